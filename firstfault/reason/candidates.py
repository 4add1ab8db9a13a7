"""The candidates for the root, beyond the events that name one: silence, slowness, hosts.

``correlate`` proposes the ranks and hosts whose own lines state a fault (and ranks that exited
with none of their own). When those do not explain the failure, the evidence is what did *not*
happen: a rank quiet while its peers timed out (:func:`silent_candidates`), a rank whose own work
slowed down (:func:`straggler_candidate`); stalls read from progress are ``reason.stalls``'.
:func:`merge_host` joins host faults (kernel, driver) with the rank faults on the same host.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from firstfault.align import sort_key
from firstfault.match.xid import lookup
from firstfault.reason.causality import (
    CollectiveConflict,
    OddCollective,
    awaited_ranks,
    conflicting_collective,
    odd_call_site,
    odd_collective,
)
from firstfault.reason.configuration import PEER_EXITED
from firstfault.reason.correlate import (
    Candidate,
    Correlation,
    RankView,
    arrival_order,
    candidate_order,
    corroborates,
    earlier,
    host_explains,
    is_exit_record,
    quotes_cause,
)
from firstfault.reason.frames import where_stopped
from firstfault.reason.inputs import ReasoningInput, fr_culprits
from firstfault.reason.launched import exited_cleanly, never_launched
from firstfault.reason.named import awaited_by_all
from firstfault.reason.rankless_exits import own_rankless_kill
from firstfault.reason.stalls import left_behind_by_the_waiters
from firstfault.reason.stops import stopped_how, survivors_stopped
from firstfault.reason.straggler import find_slowdown
from firstfault.reason.ties import note_lowest_unseen, printed_untagged, tied_at_one_step, untagged_reading
from firstfault.vocab import CandidateKind, Category, Event, FRKind, Layer, RankProgress, Role, Severity
from firstfault.vocab.text import rank_list
from firstfault.vocab.timefmt import iso
from firstfault.vocab.topology import Topology


def is_weak(c: Candidate) -> bool:
    """A root of last resort (signature field ``weak_root``): a plain ``CANCELLED`` is what srun's
    --kill-on-bad-exit prints after another task failed, and what scancel prints on its own."""
    return c.event is not None and c.event.fields.get("weak_root") == "1"


@dataclass(frozen=True)
class _Suspects:
    """Who a hang's victims may have waited for, strongest evidence first (see ``_suspects``)."""

    quiet: frozenset[int]  # (membership only: the order that matters is the pool's)
    unseen: frozenset[int]
    awaited: dict[int, int]
    odd: OddCollective | None
    conflict: CollectiveConflict | None
    pool: list[int]


def _suspects(corr: Correlation, victims: set[int], prog: dict[int, RankProgress]) -> _Suspects:
    """Quiet ranks a line shows (or the victims name), else the rank in an odd collective, else
    quiet ranks no line shows. A rank implied only by the numbering or the world size is quiet for
    want of lines, which a paste may simply have cut: positive evidence about the victims comes
    before it, and victims in one collective of different kinds (a conflict) are such evidence even
    where it names nobody."""
    quiet = [r for r, v in corr.ranks.items() if v.said_nothing()]
    unseen = [r for r in quiet if corr.ranks[r].left_no_line(prog)]
    # victims that name whom they wait for (a store key, a monitored barrier) point at the culprit
    awaited = awaited_ranks(e for e in corr.errors if e.role == Role.CASCADE)  # rank-less ones too
    # (sets for membership: victims may name thousands of ranks, and list lookups here were quadratic)
    in_quiet, in_unseen = set(quiet), set(unseen)
    quiet += [r for r in sorted(awaited) if r not in in_quiet and r not in victims]
    seen = [r for r in quiet if r not in in_unseen or r in awaited]
    # no quiet rank seen: every rank that printed was a victim; only positive evidence names one of them
    odd = None if seen else (odd_collective(corr.errors) or odd_call_site(corr.errors))
    conflict = None if seen or odd is not None else conflicting_collective(corr.errors)
    pool = seen or (odd.ranks if odd is not None else []) or ([] if conflict is not None else unseen)
    return _Suspects(frozenset(quiet), frozenset(in_unseen), awaited, odd, conflict, list(pool))


