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
