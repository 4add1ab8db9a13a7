"""Point-to-point operations: sends matched against receives per peer pair.

Their ``p2p_seq_id`` counters are per rank, so they cannot be aligned by value the way
collectives are; a pending send waits on the peer that never posted the matching receive.
"""

from __future__ import annotations

from collections import defaultdict

from firstfault.flightrec.common import Edge, Group, View, entry_done
from firstfault.flightrec.records import FRDump, FREntry
from firstfault.vocab.flightrec import FRGroupSummary


def analyse_p2p(
    k: str,
    g: Group,
    gv: dict[int, View],
    by_rank: dict[int, FRDump],
    label: str,
    summ: FRGroupSummary,
    edges: list[Edge],
    stuck_together: dict[int, list[tuple[str, int, int | None]]],
) -> None:
    """Match pending sends against pending recvs per peer pair.

    ``p2p_seq_id`` counts each rank's own p2p ops, so values differ across ranks;
    a pending op whose peer has no pending counterpart means the peer never
    posted it (it is missing there); matched pending pairs are stuck together.
    """
    members = g.members
    pend: dict[tuple[int, int, str], list[FREntry]] = defaultdict(list)
    for r, v in gv.items():
        d = by_rank.get(r)
        if d is None:
            continue
        for e in v.p2p:
            if entry_done(e, d) is not False or e.peer is None or e.peer >= len(members):
                continue
            q = members[e.peer]
            pend[(r, q, e.op)].append(e)
    if not pend:
        return
    waits: list[tuple[int, int, FREntry]] = []
    matched_ranks: set[int] = set()
    for (r, q, op), lst in pend.items():
        other = "recv" if op == "send" else "send"
        counter = pend.get((q, r, other), [])
        lst_sorted = sorted(lst, key=lambda e: e.record_id)
        for i, e in enumerate(lst_sorted):
            if i < len(counter):
                matched_ranks.add(r)
                continue
            if q not in by_rank or q in gv:
                waits.append((r, q, e))
    if waits:
        for r, q, e in waits:
            edges.append(
                Edge(
                    (r,),
                    (q,),
                    k,
                    e.p2p_seq_id,
                    f"{e.op}{'->' if e.op == 'send' else '<-'}{q}",
                    e.time_created_ns,
                    "p2p" if q in by_rank else "nodump",
                )
            )
        if summ.state in ("ok", "idle"):
            summ.state = "waiting"
            first = min(waits, key=lambda w: w[2].time_created_ns or 0)
            summ.op = f"{first[2].op} (p2p)"
            summ.seq = None
        summ.waiting = sorted(set(summ.waiting) | {w[0] for w in waits})
        summ.missing = sorted(set(summ.missing) | {w[1] for w in waits if w[1] in by_rank})
        summ.no_dump = sorted(set(summ.no_dump) | {w[1] for w in waits if w[1] not in by_rank})
        t = min((w[2].time_created_ns or 0) for w in waits) or None
        summ.first_pending_ns = (
            min(x for x in (summ.first_pending_ns, t) if x) if (summ.first_pending_ns or t) else None
        )
    for r in matched_ranks:
        if r not in {w[0] for w in waits}:
            es = [e for (rr, _, _), lst in pend.items() if rr == r for e in lst]
            t0 = min((e.time_created_ns or 0 for e in es), default=0) or None
            stuck_together[r].append((k, -1, t0))
    if matched_ranks and summ.state in ("ok", "idle"):
        summ.state = "stuck"
        summ.op = "send/recv (p2p)"
        summ.waiting = sorted(matched_ranks)