def _quiet_reading(
    r: int, sus: _Suspects, victims: int, timeouts: bool, exiting: bool | str | None, printers: int = 0
) -> tuple[Category, list[str]]:
    """What a quiet suspect's silence means: a hang when its peers timed out, an exit when their
    connections to it closed (an early, error-less end when it was already shutting down, or when
    the launcher's summary says it exited 0: ``exiting`` is then that reason's text)."""
    reasons = []
    cat = Category.HANG
    if r in sus.unseen and r not in sus.awaited and r < printers:
        reasons.append(
            f"the console's untagged progress lines show {printers} processes at each step: rank {r} ran and "
            "printed steps, but no line tagged with its rank shows an error, an exit or where it stopped"
        )
    elif r in sus.unseen and r not in sus.awaited:
        reasons.append(
            f"no line of rank {r} is in the log that shows what it did (no error, exit or progress line; ranks "
            "are numbered from 0, or the world size says it ran); a paste may have left its lines out"
        )
    if r in sus.quiet and timeouts:
        reasons.append(f"rank {r} reported no error while {victims} peer(s) timed out waiting for it")
    elif r in sus.quiet:
        cat = Category.APPLICATION_ERROR if exiting else Category.PROCESS_CRASH
        reasons.append(f"rank {r} reported no error while {victims} peer(s) saw their connections to it close")
        if isinstance(exiting, str):
            reasons.append(exiting)
        elif exiting:
            reasons.append(
                "it was already shutting down (interpreter exit, no Python frame) when torchrun stopped it: "
                "the program ended on that rank without an error (sys.exit or an early return)"
            )
    return cat, reasons


def _said_before_leaving(said: Event) -> str:
    """Why a quiet rank that printed an error before its peers lost it ended itself, not crashed."""
    return (
        f"it printed an error before it left ({said.source}:{said.line}: {said.text.strip()[:160]}): "
        "a program that reports an error and ends has stopped itself; a crash (a signal, an abort) prints "
        "no such line"
    )


def _none_named(
    corr: Correlation, victims: set[int], pool: list[int], sus: _Suspects, ev: ReasoningInput
) -> Candidate | None:
    """The reading that names no rank, where no suspect is left or none can be told apart."""
    if not pool:
        return _nobody_stands_out(corr, victims, ev) if sus.conflict is None else _conflict_reading(sus.conflict)
    if printed_untagged(pool, sus.unseen, sus.awaited, ev.topology.untagged_printers):
        return untagged_reading(victims, pool, ev.topology.untagged_printers, corr)
    return None


