"""What the flight-recorder analysis finds, as records: culprits, per-group summaries, the whole result.

They are vocabulary, not analysis: the verdict carries an :class:`FRAnalysis` (serialised only in
``Verdict.to_dict``), reasoning reads its culprits typed, and the reports read its JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from firstfault.vocab.enums import FRKind
from firstfault.vocab.timefmt import iso_ns

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
EXPLAINED_SHOWN = 64


def _shallow(obj: Any) -> dict[str, Any]:
    """``dataclasses.asdict`` without its deep copy (it took 0.4 s over 400 groups of 1,024 ranks):
    the fields here are flat lists and dicts of primitives, copied one level."""
    out: dict[str, Any] = {}
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in fields(obj))
    for name in names:
        v = getattr(obj, name)
        out[name] = list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
    return out


@dataclass(slots=True)
class FRCulprit:
    """One rank blamed for the failure, with the evidence that blames it."""

    rank: int
    kind: FRKind
    reason: str
    pg: str | None
    seq: int | None
    op: str | None
    frames: list[str]
    time_ns: int | None
    score: float
    pg_desc: str | None = None
    victims: int = 0
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = _shallow(self)
        d["time"] = iso_ns(self.time_ns)
        return d


@dataclass(slots=True)
class FRGroupSummary:
    """What one process group shows: where it is stuck and on whom."""

    pg: str
    desc: str
    ranks: list[int]
    membership: str
    state: str
    seq: int | None = None
    op: str | None = None
    waiting: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    stalled: list[int] = field(default_factory=list)
    mismatched: list[int] = field(default_factory=list)
    no_dump: list[int] = field(default_factory=list)
    origin: bool = False
    explained: dict[int, str] = field(default_factory=dict)
    first_pending_ns: int | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = _shallow(self)
        # at 16k ranks a group explains thousands of members: the first ones say it, a count says the rest
        shown = list(self.explained.items())[:EXPLAINED_SHOWN]
        d["explained"] = {str(k): v for k, v in shown}
        if len(self.explained) > EXPLAINED_SHOWN:
            d["explained_more"] = len(self.explained) - EXPLAINED_SHOWN
        d["size"] = len(self.ranks)
        if len(self.ranks) > 64:
            d["ranks"] = compress_ranks(self.ranks)
        d["first_pending"] = iso_ns(self.first_pending_ns)
        return d


@dataclass(slots=True)
class FRAnalysis:
    """The full result: ranked culprits, per-group summaries, warnings."""

    culprits: list[FRCulprit]
    groups: list[FRGroupSummary]
    warnings: list[str]
    world_size: int
    ranks_with_dumps: int
    missing_dumps: list[int]
    backend: str
    verdict: str
    roles: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "world_size": self.world_size,
            "ranks_with_dumps": self.ranks_with_dumps,
            "missing_dumps": self.missing_dumps,
            "backend": self.backend,
            "culprits": [c.to_dict() for c in self.culprits],
            "groups": [g.to_dict() for g in self.groups],
            "roles": {k: compress_ranks(v) for k, v in self.roles.items()},
            "warnings": list(self.warnings),
        }


def compress_ranks(ranks: Iterable[int]) -> str:
    """``[0,1,2,3,7]`` -> ``"0-3,7"``: readable rank lists for 16k-rank jobs."""
    rs = sorted(set(ranks))
    if not rs:
        return ""
    parts: list[str] = []
    start = prev = rs[0]
    for r in rs[1:]:
        if r == prev + 1:
            prev = r
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = r
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)
