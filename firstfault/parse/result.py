"""What the parse stage hands on: the bundle's events and the facts read beside them.

Why a module of its own: the batch parse (``parse.run``), its worker pool (``parse.workers``)
and a live reader (``firstfault.live``) all build one, and the pipeline's later stages only read
it; none of them needs the others' code to do so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

from firstfault.parse.base import ParseContext, Progress
from firstfault.parse.ibstat import HostIB
from firstfault.vocab import Event, RankProgress, settings

RECENT_MIN_STEPS = 5


@dataclass
class ParseResult:
    events: list[Event]
    ctx: ParseContext
    files_read: int = 0
    bytes_read: int = 0
    lines_flagged: int = 0
    skipped: list[str] = field(default_factory=list)
    ib: dict[str, HostIB] = field(default_factory=dict)  # host -> its ibstat/ibv_devinfo/rdma port states

    def known_ranks(self) -> list[int]:
        """Every rank the bundle shows: in progress lines, events, per-rank directories, the world size,
        and as many as print each untagged step line."""
        ranks: set[int] = set()
        for prog in self.ctx.progress_by_attempt.values():
            ranks.update(prog)
        ranks.update(e.rank for e in self.events if e.rank is not None)
        ranks.update(self.ctx.rank_dirs_local)
        if self.ctx.topology.world_size:
            ranks.update(range(self.ctx.topology.world_size))
        ranks.update(range(self.ctx.topology.untagged_printers))  # untagged step lines, so many to a step
        if ranks and max(ranks) < settings.current().limits.max_world:
            ranks.update(range(max(ranks) + 1))  # ranks are 0..W-1: one seen implies every lower one
        return sorted(ranks)

    def missing_rank_logs(self, ranks: list[int]) -> list[int]:
        """Ranks below the highest known one that have no per-rank torchrun log."""
        logged = self.ctx.rank_dirs_local
        if not logged or not ranks:
            return []
        hi = min(max(ranks), settings.current().limits.max_world)  # a rank of 1e9 is a claim, not 1e9 ranks
        return sorted(set(range(hi + 1)) - logged)

    def hosts(self) -> list[str]:
        """Every host the bundle shows the job on: the topology's, the hosts of its per-rank log
        folders and of its events (the fleet's exposure: which nodes ran this job)."""
        found = set(self.ctx.topology.rank_host.values())
        found.update(p.host for prog in self.ctx.progress_by_attempt.values() for p in prog.values() if p.host)
        found.update(e.host for e in self.events if e.host)
        return sorted(found)

    def looks_like_a_job(self) -> bool:
        """Any line a signature knows (noise included), training under way, an error line, a
        flight-recorder dump or a launcher's per-rank file: evidence that this is what a job left.
        Without any, saying "no failure" would be a lie about a file that is not a job log at all."""
        return bool(
            self.events
            or self.ctx.training_seen
            or any(self.ctx.progress_by_attempt.values())
            or self.ctx.has_fr_dumps
            or self.ctx.has_rank_files
            or self.ctx.has_error_files
            or self.ctx.has_job_output_kind
            or self.ctx.job_evidence
            or self.ctx.topology.world_size is not None  # a line states a distributed world's size
        )

    def launched(self) -> bool:
        """Does the bundle hold the job's start as a launcher or the scheduler recorded it (not a paste)?"""
        return bool(self.ctx.sched.get("start") or self.ctx.attempt_start or self.ctx.has_launch_output)

    def own_series(self, attempt: int | None = None) -> dict[int, list[float]]:
        """Each rank's own work per step (compute time), in step order: what a straggler shows in."""
        return {rank: list(p.own_ms) for rank, p in self.ctx.progress(attempt).items() if p.own_ms}

    def rank_progress(self, attempt: int | None = None) -> list[RankProgress]:
        return [self._progress_of(rank, p) for rank, p in sorted(self.ctx.progress(attempt).items())]

    def job_progress(self, attempt: int | None = None) -> RankProgress | None:
        """The job's progress from lines no rank can be given (rank -1), where no rank's is known."""
        if self.ctx.progress(attempt) or not self.ctx.unranked_progress:
            return None
        key = min(self.ctx.unranked_progress) if attempt is None else attempt
        p = self.ctx.unranked_progress.get(key)
        return None if p is None else self._progress_of(-1, p)

    def _progress_of(self, rank: int, p: Progress) -> RankProgress:
        med = median(p.step_ms) if p.step_ms else None
        interval = None
        if p.first_ts is not None and p.last_ts is not None and p.last_step and p.last_step > (p.first_step or 0):
            interval = (p.last_ts - p.first_ts) / (p.last_step - (p.first_step or 0))
        tail = p.step_ms[-max(RECENT_MIN_STEPS, len(p.step_ms) // 4) :]
        recent = median(tail) if len(p.step_ms) >= 2 * RECENT_MIN_STEPS else None
        return RankProgress(
            rank=rank,
            last_step=p.last_step,
            last_step_ts=p.last_ts,
            steps_seen=p.steps_seen,
            median_step_ms=med,
            host=self.ctx.topology.rank_host.get(rank) or p.host,
            recent_step_ms=recent,
            step_interval_s=round(interval, 3) if interval else None,
        )
