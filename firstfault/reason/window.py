"""The job's window: host evidence from before the job began, or after it ended, is context.

A node's kernel log holds days of lines: module loads at boot, links that came up, corrected
PCIe errors, an Xid from last week's job. None of it can be the root of *this* job's failure,
however alarming its wording. The window is what the job's own output and the scheduler say:
from the earliest of SLURM's ``StartTime``/``Start`` and the first timed line of any job-output
file (ranks, launcher, srun, NCCL), to the latest of ``EndTime``/``End`` and their last timed
line, widened by the margins of ``Reasoning`` (``window_margin_before_s``,
``window_margin_after_s``). Host events (kernel, scheduler
daemons) outside it are demoted to context: shown in the verdict, never a root.

Inside the window, some host lines are benign unless something follows from them: a port that
went down and back, a corrected error, a cable event. Signatures mark those with
``sets = { needs_consequence = "1" }``; such an event stays a candidate only when an error of the
job on the same host (a rank's error, or a peer's network error naming the host) follows within
``Reasoning.consequence_window_s``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from firstfault.vocab import Event, Role, Severity, settings

CONTEXT = "context"


@dataclass(frozen=True)
class JobWindow:
    """When the job ran, as the bundle shows it; ``None`` ends are unknown (no bound)."""

    start: float | None
    end: float | None
    how: str

    def contains(self, ts: float | None) -> bool:
        if ts is None:
            return True
        if self.start is not None and ts < self.start - settings.current().reasoning.window_margin_before_s:
            return False
        return not (self.end is not None and ts > self.end + settings.current().reasoning.window_margin_after_s)

    def describe(self) -> dict[str, object]:
        return {
            "start": self.start,
            "end": self.end,
            "from": self.how,
            "margin_before_s": settings.current().reasoning.window_margin_before_s,
            "margin_after_s": settings.current().reasoning.window_margin_after_s,
        }


def job_window(spans: Iterable[tuple[float, float]], sched: dict[str, float]) -> JobWindow:
    """The window from job-output spans (first, last time of each file) and the scheduler's record."""
    firsts, lasts, how = [], [], []
    for lo, hi in spans:
        firsts.append(lo)
        lasts.append(hi)
    if firsts:
        how.append("the job's own output")
    if "start" in sched:
        firsts.append(sched["start"])
    if "end" in sched:
        lasts.append(sched["end"])
    if "start" in sched or "end" in sched:
        how.append("the scheduler's record")
    return JobWindow(min(firsts) if firsts else None, max(lasts) if lasts else None, " and ".join(how) or "unknown")


def demote_outside(events: Sequence[Event], window: JobWindow, job_files: set[str]) -> list[Event]:
    """Host events outside the window become context (role noise); returns them."""
    out: list[Event] = []
    if window.start is None and window.end is None:
        return out
    for e in events:
        if e.source in job_files or e.role == Role.NOISE or window.contains(e.ts):
            continue
        e.role = Role.NOISE
        e.set_field(CONTEXT, "outside the job window")
        out.append(e)
    return out


def _follows(cause: Event, e: Event, named_host: str | None) -> bool:
    if e is cause or e.role == Role.NOISE or e.severity not in (Severity.ERROR, Severity.WARNING, Severity.CRITICAL):
        return False
    if (
        cause.ts is not None
        and e.ts is not None
        and not (0 <= e.ts - cause.ts <= settings.current().reasoning.consequence_window_s)
    ):
        return False
    same_host = cause.host is not None and (e.host == cause.host or named_host == cause.host)
    return same_host and (e.rank is not None or named_host == cause.host)


def demote_inconsequential(events: Sequence[Event], peer_host: dict[int, str | None]) -> list[Event]:
    """Benign-unless-followed host events with nothing after them on their host become context.

    ``peer_host`` maps an event's id to the host its ``peer`` field names (a network error that
    names the host at the other end), where known.
    """
    out = []
    for cause in events:
        if cause.fields.get("needs_consequence") != "1" or cause.role == Role.NOISE:
            continue
        if any(_follows(cause, e, peer_host.get(e.id)) for e in events):
            continue
        cause.role = Role.NOISE
        cause.set_field(CONTEXT, "benign unless something follows on its host, and nothing did")
        out.append(cause)
    return out


def context_of(
    events: Sequence[Event], window: JobWindow, job_files: set[str], peer_host: dict[int, str | None]
) -> tuple[list[Event], list[str]]:
    """Demote host events outside the window, then benign ones with nothing after them: (context, warnings)."""
    context = demote_outside(events, window, job_files)
    context += demote_inconsequential(events, peer_host)
    warnings = []
    if context:
        warnings.append(
            f"{len(context)} host event(s) outside the job's window or benign with nothing following them "
            "are context, not candidates (see 'context')"
        )
    return context, warnings
