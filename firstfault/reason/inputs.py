"""What attribution reads besides the correlated events: the typed facts of the earlier stages.

Parsing gives the topology, progress and InfiniBand state; the flight recorder its analysis;
the window and context come from ``reason.window``. Attribution gets them together, read-only,
so every rule sees the same facts and none has to reach back into a stage's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from firstfault.parse.ibstat import HostIB
from firstfault.parse.losses import Series
from firstfault.reason.configuration import TrainingSeen
from firstfault.reason.window import JobWindow
from firstfault.vocab import Action, Event, FRAnalysis, FRCulprit, RankProgress
from firstfault.vocab.topology import Topology


@dataclass
class ReasoningInput:
    """Everything attribution reads besides the correlated events: typed facts of the earlier stages."""

    topology: Topology = field(default_factory=Topology)
    progress: list[RankProgress] = field(default_factory=list)
    job_progress: RankProgress | None = None  # rank -1: steps no rank can be given, where no rank's are known
    fr: FRAnalysis | None = None
    action_of: dict[str, Action] = field(default_factory=dict)
    fr_events: list[Event] = field(default_factory=list)
    window: JobWindow | None = None
    launch_start: float | None = None  # the job's start as a launcher or the scheduler recorded it
    series: dict[int, list[float]] = field(default_factory=dict)  # each rank's own work per step
    training: TrainingSeen = field(default_factory=lambda: TrainingSeen(False, None))
    events: list[Event] = field(default_factory=list)  # the aligned timeline (network localisation reads it)
    ib: dict[str, HostIB] = field(default_factory=dict)  # InfiniBand port state per host
    inputs: dict[str, Any] = field(default_factory=dict)  # what the bundle held (for the verdict)
    context: list[Event] = field(default_factory=list)  # host evidence outside the job window, or benign
    kernel_logs: bool = False  # the bundle holds a kernel log: an OOM kill would show in it
    training_end: str | None = None  # a rank's progress line at its last step ("step N/N"), as file:line: text
    # "file:line: text" of the last frame of a traceback a file ends inside (its exception line
    # missing: a paste cut there), the first such file's
    cut_traceback: str | None = None
    # file -> the number of its last line that is not blank (``parse.facts._file_end``)
    file_ends: dict[str, int] = field(default_factory=dict)
    # each job-output file's first and last time (a node's console that stopped before its peers failed)
    file_spans: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # None: no timed line
    # rank -> ("file:line", text): the last line its own stderr file holds (``parse.facts._last_words``)
    last_words: dict[int, tuple[str, str]] = field(default_factory=dict)
    # file -> series (rank or None) -> its trailing climb of training-loss values (``parse.losses``)
    losses: dict[str, Series] = field(default_factory=dict)


def fr_culprits(fr: FRAnalysis | None) -> list[FRCulprit]:
    return list(fr.culprits) if fr is not None else []


def fr_dumped_culprits(fr: FRAnalysis | None) -> list[FRCulprit]:
    """The culprits the flight recorder names from a rank's own dump.

    A rank that wrote no dump is blamed only because a peer waits on it; that is no evidence of
    what the rank did, so it must not override a log line that shows it (a gloo receiver's size
    check, DETAIL's mismatch report). A run under load shows why: the ranks that aborted first
    died before dumping, and the one dump left named them all.
    """
    if fr is None:
        return []
    absent = set(fr.missing_dumps)
    return [c for c in fr.culprits if c.rank not in absent]
