"""Attribute: choose the root among the candidates, say how sure, and what to do.

Each candidate from ``correlate`` becomes a :class:`Hypothesis`. The earliest independent
fault wins, lower layers breaking near-ties (a GPU fault explains the CUDA error above it);
when no rank reports a fault of its own, silence is evidence (the rank that stopped first,
or that the flight recorder shows missing); with no error at all, progress may still show a
straggler. Confidence is built from named factors (time margin to the runner-up, timestamp
quality, corroboration by the flight recorder or the host) so the number can be explained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from firstfault.correlate import (
    Candidate,
    Correlation,
    RankView,
    arrival_order,
    candidate_order,
    corroborates,
    exit_signal,
    host_explains,
    is_exit_record,
    same_process,
)
from firstfault.lost_hosts import date_lost_hosts
from firstfault.parse.base import ParseContext
from firstfault.reason.causality import RING_RECV, awaited_ranks, group_mismatch, ring_sender
from firstfault.reason.configuration import (
    CommonFailure,
    TrainingSeen,
    before_training,
    common_failure,
    pretraining_category,
    template_key,
)
from firstfault.reason.straggler import find_slowdown
from firstfault.reason.unrecognised import unrecognised_candidates
from firstfault.reason.window import JobWindow
from firstfault.vocab import (
    Action,
    Category,
    ChainLink,
    Culprit,
    Event,
    Hypothesis,
    Layer,
    RankProgress,
    Role,
    Verdict,
)
from firstfault.vocab.timefmt import iso

# What to do when a signature does not say: hardware is excluded, transient faults restarted,
# and faults that will recur on restart (code, config, data) stop the job.
DEFAULT_ACTION = {
    Category.GPU_HARDWARE: Action.EXCLUDE_AND_RESTART,
    Category.GPU_OOM: Action.STOP,
    Category.HOST_OOM: Action.STOP,
    Category.NETWORK: Action.RESTART,
    Category.HANG: Action.RESTART,
    Category.COLLECTIVE_MISMATCH: Action.STOP,
    Category.PROCESS_CRASH: Action.RESTART,
    Category.APPLICATION_ERROR: Action.STOP,
    Category.NUMERICAL: Action.STOP,
    Category.STORAGE_IO: Action.RESTART,
    Category.CONFIGURATION: Action.STOP,
    Category.SOFTWARE_BUG: Action.STOP,
    Category.SCHEDULER: Action.RESTART,
    Category.STRAGGLER: Action.NONE,
    Category.NONE: Action.NONE,
    Category.UNKNOWN: Action.RESTART,
}
NEAR_TIE_S = 1.0


@dataclass
class Evidence:
    """Everything attribution looks at besides the correlated events."""

    progress: list[RankProgress] = field(default_factory=list)
    fr: dict[str, Any] | None = None
    ctx: ParseContext | None = None
    action_of: dict[str, Action] = field(default_factory=dict)
    fr_events: list[Event] = field(default_factory=list)
    window: JobWindow | None = None
    launch_start: float | None = None  # the job's start as a launcher or the scheduler recorded it
    series: dict[int, list[float]] = field(default_factory=dict)  # each rank's own work per step


def _weak(c: Candidate) -> bool:
    """A root of last resort (signature field ``weak_root``): a plain ``CANCELLED`` is what srun's
    --kill-on-bad-exit prints after another task failed, and what scancel prints on its own."""
    return c.event is not None and c.event.fields.get("weak_root") == "1"


def _fr_culprits(fr: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not fr:
        return []
    return [c for c in fr.get("culprits", []) if isinstance(c, dict) and c.get("rank") is not None]


def _gpu_of(rank: int | None, ev: Event | None, ctx: ParseContext | None) -> list[str]:
    if ev is not None and ev.gpu:
        return [ev.gpu]
    if rank is not None and ctx is not None and rank in ctx.topology.rank_gpu:
        return [ctx.topology.rank_gpu[rank]]
    return []


DETAIL_MISMATCH = "torch.collective_mismatch_detail"
_SHUTDOWN_ABORTS = {"python.fatal_abort", "cpp.terminate_no_exception"}


def _exited_early(c: Candidate, corr: Correlation) -> bool:
    """An abort with no Python frame and no exception: the process was already shutting down.

    A rank that calls sys.exit mid-training (or returns) often aborts in interpreter shutdown
    while its communication threads are alive; the abort is a symptom of the early exit.
    """
    if c.event is None or c.event.signature not in _SHUTDOWN_ABORTS or c.rank is None:
        return False
    v = corr.ranks.get(c.rank)
    if v is None:
        return False
    sigs = {e.signature for e in v.events}
    return "python.faulthandler_no_frame" in sigs and not any(
        e.role == Role.ROOT and e.signature not in _SHUTDOWN_ABORTS and e.layer == Layer.APPLICATION for e in v.events
    )


def _category_for(c: Candidate, corr: Correlation) -> Category:
    """Refine a candidate's category with what else its host says (OOM kill explains -9)."""
    if _exited_early(c, corr):
        if not any("shutting down" in r for r in c.reasons):
            c.reasons.append(
                "it aborted during interpreter shutdown (no Python frame, no exception): the program had already "
                "ended on this rank while its peers were still training (sys.exit or an early return)"
            )
        return Category.APPLICATION_ERROR
    if c.kind == "exit" and c.host and c.event is not None:
        for e in corr.host_events.get(c.host, []):
            if e.category == Category.HOST_OOM and same_process(e, c.event) is not False:
                return Category.HOST_OOM
    return c.category


