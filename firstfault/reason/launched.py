"""What the launcher says it started: ranks the job waits for that were never launched.

Why a module of its own: it reads torchrun's failure summary as a record of which workers exist,
a fact about the launch, not about any rank's fault (``reason.candidates`` asks it before naming a
silent rank the culprit).
"""

from __future__ import annotations

from firstfault.parse.slurm import expand_tasks
from firstfault.reason.correlate import Candidate
from firstfault.reason.inputs import ReasoningInput
from firstfault.vocab import CandidateKind, Category, Event
from firstfault.vocab.text import rank_list

LAUNCH_RECORD = "torchelastic.failure_record"


def never_launched(pool: list[int], awaited: dict[int, int], ev: ReasoningInput) -> Candidate | None:
    """The victims wait for ranks the launcher never started: the job asked for more ranks than it ran.

    torchrun's summary lists every worker it started and how each ended, and it starts workers only
    once every node has joined its rendezvous. When the ranks it started (0 to N-1, all on one
    console) wait in the store for rank N or above, and nothing anywhere shows such a rank, the world
    size the program gave ``init_process_group`` (or a WORLD_SIZE it set itself) is larger than the
    processes launched: a configuration error, no rank's fault. One console only, since another
    node's console, left out of the bundle, would hold those ranks.
    """
    if not pool or any(r not in awaited for r in pool):
        return None
    records = [e for e in ev.events if e.signature == LAUNCH_RECORD and e.rank is not None]
    launched = sorted({e.rank for e in records if e.rank is not None})
    if not launched or launched != list(range(len(launched))) or len({e.source for e in records}) != 1:
        return None
    if len(set(ev.topology.rank_host.values())) > 1 or min(pool) < len(launched):
        return None
    beyond = set(pool)
    if any(e.rank in beyond for e in ev.events) or any(p.rank in beyond for p in ev.progress):
        return None
    reasons = [
        f"the ranks waited for rank(s) {rank_list(sorted(pool))}, which the launcher never started: its summary "
        f"lists ranks 0 to {len(launched) - 1} only, and no line anywhere shows a rank {min(pool)}",
        f"the world size the program asked for (at least {max(pool) + 1}) is larger than the {len(launched)} "
        "processes launched: a world_size passed to init_process_group, or a WORLD_SIZE set in the program or "
        "its config, disagrees with the launcher's --nnodes/--nproc-per-node (or another node's log is missing)",
    ]
    return Candidate(CandidateKind.SILENT, None, None, None, None, Category.CONFIGURATION, reasons)


def exited_cleanly(ev: ReasoningInput) -> dict[int, str]:
    """The one rank torchrun's summary leaves out, with why that means it ended with status 0
    (empty when no rank is left out so).

    torchrun's failure summary lists each worker that did not exit 0 (those it stopped itself
    included, with -15). When its ranks, on one console, are 0 to N-1 but for one, and no other
    rank shows a line anywhere, that one left with status 0 (past the highest rank listed, the
    world is unknown: a gap only). With one console per node, each agent lists its own node's
    workers, local ranks 0 to P-1 from one base; the one worker no agent lists is that rank.
    A rank that left cleanly while its peers still waited for it ended its program on its own: a
    ``sys.exit(0)`` or an early return on that rank alone (an early-stopping decision its peers
    never made), not a crash.
    """
    records = [e for e in ev.events if e.signature == LAUNCH_RECORD and e.rank is not None]
    listed = {e.rank for e in records if e.rank is not None}
    if not listed:
        return _srun_left_out(ev)
    world = _agents_workers(records) if len({e.source for e in records}) > 1 else set(range(max(listed) + 1))
    missing = world - listed
    if len(missing) != 1:
        return {}
    (r,) = missing
    stray = any(e.rank is not None and e.rank not in world for e in ev.events)
    if stray or any(p.rank not in world for p in ev.progress):
        return {}
    why = (
        f"torchrun's summary lists how every other rank ended ({rank_list(sorted(listed))}) and not rank {r}: "
        "its process exited with status 0 while its peers still needed it (a sys.exit(0) or an early return on "
        "that rank alone, such as an early-stopping decision its peers never made)"
    )
    return {r: why}


def _srun_left_out(ev: ReasoningInput) -> dict[int, str]:
    """The one task srun's exit lines leave out, when srun started one task per rank.

    srun reports each task that ended otherwise than with status 0 ("srun: error: node01: task 1:
    Exited with exit code 1", "tasks 2-3: Killed"); a task it never names ended with 0. With the
    world known (or ranks 0 to the highest named), the one rank left out, whose peers then lost it,
    ended its program on its own. Not under ``srun torchrun``, whose tasks are nodes' agents.
    """
    if any(e.signature.startswith("torchelastic.") for e in ev.events):
        return {}
    listed: set[int] = set()
    for e in ev.events:
        # srun's per-task end lines, the only signatures with a ``tasks`` field ("node01: tasks 2-3: Killed")
        if tasks := e.fields.get("tasks"):
            listed.update(expand_tasks(tasks))
    if not listed:
        return {}
    size = ev.topology.world_size or max(listed) + 1
    world = set(range(size))
    missing = world - listed
    if len(missing) != 1 or not listed <= world:
        return {}
    (r,) = missing
    if any(e.rank is not None and e.rank not in world for e in ev.events):
        return {}
    why = (
        f"srun reports how every other task ended ({rank_list(sorted(listed))}) and not task {r}: srun names each "
        "task that ends otherwise than with status 0, so its process exited with status 0 while its peers still "
        "needed it (a sys.exit(0) or an early return on that rank alone, such as an early-stopping decision its "
        "peers never made)"
    )
    return {r: why}


def _agents_workers(records: list[Event]) -> set[int]:
    """The ranks several agents' summaries (one console per node) cover: each node's workers are
    its local ranks 0 to P-1 from one base (global rank - local rank), P the most any node shows.
    Empty when a record lacks its local rank, or one console's records disagree on their base."""
    bases: dict[str, int] = {}
    for e in records:
        if (
            e.rank is None
            or e.local_rank is None
            or bases.setdefault(e.source, e.rank - e.local_rank) != (e.rank - e.local_rank)
        ):
            return set()
    per_node = 1 + max(e.local_rank for e in records if e.local_rank is not None)
    return {b + k for b in set(bases.values()) for k in range(per_node)}
