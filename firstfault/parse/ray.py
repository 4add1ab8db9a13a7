"""Ray Train's own placement: which worker process is which rank, and whose error a report quotes.

Why: under Ray Train every line a worker prints reaches the driver's console behind Ray's log
monitor label, ``(RayTrainWorker pid=N)``: a process, never a rank. Ray Train itself says which
is which, once, when the worker group starts (``worker_group.py``: ``- (ip=..., pid=N)
world_rank=R, local_rank=L, node_rank=K``), and its ``WorkerGroupError`` heads each quoted
error with the ranks it came from (``poll.py``: ``[Rank 2 Error Snippet]:``, ``[Rank 0,1,2,3 ...]``
when they failed alike). Those two facts give a rank to lines that carry only a pid, and to the
traceback the controller and the driver quote, the only copy of it a crash of the worker leaves.

Both are placement, like NCCL's ``Init COMPLETE`` (``parse.topology.learn_from_nccl``): they fill
gaps and never overwrite a rank a line's own prefix gave.
"""

from __future__ import annotations

import re

from firstfault.vocab import Event
from firstfault.vocab.identity import RAY_PREFIX
from firstfault.vocab.topology import Topology

WORKER_RANK = "ray.train_worker_rank"
# The controller's own summary, "ray.train.WorkerGroupError: Training failed due to worker errors:",
# which introduces the snippets (WorkerGroupError's message, then ``poll.py``'s snippets): a report
# about the ranks below it, never an error of the rank whose snippet stands above it
GROUP_REPORT = "ray.train_worker_group_error"
# One row of the worker group's table (the ``ray.train_worker_rank`` signature's words), for the
# readers of a file's head and tail that run before signatures do (``parse.facts``)
_WORKER_ROW = re.compile(r"- \(ip=[\w.:-]+, pid=(?P<pid>\d+)\) world_rank=(?P<rank>\d+), ")
_ROW_LITERAL = ") world_rank="


def worker_ranks(*texts: str | None) -> dict[int, int]:
    """pid -> world rank from the worker-group tables in ``texts`` (a file's head and tail)."""
    out: dict[int, int] = {}
    for text in texts:
        if text and _ROW_LITERAL in text:
            out.update((int(m["pid"]), int(m["rank"])) for m in _WORKER_ROW.finditer(text))
    return out


def worker_rank(raw: str, pids: dict[int, int]) -> int | None:
    """The rank of a line Ray's log monitor labelled with a worker's pid, by ``pids``."""
    if pids and raw[:1] == "(" and (m := RAY_PREFIX.match(raw)):
        return pids.get(int(m["pid"]))
    return None


def learn_from_ray(events: list[Event], topology: Topology) -> None:
    """Give Ray Train workers' events their world rank, by the pid Ray's label or the raylet's
    death report names (a snippet's error is placed by its header: ``parse.headers``)."""
    table = [e for e in events if e.signature == WORKER_RANK]  # one pass: runs on every bundle
    pid_rank: dict[int, int] = {}
    for e in table:
        pid, rank = int(e.fields["worker_pid"]), int(e.fields["world_rank"])
        if pid_rank.setdefault(pid, rank) != rank:
            pid_rank[pid] = -1  # one pid named as two ranks (two attempts' tables): place by neither
    pid_rank = {p: r for p, r in pid_rank.items() if r >= 0}
    if not pid_rank:
        return
    if topology.world_size is None:
        topology.world_size = len(set(pid_rank.values()))
    for e in events:
        if e.rank is not None:
            continue
        if e.pid is not None and e.pid in pid_rank:
            e.rank = pid_rank[e.pid]
        elif (dead := e.fields.get("worker_pid", "")).isdigit() and int(dead) in pid_rank:
            e.rank = pid_rank[int(dead)]  # the raylet's report of a worker's death names its PID
