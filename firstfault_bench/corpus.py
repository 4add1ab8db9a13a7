"""Accuracy on the real-world corpus: logs people pasted into public threads, labelled from the thread.

Each case is a folder with ``log.txt`` (the paste, verbatim) and ``label.toml`` (URL, category,
culprit ranks where the thread establishes them, the line that shows the fault, and why), written
before firstfault ever saw the log (see corpus/README.md). A case is scored on:

* **category**: firstfault's category equals the label's;
* **culprit**: top-1 rank equals the label's first culprit rank, where the label names one
  (reported on its own: "culprit top-1 (label names a rank)"); a label with no culprit is right
  when firstfault names no rank either ("no rank named"), or scores nothing when it says it
  cannot tell (``culprit_ranks = []`` with ``culprit_known = false``);
* **silent**: a failed case answered ``none`` (the goal is zero);
* **false alarm**: a healthy case answered with anything but ``none``.

Cases are split into a development half and a held-out half by a hash of their name, so that the
held-out figure is measured on cases no rule was written against (report both).

A case may hold ``second_reading.toml``: the same thread labelled again by a second reader who
never saw the first label (category, culprit ranks, confidence, why). Where two careful readers of
one thread disagree, no log reader can be right by both; the agreement between them is the
ceiling the corpus itself puts on any score (``agreement``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

TEST_SHARE = 4  # of 10: the held-out share of the corpus


def culprit_right(truth_ranks: Sequence[int], ranks: Sequence[int]) -> bool:
    """Top-1 against the label's first rank; where the label names none, naming none too (the
    corpus and the real-job sets score a culprit the one way)."""
    if truth_ranks:
        return bool(ranks) and ranks[0] == truth_ranks[0]
    return not ranks


@dataclass
class CorpusResult:
    name: str
    project: str
    split: str
    truth_category: str
    truth_ranks: list[int]
    culprit_known: bool
    failed: bool
    category: str
    ranks: list[int]
    summary: str
    seconds: float
    error: str = ""
    confidence: float = 0.0  # the verdict's own (0 for a refusal)
    second_category: str | None = None  # a second, independent reader's label, where one exists
    second_ranks: list[int] | None = None
    second_confidence: str = ""

    @property
    def category_ok(self) -> bool:
        return self.category == self.truth_category

    @property
    def culprit_scored(self) -> bool:
        return self.culprit_known

    @property
    def culprit_ok(self) -> bool:
        return culprit_right(self.truth_ranks, self.ranks)

    @property
    def readers_agree(self) -> bool:
        """A second reading exists and gives the first reading's category."""
        return self.second_category is not None and self.second_category == self.truth_category

    @property
    def readers_agree_on_culprit(self) -> bool:
        """The two readings name the same first rank, or both none (an empty list reads as none)."""
        return (self.second_ranks or [])[:1] == self.truth_ranks[:1]

    @property
    def silent(self) -> bool:
        return self.failed and self.category == "none"

    @property
    def false_alarm(self) -> bool:
        return not self.failed and self.category != "none"


def split_of(name: str) -> str:
    h = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    return "held-out" if h % 10 < TEST_SHARE else "dev"


def corpus_cases(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("label.toml") if (p.parent / "log.txt").exists())


