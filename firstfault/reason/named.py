"""The rank the victims name: their own account of whom they waited for, read as the culprit.

Why a module of its own: two readings share it. A store wait that timed out on a key ending in a
rank, a monitored barrier, Ray Train's barrier report, JAX's list of tasks that stopped
heartbeating: each is a victim's line naming another rank. When the ranks that printed them are
left with bare exits (``named_by_victims``), or when such a report is the earliest error of a
rank-less paste (``awaited_by_all``), the rank they name is the one to look at.
"""

from __future__ import annotations

from collections.abc import Sequence

from firstfault.align import sort_key
from firstfault.reason.causality import awaited_ranks
from firstfault.reason.confidence import generic_exit
from firstfault.reason.configuration import failed_exit
from firstfault.reason.correlate import Candidate, Correlation
from firstfault.reason.frames import where_stopped
from firstfault.reason.inputs import ReasoningInput
from firstfault.vocab import CandidateKind, Category, Event, RankProgress, Role
from firstfault.vocab.text import rank_list
from firstfault.vocab.timefmt import iso


def named_by_victims(cands: Sequence[Candidate], corr: Correlation, ev: ReasoningInput) -> list[Candidate]:
    """The rank the victims name, when every other candidate is a bare exit.

    A store wait that timed out on a key ending in a rank, or a monitored barrier naming the rank
    that never arrived, is the victims' own account of whom they waited for. A console without
    rank prefixes cannot say which rank printed each such line, so the ranks that printed them
    are left with bare exit codes ("exitcode 1", no error of their own); those exits are the
    victims giving up, and the named rank, which did not fail on its own, is the culprit.
    """
    if not cands or any(c.kind != CandidateKind.EXIT for c in cands):
        return []
    awaited = awaited_ranks(e for e in corr.errors if e.role == Role.CASCADE)
    exiting = {c.rank for c in cands}
    named = [
        r for r, _ in awaited.most_common() if r not in exiting and (r not in corr.ranks or not corr.ranks[r].roots)
    ]
    prog = {p.rank: p for p in ev.progress}
    out = []
    for r in named:
        p = prog.get(r)
        reasons = [
            f"{awaited[r]} waiting rank(s) name rank {r} as the rank they waited for, and the ranks that "
            f"exited ({rank_list(sorted(x for x in exiting if x is not None))}) left no error of their own"
        ]
        if p and p.last_step is not None:
            reasons.append(f"its last progress was step {p.last_step} at {iso(p.last_step_ts)}")
        where = where_stopped(corr.ranks[r].events) if r in corr.ranks else None
        if where:
            reasons.append(where)
        out.append(
            Candidate(CandidateKind.SILENT, None, r, None, p.last_step_ts if p else None, Category.HANG, reasons)
        )
    return out


def _wait_began(e: Event) -> float | None:
    """When a timed-out wait began: its timeout before the line that reports it (None: not known)."""
    ms = e.fields.get("timeout_ms", "")
    return e.ts - int(ms) / 1000.0 if e.ts is not None and ms.isdigit() else None


