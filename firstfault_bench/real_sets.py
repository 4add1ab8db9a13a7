"""Accuracy on labelled real jobs, set by set, against the bar real-world accuracy is held to.

The real sets are bundles that real software left (``tools/realjobs``: torchrun, SLURM, Ray Train,
``mpirun``, Lightning, Accelerate, Transformers, JAX) with the injected fault in ``truth.json``,
and the excerpts ``make_excerpts.py`` cuts from their consoles. They live outside the repository
(a set is tens of MB and is made again on each machine), so this module reads whatever sets it is
given and never assumes which exist.

Why a module of its own beside ``accuracy.py``: ``bench accuracy`` tables one folder case by case
next to two baselines, and scores a culprit where the label names none as a hit when firstfault
names none too. The real-world bar is stated per set and on different measures, and a per-case
table of three hundred jobs hides which set falls short. Here each set is one row:

* **category**: firstfault's category equals the label's;
* **culprit top-1**: only over jobs whose label names a rank (a job-level fault has no culprit to
  find, and counting it would flatter the measure);
* **no rank named**: over jobs whose label names none, firstfault named none either;
* **healthy flagged**: a job labelled ``none`` answered with anything else (the goal is zero);
* **failed -> none**: a failed job answered ``none`` (the goal is zero);
* **refused**: the bundle was refused as unusable (counted wrong on category, listed by name:
  an excerpt of a failed job refused as "not a job log" is a miss, not a skip).

The bar (culprit top-1 >= 95%, category >= 90% on each set, no healthy job flagged, no failed job
answered ``none``) is checked per set and over all. ``--rows`` writes one JSON line per job, and
``--against`` compares a run with such a file, job by job, so that a change to a rule shows every
verdict it moved, on every set, before it is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from firstfault.discover import discover
from firstfault.match.registry import Registry, load_registry
from firstfault.pipeline import analyze_bundle
from firstfault.vocab.errors import BundleError
from firstfault_bench.corpus import CONFIDENCE_BANDS, culprit_right

CULPRIT_BAR = 0.95
CATEGORY_BAR = 0.90
REFUSED = "refused"
ROOT_CHARS = 120  # of the root event's line: enough to find it in an excerpt, short of a wrapped tail
# make_excerpts.py's "fragment": "<rule> of <set>/<job>/<file>"
_CUT_FROM = re.compile(r"\bof (?P<set>[^/\s]+)/(?P<job>[^/\s]+)/\S+$")
KEPT, CUT = "kept the fault's line", "cut the fault's line"
UNPLACED = "had no line to keep (job missed, not scored, or read from a silence)"


@dataclass(frozen=True)
class JobRow:
    """One job's label and verdict: what ``--rows`` writes and ``--against`` reads back."""

    set: str
    job: str
    truth_category: str
    truth_ranks: list[int]
    category: str
    ranks: list[int]
    confidence: float
    summary: str
    fragment: str = ""  # how make_excerpts.py cut it from a console ("" for a whole job)
    root_line: str = ""  # the verdict's root event, as its line reads (an excerpt's evidence check)

    @property
    def category_ok(self) -> bool:
        return self.category == self.truth_category

    @property
    def names_rank(self) -> bool:
        return bool(self.truth_ranks)

    @property
    def culprit_ok(self) -> bool:
        return culprit_right(self.truth_ranks, self.ranks)

    @property
    def right(self) -> bool:
        return self.category_ok and self.culprit_ok