def evaluate_case(case: Path) -> CorpusResult:
    from firstfault.pipeline import analyze
    from firstfault.vocab.errors import BundleError

    label = tomllib.loads((case / "label.toml").read_text(encoding="utf-8"))
    ranks = [int(r) for r in label.get("culprit_ranks", [])]
    known = bool(label.get("culprit_known", True))
    failed = label.get("outcome", "failed") != "healthy"
    second = case / "second_reading.toml"
    other = tomllib.loads(second.read_text(encoding="utf-8")) if second.exists() else None
    t0 = time.perf_counter()
    try:
        v = analyze(case / "log.txt")
        cat, got, summary, err, conf = str(v.category), list(v.culprit.ranks), v.summary, "", float(v.confidence)
    except BundleError as exc:
        cat, got, summary, err, conf = "error", [], "", str(exc), 0.0
    return CorpusResult(
        case.name,
        str(label.get("project", "?")),
        split_of(case.name),
        str(label.get("category", "?")),
        ranks,
        known,
        failed,
        cat,
        got,
        summary,
        time.perf_counter() - t0,
        err,
        conf,
        None if other is None else str(other.get("category", "?")),
        None if other is None else [int(r) for r in other.get("culprit_ranks", [])],
        "" if other is None else str(other.get("label_confidence", "")),
    )


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def totals(rows: list[CorpusResult]) -> dict[str, str]:
    scored = [r for r in rows if r.culprit_scored]
    named = [r for r in scored if r.truth_ranks]
    unnamed = [r for r in scored if not r.truth_ranks]
    failed = [r for r in rows if r.failed]
    healthy = [r for r in rows if not r.failed]
    return {
        "cases": str(len(rows)),
        "category": _pct(sum(r.category_ok for r in rows), len(rows)),
        # top-1 where the thread names a rank (the issue's own measure), apart from "names none"
        # where the label names none: the second is most of the corpus and would hide the first
        "culprit top-1 (label names a rank)": _pct(sum(r.culprit_ok for r in named), len(named)),
        "no rank named (label names none)": _pct(sum(r.culprit_ok for r in unnamed), len(unnamed)),
        "failed answered none": _pct(sum(r.silent for r in failed), len(failed)),
        "healthy flagged": _pct(sum(r.false_alarm for r in healthy), len(healthy)),
    }


# Confidence bands: is a verdict that says it is surer right more often? (refusals left out)
CONFIDENCE_BANDS = ((0.0, 0.5), (0.5, 0.7), (0.7, 0.85), (0.85, 1.01))


def calibration(rows: list[CorpusResult]) -> list[tuple[str, str]]:
    """Category right, per band of the verdict's confidence: what "how sure it is" is worth."""
    out = []
    answered = [r for r in rows if r.category != "error"]
    for lo, hi in CONFIDENCE_BANDS:
        band = [r for r in answered if lo <= r.confidence < hi]
        name = f"{lo:.2f}-{min(hi, 1.0):.2f}"
        out.append((name, _pct(sum(r.category_ok for r in band), len(band))))
    return out


def agreement(rows: list[CorpusResult]) -> list[tuple[str, str]]:
    """Two readers of the same thread, and firstfault against each (cases with a second reading).

    The second reader's own confidence splits the agreement: where they are sure the thread
    settles it ("high"), two readings should agree; where they labelled from the log alone
    ("low"), the disagreement is the log's ambiguity.
    """
    both = [r for r in rows if r.second_category is not None]
    agreed = [r for r in both if r.readers_agree]
    sure = [r for r in agreed if r.second_confidence == "high"]
    out = [
        ("cases read twice", str(len(both))),
        ("the two readers agree on the category", _pct(len(agreed), len(both))),
    ]
    for level in ("high", "medium", "low"):
        at = sum(r.second_confidence == level for r in both)
        same = sum(r.second_confidence == level for r in agreed)
        out.append((f"  of them, where the second reader is {level}", _pct(same, at)))
    out += [
        (
            "the two readers agree on the culprit (first rank, or both none)",
            _pct(sum(r.readers_agree_on_culprit for r in both), len(both)),
        ),
        ("firstfault's category = the first reader's", _pct(sum(r.category_ok for r in both), len(both))),
        (
            "firstfault's category = the second reader's",
            _pct(sum(r.category == r.second_category for r in both), len(both)),
        ),
        (
            "firstfault's category = either reader's",
            _pct(sum(r.category in (r.truth_category, r.second_category) for r in both), len(both)),
        ),
        ("firstfault's category where the readers agree", _pct(sum(r.category_ok for r in agreed), len(agreed))),
        ("  of them, where the second reader is sure (high)", _pct(sum(r.category_ok for r in sure), len(sure))),
    ]
    return out


def agreed_rows(rows: list[CorpusResult]) -> list[CorpusResult]:
    """The failed cases whose two readings agree on the category, with the culprit scored only
    where they also agree on it (the same first rank, or both none).

    A label one reader gives and another does not is a coin the log cannot call; scores on the
    labels two readers share are what a log reader can be held to. A second reading has no
    "culprit unknown" of its own: an empty list is read as "names none", as in :func:`agreement`.
    """
    return [
        dataclasses.replace(r, culprit_known=r.culprit_known and r.readers_agree_on_culprit)
        for r in rows
        if r.readers_agree
    ]