def _silent_candidates(corr: Correlation, ev: Evidence) -> list[Candidate]:
    """Ranks that never complained while their peers timed out: the hang's usual culprit."""
    victims = {r for r, v in corr.ranks.items() if v.first_cascade is not None}
    if not victims:
        return []
    prog = {p.rank: p for p in ev.progress}
    fr_list = _fr_culprits(ev.fr)
    fr_pos_of: dict[int, int] = {}
    for i, c in enumerate(fr_list):
        fr_pos_of.setdefault(int(c["rank"]), i)
    quiet = [r for r, v in corr.ranks.items() if v.first_cascade is None and v.first_root is None]
    # victims that name whom they wait for (a store key, a monitored barrier) point at the culprit
    awaited = awaited_ranks(e for v in corr.ranks.values() for e in v.events if e.role == Role.CASCADE)
    quiet += [r for r in sorted(awaited) if r not in quiet and r not in victims]
    # no quiet rank: every rank that printed was a victim; only positive evidence names one of them
    pool = quiet or _behind_or_named(corr, prog, fr_pos_of)
    if not pool and not fr_list:
        return [_nobody_stands_out(corr, victims, ev)]
    # a rank that entered the collective with other arguments times out like its peers: not quiet
    pool += [
        int(c["rank"]) for c in fr_list
        if c.get("kind") == "mismatched" and int(c["rank"]) not in pool and int(c["rank"]) in corr.ranks
    ]
    timeouts = any(
        v.first_cascade is not None and v.first_cascade.category == Category.HANG for v in corr.ranks.values()
    )
    out = []
    for r in pool:
        p = prog.get(r)
        reasons = []
        cat = Category.HANG
        view = corr.ranks.get(r) or RankView(r)  # a rank the victims name but that printed nothing
        exiting = any(e.signature == "python.faulthandler_no_frame" for e in view.events)
        if r in quiet and timeouts:
            reasons.append(f"rank {r} reported no error while {len(victims)} peer(s) timed out waiting for it")
        elif r in quiet:
            cat = Category.APPLICATION_ERROR if exiting else Category.PROCESS_CRASH
            reasons.append(f"rank {r} reported no error while {len(victims)} peer(s) saw their connections to it close")
            if exiting:
                reasons.append(
                    "it was already shutting down (interpreter exit, no Python frame) when torchrun stopped it: "
                    "the program ended on that rank without an error (sys.exit or an early return)"
                )
        if awaited.get(r):
            reasons.append(f"{awaited[r]} peer(s) name rank {r} as the rank they waited for")
        if p and p.last_step is not None:
            reasons.append(f"its last progress was step {p.last_step} at {iso(p.last_step_ts)}")
        where = None if exiting else _where_stopped(view.events)
        if where:
            reasons.append(where)
        own = view.unrecognised
        if own:
            reasons.append(f"its own last error line (no signature knows it): {own[-1].text.strip()[:200]}")
        if r in fr_pos_of:
            fc = fr_list[fr_pos_of[r]]
            reasons.append(f"flight recorder: {fc.get('reason', fc.get('kind'))}")
            if fc.get("kind") == "mismatched" and cat == Category.HANG:
                cat = Category.COLLECTIVE_MISMATCH  # it did enter the collective, with other arguments
        ts = p.last_step_ts if p else None
        fr_ev = next((e for e in ev.fr_events if e.rank == r), None)
        out.append(Candidate("silent", fr_ev, r, None, ts, cat, reasons))

    def key(c: Candidate) -> tuple[int, int, int, float, int]:
        fr_pos = fr_pos_of.get(c.rank if c.rank is not None else -1, len(fr_list) + 1)
        p = prog.get(c.rank or -1)
        step = p.last_step if p and p.last_step is not None else 10**9
        named = -awaited.get(c.rank if c.rank is not None else -1, 0)
        return (fr_pos, named, step, c.ts if c.ts is not None else float("inf"), c.rank or 0)

    out.sort(key=key)
    return out