@dataclass
class SetScore:
    name: str
    rows: list[JobRow] = field(default_factory=list)

    @property
    def jobs(self) -> int:
        return len(self.rows)

    @property
    def category(self) -> int:
        return sum(r.category_ok for r in self.rows)

    @property
    def ranked(self) -> int:
        return sum(r.names_rank for r in self.rows)

    @property
    def culprit(self) -> int:
        return sum(r.culprit_ok for r in self.rows if r.names_rank)

    @property
    def unranked(self) -> int:
        return sum(not r.names_rank for r in self.rows)

    @property
    def no_rank_ok(self) -> int:
        return sum(r.culprit_ok for r in self.rows if not r.names_rank)

    @property
    def healthy(self) -> int:
        return sum(r.truth_category == "none" for r in self.rows)

    @property
    def healthy_flagged(self) -> int:
        return sum(r.truth_category == "none" and r.category != "none" for r in self.rows)

    @property
    def failed(self) -> int:
        return self.jobs - self.healthy

    @property
    def failed_none(self) -> int:
        return sum(r.truth_category != "none" and r.category == "none" for r in self.rows)

    @property
    def refused(self) -> list[str]:
        return [r.job for r in self.rows if r.category == REFUSED]

    def meets_bar(self) -> bool:
        culprit_ok = self.ranked == 0 or self.culprit >= CULPRIT_BAR * self.ranked
        category_ok = self.jobs == 0 or self.category >= CATEGORY_BAR * self.jobs
        return culprit_ok and category_ok and self.healthy_flagged == 0 and self.failed_none == 0


def set_dirs(paths: Iterable[Path]) -> list[Path]:
    """The sets under the given paths: a folder whose children hold ``truth.json`` is a set; a
    folder whose grandchildren do is a folder of sets. Anything else is left out (returned empty)."""
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        if any(p.glob("*/truth.json")):
            found.append(p)
        elif p.is_dir():
            found.extend(sorted(d for d in p.iterdir() if d.is_dir() and any(d.glob("*/truth.json"))))
    return found


def score_job(job: Path, set_name: str, registry: Registry) -> JobRow:
    truth = json.loads((job / "truth.json").read_text(encoding="utf-8"))
    label = str(truth.get("expected_category"))
    cut = str(truth.get("fragment") or "")
    truth_ranks = [int(r) for r in truth.get("culprit_ranks", [])]
    try:
        bundle = discover(job)
        try:
            v = analyze_bundle(bundle, registry)
        finally:
            bundle.close()
    except BundleError as exc:
        return JobRow(set_name, job.name, label, truth_ranks, REFUSED, [], 0.0, str(exc)[:200], cut)
    ranks = list(v.culprit.ranks)
    root = v.root_event.text.strip()[:ROOT_CHARS] if v.root_event is not None else ""
    return JobRow(
        set_name, job.name, label, truth_ranks, str(v.category), ranks, float(v.confidence), v.summary, cut, root
    )


def score_set(set_dir: Path, registry: Registry, skipped: list[str] | None = None) -> SetScore:
    """Every job of the set; a job whose ``truth.json`` does not read as a label is left out and
    named in ``skipped`` (a broken label scores nothing, right or wrong)."""
    rows = []
    for job in sorted(d for d in set_dir.iterdir() if (d / "truth.json").is_file()):
        try:
            rows.append(score_job(job, set_dir.name, registry))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            if skipped is not None:
                skipped.append(f"{set_dir.name}/{job.name}: truth.json unreadable ({type(exc).__name__}: {exc})"[:200])
    return SetScore(set_dir.name, rows)