SPLITS = ("all", "dev", "held-out")


def _split_table(title: str, measures: dict[str, dict[str, str]], skip: tuple[str, ...] = ()) -> Table:
    """One row per measure, one column per split (all, development, held out)."""
    t = Table(title=title)
    t.add_column("measure")
    for split in SPLITS:
        t.add_column(split)
    for key in measures["all"]:
        if key not in skip:
            t.add_row(key, *(measures[k][key] for k in SPLITS))
    return t


def _split_markdown(head: str, measures: dict[str, dict[str, str]], skip: tuple[str, ...] = ()) -> list[str]:
    lines = [f"| {head} | all | dev | held-out |", "|---|---|---|---|"]
    return lines + [f"| {k} | {' | '.join(measures[s][k] for s in SPLITS)} |" for k in measures["all"] if k not in skip]


def _case_table(root: Path, rows: list[CorpusResult]) -> Table:
    t = Table(title=f"corpus: {root}")
    for col in ("case", "split", "truth", "firstfault", "culprit", "summary"):
        t.add_column(col, overflow="fold")
    for r in rows:
        truth = r.truth_category + (f" r{r.truth_ranks[0]}" if r.truth_ranks else "")
        mark = "✓" if r.category_ok else "✗"
        cmark = ("✓" if r.culprit_ok else "✗") if r.culprit_scored else "·"
        got = ",".join(map(str, r.ranks[:3])) or "-"
        t.add_row(r.name, r.split, truth, f"{mark} {r.category}", f"{cmark} {got}", (r.summary or r.error)[:90])
    return t


def _two_column(title: str, head: tuple[str, str], rows: list[tuple[str, str]]) -> Table:
    t = Table(title=title)
    t.add_column(head[0])
    t.add_column(head[1])
    for a, b in rows:
        t.add_row(a, b)
    return t


def run_corpus(root: Path, markdown: Path | None = None, verbose: bool = True) -> list[CorpusResult]:
    rows = [evaluate_case(c) for c in corpus_cases(root)]
    con = Console()
    if verbose:
        con.print(_case_table(root, rows))
    parts = {
        "all": rows,
        "dev": [r for r in rows if r.split == "dev"],
        "held-out": [r for r in rows if r.split != "dev"],
    }
    tots = {k: totals(v) for k, v in parts.items()}
    con.print(_split_table("totals", tots))
    # the same measures on the labels two readers share (failed cases only: healthy ones were not read twice)
    read_twice = any(r.second_category is not None for r in rows)
    shared = {k: totals(agreed_rows(v)) for k, v in parts.items()} if read_twice else {}
    only_failed = ("healthy flagged",)
    if read_twice:
        con.print(_split_table("on the labels two readers agree on (failed cases read twice)", shared, only_failed))
    cal = calibration(rows)
    con.print(
        _two_column(
            "category right, by the verdict's confidence (refusals left out)", ("confidence", "category right"), cal
        )
    )
    agree = agreement(rows) if read_twice else []
    if read_twice:
        con.print(
            _two_column(
                "two readers of the same thread (cases with a second, independent reading)", ("measure", "all"), agree
            )
        )
    conf = Counter((r.truth_category, r.category) for r in rows if not r.category_ok)
    if conf:
        c = Table(title="category misses (label -> firstfault)")
        for col in ("label", "firstfault", "n"):
            c.add_column(col)
        for (a, b), n in conf.most_common():
            c.add_row(a, b, str(n))
        con.print(c)
    if markdown is None:
        return rows
    lines = _split_markdown("measure", tots)
    lines += ["", "| confidence | category right |", "|---|---|"] + [f"| {band} | {pct} |" for band, pct in cal]
    if read_twice:
        lines += ["", "| two readers | all |", "|---|---|"] + [f"| {k} | {v} |" for k, v in agree]
        lines += ["", *_split_markdown("on the labels two readers agree on", shared, only_failed)]
    lines += [
        "",
        "| case | split | label | firstfault | culprit label | culprit firstfault |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.name} | {r.split} | {r.truth_category} | {r.category} | {r.truth_ranks or '-'} | {r.ranks[:3] or '-'} |"
        for r in rows
    ]
    markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows
