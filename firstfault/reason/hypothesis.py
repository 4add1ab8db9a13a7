"""A candidate becomes a hypothesis: its category, culprit (ranks, hosts, GPUs), action and summary.

The category is the candidate's own, refined by what else its host says (an OOM kill explains a
SIGKILL) and by how it ended (an abort in interpreter shutdown is an early exit); the action is
the signature's, else the category's default (:data:`DEFAULT_ACTION`).
"""

from __future__ import annotations

from collections.abc import Container

from firstfault.reason.correlate import SHUTDOWN_ABORTS, Candidate, Correlation, exit_signal, same_process
from firstfault.reason.inputs import ReasoningInput
from firstfault.vocab import Action, CandidateKind, Category, Culprit, Event, Hypothesis, Layer, Role
from firstfault.vocab.timefmt import iso
from firstfault.vocab.topology import Topology

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


# The headline's place when the failing line is on no rank or host (a bare paste of the error)
UNPLACED = "(no rank or host on the failing line)"


def gpu_of(rank: int | None, ev: Event | None, topo: Topology) -> list[str]:
    if ev is not None and ev.gpu:
        return [ev.gpu]
    if rank is not None and rank in topo.rank_gpu:
        return [topo.rank_gpu[rank]]
    return []


def exited_early(c: Candidate, corr: Correlation) -> bool:
    """An abort with no Python frame and no exception: the process was already shutting down.

    A rank that calls sys.exit mid-training (or returns) often aborts in interpreter shutdown
    while its communication threads are alive; the abort is a symptom of the early exit.
    """
    if c.event is None or c.event.signature not in SHUTDOWN_ABORTS or c.rank is None:
        return False
    v = corr.ranks.get(c.rank)
    if v is None:
        return False
    sigs = {e.signature for e in v.events}
    return "python.faulthandler_no_frame" in sigs and not any(
        e.role == Role.ROOT and e.signature not in SHUTDOWN_ABORTS and e.layer == Layer.APPLICATION for e in v.events
    )


def category_for(c: Candidate, corr: Correlation, kernel_logs: bool = False) -> Category:
    """Refine a candidate's category with what else its host says (OOM kill explains -9)."""
    if exited_early(c, corr):
        if not any("shutting down" in r for r in c.reasons):
            c.reasons.append(
                "it aborted during interpreter shutdown (no Python frame, no exception): the program had already "
                "ended on this rank while its peers were still training (sys.exit or an early return)"
            )
        return Category.APPLICATION_ERROR
    if c.kind == CandidateKind.EXIT and c.host and c.event is not None:
        for e in corr.host_events.get(c.host, []):
            if e.category == Category.HOST_OOM and same_process(e, c.event) is not False:
                return Category.HOST_OOM
    if c.kind == CandidateKind.EXIT and c.event is not None and exit_signal(c.event) == "SIGKILL":
        return _sigkill_reading(c, kernel_logs)
    return c.category


def _sigkill_reading(c: Candidate, kernel_logs: bool) -> Category:
    """A SIGKILL with no error of its own: who sends one to a training process?

    The launcher tears its workers down with SIGTERM and the scheduler with SIGTERM first; a bare
    SIGKILL is, overwhelmingly, the kernel's OOM killer (the node out of memory, or a cgroup or
    container limit). See :func:`silent_kill_suspects_oom`.
    """
    oom = silent_kill_suspects_oom(c.reasons, "it was killed by SIGKILL with no error of its own", kernel_logs)
    return Category.HOST_OOM if oom else c.category


def silent_kill_suspects_oom(reasons: list[str], premise: str, kernel_logs: bool) -> bool:
    """A process killed outright, without a word of its own: is the OOM killer the suspect?

    With no kernel log in the bundle it is, said as a suspicion with what would confirm it; with
    kernel logs that show no OOM kill (the kill would have been found there), something else sent
    it: a crash of the process, not its memory. ``premise`` says what was killed; the reading is
    appended to ``reasons``.
    """
    if kernel_logs:
        reasons.append(f"{premise}, and the kernel log shows no OOM kill")
        return False
    reasons.append(
        f"{premise}: the kernel's OOM killer (the node out of memory, or a cgroup or container memory limit) "
        "is what usually kills a process so; the bundle has no kernel log to confirm (add dmesg or "
        "journalctl -k of that node)"
    )
    return True


