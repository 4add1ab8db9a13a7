"""Stalls read from progress: a rank that stopped while its peers went on, a job that stopped long
before something outside ended it.

A hang says nothing of its own: a stuck data loader prints no line, and a collective with no
timeout (or one longer than anyone waits) prints none either. Its trace is in progress lines: the
rank whose last step is behind its peers' (:func:`stalled_first`), and a job whose every rank
stopped long before its time limit, a cancel or a stop signal ended it (:func:`stalled_before_limit`):
that end is the stall's consequence, not the fault.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Sequence
from statistics import median

from firstfault.align import sort_key
from firstfault.reason.configuration import PEER_EXITED
from firstfault.reason.correlate import Candidate, Correlation, earlier
from firstfault.reason.frames import where_stopped
from firstfault.reason.inputs import ReasoningInput
from firstfault.vocab import CandidateKind, Category, Event, RankProgress, Role, settings
from firstfault.vocab.text import rank_list
from firstfault.vocab.timefmt import iso


def stalled_first(first: Candidate, corr: Correlation, ev: ReasoningInput) -> Candidate | None:
    """A rank that stopped making progress well before the first error, while its peers went on.

    A hung data loader says nothing; if another fault ends the job before the NCCL timeout
    (srun --kill-on-bad-exit tears everything down), the hang leaves no timeout either. Its
    trace is in progress: its last step is behind every peer's and ``Reasoning.stall_steps`` behind the
    median, and it stopped
    more than ``Reasoning.stall_steps`` step intervals before the first error.
    """
    if first.ts is None:
        return None
    prog = [p for p in ev.progress if p.last_step is not None and p.last_step_ts is not None]
    if len(prog) < 2:
        return None
    slow = min(prog, key=lambda p: (p.last_step or 0, p.last_step_ts or 0.0))
    last = slow.last_step or 0
    others = [p.last_step or 0 for p in prog if p.rank != slow.rank]
    if min(others) <= last:
        return None  # not alone behind: its group stopped together (a collective, not one rank)
    ahead = int(median(others))
    intervals = [p.step_interval_s for p in prog if p.step_interval_s]
    if not intervals or slow.rank == first.rank:
        return None
    step_s = median(intervals)
    assert slow.last_step is not None and slow.last_step_ts is not None
    if (
        ahead - last < settings.current().reasoning.stall_steps
        or first.ts - slow.last_step_ts < settings.current().reasoning.stall_steps * step_s + 5.0
    ):
        return None
    v = corr.ranks.get(slow.rank)
    if v is not None and (v.first_root is not None or v.first_cascade is not None):
        return None  # it reported a fault of its own
    reasons = [
        f"rank {slow.rank}'s progress stopped at step {slow.last_step} ({iso(slow.last_step_ts)}), "
        f"{first.ts - slow.last_step_ts:.0f} s before the first error, while its peers went on "
        f"(to step {ahead}, median)"
    ]
    where = where_stopped(v.events if v else [])
    if where:
        reasons.append(where)
    return Candidate(CandidateKind.SILENT, None, slow.rank, None, slow.last_step_ts + step_s, Category.HANG, reasons)


# The ends that come from outside the job (signature field ``reason``): the scheduler's time limit,
# a cancel (scancel, an admin), a stop signal to the launcher (torchrun's "death signal").
OUTSIDE_ENDS = {
    "time_limit": "the time limit",
    "cancelled": "the cancel",
    "preemption": "the preemption",
    "stopped": "a stop from outside",
}


def stalled_before_limit(win: Candidate, corr: Correlation, ev: ReasoningInput) -> Candidate | None:
    """A job ended from outside (its time limit, a cancel, a stop signal) that had stopped making
    progress long before.

    Under plain ``srun`` (no watchdog, or a process-group timeout longer than the job's limit) a
    hang prints nothing until the scheduler kills the job, or a person who saw it stall stops it.
    The end is then the consequence; the stall is the root. Progress that went on until the end
    means the job simply ran out of time, or was stopped while it worked (the end stays the root).
    The culprit is the rank that stopped behind its peers, or the one whose stack dump at the kill
    shows it somewhere its peers are not; often neither tells.
    """
    e = win.event
    ended = OUTSIDE_ENDS.get(e.fields.get("reason", "")) if e is not None else None
    if e is None or ended is None or win.ts is None:
        return None
    return _stalled_until(e, win.ts, corr, ev, ended) or _waited_before(e, corr, ended)


def _waited_before(end: Event, corr: Correlation, ended: str) -> Candidate | None:
    """A job whose ranks timed out waiting in a collective before something outside ended it.

    Where no progress line places the stall (a paste that starts at the first error), the ranks'
    own timeouts do: each waited its process-group timeout for a peer, and printed it above the
    end (or before it by the clock). The job had hung; the end only stopped it. The culprit is
    the one rank that printed nothing while the others waited (srun's "task 1: Terminated" by the
    limit, where its peers had exited); with none or several such ranks, none is named."""
    waited = sorted(r for r, v in corr.ranks.items() if v.timed_out() and earlier(v.first_cascade, end))
    if not waited:
        return None
    quiet = [r for r, v in corr.ranks.items() if r not in waited and v.said_nothing()]
    reasons = [
        f"rank(s) {', '.join(map(str, waited))} timed out waiting in a collective before {ended} "
        f"({end.source}:{end.line}): the job had hung, and {ended} only ended it"
    ]
    rank = quiet[0] if len(quiet) == 1 else None
    if rank is not None:
        reasons.append(f"rank {rank} printed nothing while they waited: it is the one they waited for")
    else:
        reasons.append("no rank stands out as the one they waited for")
    times = [c.ts for r in waited if (c := corr.ranks[r].first_cascade) is not None and c.ts is not None]
    return Candidate(CandidateKind.STALLED, None, rank, None, min(times, default=None), Category.HANG, reasons)


def stop_came_first(corr: Correlation) -> Event | None:
    """A stop from outside (signature field ``reason``: a time limit, a cancel, a signal to the
    launcher) that came before every error of the job's own, or None.

    Everything the ranks print after such a stop is its fallout: a rank that a Ctrl-C interrupted
    leaves, and its peers' connections to it close. Their errors say where the job was when it was
    stopped, not that something in it broke first."""
    ends = _outside_ends(corr)
    if not ends:
        return None
    stop = ends[0]
    outside = {id(e) for e in ends}
    own = [e for e in corr.errors if e.role in (Role.ROOT, Role.CASCADE) and id(e) not in outside]
    return stop if own and all(earlier(stop, e) for e in own) else None


def before_outside_stop(corr: Correlation, lines: Sequence[Event]) -> list[Event]:
    """``lines`` less those that came after the first stop from outside (a time limit, a cancel, a
    preemption, a stop signal).

    Error lines no signature knows are the last resort for a root: an unknown line is more likely
    the fault than a plain cancel is. But not one the stop came before: what slurmstepd, a launcher
    or a wrapper prints after the job was cancelled ("Failed to send MESSAGE_TASK_EXIT: Connection
    refused", a wrapper's "Submitted job triggered an exception") is the stop's fallout, as the
    ranks' own errors after it are (:func:`stop_came_first`)."""
    ends = _outside_ends(corr)
    return [e for e in lines if not earlier(ends[0], e)] if ends else list(lines)


def _outside_ends(corr: Correlation) -> list[Event]:
    """The job's stops from outside that have a time (signature field ``reason``), earliest first."""
    timed = (e for e in corr.errors if e.fields.get("reason") in OUTSIDE_ENDS and e.ts is not None)
    return sorted(timed, key=lambda e: (e.ts or 0.0, e.line))


def _signal_named(stop: Event) -> str:
    """ " (SIGINT)" when the stop's line names its signal by number or name, else ""."""
    sig = stop.fields.get("signame", "").removeprefix("Signals.")
    if sig.isdigit():
        with contextlib.suppress(ValueError):
            sig = signal.Signals(int(sig)).name
    return f" ({sig})" if sig.startswith("SIG") else ""


def waited_at_stop(win: Candidate, corr: Correlation, ev: ReasoningInput) -> Candidate | None:
    """A rank its peers were waiting for when a stop from outside ended a job that had stopped
    making progress: a hang the stop ended (a user's Ctrl-C, a preemption), not a crash.

    The peers lost their connections to ``win``'s rank (or timed out on it) only after the stop:
    its leaving is the stop's doing, not a fault of its own, and what is left is that they were
    blocked on it. The stall is measured at the job's own pace, as :func:`stalled_first` measures
    it (``Reasoning.stall_steps`` step intervals and 5 s), since the peers' wait says who held the
    job up; with no such rank, :func:`stalled_before_limit`'s longer silence is needed."""
    if win.kind != CandidateKind.SILENT or win.rank is None or win.event is not None:
        return None
    stop = stop_came_first(corr)
    if stop is None or stop.ts is None:
        return None
    _, last, step_s = _last_progress(ev)
    if last is None or step_s is None:
        return None
    quiet = stop.ts - last
    if quiet < settings.current().reasoning.stall_steps * step_s + 5.0:
        return None
    ended = OUTSIDE_ENDS[stop.fields["reason"]] + _signal_named(stop)
    reasons = [
        f"no rank made progress for {quiet:.0f} s (about {quiet / step_s:.0f} step intervals of "
        f"{step_s * 1000:.0f} ms) before {ended} ({stop.source}:{stop.line}); every error the ranks printed "
        "came after it: the job hung, and the stop only ended it",
        *win.reasons,
    ]
    return Candidate(CandidateKind.STALLED, None, win.rank, None, last, Category.HANG, reasons)


def _last_progress(ev: ReasoningInput) -> tuple[list[RankProgress], float | None, float | None]:
    """The ranks with a step, the time of the last step any of them made, and the median step
    interval (None where unknown). With no rank's progress known, the job's own (steps no rank can
    be given: ``ReasoningInput.job_progress``) still says when the job last moved."""
    prog = [p for p in ev.progress if p.last_step_ts is not None and p.last_step is not None]
    if not prog and ev.job_progress is not None and ev.job_progress.last_step_ts is not None:
        prog = [ev.job_progress] if ev.job_progress.last_step is not None else []
    if not prog:
        return prog, None, None
    last = max(p.last_step_ts for p in prog if p.last_step_ts is not None)
    intervals = [p.step_interval_s for p in prog if p.step_interval_s]
    return prog, last, median(intervals) if intervals else None


def _stalled_until(end: Event, end_ts: float, corr: Correlation, ev: ReasoningInput, ended: str) -> Candidate | None:
    """The stall before ``end`` (no rank's progress for long before it), as a hang candidate."""
    prog, last, step_s = _last_progress(ev)
    if last is None:
        return None
    floor = settings.current().reasoning.stall_before_limit_s
    need = max(floor, 10 * step_s) if step_s is not None else floor
    if end_ts - last < need:
        return None
    steps = sorted({p.last_step for p in prog if p.last_step is not None})
    reasons = [
        f"no rank made progress for {end_ts - last:.0f} s before {ended} (last step {steps[-1]} at "
        f"{iso(last)}): the job hung, and {ended} only ended it ({end.source}:{end.line})"
    ]
    culprit, why = _odd_rank_out(corr, prog)
    if why:
        reasons.append(why)
    else:
        reasons.append("every rank stopped at the same step and nothing in the logs tells which one hung first")
    return Candidate(CandidateKind.STALLED, None, culprit, None, last, Category.HANG, reasons)


def _odd_rank_out(corr: Correlation, prog: Sequence[RankProgress]) -> tuple[int | None, str | None]:
    """The one rank that stopped behind the rest, the one that did not time out where every peer
    did, or the one whose stack dump differs from all of theirs."""
    behind = behind_every_peer(prog)
    if behind is not None:
        return behind[0], f"rank {behind[0]} stopped at step {behind[1]}, behind every peer"
    quiet = _the_one_not_waiting(corr, prog)
    if quiet is not None:
        return quiet
    return _odd_stack(corr)


def behind_every_peer(progress: Sequence[RankProgress]) -> tuple[int, int, int] | None:
    """The one rank whose last step is behind every other rank's: (rank, its step, the peers'
    lowest), or None."""
    prog = sorted((p for p in progress if p.last_step is not None), key=lambda p: p.last_step or 0)
    if len(prog) < 2:
        return None
    low, nxt = prog[0].last_step or 0, prog[1].last_step or 0
    return (prog[0].rank, low, nxt) if low < nxt else None


def _the_one_not_waiting(corr: Correlation, prog: Sequence[RankProgress]) -> tuple[int, str] | None:
    """Of the ranks that stopped at one step, the one that printed nothing while every other timed
    out waiting in the collective: they waited for it (the silent rank of a hang, issue 11), which
    a time limit that ended the job later does not change."""
    ranks = {p.rank for p in prog}
    waited = {r for r in ranks if r in corr.ranks and corr.ranks[r].timed_out()}
    quiet = [r for r in ranks - waited if corr.ranks.get(r) is None or corr.ranks[r].said_nothing()]
    if len(quiet) != 1 or not waited or waited | set(quiet) != ranks:
        return None
    (r,) = quiet
    return r, (
        f"rank(s) {', '.join(map(str, sorted(waited)))} timed out waiting in a collective and rank {r} printed "
        "nothing: it is the one they waited for"
    )


def left_behind_by_the_waiters(corr: Correlation, world: int | None) -> tuple[int, str] | None:
    """Every rank of the world printed an error: all but one timed out waiting, and the one left
    lost its connection only after their timeouts (gloo's "Connection closed by peer"). It was not
    in the collective they waited in, or it would have timed out with them: it is the one they
    waited for (rank 0 stuck writing a checkpoint while its peers waited at the barrier after it),
    and its own error is only their leaving. Without every rank in the logs, a rank that printed
    nothing could be the one, and the rule says nothing."""
    if world is None or sorted(corr.ranks) != list(range(world)) or world < 3:
        return None
    firsts = {r: v.first_cascade for r, v in corr.ranks.items() if v.first_cascade is not None}
    if len(firsts) != world:
        return None
    waited = sorted(r for r in firsts if corr.ranks[r].timed_out())
    left = [r for r in firsts if r not in waited]
    if len(left) != 1:
        return None
    (r,) = left
    own = firsts[r]
    if not own.fields.get(PEER_EXITED) or any(sort_key(own) < sort_key(firsts[w]) for w in waited):
        return None
    return r, (
        f"rank(s) {rank_list(waited)} timed out waiting in a collective; rank {r} did not, and lost its "
        "connection only after they gave up: it is the one they waited for"
    )


def _odd_stack(corr: Correlation) -> tuple[int | None, str | None]:
    """The one rank whose stack dump at the kill differs from all of its peers'."""
    tops: dict[int, str] = {}
    for r, v in corr.ranks.items():
        stack = next((x for x in v.events if x.fields.get("top_frame")), None)
        if stack is not None:
            tops[r] = stack.fields["top_frame"]
    if len(tops) >= 3:
        counts: dict[str, list[int]] = {}
        for r, t in tops.items():
            counts.setdefault(t, []).append(r)
        odd = [rs[0] for rs in counts.values() if len(rs) == 1]
        if len(counts) == 2 and len(odd) == 1:
            r = odd[0]
            return (
                r,
                f"at the kill rank {r} was in {tops[r]}, every peer elsewhere "
                f"({where_stopped(corr.ranks[r].events) or ''})",
            )
    return None, None
