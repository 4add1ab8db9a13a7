"""Silence is evidence: a rank whose progress lines stop while its peers' go on.

A hung rank prints nothing; its peers block in the next collective and, minutes later, the
collective's watchdog times out on all of them at once, so the first line that names anything
names every rank. Progress lines arrive all along, though, and the rank that stopped first is the
one to look at. This module keeps, per rank, the last step seen and the (watcher's) wall time it
was first seen, and calls a rank silent when it has not advanced for the threshold while a peer
is ahead of it or advanced after it.

If every rank stopped at the same step, nothing is said: progress cannot tell who hung (peers of
a synchronous job block in the very next collective and print nothing more either, see the
``hang`` row of ``bench live``), and every rank stopping together is also how a healthy job
ends. The pipeline names the rank once the timeouts and the flight recorder's dumps arrive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

from firstfault.parse.base import Progress


@dataclass(frozen=True)
class SilenceSettings:
    """When no progress is silence.

    ``k`` step times: a healthy rank's step time varies by tens of percent (data loading, a garbage
    collection, a slow collective); an occasional step several times the median is normal, one
    that lasts ``k=5`` medians while peers move is not. ``floor_s``: at small step times (the
    simulated job's is ~80 ms, so 5 medians is 0.4 s) a file system's write-back, the watcher's own
    read interval (0.25 s) and a loaded host's scheduling delays are of the order of a second; 3 s
    keeps those from reading as a hang and still leaves the verdict well inside the 5 s goal of
    ``bench live``, and ~200x earlier than NCCL's default 10-minute watchdog.
    """

    k: float = 5.0
    floor_s: float = 3.0

    def threshold(self, step_s: float | None) -> float:
        return max(self.k * step_s, self.floor_s) if step_s else self.floor_s


@dataclass(frozen=True)
class SilentRanks:
    """The ranks that stopped while others went on, and why."""

    ranks: list[int]
    step: int | None
    silent_for_s: float
    threshold_s: float
    ahead: list[int]

    def summary(self) -> str:
        who = ", ".join(str(r) for r in self.ranks)
        return (
            f"rank {who} made no progress after step {self.step} for {self.silent_for_s:.1f} s "
            f"(threshold {self.threshold_s:.1f} s) while rank(s) {', '.join(str(r) for r in self.ahead)} went on"
        )


@dataclass
class _Clock:
    step: int
    seen_at: float  # the watcher's clock when this step was first seen


@dataclass
class SilenceWatch:
    """Per-rank progress clocks of one attempt, updated from the parse's progress counters."""

    settings: SilenceSettings = field(default_factory=SilenceSettings)
    attempt: int | None = None
    clocks: dict[int, _Clock] = field(default_factory=dict)
    step_ms: list[float] = field(default_factory=list)

    def observe(self, attempt: int, progress: dict[int, Progress], now: float) -> None:
        if attempt != self.attempt:  # a restart: every rank's count starts again
            self.attempt, self.clocks = attempt, {}
        for rank, p in progress.items():
            if p.last_step is None:
                continue
            c = self.clocks.get(rank)
            if c is None or p.last_step > c.step:
                self.clocks[rank] = _Clock(p.last_step, now)
        self.step_ms = [m for p in progress.values() for m in p.step_ms[-50:]]

    def silent(self, now: float) -> SilentRanks | None:
        """The ranks silent past the threshold, or None while progress is healthy."""
        if len(self.clocks) < 2:
            return None
        threshold = self.settings.threshold(median(self.step_ms) / 1000 if self.step_ms else None)
        low = min(c.step for c in self.clocks.values())
        behind = sorted(r for r, c in self.clocks.items() if c.step == low)
        ahead = sorted(r for r, c in self.clocks.items() if c.step > low)
        since = now - max(self.clocks[r].seen_at for r in behind)
        if since <= threshold:
            return None
        if ahead and len(behind) <= len(ahead):  # the few that stopped, not the many that finished
            return SilentRanks(behind, low, since, threshold, ahead)
        return None