def _behind_or_named(corr: Correlation, prog: dict[int, RankProgress], fr_pos_of: dict[int, int]) -> list[int]:
    """Among ranks that all timed out: those the flight recorder names, or the one behind the rest."""
    named = [r for r in fr_pos_of if r in corr.ranks]
    steps = sorted((p.last_step, r) for r, p in prog.items() if p.last_step is not None and r in corr.ranks)
    behind = [steps[0][1]] if len(steps) >= 2 and steps[0][0] < steps[1][0] else []
    return list(dict.fromkeys(named + behind))


def _nobody_stands_out(corr: Correlation, victims: set[int], ev: Evidence) -> Candidate:
    """Every rank in the logs timed out waiting and none stands out: say so, name no culprit."""
    world = ev.ctx.topology.world_size if ev.ctx is not None else None
    seen = sorted(corr.ranks)
    reasons = [
        f"every rank in the logs ({_rank_list(seen)}) reported a timeout or lost connection: none is the "
        "rank the others waited for"
    ]
    if world is None:
        reasons.append(
            "the world size is not in the logs, so a rank that printed nothing cannot be ruled out: it is the "
            "likely culprit (add the launcher's output, NCCL's init lines or a topology.json)"
        )
    elif len(seen) >= world:
        reasons.append(f"all {world} ranks timed out: a collective no rank could finish (a mismatch or a fabric stall)")
    return Candidate("silent", None, None, None, None, Category.HANG, reasons)


