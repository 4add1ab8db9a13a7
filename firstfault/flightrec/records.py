"""The flight recorder's records, normalised: one rank's dump, its operations, its groups.

Why apart from the loader: the analyses (``collectives``, ``p2p``, ``groups``, ``stragglers``,
``culprits``) work on these types only and never need the code that reads pickles and JSON of
every schema version; the loader (``load``) and the normaliser (``normalize``) make them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FRDump", "FREntry", "FRFrame", "FRLoadIssue", "FRLoadResult", "FRPGConfig", "FRPGStatus"]


@dataclass(slots=True, frozen=True)
class FRFrame:
    """One Python stack frame recorded with a collective (innermost first)."""

    name: str
    filename: str
    line: int

    def __str__(self) -> str:
        return f"{self.name} ({self.filename}:{self.line})"


@dataclass(slots=True)
class FREntry:
    """One recorded collective or p2p operation on one rank.

    ``op`` is the bare operation (``all_reduce``, ``send``...), ``peer`` the
    group-local peer of a send/recv (destination of a send, source of a recv).
    Completion fields are ``None`` when the dump does not know them.
    """

    record_id: int
    pg_id: int
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    profiling_name: str
    backend: str
    op: str
    is_p2p: bool
    peer: int | None
    input_sizes: list[list[int]]
    input_dtypes: list[str]
    output_sizes: list[list[int]]
    output_dtypes: list[str]
    state: str
    time_created_ns: int | None
    time_started_ns: int | None
    time_completed_ns: int | None
    retired: bool | None
    timeout_ms: int | None
    duration_ms: float | None
    frames: tuple[FRFrame, ...]
    thread_name: str | None = None

    @property
    def seq(self) -> int:
        """The sequence id that orders this op within its group and kind."""
        return self.p2p_seq_id if self.is_p2p else self.collective_seq_id


@dataclass(slots=True, frozen=True)
class FRPGConfig:
    """A process group as one rank's dump describes it (global ranks)."""

    name: str
    desc: str
    ranks: tuple[int, ...] | None


@dataclass(slots=True, frozen=True)
class FRPGStatus:
    """Per-group progress counters keyed by the rank-local group uid (``pg_id``)."""

    uid: str
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(slots=True)
class FRDump:
    """One rank's dump, normalised across schema versions and formats."""

    rank: int
    path: str
    fmt: str
    version: str
    backend: str
    comm_lib_version: str | None
    pg_config: dict[str, FRPGConfig]
    pg_status: dict[str, FRPGStatus]
    entries: list[FREntry]
    only_active: bool
    ring_wrapped: bool
    notes: list[str] = field(default_factory=list)

    @property
    def first_record_id(self) -> int | None:
        return self.entries[0].record_id if self.entries else None


@dataclass(slots=True, frozen=True)
class FRLoadIssue:
    """A file that could not be used, and why."""

    path: str
    kind: str
    message: str


@dataclass(slots=True)
class FRLoadResult:
    """What :func:`load_dumps` found: usable dumps, warnings, unusable files."""

    dumps: list[FRDump]
    warnings: list[str]
    issues: list[FRLoadIssue] = field(default_factory=list)
    files_considered: int = 0
    unusable_ranks: list[int] = field(default_factory=list)

    @property
    def world_size_hint(self) -> int | None:
        """Smallest world size consistent with every rank-named file seen (usable or not)."""
        ranks = [d.rank for d in self.dumps] + self.unusable_ranks
        return max(ranks) + 1 if ranks else None

    @property
    def refused(self) -> list[FRLoadIssue]:
        return [i for i in self.issues if i.kind == "unsafe"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": sorted(d.rank for d in self.dumps),
            "warnings": list(self.warnings),
            "issues": [asdict(i) for i in self.issues],
            "files_considered": self.files_considered,
            "unusable_ranks": list(self.unusable_ranks),
        }
