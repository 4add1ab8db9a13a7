"""Cycles in the wait-for graph: ranks explained only by waiting on each other (an order inversion).

Such a cycle is a deadlock; it is broken at its oldest wait, whose blocker becomes the culprit.
"""

from __future__ import annotations

from firstfault.flightrec.common import Edge, Group, Observation, pg_label, ranks_text
from firstfault.vocab.timefmt import iso_ns


def resolve_cycles(
    out_edges: dict[int, list[Edge]],
    in_edges: dict[int, list[Edge]],
    roots: set[int],
    groups: dict[str, Group],
    evidence: dict[int, list[Observation]],
) -> None:
    """Find sink strongly-connected components of the wait-for graph with no root.

    Such a component is a set of ranks each waiting on another member: an order
    inversion (deadlock) or a hang whose cause FR cannot see.  The wait that
    started first names the rank that failed to show up first.
    """
    comps = _components(out_edges, set(out_edges) | set(in_edges))
    comp_of = {r: i for i, c in enumerate(comps) for r in c}
    for i, comp in enumerate(comps):
        if len(comp) < 2:
            continue
        cset = set(comp)
        leaves = any(comp_of.get(b) != i for r in comp for e in out_edges.get(r, []) for b in e.blockers)
        if leaves or cset & roots:
            continue
        inner = [e for r in comp for e in out_edges.get(r, []) if cset.intersection(e.blockers)]
        if not inner:
            continue
        first = min(inner, key=lambda e: (e.t or 0, min(cset.intersection(e.blockers))))
        blocker = min(cset.intersection(first.blockers))
        waiter = min(cset.intersection(first.waiters)) if cset.intersection(first.waiters) else first.waiter
        grp = groups[first.group]
        others = sorted(cset - {blocker})
        evidence[blocker].append(
            Observation(
                "deadlock",
                first.group,
                first.seq,
                first.op,
                first.t,
                f"ranks {ranks_text(comp)} wait on each other in a cycle; the oldest wait is rank {waiter} in "
                f"{first.op} #{first.seq} of {pg_label(grp.name, grp.desc)} since {iso_ns(first.t)}, "
                "which rank "
                f"{blocker} never entered because it went on to wait elsewhere (order inversion between "
                f"rank {blocker} and {ranks_text(others)}, or rank {blocker} hung)",
            )
        )


def _components(out_edges: dict[int, list[Edge]], nodes: set[int]) -> list[list[int]]:
    """Strongly-connected components of the wait-for graph (Tarjan, iterative: the graph can hold
    a whole world of ranks, deeper than Python's recursion)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    comps: list[list[int]] = []
    counter = 0
    # successors once per node: Tarjan revisits a node once per successor, and a claimed world of
    # 10^5 ranks gives a waiter 10^5 blockers (recomputing them per visit was quadratic)
    succ_of: dict[int, list[int]] = {}
    for start in sorted(nodes):
        if start in index:
            continue
        # iterative Tarjan
        work: list[tuple[int, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on.add(node)
            succ = succ_of.get(node)
            if succ is None:
                succ = succ_of[node] = sorted({b for e in out_edges.get(node, []) for b in e.blockers})
            if i < len(succ):
                work.append((node, i + 1))
                nxt = succ[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp: list[int] = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                comps.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return comps