def waited_before_exits(cands: Sequence[Candidate], corr: Correlation, ev: ReasoningInput) -> list[Candidate]:
    """A hang, when the only candidates are bare exits that came as a peer's wait ran out.

    A timeout of D ms reported at T says its rank waited from T - D on, in vain, for a peer that
    stayed connected: the stall began then. Ranks that exit with a status that says only "failed"
    (1, SIGABRT: ``confidence.generic_exit``), no error of their own in the log, within the last
    half of that wait, are the waiters giving up at their own timeouts, whose lines the paste left
    out (the tail of a console holds torchrun's summary and little else): the exits follow the
    stall, they do not explain it. A rank whose exit explained the wait would have ended when the
    wait began, a timeout earlier (a crash under ``srun`` without ``--kill-on-bad-exit``: its peers
    time out one timeout after it), and keeps its reading; so does any candidate that is not such
    an exit.

    The stalled rank is the one the waiters name (a monitored barrier, a store key), else a rank
    that neither waited nor ended on its own: the launcher stopped it (SIGTERM) while it still ran.
    With several such ranks, which one stalled is not in the log (``ties.tied_at_one_step``'s
    reasoning): the verdict names no rank and lists them.
    """
    if not cands or not all(generic_exit(c) and c.ts is not None for c in cands):
        return []
    waits = [(b, e) for e in corr.errors if e.role == Role.CASCADE and (b := _wait_began(e)) is not None]
    if not waits:
        return []
    began, wait = min(waits, key=lambda w: w[0])
    assert wait.ts is not None
    first = min(c.ts for c in cands if c.ts is not None)
    if first < wait.ts - (wait.ts - began) / 2:
        return []  # an exit in the wait's first half: it may be what the peer waited for
    exited = sorted({c.rank for c in cands if c.rank is not None})
    premise = (
        f"{wait.source}:{wait.line}: a rank waited {wait.ts - began:.0f} s in vain (from {iso(began)}); the bare "
        f"exit(s) of rank(s) {rank_list(exited) or '?'} came as that wait ran out, with no error of their own "
        "in the log: waiters giving up, not the fault"
    )
    awaited = awaited_ranks(e for e in corr.errors if e.role == Role.CASCADE)
    named = [r for r, _ in awaited.most_common()]
    stopped = sorted(r for r, v in corr.ranks.items() if v.said_nothing() and v.exits and not failed_exit(v))
    suspects = named or stopped
    if len(suspects) != 1:
        reasons = [premise]
        if suspects:
            how = (
                "are named by the waiters"
                if named
                else "neither timed out nor ended on their own (the launcher stopped them while they still ran)"
            )
            reasons.append(
                f"rank(s) {rank_list(suspects)} {how}: which of them the others waited for is not in the log, "
                "so no rank is named"
            )
        else:
            reasons.append("no line says which rank they waited for (its lines, or its place, are not in the log)")
        return [Candidate(CandidateKind.SILENT, None, None, None, began, Category.HANG, reasons)]
    r = suspects[0]
    why = (
        f"{awaited[r]} waiting rank(s) name rank {r} as the rank they waited for"
        if named
        else f"rank {r} neither timed out nor ended on its own: the launcher stopped it while it still ran"
    )
    return [Candidate(CandidateKind.SILENT, None, r, None, began, Category.HANG, [premise, why])]


def awaited_by_all(corr: Correlation, e: Event, progress: Sequence[RankProgress]) -> Candidate | None:
    """The rank a rank-less waiting report names, when that report is the earliest error.

    Some waits are reported once for the whole group by whoever holds the barrier (Ray Train's
    synchronisation actor: "The workers have been waiting for 60.10 s for the following ranks to
    join the `ray.train.report` call: [1]"), not by each victim: the line belongs to no rank, and
    the rank it names is the one every other rank waits for. With no error before it, that rank
    is stuck: a hang on it.

    The naming may come a line after the earliest error: JAX's surviving processes print "Terminating
    process because the JAX distributed service detected fatal errors ... The following tasks are
    unhealthy (stopped sending heartbeats):" and name the dead task on the next line. So when the
    earliest report names nobody, the other rank-less reports are asked; the reading is then the
    naming report's own (a hang for a wait, a crash for a task that stopped heartbeating).
    """
    if e.rank is not None:
        return None
    naming = e
    awaited = awaited_ranks([e])
    if not awaited:
        others = [x for x in corr.errors if x.rank is None and x.role == Role.CASCADE and awaited_ranks([x])]
        if not others:
            return None
        naming = min(others, key=sort_key)
        awaited = awaited_ranks(others)
    named = [r for r, _ in awaited.most_common() if r not in corr.ranks or not corr.ranks[r].roots]
    if not named:
        return None
    r = named[0]
    first = "the earliest error is" if naming is e else f"the earliest error is followed by ({naming.signature})"
    reasons = [
        f"{first} a report of who waits for whom, and it names rank(s) {rank_list(sorted(awaited))} "
        f"as the one(s) the others wait for: nothing earlier shows a fault of their own, so rank {r} is stuck"
    ]
    p = next((p for p in progress if p.rank == r), None)
    if p is not None and p.last_step is not None:
        reasons.append(f"its last progress was step {p.last_step} at {iso(p.last_step_ts)}")
    cat = Category.HANG if naming is e else naming.category  # a waiting report is a hang
    return Candidate(CandidateKind.SILENT, e, r, None, e.ts, cat, reasons)