def _frac(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def render(scores: Sequence[SetScore], console: Console) -> str:
    """One row per set, then the whole jobs together and the excerpts together (a job whose label
    says how ``make_excerpts.py`` cut it: a cut of a console is a harder reading than the job it
    came from, and adding the two would blur both); returns the same table as Markdown."""
    cols = ["set", "jobs", "category", "culprit top-1 (label names a rank)", "no rank named",
            "healthy flagged", "failed -> none", "refused", "bar"]  # fmt: skip
    t = Table(title="real jobs, set by set (bar: culprit >= 95%, category >= 90%, 0 flagged, 0 silent)")
    for c in cols:
        t.add_column(c)
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    rows = [r for s in scores for r in s.rows]
    totals = [
        SetScore("all whole jobs", [r for r in rows if not r.fragment]),
        SetScore("all excerpts", [r for r in rows if r.fragment]),
    ]
    for s in [*scores, *(t for t in totals if t.rows)]:
        row = [
            s.name,
            str(s.jobs),
            _frac(s.category, s.jobs),
            _frac(s.culprit, s.ranked),
            _frac(s.no_rank_ok, s.unranked),
            f"{s.healthy_flagged}/{s.healthy}",
            f"{s.failed_none}/{s.failed}",
            str(len(s.refused)),
            "met" if s.meets_bar() else "not met",
        ]
        t.add_row(*row)
        md.append("| " + " | ".join(row) + " |")
    console.print(t)
    md += _calibration(rows, console)
    missed = [r for s in scores for r in s.rows if not r.right]
    if missed:
        console.print(f"{len(missed)} job(s) not right:", markup=False)
        md.append("")
        for r in missed:
            line = (f"  {r.set}/{r.job}: {r.truth_category} {r.truth_ranks} -> {r.category} {r.ranks} "
                    f"conf {r.confidence:.2f}")  # fmt: skip
            console.print(line, markup=False, soft_wrap=True)
            md.append("- " + line.strip())
    return "\n".join(md) + "\n"


def excerpt_evidence(rows: Sequence[JobRow], texts: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """What each excerpt kept of its job's evidence: ``KEPT`` where the job it was cut from was read
    right (category and culprit) and that verdict's root line is in the excerpt's text; ``CUT``
    where it was read right and the line is not; ``UNPLACED`` otherwise (the job was not scored in
    this run or was read wrong, or its verdict rests on no line: a rank that printed nothing).

    Why: an excerpt carries its job's label, so a culprit whose lines were cut off counts as missed,
    and the excerpts' totals mix two questions: how well firstfault reads what a paste holds, and
    how often a paste holds the fault at all. The whole job's right verdict says which line is the
    fault's; whether the cut kept it splits the two, with nothing taken from the label."""
    whole = {(r.set, r.job): r for r in rows if not r.fragment}
    out: dict[tuple[str, str], str] = {}
    for r in rows:
        if not r.fragment:
            continue
        m = _CUT_FROM.search(r.fragment)
        src = whole.get((m["set"], m["job"])) if m else None
        if src is None or not src.right or not src.root_line:
            out[(r.set, r.job)] = UNPLACED
        else:
            out[(r.set, r.job)] = KEPT if src.root_line in texts.get((r.set, r.job), "") else CUT
    return out


def _evidence_table(rows: Sequence[JobRow], kinds: dict[tuple[str, str], str], console: Console) -> list[str]:
    """The excerpts' category and culprit, apart by what they kept (:func:`excerpt_evidence`)."""
    cells = []
    for kind in (KEPT, CUT, UNPLACED):
        s = SetScore(kind, [r for r in rows if kinds.get((r.set, r.job)) == kind])
        if s.rows:
            cells.append([kind, str(s.jobs), _frac(s.category, s.jobs), _frac(s.culprit, s.ranked)])
    title = "excerpts, by whether they kept the fault's line (their job's right verdict's root line)"
    return _table(title, ["excerpts that", "jobs", "category", "culprit top-1 (label names a rank)"], cells, console)


def _texts(sets: Sequence[Path], rows: Sequence[JobRow]) -> dict[tuple[str, str], str]:
    """Each excerpt's text (its files but the label), for :func:`excerpt_evidence`."""
    where = {s.name: s for s in sets}
    out = {}
    for r in rows:
        if not r.fragment or r.set not in where:
            continue
        job = where[r.set] / r.job
        parts = [
            p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(job.rglob("*"))
            if p.is_file() and p.name != "truth.json"
        ]
        out[(r.set, r.job)] = "\n".join(parts)
    return out


def _calibration(rows: Sequence[JobRow], console: Console) -> list[str]:
    """Right (category and culprit) per band of the verdict's confidence, whole jobs and excerpts
    apart: what "how sure it is" is worth on real jobs (the corpus's bands, ``corpus.CONFIDENCE_BANDS``)."""
    cells = []
    for lo, hi in CONFIDENCE_BANDS:
        row = [f"{lo:.2f}-{min(hi, 1.0):.2f}"]
        for cut in (False, True):
            band = [r for r in rows if bool(r.fragment) == cut and r.category != REFUSED and lo <= r.confidence < hi]
            row.append(_frac(sum(r.right for r in band), len(band)))
        cells.append(row)
    title = "right (category and culprit) by the verdict's confidence"
    return _table(title, ["confidence", "whole jobs", "excerpts"], cells, console)


def _table(title: str, cols: Sequence[str], rows: Sequence[Sequence[str]], console: Console) -> list[str]:
    """Print a small table, and return it as Markdown lines after a blank one."""
    t = Table(title=title)
    for c in cols:
        t.add_column(c)
    md = ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for cells in rows:
        t.add_row(*cells)
        md.append("| " + " | ".join(cells) + " |")
    console.print(t)
    return md


def compare(rows: Sequence[JobRow], base_file: Path) -> list[str]:
    """Every job whose verdict (category or ranks) differs from the run written to ``base_file``:
    better, worse or moved, so that a rule's effect is read job by job, not only as totals."""
    base: dict[tuple[str, str], dict[str, object]] = {}
    for line in base_file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            base[(str(d["set"]), str(d["job"]))] = d
    out = []
    for r in rows:
        b = base.get((r.set, r.job))
        if b is None:
            out.append(f"new     {r.set}/{r.job}: {r.category} {r.ranks}")
            continue
        if (b["category"], b["ranks"]) == (r.category, r.ranks):
            continue
        was_ranks = [int(x) for x in b["ranks"]]  # type: ignore[attr-defined]
        was = JobRow(r.set, r.job, r.truth_category, r.truth_ranks, str(b["category"]), was_ranks, 0.0, "")
        score = (r.category_ok - was.category_ok) + (r.culprit_ok - was.culprit_ok)
        tag = "better" if score > 0 else "worse" if score < 0 else "moved"
        out.append(
            f"{tag:7} {r.set}/{r.job}: {was.category} {was.ranks} -> {r.category} {r.ranks} "
            f"(label {r.truth_category} {r.truth_ranks})"
        )
    return out


def run_sets(
    paths: Sequence[Path],
    markdown: Path | None = None,
    rows_out: Path | None = None,
    against: Path | None = None,
    console: Console | None = None,
) -> int:
    """Score every set found under ``paths``; exit status 0 when some were scored, 2 when none."""
    console = console or Console(width=max(Console().width, 150))
    sets = set_dirs(paths)
    if not sets:
        console.print("no set found: give folders whose sub-folders hold truth.json", markup=False)
        return 2
    registry = load_registry()
    skipped: list[str] = []
    scores = [score_set(s, registry, skipped) for s in sets]
    for line in skipped:
        console.print(f"left out: {line}", markup=False, soft_wrap=True)
    md = render(scores, console)
    rows = [r for s in scores for r in s.rows]
    if any(r.fragment for r in rows):
        md += "\n".join(_evidence_table(rows, excerpt_evidence(rows, _texts(sets, rows)), console)) + "\n"
    if against is not None:
        changes = compare(rows, against)
        head = f"against {against}: {len(changes)} verdict(s) changed"
        console.print(head, markup=False)
        for c in changes:
            console.print("  " + c, markup=False, soft_wrap=True)
        md += "\n" + head + "\n" + "".join(f"- {c}\n" for c in changes)
    if rows_out is not None:
        with rows_out.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(asdict(r)) + "\n")
    if markdown is not None:
        markdown.write_text(md, encoding="utf-8")
    return 0