def silent_candidates(corr: Correlation, ev: ReasoningInput) -> list[Candidate]:
    """Ranks that never complained while their peers timed out: the hang's usual culprit."""
    victims = {r for r, v in corr.ranks.items() if v.first_cascade is not None}
    if not victims:
        return []
    prog = {p.rank: p for p in ev.progress}
    fr_list = fr_culprits(ev.fr)
    fr_pos_of: dict[int, int] = {}
    for i, c in enumerate(fr_list):
        fr_pos_of.setdefault(c.rank, i)
    sus = _suspects(corr, victims, prog)
    awaited, odd = sus.awaited, sus.odd
    pool = sus.pool or _behind_or_named(corr, prog, fr_pos_of)
    beyond = never_launched(pool, awaited, ev)
    if beyond is not None:
        return [beyond]
    if not fr_list and (none := _none_named(corr, victims, pool, sus, ev)) is not None:
        return [none]
    # a rank that entered the collective with other arguments times out like its peers: not quiet
    pool += [c.rank for c in fr_list if c.kind == FRKind.MISMATCHED and c.rank not in pool and c.rank in corr.ranks]
    timeouts = any(v.timed_out() for v in corr.ranks.values())
    clean = exited_cleanly(ev)
    out = []
    for r in pool:
        p = prog.get(r)
        view = corr.ranks.get(r) or RankView(r)  # a rank the victims name but that printed nothing
        exiting = any(e.signature == "python.faulthandler_no_frame" for e in view.events)
        cat, reasons = _quiet_reading(
            r, sus, len(victims), timeouts, exiting or clean.get(r), ev.topology.untagged_printers
        )
        if odd is not None and r in odd.ranks:
            cat = Category.COLLECTIVE_MISMATCH
            reasons.append(odd.reason)
        if awaited.get(r):
            reasons.append(f"{awaited[r]} peer(s) name rank {r} as the rank they waited for")
        if p and p.last_step is not None:
            reasons.append(f"its last progress was step {p.last_step} at {iso(p.last_step_ts)}")
        where = None if exiting else where_stopped(view.events)
        if where:
            reasons.append(where)
        own = view.unrecognised
        if own:
            reasons.append(f"its own last error line (no signature knows it): {own[-1].text.strip()[:200]}")
        said = own[-1] if own and cat == Category.PROCESS_CRASH and not exiting else None
        if said is not None:
            cat = Category.APPLICATION_ERROR
            reasons.append(_said_before_leaving(said))
        if r in fr_pos_of:
            fc = fr_list[fr_pos_of[r]]
            reasons.append(f"flight recorder: {fc.reason}")
            if fc.kind == FRKind.MISMATCHED and cat == Category.HANG:
                cat = Category.COLLECTIVE_MISMATCH  # it did enter the collective, with other arguments
        ts = p.last_step_ts if p else None
        fr_ev = next((e for e in ev.fr_events if e.rank == r), None)
        out.append(Candidate(CandidateKind.SILENT, fr_ev or said, r, None, ts, cat, reasons))

    def key(c: Candidate) -> tuple[int, int, int, float, int]:
        fr_pos = fr_pos_of.get(c.rank if c.rank is not None else -1, len(fr_list) + 1)
        p = prog.get(c.rank if c.rank is not None else -1)
        step = p.last_step if p and p.last_step is not None else 10**9
        named = -awaited.get(c.rank if c.rank is not None else -1, 0)
        return (fr_pos, named, step, c.ts if c.ts is not None else float("inf"), c.rank or 0)

    out.sort(key=key)
    own_rankless_kill(out, corr, ev)
    tie = tied_at_one_step(out, prog, awaited, fr_pos_of, sus.unseen)
    if tie is not None:
        return [tie]
    note_lowest_unseen(out, sus.unseen, awaited, bool(fr_list))
    return out


_PREVIOUS_XID = re.compile(r"caused by previous Xid (?P<xid>\d{1,4})\b")


def named_cause_candidates(corr: Correlation) -> list[Candidate]:
    """An Xid that says which earlier Xid caused it stands for that Xid when its line is missing.

    The driver reports Xid 45 (preemptive cleanup) *because of* another fault, and newer drivers
    name it: "Ch 00000001 caused by previous Xid 149". A kernel log cut before the cause (a paste,
    a rotated log) still says what the cause was; the catalog's judgement of the named Xid gives
    its category and action. The consequence line is the evidence, its cause the fault.
    """
    out: list[Candidate] = []
    for e in [*(x for evs in corr.host_events.values() for x in evs), *corr.errors]:
        m = _PREVIOUS_XID.search(e.fields.get("detail", "")) if e.role == Role.CASCADE else None
        if m is None or any(c.event is e for c in out):
            continue
        cause = lookup(m["xid"])
        if cause.role == "consequence":
            continue
        reasons = [
            f"the driver says this Xid {e.fields.get('xid', '?')} was caused by a previous Xid {cause.xid} "
            f"({cause.mnemonic or 'not in the catalog'}), whose own line is not in the bundle"
        ]
        out.append(Candidate(CandidateKind.EVENT, e, e.rank, e.host, e.ts, Category(cause.category), reasons))
    out.sort(key=candidate_order)
    return out


