"""Where each rank sits on the HTML report's page: host lanes, GPU slots and topology roles.

Placement comes only from what the verdict says (progress rows, chain events, culprits); the
page never invents a machine, and ranks with no known host go on placeholder hosts that are
named as such.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from firstfault.report.html_values import int_or_none, natural_key, num

#: Ranks per placeholder host when the bundle does not say where ranks ran.
PSEUDO_HOST_RANKS = 8
# Topology cell roles, in the order the page's colour legend uses.
TOPO_ROLES = ("healthy", "culprit", "failed", "victim", "torn_down", "no_data")


class Places:
    """Rank and host indices for the page: dense small integers instead of repeated strings.

    Placement comes from whatever the verdict says: progress rows carry the host, events carry
    rank/host/local rank/GPU. A rank seen nowhere is not on the page (the verdict has no record
    of it); a host seen only in kernel logs still gets a lane.
    """

    def __init__(self, verdict: Mapping[str, Any], chain: Sequence[Mapping[str, Any]]) -> None:
        host_of, slot_of, gpu_of, hosts, ranks = placements(verdict, chain)
        hosts.update(host_of.values())
        # Ranks with no known host (a single-machine run logs none) still deserve lanes and
        # cells: put them on placeholder hosts of 8 consecutive ranks, named so nobody mistakes
        # them for real machines.
        self.pseudo: set[str] = set()
        for r in sorted(ranks):
            if r not in host_of:
                lo = r - r % PSEUDO_HOST_RANKS
                name = f"unknown host · ranks {lo}–{lo + PSEUDO_HOST_RANKS - 1}"
                host_of[r] = name
                self.pseudo.add(name)
                slot_of[r] = r - lo
        hosts.update(self.pseudo)
        self.hosts: list[str] = sorted(hosts, key=lambda h: (h in self.pseudo, natural_key(h)))
        self.host_index = {h: i for i, h in enumerate(self.hosts)}
        self.ranks: list[int] = sorted(ranks)
        self.rank_index = {r: i for i, r in enumerate(self.ranks)}
        # Slot = position of the rank on its host (GPU column in the topology view): local rank
        # when known, else a numeric GPU id, else order of rank numbers on that host.
        by_host: dict[str, list[int]] = defaultdict(list)
        for r in self.ranks:
            if r in host_of:
                by_host[host_of[r]].append(r)
        self.rank_host: list[int] = []
        self.rank_slot: list[int] = []
        self.rank_gpu: list[str | None] = []
        for r in self.ranks:
            h = host_of.get(r)
            self.rank_host.append(self.host_index[h] if h is not None else -1)
            slot = slot_of.get(r)
            if slot is None:
                slot = int_or_none(gpu_of.get(r))
            if slot is None and h is not None:
                slot = by_host[h].index(r)
            self.rank_slot.append(slot if slot is not None else -1)
            self.rank_gpu.append(gpu_of.get(r))


def placements(
    verdict: Mapping[str, Any], chain: Sequence[Mapping[str, Any]]
) -> tuple[dict[int, str], dict[int, int], dict[int, str], set[str], set[int]]:
    """What the verdict says of places: rank -> host, slot (local rank), GPU; the hosts and ranks seen."""
    host_of: dict[int, str] = {}
    slot_of: dict[int, int] = {}
    gpu_of: dict[int, str] = {}
    hosts: set[str] = set()
    ranks: set[int] = set()
    for p in verdict.get("progress") or []:
        r = int_or_none(p.get("rank"))
        if r is None:
            continue
        ranks.add(r)
        if p.get("host"):
            host_of.setdefault(r, str(p["host"]))
    for e in chain:
        r = int_or_none(e.get("rank"))
        h = e.get("host")
        if h:
            hosts.add(str(h))
        if r is None:
            continue
        ranks.add(r)
        if h:
            host_of.setdefault(r, str(h))
        lr = int_or_none(e.get("local_rank"))
        if lr is not None:
            slot_of.setdefault(r, lr)
        g = e.get("gpu")
        if g not in (None, ""):
            gpu_of.setdefault(r, str(g))
    cul = (verdict.get("verdict") or {}).get("culprit") or {}
    for r in cul.get("ranks") or []:
        ri = int_or_none(r)
        if ri is not None:
            ranks.add(ri)
    hosts.update(str(h) for h in cul.get("hosts") or [] if h)
    for c in (verdict.get("flight_recorder") or {}).get("culprits") or []:
        ri = int_or_none(c.get("rank")) if isinstance(c, Mapping) else None
        if ri is not None:
            ranks.add(ri)
    return host_of, slot_of, gpu_of, hosts, ranks


def progress(
    places: Places, rows: Sequence[Mapping[str, Any]], rel_ms: Callable[[Any], float | None]
) -> dict[str, Any] | None:
    """Per-rank last step, its time and median step time, aligned with ``ranks``."""
    if not rows:
        return None
    n = len(places.ranks)
    step: list[int | None] = [None] * n
    ts: list[float | None] = [None] * n
    med: list[float | None] = [None] * n
    for p in rows:
        r = int_or_none(p.get("rank"))
        ri = places.rank_index.get(r, -1) if r is not None else -1
        if ri < 0:
            continue
        step[ri] = int_or_none(p.get("last_step"))
        ts[ri] = rel_ms(p.get("last_step_ts"))
        m = num(p.get("median_step_ms"))
        med[ri] = round(m, 2) if m is not None else None
    return {"step": step, "t": ts, "median_ms": med}


def topology(
    places: Places,
    verdict: Mapping[str, Any],
    chain: Sequence[Mapping[str, Any]],
    group_of_event: Mapping[Any, int],
    groups: Sequence[Mapping[str, Any]],
    culprit: Mapping[str, list[Any]],
) -> dict[str, Any]:
    """Role of every known rank: culprit > failed (own root event) > victim > torn down > healthy."""
    pl = places
    n = len(pl.ranks)
    worst = [0] * n  # 0 none, 1 noise, 2 teardown, 3 cascade, 4 root
    rank_of_role = {"noise": 1, "teardown": 2, "cascade": 3, "root": 4}
    host_roots: set[tuple[int, str]] = set()
    for e in chain:
        g = group_of_event.get(e.get("id"))
        if g is None:
            continue
        lvl = rank_of_role[groups[g]["role"]]
        r = int_or_none(e.get("rank"))
        ri = pl.rank_index.get(r, -1) if r is not None else -1
        if ri >= 0:
            worst[ri] = max(worst[ri], lvl)
        elif lvl == 4 and e.get("host") and e.get("gpu") not in (None, ""):
            host_roots.add((pl.host_index.get(str(e["host"]), -1), str(e["gpu"])))
    cul_ranks = set(culprit["ranks"])
    cul_hosts = {pl.host_index[h] for h in culprit["hosts"] if h in pl.host_index}
    cul_gpus = set(culprit["gpus"])
    role: list[int] = []
    for i, r in enumerate(pl.ranks):
        hi = pl.rank_host[i]
        gpu = pl.rank_gpu[i]
        slot = str(pl.rank_slot[i])
        is_cul = r in cul_ranks
        if not is_cul and not cul_ranks and hi in cul_hosts:
            # A host-level culprit (host OOM, NIC) or a named GPU on a culprit host.
            is_cul = (
                not cul_gpus
                or bool({gpu, slot} & cul_gpus)
                or any(g.endswith((f":{slot}", f" {slot}")) for g in cul_gpus)
            )
        if not is_cul and ((hi, slot) in host_roots or (gpu is not None and (hi, gpu) in host_roots)):
            worst[i] = max(worst[i], 4)
        code = 1 if is_cul else {4: 2, 3: 3, 2: 4, 1: 0, 0: 0}[worst[i]]
        role.append(code)
    fr = verdict.get("flight_recorder") if isinstance(verdict.get("flight_recorder"), Mapping) else None
    fr_ranks = sorted(
        {
            pl.rank_index[r]
            for r in (int_or_none(c.get("rank")) for c in (fr or {}).get("culprits") or [] if isinstance(c, Mapping))
            if r is not None and r in pl.rank_index
        }
    )
    counts = Counter(role)
    return {
        "roles": list(TOPO_ROLES),
        "role": role,
        "fr_culprits": fr_ranks,
        "counts": {TOPO_ROLES[k]: c for k, c in sorted(counts.items())},
        "culprit_hosts": sorted(cul_hosts),
    }