def _what(c: Candidate, cat: Category, corr: Correlation, progressed: Container[int]) -> str:
    """What the hypothesis says happened: the root's own line, or what the candidate's kind implies
    (``progressed``: the ranks a progress line shows)."""
    root = c.event
    if c.what is not None:
        return c.what
    elif root is not None:
        return root.text.strip()
    elif c.kind == CandidateKind.SILENT and c.rank is None and cat == Category.PROCESS_CRASH:
        return "a log stopped without a word as its peers lost their connections: the processes writing it were lost"
    elif c.kind == CandidateKind.SILENT and c.rank is None and cat == Category.CONFIGURATION:
        return "the ranks waited for a rank the launcher never started: the job asked for more ranks than it ran"
    elif c.kind == CandidateKind.SILENT and c.rank is None:
        return "every rank that printed timed out waiting; no rank stands out as the one they waited for"
    elif c.kind == CandidateKind.SILENT and cat == Category.HANG:
        timed_out = any(v.timed_out() for v in corr.ranks.values())
        view = corr.ranks.get(c.rank) if c.rank is not None else None
        silent = view is None or view.left_no_line(progressed)
        how = "printed nothing in the log" if silent else "stopped making progress"
        return f"{how}; " + (
            "its peers timed out waiting for it" if timed_out else "the job was stalled on it before the first error"
        )
    elif c.kind == CandidateKind.SILENT and cat == Category.COLLECTIVE_MISMATCH:
        return "it was in a different collective from the one its peers waited in"
    elif c.kind == CandidateKind.SILENT:
        return "left the job without an error of its own; its peers lost their connections to it"
    elif c.kind == CandidateKind.STALLED:
        return c.reasons[0] if c.reasons else "the job stopped making progress"
    return "; ".join(c.reasons)


def hypothesis(c: Candidate, corr: Correlation, ev: ReasoningInput) -> Hypothesis:
    cat = category_for(c, corr, ev.kernel_logs)
    ranks: list[int] = [c.rank] if c.rank is not None else []
    ranks += sorted(
        {
            e.rank
            for e in c.supporting
            if e.rank is not None and e.rank not in ranks and (not c.host or e.host == c.host)
        }
    )
    if c.rank is None and c.host:
        ranks = ranks or ev.topology.host_ranks(c.host)
    hosts = [c.host] if c.host else []
    if not hosts and c.rank is not None:
        v = corr.ranks.get(c.rank)
        if v and v.hosts:
            hosts = sorted(v.hosts)
        elif c.rank in ev.topology.rank_host:
            hosts = [ev.topology.rank_host[c.rank]]  # a silent or slow rank: where it ran
    action = DEFAULT_ACTION[cat]
    if c.event is not None and c.event.signature in ev.action_of:
        action = ev.action_of[c.event.signature]
    root = c.event
    what = _what(c, cat, corr, {p.rank for p in ev.progress})
    job_level = root is not None and root.fields.get("job_level") == "1"
    if job_level:  # the scheduler's word about the whole job (a cancel, a time limit, its memory limit)
        ranks, hosts = [], []
    where = f"on rank {ranks[0]}" if ranks else (f"on host {hosts[0]}" if hosts else UNPLACED)
    if hosts and ranks:
        where += f" on {hosts[0]}"
    if c.kind == CandidateKind.COMMON or (job_level and c.kind != CandidateKind.STALLED):
        where = "on every rank" if c.kind == CandidateKind.COMMON else "on the whole job"
    elif c.kind == CandidateKind.STALLED:
        where = f"on rank {c.rank}" if c.rank is not None else "on every rank"
    summary = f"{cat.value.replace('_', ' ')} {where}: {what}"
    reasons = list(c.reasons)
    if root is not None:
        reasons.insert(0, f"earliest independent fault at {iso(root.ts)} ({root.source}:{root.line}, {root.signature})")
    return Hypothesis(
        category=cat,
        culprit=Culprit(ranks=ranks, hosts=hosts, gpus=gpu_of(c.rank, root, ev.topology)),
        action=action,
        score=0.0,
        summary=summary,
        root_event=root,
        reasons=reasons,
    )