def quoted_cause_candidates(corr: Correlation) -> list[Candidate]:
    """A tear-down that quotes the error it caught, when that error's own line is not in the log.

    torch's watchdog re-raises what it caught ("Process group watchdog thread terminated with
    exception: CUDA error: unspecified launch failure"): normally the caught error's own line is
    there and is the root. In a paste of the last lines it is not, and the quoted words (matched
    as a line of their own at parse time, ``parse.run._quoted_cause``) are the evidence: the
    quoted error's category, on the rank and host that printed the tear-down.
    """
    quoting = [e for e in corr.errors if quotes_cause(e)]
    if not quoting:
        return []
    e = min(quoting, key=sort_key)
    cat = Category(e.fields["cause_category"])
    reason = (
        f"the only failure is quoted by a tear-down ({e.signature}): it re-raised "
        f"{e.fields['cause_signature']} ({cat.value}), whose own line is not in the log"
    )
    return [Candidate(CandidateKind.EVENT, e, e.rank, e.host, e.ts, cat, [reason])]


def scheduler_end_candidates(corr: Correlation) -> list[Candidate]:
    """The scheduler ended the job (a requeue) before any error line of the job's own.

    slurmstepd's ``CANCELLED AT ... DUE TO JOB REQUEUE`` is a tear-down: the scheduler stops the
    step and every process in it. The lines printed after it (slurmstepd failing to report task
    exits, tasks exiting 1) are that tear-down's fallout, not a fault of their own; with no error
    before it, the scheduler's end is the answer, and its cause is in the scheduler's log. Which
    tear-downs count is data: a scheduler signature that sets ``reason``.
    """
    ends = [e for e in corr.errors if e.role == Role.TEARDOWN and e.layer == Layer.SCHEDULER and e.fields.get("reason")]
    if not ends or any(e.role == Role.ROOT for e in corr.errors):
        return []
    end = min(ends, key=sort_key)
    if any(earlier(u, end) for u in corr.unrecognised):
        return []
    after = sum(1 for u in corr.unrecognised if earlier(end, u))
    reason = (
        f"the scheduler ended the job ({end.fields['reason']}) before any error of the job's own; "
        f"the {after} unrecognised error line(s) after it are its tear-down"
    )
    return [Candidate(CandidateKind.EVENT, end, None, end.host, end.ts, Category.SCHEDULER, [reason])]


def orphan_cascade_candidates(corr: Correlation, progress: Sequence[RankProgress] = ()) -> list[Candidate]:
    """The earliest symptom, when no fault it could follow from is anywhere in the bundle.

    A rendezvous that timed out connecting to its master, a socket refused at start-up, a
    collective that timed out in a paste of one rank's output: each is normally a consequence, but
    with nothing earlier to be the consequence *of*, it is the best evidence there is, and naming it
    (its own category, no culprit rank unless its line gives one) says more than an unrecognised line.
    """
    if any(e.role == Role.ROOT for e in corr.errors):
        return []
    firsts = [e for e in corr.errors if e.role == Role.CASCADE and e.severity == Severity.ERROR]
    if not firsts:
        return []
    e = min(firsts, key=sort_key)
    reason = (
        "the earliest error, and nothing in the bundle it could follow from: it is the failure as far as the logs show"
    )
    if e.fields.get(PEER_EXITED):
        # "Connection closed by peer": the peer's process ended its side (it exited, crashed or was
        # killed), which says nothing of why; calling it the network would name a fault nothing shows
        peer = e.fields.get("peer")
        who = f"the peer at {peer}" if peer else "a peer"
        reason = (
            f"the earliest error says {who} closed its connection: that process left first (it exited, "
            "crashed or was killed) and its own output is not in the log, so the cause is unknown"
        )
        return [Candidate(CandidateKind.EVENT, e, None, e.host, e.ts, Category.UNKNOWN, [reason])]
    named = awaited_by_all(corr, e, progress)
    if named is not None:
        return [named]
    return [Candidate(CandidateKind.EVENT, e, e.rank, e.host, e.ts, e.category, [reason])]