def _rank_list(ranks: Sequence[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f", ... ({len(ranks)} ranks)" if len(ranks) > 8 else "")


def _where_stopped(events: Sequence[Event]) -> str | None:
    """Where a rank's stack dump (faulthandler on SIGTERM) shows it was when it was stopped."""
    stack = next((e for e in events if e.fields.get("top_frame")), None)
    if stack is None:
        return None
    loader = any("dataloader" in f or "__getitem__" in f or "fetch" in f for f in stack.context[:4])
    where = f"when it was stopped it was in {stack.fields['top_frame']}"
    return where + (" (inside the data loader)" if loader else "")


STALL_STEPS = 3  # how many steps its peers must have gone on for a rank's stop to count


def _stalled_first(first: Candidate, corr: Correlation, ev: Evidence) -> Candidate | None:
    """A rank that stopped making progress well before the first error, while its peers went on.

    A hung data loader says nothing; if another fault ends the job before the NCCL timeout
    (srun --kill-on-bad-exit tears everything down), the hang leaves no timeout either. Its
    trace is in progress: its last step is behind every peer's and ``STALL_STEPS`` behind the
    median, and it stopped
    more than ``STALL_STEPS`` step intervals before the first error.
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
    if ahead - last < STALL_STEPS or first.ts - slow.last_step_ts < STALL_STEPS * step_s + 5.0:
        return None
    v = corr.ranks.get(slow.rank)
    if v is not None and (v.first_root is not None or v.first_cascade is not None):
        return None  # it reported a fault of its own
    reasons = [
        f"rank {slow.rank}'s progress stopped at step {slow.last_step} ({iso(slow.last_step_ts)}), "
        f"{first.ts - slow.last_step_ts:.0f} s before the first error, while its peers went on "
        f"(to step {ahead}, median)"
    ]
    where = _where_stopped(v.events if v else [])
    if where:
        reasons.append(where)
    return Candidate("silent", None, slow.rank, None, slow.last_step_ts + step_s, Category.HANG, reasons)


STALL_BEFORE_LIMIT_S = 60.0  # silence this long before a time limit is a stall, not a job that ran out of time


def _stalled_before_limit(win: Candidate, corr: Correlation, ev: Evidence) -> Candidate | None:
    """A job cancelled at its time limit that had stopped making progress long before it.

    Under plain ``srun`` (no watchdog, or a process-group timeout longer than the job's limit) a
    hang prints nothing until the scheduler kills the job. The time limit is then the consequence;
    the stall is the root. Progress that went on until the limit means the job simply ran out of
    time (the limit stays the root). The culprit is the rank that stopped behind its peers, or the
    one whose stack dump at the kill shows it somewhere its peers are not; often neither tells.
    """
    e = win.event
    if e is None or e.fields.get("reason") != "time_limit" or win.ts is None:
        return None
    prog = [p for p in ev.progress if p.last_step_ts is not None and p.last_step is not None]
    if not prog:
        return None
    last = max(p.last_step_ts for p in prog if p.last_step_ts is not None)
    intervals = [p.step_interval_s for p in prog if p.step_interval_s]
    need = max(STALL_BEFORE_LIMIT_S, 10 * median(intervals)) if intervals else STALL_BEFORE_LIMIT_S
    if win.ts - last < need:
        return None
    steps = sorted({p.last_step for p in prog if p.last_step is not None})
    reasons = [
        f"no rank made progress for {win.ts - last:.0f} s before the time limit (last step {steps[-1]} at "
        f"{iso(last)}): the job hung, and the time limit only ended it ({e.source}:{e.line})"
    ]
    culprit, why = _odd_rank_out(corr, prog)
    if why:
        reasons.append(why)
    else:
        reasons.append("every rank stopped at the same step and nothing in the logs tells which one hung first")
    return Candidate("stalled", None, culprit, None, last, Category.HANG, reasons)


def _odd_rank_out(corr: Correlation, prog: Sequence[RankProgress]) -> tuple[int | None, str | None]:
    """The one rank that stopped behind the rest, or whose stack dump differs from all of theirs."""
    by_step = sorted(prog, key=lambda p: p.last_step if p.last_step is not None else 0)
    if len(by_step) >= 2 and (by_step[0].last_step or 0) < (by_step[1].last_step or 0):
        p = by_step[0]
        return p.rank, f"rank {p.rank} stopped at step {p.last_step}, behind every peer"
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
            return r, f"at the kill rank {r} was in {tops[r]}, every peer elsewhere ({_where_stopped(corr.ranks[r].events) or ''})"
    return None, None


def _straggler(ev: Evidence) -> Candidate | None:
    """A rank whose own work per step shows a real, sustained slowdown (``reason.straggler``), or
    the flight recorder's late rank. Wall step times alone never make one: in synchronous
    training every rank waits for the slowest, so they cannot show which it was."""
    fr_late = [c for c in _fr_culprits(ev.fr) if c.get("kind") in ("straggler", "late", "slow")]
    if fr_late:
        r = int(fr_late[0]["rank"])
        return Candidate("slow", None, r, None, None, Category.STRAGGLER, [str(fr_late[0].get("reason"))])
    slow = find_slowdown(ev.series)
    if slow is None:
        return None
    prog = {p.rank: p for p in ev.progress}
    interval = prog[slow.rank].step_interval_s if slow.rank in prog else None
    return Candidate("slow", None, slow.rank, None, None, Category.STRAGGLER, [slow.describe(interval)])


def _merge_host(cands: list[Candidate], ctx: ParseContext | None) -> list[Candidate]:
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
                c.supporting.append(h.event)
                c.reasons.append(f"{h.host}'s kernel log agrees: {h.event.text.strip()[:160]}")
                absorbed.add(id(h))
    out = [c for c in cands if id(c) not in absorbed]
    for h in out:
        if h.rank is None and h.host and h.event is not None and ctx is not None:
            h.rank = _rank_of_host_event(h, ctx)
    out.sort(key=candidate_order)
    arrival_order(out)
    return out


def _rank_of_host_event(h: Candidate, ctx: ParseContext) -> int | None:
    """Which rank a host fault hit: the one that failed there, else the one on that GPU."""
    failed = [e.rank for e in h.supporting if e.rank is not None]
    if failed:
        return failed[0]
    if h.event is not None and h.event.gpu:
        
        on_gpu = ctx.topology.ranks_on_gpu(h.host, h.event.gpu)
        if on_gpu:
            return on_gpu[0]
    return None


def _hypothesis(c: Candidate, corr: Correlation, ev: Evidence) -> Hypothesis:
    cat = _category_for(c, corr)
    ranks: list[int] = [c.rank] if c.rank is not None else []
    ranks += sorted(
        {
            e.rank
            for e in c.supporting
            if e.rank is not None and e.rank not in ranks and (not c.host or e.host == c.host)
        }
    )
    if c.rank is None and c.host and ev.ctx:
        ranks = ranks or ev.ctx.topology.host_ranks(c.host)
    hosts = [c.host] if c.host else []
    if not hosts and c.rank is not None:
        v = corr.ranks.get(c.rank)
        if v and v.hosts:
            hosts = sorted(v.hosts)
        elif ev.ctx is not None and c.rank in ev.ctx.topology.rank_host:
            hosts = [ev.ctx.topology.rank_host[c.rank]]  # a silent or slow rank: where it ran
    action = DEFAULT_ACTION[cat]
    if c.event is not None and c.event.signature in ev.action_of:
        action = ev.action_of[c.event.signature]
    root = c.event
    if root is not None:
        what = root.text.strip()
    elif c.kind == "silent" and c.rank is None:
        what = "every rank that printed timed out waiting; no rank stands out as the one they waited for"
    elif c.kind == "silent" and cat == Category.HANG:
        timed_out = any(
            v.first_cascade is not None and v.first_cascade.category == Category.HANG for v in corr.ranks.values()
        )
        what = "stopped making progress; " + (
            "its peers timed out waiting for it" if timed_out else "the job was stalled on it before the first error"
        )
    elif c.kind == "silent":
        what = "left the job without an error of its own; its peers lost their connections to it"
    elif c.kind == "stalled":
        what = c.reasons[0] if c.reasons else "the job stopped making progress"
    else:
        what = "; ".join(c.reasons)
    job_level = root is not None and root.fields.get("job_level") == "1"
    if job_level:  # the scheduler's word about the whole job (a cancel, a time limit, its memory limit)
        ranks, hosts = [], []
    where = f"rank {ranks[0]}" if ranks else (f"host {hosts[0]}" if hosts else "unknown location")
    if hosts and ranks:
        where += f" on {hosts[0]}"
    if c.kind == "common" or (job_level and c.kind != "stalled"):
        where = "every rank" if c.kind == "common" else "the whole job"
    elif c.kind == "stalled":
        where = f"rank {c.rank}" if c.rank is not None else "every rank"
    summary = f"{cat.value.replace('_', ' ')} on {where}: {what}"
    reasons = list(c.reasons)
    if root is not None:
        reasons.insert(0, f"earliest independent fault at {iso(root.ts)} ({root.source}:{root.line}, {root.signature})")
    return Hypothesis(
        category=cat,
        culprit=Culprit(ranks=ranks, hosts=hosts, gpus=_gpu_of(c.rank, root, ev.ctx)),
        action=action,
        score=0.0,
        summary=summary,
        root_event=root,
        reasons=reasons,
    )


_KIND_PHRASE = {
    "event": "an error event of its own",
    "exit": "an exit with no error of its own",
    "silent": "a rank that went silent",
    "slow": "a slow rank",
    "unrecognised": "an error line no signature recognises",
    "common": "a failure every rank shared",
    "stalled": "a job that stalled long before its time limit",
}


def _confidence(win: Candidate, rest: Sequence[Candidate], ev: Evidence) -> tuple[float, list[str]]:
    why: list[str] = []
    base = {"event": 0.8, "exit": 0.7, "silent": 0.55, "slow": 0.6, "unrecognised": 0.35, "common": 0.8, "stalled": 0.6}.get(
        win.kind, 0.5
    )
    score = base
    why.append(f"{base:.2f} for {_KIND_PHRASE.get(win.kind, 'a candidate')}")
    others = [c for c in rest if c.rank != win.rank or c.host != win.host]
    if others and win.ts is not None and others[0].ts is not None:
        gap = others[0].ts - win.ts
        if gap < 0.1:
            score -= 0.25
            why.append(f"-0.25: runner-up only {gap * 1000:.0f} ms later")
        elif gap < NEAR_TIE_S:
            score -= 0.1
            why.append(f"-0.10: runner-up {gap:.2f} s later")
        else:
            score += 0.1
            why.append(f"+0.10: runner-up {gap:.1f} s later")
    elif not others:
        score += 0.1
        why.append("+0.10: no competing candidate")
    if win.event is not None and win.event.ts_quality == "none":
        score -= 0.2
        why.append("-0.20: the root event has no timestamp")
    fr = _fr_culprits(ev.fr)
    if fr and win.rank is not None:
        fr_ranks = [int(c["rank"]) for c in fr]
        if win.rank == fr_ranks[0]:
            score += 0.15
            why.append("+0.15: the flight recorder names the same rank first")
        elif win.rank in fr_ranks:
            score += 0.05
            why.append("+0.05: the flight recorder also names this rank")
        elif win.kind != "event":
            score -= 0.1
            why.append("-0.10: the flight recorder points elsewhere")
    if win.supporting:
        score += 0.05
        why.append(f"+0.05: {len(win.supporting)} corroborating event(s)")
    return max(0.05, min(0.98, score)), why


def _chain(corr: Correlation, win: Candidate | None, seconds: list[Candidate]) -> tuple[list[ChainLink], float]:
    links: list[ChainLink] = []
    root_ev = win.event if win else None
    root_id = root_ev.id if root_ev else None
    root_ts = win.ts if win else None
    second_ids = {c.event.id for c in seconds if c.event is not None}
    support_ids = {e.id for e in win.supporting} if win else set()
    explained = 0
    for e in corr.errors:
        role = e.role
        by: int | None = None
        if root_ev is not None and e.id == root_id:
            role, rule = Role.ROOT, "earliest independent fault"
        elif e.id in second_ids:
            role, rule = Role.ROOT, "independent fault on another rank (second root)"
        elif win is None:
            rule = "no root found"
        elif root_ts is not None and e.ts is not None and e.ts < root_ts - 1.0 and e.id not in support_ids:
            rule = "happened before the root; not explained by it"
        else:
            by = root_id
            if e.id in support_ids:
                role, rule = Role.CASCADE, "explained by a lower-layer fault on the same host"
            elif e.role == Role.TEARDOWN or (is_exit_record(e) and exit_signal(e) in ("SIGTERM", "SIGINT")):
                role, rule = Role.TEARDOWN, "launcher or scheduler tear-down after the first failure"
            elif win.rank is not None and e.rank == win.rank:
                role, rule = Role.CASCADE, "later error on the culprit rank itself"
            elif e.role == Role.CASCADE:
                rule = "peer of the culprit failing in a collective or connection"
            else:
                role, rule = Role.CASCADE, "error on a rank that was already a victim"
        if e.id == root_id or e.id in second_ids or by is not None:
            explained += 1
        links.append(ChainLink(e, role, by, rule))
    total = len(corr.errors)
    frac = explained / total if total else 1.0
    if win is not None and root_ev is None and total:
        # A silent culprit explains its peers' timeouts even though it has no event of its own.
        frac = sum(1 for link in links if link.rule != "happened before the root; not explained by it") / total
    return links, frac


def attribute(corr: Correlation, ev: Evidence, warnings: Sequence[str] = (), later: Sequence[Event] = ()) -> Verdict:
    strong = [c for c in corr.candidates if c.kind in ("event", "exit") and not _weak(c)]
    cands = _merge_host(strong, ev.ctx)
    if ev.ctx is not None:
        cands = date_lost_hosts(cands, corr, ev.progress, ev.ctx.topology)  # also absorbs peer errors
        cands.sort(key=candidate_order)
    if cands:
        stalled = _stalled_first(cands[0], corr, ev)
        if stalled is not None:
            cands.insert(0, stalled)
    if not cands:
        cands = _silent_candidates(corr, ev)
    if not cands:
        cands = unrecognised_candidates(corr.unrecognised)
    if not cands:
        cands = _merge_host([c for c in corr.candidates if _weak(c)], ev.ctx)
    if not cands and not corr.errors:
        s = _straggler(ev)
        if s is not None:
            cands = [s]
    warns = list(warnings)
    if not cands:
        if corr.errors:
            cat, summary, conf = (
                Category.UNKNOWN,
                "errors were found but none could be placed as the root",
                0.2,
            )
            act = Action.RESTART
        else:
            cat, summary, conf = Category.NONE, "no failure found: the job shows no error evidence", 0.9
            act = Action.NONE
        chain, frac = _chain(corr, None, [])
        return Verdict(
            cat,
            Culprit(),
            act,
            conf,
            summary,
            None,
            chain,
            frac if corr.errors else 1.0,
            [],
            warns,
            progress=ev.progress,
            flight_recorder=ev.fr,
        )
    win, rest = cands[0], cands[1:]
    stalled = _stalled_before_limit(win, corr, ev)
    if stalled is not None:
        win, rest = stalled, [win, *rest]
    world = _world_size(corr, ev)
    common = common_failure(corr, world)
    if common is not None and _common_applies(win, common):
        win = Candidate(
            "common", common.event, None, None, common.event.ts, common.event.category, [common.describe(world)]
        )
        rest = [c for c in rest if c.event is None or template_key(c.event) != template_key(common.event)]
    hyp = _hypothesis(win, corr, ev)
    if win.kind == "common":
        hyp.culprit.ranks, hyp.culprit.hosts, hyp.culprit.gpus = [], [], []
    _before_training(hyp, win, ev)
    _fr_mismatch(hyp, win, ev)
    if not _fr_culprits(ev.fr):
        _witness(hyp, corr, world)
        _group_mismatch(hyp, corr)
    conf, why = _confidence(win, rest, ev)
    hyp.score = conf
    # A later root on another rank in the same attempt is a second, independent fault.
    seconds = [
        c
        for c in rest
        if c.kind == "event"
        and c.rank is not None
        and c.rank != win.rank
        and c.event is not None
        and (win.event is None or c.event.attempt == win.event.attempt)
        and c.event.signature != (win.event.signature if win.event else None)
        and not (c.category == Category.NETWORK and hyp.category == Category.NETWORK)  # the link's other end
    ]
    alternatives = []
    for c in rest[:5]:
        h = _hypothesis(c, corr, ev)
        h.score = max(0.01, round(conf * 0.5 if c in seconds else conf * 0.25, 3))
        if c in seconds:
            h.reasons.append("an independent fault of its own, later than the root")
        alternatives.append(h)
    culprit = hyp.culprit
    for c in seconds:
        if c.rank is not None and c.rank not in culprit.ranks:
            culprit.ranks.append(c.rank)
    chain, frac = _chain(corr, win, seconds)
    chain += _fr_links(ev.fr_events, win, hyp.culprit.ranks)
    chain += _later_links(later, win)
    n_casc = sum(1 for link in chain if link.explained_by is not None or (win.event is None and link.role != Role.ROOT))
    victims = {
        link.event.rank
        for link in chain
        if link.role in (Role.CASCADE, Role.TEARDOWN) and link.event.rank not in (None, win.rank)
    }
    summary = hyp.summary
    if n_casc:
        summary += f" — {n_casc} later error(s) on {len(victims)} other rank(s) follow from it"
    if seconds:
        summary += f"; rank {seconds[0].rank} failed independently {(seconds[0].ts or 0) - (win.ts or 0):.1f} s later"
    recur = _recurrences(corr, win, later)
    if recur:
        hyp.reasons.append(f"the same failure recurred in attempt(s) {', '.join(map(str, recur))}")
    if hyp.root_event is not None and hyp.root_event.ts_quality != "exact":
        warns.append(f"root event time is {hyp.root_event.ts_quality}: taken from a nearby line")
    return Verdict(
        category=hyp.category,
        culprit=culprit,
        action=hyp.action,
        confidence=conf,
        summary=summary,
        root_event=hyp.root_event,
        causal_chain=chain,
        explained_fraction=frac,
        alternatives=alternatives,
        warnings=warns,
        reasons=hyp.reasons + [f"confidence: {w}" for w in why],
        progress=ev.progress,
        flight_recorder=ev.fr,
    )


def _world_size(corr: Correlation, ev: Evidence) -> int | None:
    if ev.ctx is not None and ev.ctx.topology.world_size:
        return ev.ctx.topology.world_size
    return max(corr.ranks) + 1 if corr.ranks else None


def _common_applies(win: Candidate, common: CommonFailure) -> bool:
    """The winner is one copy of the shared failure, or an exit that the shared failure explains."""
    if win.kind == "exit":
        return True
    if win.event is None:
        return False
    return template_key(win.event) == template_key(common.event) or (
        win.rank is None and win.event.layer in (Layer.APPLICATION, Layer.FRAMEWORK)
    )


def _before_training(hyp: Hypothesis, win: Candidate, ev: Evidence) -> None:
    """A failure before any rank made a step is the set-up's: ``configuration`` (see reason.configuration)."""
    root = hyp.root_event
    ts = root.ts if root is not None else win.ts
    exact = root is None or root.ts_quality in ("exact", "coarse")
    if ts is not None and root is not None and root.ts_quality == "coarse":
        ts += 1.0  # known to the second: it may be anywhere in that second
    training = TrainingSeen(ev.ctx.training_seen, ev.ctx.training_ts) if ev.ctx is not None else None
    end = ev.window.end if ev.window else None
    if training is None or not before_training(ts, training, ev.launch_start, exact, end):
        return
    cat = pretraining_category(hyp.category, root)
    hyp.reasons.append("it happened before training started: no rank had made a step yet")
    if cat is None or cat == hyp.category:
        return
    old = hyp.category
    hyp.category = cat
    hyp.action = DEFAULT_ACTION[cat]
    hyp.summary = hyp.summary.replace(old.value.replace("_", " "), cat.value.replace("_", " "), 1)
    hyp.reasons.append(f"a failure of the set-up ({old.value} before the first step): fix the configuration")


def _witness(hyp: Hypothesis, corr: Correlation, world: int | None) -> None:
    """A receiver that aborted on a buffer too large for it is a witness; the sender is the culprit."""
    root = hyp.root_event
    if root is None or root.fields.get("witness") != RING_RECV or root.rank is None or not world or world < 2:
        return
    sender = ring_sender(root.rank, world)
    hyp.culprit.ranks = [sender] + [r for r in hyp.culprit.ranks if r != sender]
    hyp.culprit.hosts = [h for h in [_host_of(sender, corr)] if h]
    hyp.summary = (
        f"collective mismatch on rank {sender}: rank {root.rank} received a larger buffer than it posted "
        f"({root.fields.get('got', '?')} vs {root.fields.get('expected', '?')} bytes) from rank {sender}"
    )
    hyp.reasons.append(
        f"rank {root.rank} is a witness: gloo aborts the rank that receives the odd buffer, and in gloo's ring "
        f"all-reduce rank r receives from rank (r + 1) % {world} (gloo/allreduce.cc ring(): recvRank): rank {sender} sent it"
    )


def _group_mismatch(hyp: Hypothesis, corr: Correlation) -> None:
    """DETAIL's mismatch report names group ranks: map them to global ranks, name the odd one out."""
    root = hyp.root_event
    if root is None or root.signature != DETAIL_MISMATCH:
        return
    reports = [e for v in corr.ranks.values() for e in v.events if e.signature == DETAIL_MISMATCH]
    gm = group_mismatch(reports or [root])
    if gm is None:
        return
    hyp.culprit.ranks = gm.culprits
    hyp.culprit.hosts = [h for h in [_host_of(gm.culprits[0], corr)] if h]
    hyp.summary = f"collective mismatch on rank {gm.culprits[0]}: {gm.fingerprints.get(gm.culprits[0], '')}"
    hyp.reasons.append(gm.reason)


def _host_of(rank: int, corr: Correlation) -> str | None:
    v = corr.ranks.get(rank)
    return sorted(v.hosts)[0] if v is not None and v.hosts else None


def _fr_mismatch(hyp: Hypothesis, win: Candidate, ev: Evidence) -> None:
    """In a desync the rank that *detects* the size mismatch is a witness; the flight
    recorder's first divergent entry names the rank that called something else."""
    if hyp.category != Category.COLLECTIVE_MISMATCH:
        return
    mism = [c for c in _fr_culprits(ev.fr) if c.get("kind") == "mismatched"]
    if not mism:
        return
    ranks = [int(mism[0]["rank"])] + [int(c["rank"]) for c in mism[1:] if float(c.get("score") or 0) >= 0.5]
    if ranks and hyp.culprit.ranks[:1] != ranks[:1]:
        if win.rank is not None:
            hyp.reasons.append(f"rank {win.rank} detected the mismatch; it is a witness, not the culprit")
        hyp.culprit.ranks = ranks
        hyp.summary = f"collective mismatch on rank {ranks[0]}: {mism[0].get('reason')}"
    hyp.reasons.append(f"flight recorder: {mism[0].get('reason')}")


def _fr_links(fr_events: Sequence[Event], win: Candidate, culprits: Sequence[int]) -> list[ChainLink]:
    """The flight recorder's evidence in the chain: it confirms the culprit(s) or names others."""
    out = []
    root = win.event
    for e in fr_events:
        if root is not None and e.id == root.id:
            continue  # already the root of the chain
        if e.rank in culprits:
            rule = "flight recorder confirms this culprit"
            by = root.id if root is not None else None
            out.append(ChainLink(e, Role.ROOT if by is None else Role.CASCADE, by, rule))
        else:
            out.append(ChainLink(e, Role.ROOT, None, "flight recorder names another culprit rank"))
    return out


def _later_links(later: Sequence[Event], win: Candidate) -> list[ChainLink]:
    """Events of restart attempts: the restart itself was caused by the root."""
    out = []
    root = win.event
    for e in later:
        if e.role == Role.NOISE or e.severity not in ("error", "warning"):
            continue
        if root is not None and e.rank == root.rank and e.signature == root.signature:
            rule = f"the same failure recurred in restart attempt {e.attempt}"
        else:
            rule = f"in restart attempt {e.attempt}, after the root fault"
        role = Role.TEARDOWN if e.role == Role.TEARDOWN else Role.CASCADE
        out.append(ChainLink(e, role, root.id if root else None, rule))
    return out


def _recurrences(corr: Correlation, win: Candidate, later: Sequence[Event] = ()) -> list[int]:
    if win.event is None or win.event.attempt is None:
        return []
    out = set()
    for e in list(corr.errors) + list(later):
        if e.rank == win.rank and e.signature == win.event.signature and e.attempt not in (None, win.event.attempt):
            out.add(e.attempt)
    return sorted(a for a in out if a is not None)
