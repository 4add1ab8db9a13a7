"""What the flight-recorder analysis phases share: its working records and the small helpers that word them.

A :class:`Group` is one process group as every dump agrees on it; a :class:`View` one member's
progress in it (its frontier ``f``, the last collective it entered, and ``done``, the last it saw
complete); an :class:`Edge` a set of waiters blocked on a set of blockers at one op; an
:class:`Observation` one fact that blames a rank (its kind, where, when, the sentence that says it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from firstfault.flightrec.records import FRDump, FREntry
from firstfault.vocab.flightrec import compress_ranks

# Base scores per culprit kind: how strongly the evidence pins the fault on the rank.
KIND_SCORE: dict[str, float] = {
    "stalled": 0.92,
    "mismatched": 0.90,
    "missing": 0.85,
    "deadlock": 0.62,
    "no_dump": 0.45,
    "straggler": 0.40,
    "stuck": 0.30,
}


SIZE_FREE_OPS = frozenset(
    {
        "all_to_all",
        "alltoall",
        "alltoall_base",
        "all_to_all_base",
        "_alltoall_base",
        "alltoallv",
        "scatter",
        "gather",
        "barrier",
    }
)


OUTPUT_SIZED_OPS = frozenset(
    {"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_base", "reduce_scatter_tensor_coalesced"}
)


TORCH_FRAME_MARKERS = (
    "/torch/distributed/",
    "/torch/nn/parallel/",
    "c10d_logger",
    "/torch/utils/",
    "<frozen ",
)


def ranks_text(ranks: Iterable[int], limit: int = 12) -> str:
    rs = sorted(set(ranks))
    if len(rs) > limit:
        return compress_ranks(rs)
    return ",".join(str(r) for r in rs)


def frames_text(frames: Sequence[Any], limit: int = 5) -> list[str]:
    """Top user frames (innermost first), skipping torch.distributed plumbing."""
    user = [f for f in frames if not any(m in f.filename for m in TORCH_FRAME_MARKERS)]
    chosen = user[:limit] if user else list(frames[:3])
    return [f"{f.name} ({f.filename}:{f.line})" for f in chosen]


def entry_signature(e: FREntry) -> tuple[Any, ...]:
    """What must agree across ranks for one collective (op, relevant sizes, dtypes)."""
    op = e.op
    if op in SIZE_FREE_OPS or e.op.endswith("coalesced"):
        sizes: Any = None
    elif op in OUTPUT_SIZED_OPS:
        sizes = tuple(tuple(s) for s in e.output_sizes)
    else:
        sizes = tuple(tuple(s) for s in e.input_sizes)
    dtypes = tuple(sorted(set(e.input_dtypes))) if op not in ("barrier",) else ()
    return (op, sizes, dtypes)


def changed_since_last_call(
    by_seq: dict[int, dict[int, FREntry]], s: int, sigs: dict[int, tuple[Any, ...]]
) -> dict[int, tuple[Any, ...] | None]:
    """For a mismatch with no majority: each member's signature at its previous call of the
    same op from the same Python frame. The rank whose shape changed since then is the one that
    diverged; the one that kept its shape is the witness."""
    out: dict[int, tuple[Any, ...] | None] = {}
    for r in sigs:
        cur = by_seq[s][r]
        where = cur.frames[0] if cur.frames else None
        out[r] = None
        for prev_s in sorted((x for x in by_seq if x < s), reverse=True):
            prev = by_seq[prev_s].get(r)
            if prev is None or prev.op != cur.op:
                continue
            if where is not None and (prev.frames[0] if prev.frames else None) != where:
                continue
            out[r] = (entry_signature(prev),)
            break
    return out


def signature_text(sig: tuple[Any, ...]) -> str:
    op, sizes, dtypes = sig[0]
    parts = [str(op)]
    if sizes is not None:
        parts.append("x".join(str(d) for d in sizes[0]) if len(sizes) == 1 else str([list(s) for s in sizes]))
    if dtypes:
        parts.append("/".join(dtypes))
    extra = f" (+{len(sig) - 1} coalesced)" if len(sig) > 1 else ""
    return " ".join(parts) + extra


def pg_label(name: str, desc: str) -> str:
    return f"{desc} (pg {name})" if desc and desc != "undefined" else f"pg {name}"


@dataclass(slots=True)
class Group:
    key: str
    name: str
    desc: str
    members: tuple[int, ...]
    membership: str
    has_p2p: bool = False
    has_coll: bool = False


@dataclass(slots=True)
class View:
    """One member rank's state in one group (collectives)."""

    f: int | None = None  # frontier: last collective seq entered
    done: int | None = None  # last collective seq known completed
    estimated: bool = False  # f was estimated (only-active dump, no entries)
    entries: list[FREntry] = field(default_factory=list)
    p2p: list[FREntry] = field(default_factory=list)
    has_dump: bool = True


@dataclass(slots=True)
class Edge:
    """Waiters blocked on blockers at one op of one group (one record per wait,
    not per rank pair, so a 16k-rank group waiting on one rank is one record)."""

    waiters: tuple[int, ...]
    blockers: tuple[int, ...]
    group: str
    seq: int | None
    op: str | None
    t: int | None
    kind: str  # collective | p2p | nodump

    @property
    def waiter(self) -> int:
        return self.waiters[0]

    @property
    def blocker(self) -> int:
        return self.blockers[0]


@dataclass(slots=True)
class Observation:
    kind: str
    group: str
    seq: int | None
    op: str | None
    t: int | None
    text: str
    entry: FREntry | None = None
    strength: float = 0.0


def entry_done(e: FREntry, dump: FRDump) -> bool | None:
    """Whether this op is known complete (True), known pending (False), or unknown."""
    if e.state == "completed" or e.time_completed_ns:
        return True
    if dump.backend == "gloo":
        # gloo never marks entries completed; retired=False means still running.
        return False if e.retired is False else None
    return False