def _behind_or_named(corr: Correlation, prog: dict[int, RankProgress], fr_pos_of: dict[int, int]) -> list[int]:
    """Among ranks that all timed out: those the flight recorder names, or the one behind the rest."""
    named = [r for r in fr_pos_of if r in corr.ranks]
    steps = sorted((p.last_step, r) for r, p in prog.items() if p.last_step is not None and r in corr.ranks)
    behind = [steps[0][1]] if len(steps) >= 2 and steps[0][0] < steps[1][0] else []
    return list(dict.fromkeys(named + behind))


def _peer_left(victims: list[int], first: Event, stopped: int, corr: Correlation) -> Candidate:
    """Every victim says its peer closed the connection, and no rank in the log is that peer.

    Why: "Connection closed by peer" says the peer's process left first (it exited, crashed or was
    killed), not that anything waited: it is no hang. Which peer left, and why, is in that peer's
    own output, which the log does not hold; a lone such line reads the same (``reason.candidates``,
    the earliest unexplained error)."""
    reasons = [
        f"every rank in the logs ({rank_list(victims)}) says its peer closed the connection: that process left "
        "first (it exited, crashed or was killed), and no line of its own is in the log, so the cause is unknown"
    ]
    if stopped:
        reasons.append(f"the launcher stopped {stopped} other process(es) after the failure ({stopped_how(corr)})")
    what = "a peer's process left first and its own output is not in the log: the ranks that printed lost it"
    # the earliest such line is the evidence: a peer's exit is no set-up failure (``pretraining_category``)
    return Candidate(CandidateKind.SILENT, first, None, first.host, first.ts, Category.UNKNOWN, reasons, what=what)


def _nobody_stands_out(corr: Correlation, victims: set[int], ev: ReasoningInput) -> Candidate:
    """Every rank in the logs timed out waiting and none stands out: say so, name no culprit."""
    lost = _lost_file(corr, victims, ev)
    if lost is not None:
        return lost
    world = ev.topology.world_size
    left = left_behind_by_the_waiters(corr, world)
    if left is not None:
        return Candidate(CandidateKind.SILENT, None, left[0], None, None, Category.HANG, [left[1]])
    seen = sorted(corr.ranks)
    stopped = survivors_stopped(corr)
    if seen == [0] and victims == {0} and (world is None or world > 1) and corr.ranks[0].timed_out() and not stopped:
        return _rank0_alone(world)
    firsts = [corr.ranks[r].first_cascade for r in victims if r in corr.ranks]
    closed = [c for c in firsts if c is not None and c.fields.get(PEER_EXITED)]
    if closed and len(closed) == len(firsts):
        return _peer_left(sorted(victims), min(closed, key=sort_key), stopped, corr)
    reasons = [
        f"every rank in the logs ({rank_list(seen)}) reported a timeout or lost connection: none is the "
        "rank the others waited for"
    ]
    if stopped:
        reasons.append(
            f"the launcher stopped {stopped} other process(es) after the failure ({stopped_how(corr)}): they were "
            "alive, stuck or waiting elsewhere, and their own lines say nothing of where"
        )
    if world is None:
        reasons.append(
            "the world size is not in the logs, so a rank that printed nothing cannot be ruled out: it is the "
            "likely culprit (add the launcher's output, NCCL's init lines or a topology.json)"
        )
    elif len(seen) >= world:
        reasons.append(f"all {world} ranks timed out: a collective no rank could finish (a mismatch or a fabric stall)")
    return Candidate(CandidateKind.SILENT, None, None, None, None, Category.HANG, reasons)


def _conflict_reading(conflict: CollectiveConflict) -> Candidate:
    """Victims that timed out in one collective call of different kinds: a mismatch, no culprit.
    Which side is odd takes a majority (``causality.odd_collective``) or the flight recorder; two
    sides alone say only that the ranks diverged, and ranks that printed nothing are not suspects
    for it (their silence may be the paste's)."""
    reasons = [
        conflict.reason,
        "no majority says which side took the wrong path: no rank is named (the flight recorder's dumps "
        "or TORCH_DISTRIBUTED_DEBUG=DETAIL would show each rank's collective)",
    ]
    return Candidate(
        CandidateKind.SILENT, None, None, None, None, Category.COLLECTIVE_MISMATCH, reasons, what=conflict.what
    )


