"""Accuracy on labelled bundles: firstfault against the answers people use today.

Every bundle with a ``truth.json`` is analysed; the table shows, per case, whether the
culprit (top-1 rank), category and action are right, next to two baselines measured on the
same files: the *naive* answer (the rank of the earliest error-looking line, what sorting a
grep gives) and *torchrun's* own "Root Cause (first observed failure)".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from firstfault.align import align
from firstfault.discover import discover
from firstfault.match.registry import Registry, load_registry
from firstfault.parse.run import parse_bundle
from firstfault.pipeline import analyze_bundle
from firstfault.vocab import Event, Role
from firstfault.vocab.errors import BundleError


@dataclass
class CaseResult:
    name: str
    fault: str
    truth_ranks: list[int]
    truth_category: str
    truth_action: str
    ff_ranks: list[int]
    ff_category: str
    ff_action: str
    ff_confidence: float
    naive_rank: int | None
    torchrun_rank: int | None
    seconds: float
    note: str = ""

    @property
    def truth_top(self) -> int | None:
        return self.truth_ranks[0] if self.truth_ranks else None

    def culprit_ok(self, rank: int | None) -> bool:
        return rank == self.truth_top

    @property
    def ff_ok(self) -> bool:
        return self.culprit_ok(self.ff_ranks[0] if self.ff_ranks else None)


def naive_rank(events: list[Event]) -> int | None:
    """The rank of the earliest error line with a time, whatever it says (grep | sort)."""
    timed = [e for e in events if e.rank is not None and e.ts is not None and e.role != Role.NOISE]
    if not timed:
        return None
    return min(timed, key=lambda e: (e.ts, e.source, e.line)).rank


def torchrun_rank(events: list[Event]) -> int | None:
    """The rank torchrun's ChildFailedError names as 'Root Cause (first observed failure)'."""
    for e in events:
        if e.signature == "torchelastic.failure_record" and e.fields.get("torchrun_root") == "1":
            return e.rank
    return None


def evaluate_case(bundle_dir: Path, registry: Registry) -> CaseResult:
    truth = json.loads((bundle_dir / "truth.json").read_text())
    t0 = time.perf_counter()
    bundle = discover(bundle_dir)
    try:
        verdict = analyze_bundle(bundle, registry)
        seconds = time.perf_counter() - t0
        pr = parse_bundle(bundle, registry)
        events = align(pr.events).events
    finally:
        bundle.close()
    return CaseResult(
        name=bundle_dir.name,
        fault=str(truth.get("fault")),
        truth_ranks=[int(r) for r in truth.get("culprit_ranks", [])],
        truth_category=str(truth.get("expected_category")),
        truth_action=str(truth.get("expected_action")),
        ff_ranks=list(verdict.culprit.ranks),
        ff_category=str(verdict.category),
        ff_action=str(verdict.action),
        ff_confidence=verdict.confidence,
        naive_rank=naive_rank(events),
        torchrun_rank=torchrun_rank(events),
        seconds=seconds,
    )


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def _r(x: int | None) -> str:
    return "-" if x is None else str(x)


def render(results: list[CaseResult], console: Console) -> str:
    t = Table(title="firstfault accuracy (culprit = top-1 rank)")
    cols = ["case", "fault", "truth", "firstfault", "cat", "action", "conf", "naive", "torchrun", "s"]
    for c in cols:
        t.add_column(c)
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def mark(ok: bool) -> str:
        return "✓" if ok else "✗"

    for r in results:
        row = [
            r.name,
            r.fault,
            ",".join(map(str, r.truth_ranks)) or "-",
            f"{mark(r.ff_ok)} {','.join(map(str, r.ff_ranks)) or '-'}",
            f"{mark(r.ff_category == r.truth_category)} {r.ff_category}",
            f"{mark(r.ff_action == r.truth_action)} {r.ff_action}",
            f"{r.ff_confidence:.2f}",
            f"{mark(r.culprit_ok(r.naive_rank))} {_r(r.naive_rank)}",
            f"{mark(r.culprit_ok(r.torchrun_rank))} {_r(r.torchrun_rank)}",
            f"{r.seconds:.3f}",
        ]
        t.add_row(*row)
        md.append("| " + " | ".join(row) + " |")
    console.print(t)
    n = len(results)
    totals = [
        (
            "culprit top-1",
            sum(r.ff_ok for r in results),
            sum(r.culprit_ok(r.naive_rank) for r in results),
            sum(r.culprit_ok(r.torchrun_rank) for r in results),
        ),
        ("category", sum(r.ff_category == r.truth_category for r in results), None, None),
        ("action", sum(r.ff_action == r.truth_action for r in results), None, None),
    ]
    tt = Table(title=f"totals over {n} cases")
    for c in ("measure", "firstfault", "naive (earliest error line)", "torchrun Root Cause"):
        tt.add_column(c)
    md += [
        "",
        "| measure | firstfault | naive (earliest error line) | torchrun Root Cause |",
        "|---|---|---|---|",
    ]
    for name, ff, nv, tr in totals:
        row = [name, _pct(ff, n), "-" if nv is None else _pct(nv, n), "-" if tr is None else _pct(tr, n)]
        tt.add_row(*row)
        md.append("| " + " | ".join(row) + " |")
    console.print(tt)
    if results:
        mean = sum(r.seconds for r in results) / n
        console.print(f"mean time to verdict: {mean * 1000:.1f} ms per bundle")
        md.append(f"\nmean time to verdict: {mean * 1000:.1f} ms per bundle")
    return "\n".join(md) + "\n"


def run_accuracy(cases: Path, markdown: Path | None = None) -> int:
    console = Console(width=max(Console().width, 150))
    dirs = sorted(p.parent for p in Path(cases).glob("*/truth.json"))
    if (Path(cases) / "truth.json").exists():
        dirs = [Path(cases)]
    if not dirs:
        console.print(f"no bundles with truth.json under {cases}", markup=False)
        return 2
    registry = load_registry()
    results = []
    for d in dirs:
        try:
            results.append(evaluate_case(d, registry))
        except (BundleError, OSError, ValueError) as exc:
            console.print(f"{d}: skipped ({exc})", markup=False)
    md = render(results, console)
    if markdown:
        markdown.write_text(md, encoding="utf-8")
    return 0
