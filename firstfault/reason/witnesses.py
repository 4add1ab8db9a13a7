"""Ranks that only saw the fault: who they point at.

Why a module of its own: the first rank to report is not always the one at fault. A gloo receiver
aborts on the buffer its ring neighbour sent (``causality.ring_sender``); a TCPStore's host times
out waiting for the clients that never joined. Each reading names the rank the witness points at,
and says when the log leaves that in doubt.
"""

from __future__ import annotations

from firstfault.reason.causality import RING_RECV, ring_collective, ring_sender
from firstfault.reason.correlate import Correlation
from firstfault.reason.refine import host_of, went_further
from firstfault.vocab import Hypothesis, settings
from firstfault.vocab.text import rank_list

STORE_HOST_TIMEOUT = "torch.store_timeout"


def apply_store_clients(hyp: Hypothesis, corr: Correlation) -> None:
    """A store host that timed out waiting for its clients is a witness; the clients that never
    joined are the fault.

    Why: "Timed out after S seconds waiting for clients. J/N clients joined." is the TCPStore server
    (rank 0's process) saying N - J ranks never connected: they never started, died first, or were
    pointed elsewhere (MASTER_ADDR/PORT). Rank 0 only waited. Where exactly N - J ranks of the N show
    no line of their own, they are the ones that never joined and are named; otherwise no rank is
    (the host's rank is the one rank known to have joined)."""
    root = hyp.root_event
    if root is None or root.signature != STORE_HOST_TIMEOUT or root.rank is None:
        return
    try:
        joined, world = int(root.fields["joined"]), int(root.fields["world"])
    except (KeyError, ValueError):
        return
    if not 0 <= joined < world <= settings.current().limits.max_world:
        return
    shown = {r for r, v in corr.ranks.items() if went_further(v)}
    silent = [r for r in range(world) if r not in shown]
    if len(silent) == world - joined:
        hyp.culprit.ranks = silent
        hyp.summary = hyp.summary.replace(f" on rank {root.rank}", f" on rank {rank_list(silent)}", 1)
        hyp.reasons.append(
            f"rank {root.rank} hosts the store and waited for its clients: {joined} of {world} joined, and rank(s) "
            f"{rank_list(silent)}, the only one(s) with no line of their own, never did"
        )
    else:
        hyp.culprit.ranks = [r for r in hyp.culprit.ranks if r != root.rank]
        hyp.reasons.append(
            f"rank {root.rank} hosts the store and only waited for its clients ({joined} of {world} joined): which "
            "rank never joined is not in the log"
        )
    hyp.culprit.hosts = [h for h in (host_of(r, corr) for r in hyp.culprit.ranks) if h]


def apply_witness(hyp: Hypothesis, corr: Correlation, world: int | None) -> int | None:
    """A receiver that aborted on a buffer too large for it is a witness; the sender is the culprit.

    Returns the rank that would have sent it in the other ring direction when no traceback says
    which collective it was (an all-gather's left neighbour, where the all-reduce's right one is
    named), so that the confidence can say the reading rests on a guess; None otherwise."""
    root = hyp.root_event
    if root is None or root.fields.get("witness") != RING_RECV or root.rank is None:
        return None
    if not world or world < 2:
        # a ring has two ranks at least: the log shows too few to place the sender (mpirun names
        # only the process that aborted), and the receiver is the one rank known not to be it
        hyp.culprit.ranks = [r for r in hyp.culprit.ranks if r != root.rank]
        hyp.culprit.hosts = []
        hyp.summary = (
            f"collective mismatch: rank {root.rank} received a larger buffer than it posted "
            f"({root.fields.get('got', '?')} vs {root.fields.get('expected', '?')} bytes) from a peer"
        )
        hyp.reasons.append(
            f"rank {root.rank} is a witness: gloo aborts the rank that receives the odd buffer, and the "
            "log shows too few ranks to say which peer sent it"
        )
        return None
    collective = ring_collective(e for v in corr.ranks.values() for e in v.events)
    sender = ring_sender(root.rank, world, collective)
    hyp.culprit.ranks = [sender] + [r for r in hyp.culprit.ranks if r != sender]
    hyp.culprit.hosts = [h for h in [host_of(sender, corr)] if h]
    hyp.summary = (
        f"collective mismatch on rank {sender}: rank {root.rank} received a larger buffer than it posted "
        f"({root.fields.get('got', '?')} vs {root.fields.get('expected', '?')} bytes) from rank {sender}"
    )
    other = ring_sender(root.rank, world, "all_gather")  # the all-gather's sender, were the collective unknown
    if collective == "all_gather":
        how = (
            f"the peers' tracebacks show an all-gather, and in gloo's ring all-gather rank r receives from "
            f"rank (r - 1) % {world} (gloo/allgather.cc: recvRank)"
        )
    else:
        how = f"in gloo's ring all-reduce rank r receives from rank (r + 1) % {world} (gloo/allreduce.cc ring(): " + (
            "recvRank), the collective the peers' tracebacks show"
            if collective
            else f"recvRank); no traceback shows the collective, and were it an all-gather (FSDP's "
            f"unshard, ZeRO-3's parameter gather: gloo/allgather.cc) the sender would be rank {other}"
        )
    hyp.reasons.append(
        f"rank {root.rank} is a witness: gloo aborts the rank that receives the odd buffer; {how}: "
        f"rank {sender} sent it"
    )
    return other if collective is None and other != sender else None


def wrap_doubt(hyp: Hypothesis, world: int | None, exact: bool) -> str | None:
    """Why a witness's sender across the ring's edge is in doubt, or None.

    The sender of rank r is (r + 1) % world in an all-reduce: for the last rank it is rank 0, but
    only if the world is exactly as large as the log shows. Where the world size is the least the
    log shows (one node's console of a larger job), the neighbour past the edge may be a rank no
    line shows, and the confidence says so."""
    root = hyp.root_event
    if exact or not world or root is None or root.fields.get("witness") != RING_RECV or root.rank is None:
        return None
    if not hyp.culprit.ranks:
        return None
    sender, r = hyp.culprit.ranks[0], root.rank
    if not ((r == world - 1 and sender == 0) or (r == 0 and sender == world - 1)):
        return None  # the neighbour is inside the ranks the log shows, whatever the world's size
    return (
        f"the world size is not in the log: were it larger than {world}, rank {r}'s ring neighbour would be a rank "
        "no line shows"
    )