# A dead process's sockets close at once, so its peers see the loss within seconds of its last line;
# a hang is seen only after a timeout. A console that stopped within this of the first victim's
# error (and no later than it, but for the clock's grain) was lost; one that stopped earlier hung.
LOST_FILE_BEFORE_S = 5.0
LOST_FILE_GRAIN_S = 1.0


def _lost_file(corr: Correlation, victims: set[int], ev: ReasoningInput) -> Candidate | None:
    """A console that went quiet mid-training as every rank in the logs lost its peers.

    A multi-node job leaves one console per node. When a node is lost (its machine down, its
    processes killed at once), its console just stops: no error, no exit, no end, since nothing on
    it was left to write one. Its peers lose their connections at once (a dead process's sockets
    close), and every rank the logs show is a victim. A console (``file_spans`` holds no rank's own
    split stdout/stderr) that stopped then, with no line of its own failing or ending, holds the
    processes they lost.
    """
    if not ev.training.seen or len(ev.file_spans) < 2:
        return None
    cascades = [v.first_cascade for r, v in corr.ranks.items() if r in victims and v.first_cascade is not None]
    first = min((c.ts for c in cascades if c.ts is not None), default=None)
    closed = any(c.fields.get(PEER_EXITED) for c in cascades)  # "Connection closed by peer": the peer left
    spoke = {e.source for e in ev.events if e.role in (Role.ROOT, Role.CASCADE, Role.TEARDOWN) or is_exit_record(e)}
    quiet: list[tuple[float, str]] = []
    for src, span in ev.file_spans.items():
        if src in spoke:
            continue
        if span is None:  # a console without times: only the peers' own words say they were left
            if closed:
                quiet.append((float("inf"), src))
        elif first is not None and first - LOST_FILE_BEFORE_S <= span[1] <= first + LOST_FILE_GRAIN_S:
            quiet.append((span[1], src))
    if not quiet:
        return None
    hi, src = min(quiet)
    ranks = sorted({e.rank for e in ev.events if e.source == src and e.rank is not None})
    when = f"stops at {iso(hi)}, as its peers lost their connections," if hi != float("inf") else "stops"
    reasons = [
        f"{src} {when} with no error, exit or end of its own: the processes writing it were lost without a word "
        "(their machine went down, or they were killed at once: check that node's kernel log and the "
        "scheduler); a hang would have stopped a timeout before its peers' errors",
        f"every rank that printed elsewhere ({rank_list(sorted(victims))}) lost its peers"
        + (", and a peer's connection was closed from its end" if closed else ""),
    ]
    if not ranks:
        reasons.append(f"no line of {src} names its ranks, so none is named")
    at = hi if hi != float("inf") else None
    return Candidate(CandidateKind.SILENT, None, ranks[0] if ranks else None, None, at, Category.PROCESS_CRASH, reasons)


def _rank0_alone(world: int | None) -> Candidate:
    """Rank 0 timed out in a collective and no other rank has a line in the logs.

    When a peer hangs, every rank waiting for it times out; one rank waiting alone is the shape of
    a collective only that rank called. Rank 0 is the rank that evaluates, logs and writes
    checkpoints alone in most trainers, so a barrier or all-reduce in a rank-0-only branch (or one
    it reaches after its peers finished) waits for peers that took the other path. The reading
    rests on what the logs do not show (the other ranks' lines), and says so."""
    reasons = [
        "rank 0 is the only rank in the logs, and it timed out waiting in a collective",
        "one rank waiting alone is the shape of a collective only it called (when a peer hangs, every rank "
        "waiting for it times out); rank 0 alone evaluates, logs and writes checkpoints in most trainers, so a "
        "collective in a rank-0-only branch, or one it reached after its peers had finished, is the likely cause",
        "this rests on the other ranks' lines being absent"
        + ("" if world is None else f" ({world} ranks ran)")
        + ": their own output would show whether they finished, took another branch or hung elsewhere",
    ]
    return Candidate(CandidateKind.SILENT, None, 0, None, None, Category.COLLECTIVE_MISMATCH, reasons)


