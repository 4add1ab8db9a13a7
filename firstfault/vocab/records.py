"""The shared vocabulary every pipeline stage speaks.

Three records cross stage boundaries: an :class:`Event` (one classified line of evidence,
with where and when it happened), the role it is given in the causal chain (:class:`Role`),
and the :class:`Verdict` the attribution stage produces. They are plain dataclasses over
primitive fields so they serialise to JSON, travel to worker processes, and can be stored
in a history database without a translation layer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from firstfault.vocab.enums import Action, Category, Layer, Role, Severity, TsQuality
from firstfault.vocab.flightrec import FRAnalysis

MAX_CONTEXT_EVENTS = 50
SCHEMA_VERSION = "1.1"  # 1.1 adds "context" (additive: every 1.0 reader reads it)


@dataclass(slots=True)
class Event:
    """One matched line (or block, for a traceback) of evidence.

    ``ts`` is seconds since the epoch (UTC) after alignment; ``ts_quality`` says whether the
    time was on the line (``exact``), taken from a nearby line (``inherited``), or unknown.
    ``fields`` holds the signature's named groups (exit code, peer, seq id, ...).
    """

    id: int
    source: str
    line: int
    text: str
    signature: str
    category: Category
    layer: Layer
    role: Role
    severity: Severity = Severity.ERROR
    ts: float | None = None
    ts_quality: TsQuality = TsQuality.NONE
    # for a time inherited from a line above (a lower bound): the latest the line can have been
    # printed (the next timed line below it, else the job's end); None when unknown or exact
    ts_hi: float | None = None
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    gpu: str | None = None
    pid: int | None = None
    attempt: int | None = None
    fields: dict[str, str] = field(default_factory=dict)
    # a tuple: most events have none, and 400,000 of them share the one empty tuple (not a list each)
    context: tuple[str, ...] = ()
    priority: int = 0

    def set_field(self, key: str, value: str) -> None:
        """Write one field, copy-on-write: the parse lets events with equal fields share one dict
        (at 16,384 ranks most of 400,000 dicts are equal to another), so a write after the parse
        must not reach through into the others."""
        self.fields = {**self.fields, key: value}

    def where(self) -> str:
        """A short human location: rank/host/gpu where known."""
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.host:
            parts.append(f"host {self.host}")
        if self.gpu:
            parts.append(f"GPU {self.gpu}")
        return ", ".join(parts) or "unknown location"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "file": self.source,
            "line": self.line,
            "timestamp": self.ts,
            "timestamp_quality": self.ts_quality,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "host": self.host,
            "gpu": self.gpu,
            "pid": self.pid,
            "attempt": self.attempt,
            "signature": self.signature,
            "category": str(self.category),
            "layer": str(self.layer),
            "severity": self.severity,
            "text": self.text,
            "fields": dict(self.fields),
            "context": list(self.context),
        }


@dataclass(slots=True)
class ChainLink:
    """An event's place in the causal chain: its role and the event that explains it."""

    event: Event
    role: Role
    explained_by: int | None
    rule: str

    def to_dict(self) -> dict[str, Any]:
        d = self.event.to_dict()
        d.update({"role": str(self.role), "explained_by": self.explained_by, "rule": self.rule})
        return d


@dataclass(slots=True)
class Culprit:
    ranks: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Hypothesis:
    """A candidate explanation; the winner becomes the verdict, the rest are alternatives."""

    category: Category
    culprit: Culprit
    action: Action
    score: float
    summary: str
    root_event: Event | None = None
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": str(self.category),
            "culprit": asdict(self.culprit),
            "action": str(self.action),
            "score": round(self.score, 4),
            "summary": self.summary,
            "root_event_id": self.root_event.id if self.root_event else None,
            "reasons": list(self.reasons),
        }


@dataclass(slots=True)
class RankProgress:
    """Last step a rank reported and its step-time statistics (stragglers, hangs)."""

    rank: int
    last_step: int | None = None
    last_step_ts: float | None = None
    steps_seen: int = 0
    median_step_ms: float | None = None
    host: str | None = None
    recent_step_ms: float | None = None  # median over the last quarter of its steps (a late slowdown)
    step_interval_s: float | None = None  # wall seconds between its progress lines


@dataclass(slots=True)
class Verdict:
    """The public answer. ``to_dict`` is the v1 JSON contract (see docs/verdict-schema.md)."""

    category: Category
    culprit: Culprit
    action: Action
    confidence: float
    summary: str
    root_event: Event | None
    causal_chain: list[ChainLink]
    explained_fraction: float
    alternatives: list[Hypothesis]
    warnings: list[str]
    reasons: list[str] = field(default_factory=list)
    progress: list[RankProgress] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    flight_recorder: FRAnalysis | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    context: list[Event] = field(default_factory=list)  # host evidence outside the job window, or benign

    def to_dict(self, chain: bool = True) -> dict[str, Any]:
        """The v1 JSON object; ``chain=False`` leaves ``causal_chain`` empty (streamed elsewhere)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": "firstfault",
            "verdict": {
                "category": str(self.category),
                "culprit": asdict(self.culprit),
                "action": str(self.action),
                "confidence": round(self.confidence, 3),
                "summary": self.summary,
                "reasons": list(self.reasons),
            },
            "root_event": self.root_event.to_dict() if self.root_event else None,
            "causal_chain": [c.to_dict() for c in self.causal_chain] if chain else [],
            "explained_fraction": round(self.explained_fraction, 4),
            "alternatives": [h.to_dict() for h in self.alternatives],
            "progress": [asdict(p) for p in self.progress],
            "flight_recorder": self.flight_recorder.to_dict() if self.flight_recorder is not None else None,
            "inputs": self.inputs,
            "stats": self.stats,
            "warnings": list(self.warnings),
            "context": [dict(e.to_dict(), why=e.fields.get("context", "")) for e in self.context[:MAX_CONTEXT_EVENTS]],
        }