def fr_hang_candidates(ev: ReasoningInput) -> list[Candidate]:
    """The flight recorder's blamed ranks when no log line names a fault: dumps that show ranks
    waiting in a collective a peer never entered are a hang, even when the logs are gone (a bundle
    of dumps alone). Never "no failure": dumps with a wait nobody finished are not a healthy job."""
    for c in fr_culprits(ev.fr):
        if c.kind not in (FRKind.MISSING, FRKind.STALLED, FRKind.MISMATCHED):
            continue
        # the culprit's event, as the chain has it (one per culprit: same rank, same kind)
        e = next((x for x in ev.fr_events if x.rank == c.rank and x.fields.get("fr_kind") == str(c.kind)), None)
        if e is not None:
            kind = CandidateKind.EVENT if c.kind == FRKind.MISMATCHED else CandidateKind.SILENT
            return [Candidate(kind, e, e.rank, None, e.ts, e.category, [e.text])]
    return []


def straggler_candidate(ev: ReasoningInput) -> Candidate | None:
    """A rank whose own work per step shows a real, sustained slowdown (``reason.straggler``), or
    the flight recorder's late rank. Wall step times alone never make one: in synchronous
    training every rank waits for the slowest, so they cannot show which it was."""
    fr_late = [c for c in fr_culprits(ev.fr) if c.kind == FRKind.STRAGGLER]
    if fr_late:
        r = fr_late[0].rank
        return Candidate(CandidateKind.SLOW, None, r, None, None, Category.STRAGGLER, [fr_late[0].reason])
    slow = find_slowdown(ev.series)
    if slow is None:
        return None
    prog = {p.rank: p for p in ev.progress}
    interval = prog[slow.rank].step_interval_s if slow.rank in prog else None
    return Candidate(CandidateKind.SLOW, None, slow.rank, None, None, Category.STRAGGLER, [slow.describe(interval)])


def merge_host(cands: list[Candidate], topo: Topology) -> list[Candidate]:
    """Join host-level faults (kernel, driver) with the rank faults on the same host.

    A lower-layer fault shortly before a rank's error explains it (Xid 79, then the rank's CUDA
    error): the host fault becomes the root and names that rank. An application-class host
    event (Xid 13/31) only corroborates the rank's own error, which stays the root.
    """
    hosts = [c for c in cands if c.rank is None and c.event is not None and c.host]
    absorbed: set[int] = set()
    for h in hosts:
        assert h.event is not None
        for c in cands:
            if c.rank is None or c.event is None or id(c) in absorbed:
                continue
            if host_explains(h.event, c.event):
                h.supporting.append(c.event)
                absorbed.add(id(c))
                if h.rank is None:
                    h.reasons.append(f"rank {c.rank}'s failure at {iso(c.event.ts)} on the same host follows from it")
            elif corroborates(h.event, c.event) and id(h) not in absorbed:
                if not h.event.fields.get("job_level"):
                    # the scheduler ending the whole job (a time limit, a cancel) follows, but agrees with nothing
                    c.supporting.append(h.event)
                    c.reasons.append(f"{h.host}'s log agrees: {h.event.text.strip()[:160]}")
                absorbed.add(id(h))
    out = [c for c in cands if id(c) not in absorbed]
    for h in out:
        if h.rank is None and h.host and h.event is not None:
            h.rank = _rank_of_host_event(h, topo)
    out.sort(key=candidate_order)
    arrival_order(out)
    return out


def _rank_of_host_event(h: Candidate, topo: Topology) -> int | None:
    """Which rank a host fault hit: the one that failed there, else the one on that GPU."""
    failed = [e.rank for e in h.supporting if e.rank is not None]
    if failed:
        return failed[0]
    if h.event is not None and h.event.gpu:
        on_gpu = topo.ranks_on_gpu(h.host, h.event.gpu)
        if on_gpu:
            return on_gpu[0]
    return None
