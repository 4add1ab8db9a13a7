"""Flight-recorder analysis: which ranks caused a hang or desync, ranked, and why.

The model (see docs/flight-recorder.md for the full rules):

* Every process group is analysed on its own.  Each member rank gets a
  *frontier* (the last collective sequence id it entered), and where the dump
  knows it, a *completed* mark (last collective whose completion the rank saw).
* In a group, the ranks with the lowest frontier block the others: the members
  that entered the next collective wait there for them (``waiting``), and the
  laggards are ``missing`` there.  A member whose peers *completed* a collective
  it entered but never saw complete is ``stalled`` (its device stopped; NCCL
  collectives cannot complete on peers without its kernel).  Members that issued
  a different op, size or dtype at the same sequence id are ``mismatched``.
* Point-to-point ops are matched send-against-recv per peer pair (their
  ``p2p_seq_id`` counters are per rank, so they cannot be aligned by value).
* Waits form a rank-level wait-for graph.  A rank missing in one group is a
  victim when it is itself waiting in another group; it is a root when nothing
  explains its absence (its host stopped issuing work, or it wrote no dump).
  Cycles (order inversions) are broken at the oldest wait.

The analysis runs in phases over one :class:`_State`: the world and its groups
(``groups``), each member's progress (:func:`_views`, :func:`_frontiers`), each
group's collectives and point-to-point ops (``collectives``, ``p2p``), the roots
of the wait-for graph (:func:`_missing_roots`, ``cycles``, :func:`_stuck_fallback`),
stragglers when nothing hangs (``stragglers``), the culprits (``culprits``) and the
group summaries (:func:`_summaries`). Everything is a pure function of the loaded
dumps: no I/O.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from firstfault.flightrec.collectives import analyse_collectives
from firstfault.flightrec.common import Edge, Group, Observation, View, entry_done, pg_label, ranks_text
from firstfault.flightrec.culprits import build_culprits, fr_verdict_text
from firstfault.flightrec.cycles import resolve_cycles
from firstfault.flightrec.groups import resolve_groups, uid_maps
from firstfault.flightrec.load import gc_paused
from firstfault.flightrec.p2p import analyse_p2p
from firstfault.flightrec.records import FRDump
from firstfault.flightrec.stragglers import find_stragglers
from firstfault.vocab import settings
from firstfault.vocab.flightrec import FRAnalysis, FRCulprit, FRGroupSummary, compress_ranks
from firstfault.vocab.timefmt import iso_ns

__all__ = [
    "FRAnalysis",
    "FRCulprit",
    "FRGroupSummary",
    "analyze_fr",
    "compress_ranks",
]

# (group key, seq, time) of a collective every member entered and none saw complete
Stuck = tuple[str, int, int | None]


@dataclass
class _State:
    """What the phases build up: the dumps, the world, the groups and the members' views, then the
    wait-for graph, the observations that blame ranks, and one summary per group."""

    by_rank: dict[int, FRDump]
    world_n: int
    world: list[int]
    missing_dumps: list[int]
    backend: str
    groups: dict[str, Group]
    key_of: dict[tuple[int, str], str]
    warnings: list[str]
    views: dict[str, dict[int, View]] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    observations: dict[int, list[Observation]] = field(default_factory=lambda: defaultdict(list))
    summaries: dict[str, FRGroupSummary] = field(default_factory=dict)
    stuck_together: dict[int, list[Stuck]] = field(default_factory=lambda: defaultdict(list))
    out_edges: dict[int, list[Edge]] = field(default_factory=lambda: defaultdict(list))
    in_edges: dict[int, list[Edge]] = field(default_factory=lambda: defaultdict(list))

    def gkey(self, rank: int, name: str) -> str:
        return self.key_of.get((rank, name), name)

    def roots(self) -> set[int]:
        return {r for r, obs in self.observations.items() if obs}


def analyze_fr(
    dumps: Sequence[FRDump],
    *,
    expected_world_size: int | None = None,
    group_hints: dict[str, list[int]] | None = None,
) -> FRAnalysis:
    """Analyse a set of per-rank dumps; see the module docstring for the rules.

    ``expected_world_size`` lets ranks that wrote no dump at all be counted;
    ``group_hints`` (group name or description -> global ranks, e.g. parsed from
    ``new_group`` log lines) fills in membership gloo dumps do not record.
    """
    with gc_paused():
        st = _world(dumps, expected_world_size, group_hints)
        if st is None:
            return FRAnalysis([], [], ["no dumps to analyse"], expected_world_size or 0, 0, [], "", "no dumps")
        _views(st)
        _progress_counters(st)
        _frontiers(st)
        _analyse_groups(st)
        _wait_for_graph(st)
        _missing_roots(st)
        resolve_cycles(st.out_edges, st.in_edges, st.roots(), st.groups, st.observations)
        if not st.roots() and st.stuck_together:
            _stuck_fallback(st)
        hang = bool(st.roots())  # before the no-dump facts: those alone are no hang
        _no_dump(st)
        if not hang:
            for rank, obs in find_stragglers(st.groups, st.views, st.by_rank):
                st.observations[rank].append(obs)
        culprits = build_culprits(st.observations, st.in_edges, st.groups, st.by_rank, st.world_n)
        ordered = _summaries(st, culprits)
        for d in st.by_rank.values():
            for note in d.notes:
                if "malformed" in note:
                    st.warnings.append(f"rank {d.rank}: {note}")
        return FRAnalysis(
            culprits=culprits,
            groups=ordered,
            warnings=st.warnings,
            world_size=st.world_n,
            ranks_with_dumps=len(st.by_rank),
            missing_dumps=st.missing_dumps,
            backend=st.backend,
            verdict=fr_verdict_text(culprits, ordered),
            roles=_roles(st, {c.rank for c in culprits}),
        )


def _world(
    dumps: Sequence[FRDump], expected_world_size: int | None, group_hints: dict[str, list[int]] | None
) -> _State | None:
    """One dump per rank, the world's size, the backend, and the groups every dump agrees on."""
    warnings: list[str] = []
    by_rank: dict[int, FRDump] = {}
    for d in dumps:
        if d.rank in by_rank:
            warnings.append(f"rank {d.rank}: duplicate dump {d.path} ignored")
            continue
        by_rank[d.rank] = d
    if not by_rank:
        return None
    world_n = expected_world_size or 0
    seen_tuples: set[int] = set()
    for d in by_rank.values():
        world_n = max(world_n, d.rank + 1)
        for cfg in d.pg_config.values():
            if cfg.ranks and id(cfg.ranks) not in seen_tuples:
                seen_tuples.add(id(cfg.ranks))
                world_n = max(world_n, max(cfg.ranks) + 1)
    for ranks in (group_hints or {}).values():
        if ranks:
            world_n = max(world_n, max(int(r) for r in ranks) + 1)
    limit = settings.current().limits.max_world
    if world_n > limit:  # a rank number that large is not believed: the world is the ranks actually seen
        seen = set(by_rank)
        for d in by_rank.values():
            for cfg in d.pg_config.values():
                seen.update(r for r in (cfg.ranks or ()) if r >= 0)
        warnings.append(
            f"a rank or world size above {limit} is not believed: the world is the {len(seen)} rank(s) seen"
        )
        world = sorted(seen)
        world_n = len(world)
    else:
        world = list(range(world_n))
    missing_dumps = [r for r in world if r not in by_rank]
    if missing_dumps:
        warnings.append(f"{len(missing_dumps)} rank(s) wrote no dump: {ranks_text(missing_dumps, 20)}")
    backend = Counter(d.backend for d in by_rank.values() if d.backend).most_common(1)
    groups, key_of = resolve_groups(list(by_rank.values()), world, group_hints, warnings)
    if len(world) > world_n:
        world_n = len(world)
        missing_dumps = [r for r in world if r not in by_rank]
    return _State(by_rank, world_n, world, missing_dumps, backend[0][0] if backend else "", groups, key_of, warnings)


def _views(st: _State) -> None:
    """Each member's entries in each of its groups (one view per group and rank)."""
    st.views = {k: {} for k in st.groups}
    for d in st.by_rank.values():
        rank = d.rank
        local: dict[str, View] = {}
        for e in d.entries:
            v = local.get(e.pg_name)
            if v is None:
                gv0 = st.views.get(st.key_of.get((rank, e.pg_name), e.pg_name))
                if gv0 is None:
                    continue
                v = gv0.get(rank)
                if v is None:
                    v = gv0[rank] = View()
                local[e.pg_name] = v
            (v.p2p if e.is_p2p else v.entries).append(e)
    for k, g in st.groups.items():
        for r in g.members:
            if r not in st.views[k]:
                st.views[k][r] = View(has_dump=r in st.by_rank)


def _progress_counters(st: _State) -> None:
    """pg_status's counters (NCCL only: gloo's include unrecorded p2p and mark failed work completed),
    for groups that only ever ran collectives."""
    for d in st.by_rank.values():
        if d.backend == "gloo" or not d.pg_status:
            continue
        for uid, name in uid_maps(d).items():
            status = d.pg_status.get(uid)
            k = st.gkey(d.rank, name)
            if status is None or k not in st.groups or st.groups[k].has_p2p:
                continue
            v = st.views[k].get(d.rank)
            if v is None:
                continue
            if status.last_enqueued is not None and status.last_enqueued >= 0:
                v.f = status.last_enqueued
            if status.last_completed is not None and status.last_completed >= 0:
                v.done = status.last_completed


def _frontiers(st: _State) -> None:
    """Each member's frontier (last collective entered) and last one seen complete, from its entries."""
    for k in st.groups:
        for r, v in st.views[k].items():
            dump = st.by_rank.get(r)
            if dump is None:
                v.has_dump = False
                continue
            if v.entries:
                fmax = max(e.collective_seq_id for e in v.entries)
                v.f = fmax if v.f is None else max(v.f, fmax)
                done_seqs = [e.collective_seq_id for e in v.entries if entry_done(e, dump) is True]
                pend = [e.collective_seq_id for e in v.entries if entry_done(e, dump) is False]
                if done_seqs:
                    v.done = max(v.done or 0, max(done_seqs))
                if dump.only_active and pend:
                    v.done = max(v.done or 0, min(pend) - 1) if v.done is None else v.done
                elif dump.backend != "gloo" and v.done is None and not pend and not dump.ring_wrapped:
                    v.done = v.f
            elif v.f is None:
                if dump.only_active:
                    v.estimated = True  # filled in per group by _estimate_frontiers
                elif not dump.ring_wrapped:
                    v.f = 0
                    if dump.backend != "gloo":
                        v.done = 0


def _analyse_groups(st: _State) -> None:
    """Each group on its own: its collectives and its point-to-point ops."""
    for k, g in st.groups.items():
        gv = st.views[k]
        label = pg_label(g.name, g.desc)
        summ = FRGroupSummary(pg=g.name, desc=g.desc, ranks=list(g.members), membership=g.membership, state="idle")
        st.summaries[k] = summ
        if not g.has_coll and not g.has_p2p:
            # No entries anywhere: only pg_status progress, nothing in flight to analyse.
            if any(v.f is not None for v in gv.values()):
                summ.state = "ok"
            continue
        _estimate_frontiers(gv)
        if g.has_coll:
            analyse_collectives(k, g, gv, st.by_rank, label, summ, st.edges, st.observations, st.stuck_together)
        if g.has_p2p:
            analyse_p2p(k, g, gv, st.by_rank, label, summ, st.edges, st.stuck_together)


def _estimate_frontiers(gv: dict[int, View]) -> None:
    """Only-active members with no entries hold nothing in flight: they have not entered the oldest
    pending collective of the group."""
    pending_heads = [
        min(e.collective_seq_id for e in v.entries if (v.done is None or e.collective_seq_id > v.done))
        for v in gv.values()
        if v.entries and any(v.done is None or e.collective_seq_id > v.done for e in v.entries)
    ]
    for v in gv.values():
        if v.estimated and v.f is None:
            if pending_heads:
                v.f = min(pending_heads) - 1
                v.done = v.f
            else:
                v.estimated = False


def _wait_for_graph(st: _State) -> None:
    for ed in st.edges:
        for w in ed.waiters:
            st.out_edges[w].append(ed)
        for b in ed.blockers:
            st.in_edges[b].append(ed)


def _missing_roots(st: _State) -> None:
    """Blockers nothing explains (not waiting anywhere themselves) are roots: say where the hang began."""
    gloo_like = st.backend == "gloo"
    hard = {r for r, obs in st.observations.items() if any(o.kind in ("stalled", "mismatched") for o in obs)}
    missing_roots: set[int] = set()
    for b in st.in_edges:
        if b in hard:
            continue
        if b not in st.by_rank or not (st.out_edges.get(b) or (b in st.stuck_together and not gloo_like)):
            missing_roots.add(b)
    all_roots = hard | missing_roots
    blockers_of: dict[str, set[int]] = defaultdict(set)
    for ed in st.edges:
        blockers_of[ed.group].update(ed.blockers)
    # once per group, not per rank and comparison: a claimed world of 10^5 ranks makes every
    # missing rank a blocker, and a subset test per sort key was quadratic in the world
    all_roots_group = {g: bl <= all_roots for g, bl in blockers_of.items()}
    for b in sorted(missing_roots):
        # The group where the hang started for b: one whose blockers are all roots (nobody there is
        # absent because of a wait elsewhere), a collective over a p2p wait, and the oldest wait.
        waits_on_b = sorted(
            st.in_edges[b],
            key=lambda ed: (not all_roots_group.get(ed.group, False), ed.kind == "p2p", ed.t or 1 << 62),
        )
        st.observations[b].append(_missing_observation(st, b, waits_on_b[0]))


def _missing_observation(st: _State, b: int, first: Edge) -> Observation:
    """Why rank ``b`` blocks the others at ``first``: it never entered, and nothing it issued waits."""
    waiters = sorted({w for ed in st.in_edges[b] if ed.group == first.group for w in ed.waiters})
    others = sorted({w for ed in st.in_edges[b] for w in ed.waiters} - set(waiters))
    grp = st.groups[first.group]
    label = pg_label(grp.name, grp.desc)
    since = f" since {iso_ns(first.t)}" if first.t else ""
    also = f" (rank(s) {ranks_text(others)} wait for it elsewhere too)" if others else ""
    if first.kind == "p2p" or (first.op or "").startswith(("send", "recv")):
        mine = "recv" if (first.op or "").startswith("send") else "send"
        what = f"posted the {mine} matching rank {first.waiter}'s pending {first.op} (its p2p #{first.seq}) in {label}"
        waited = f"rank(s) {ranks_text(waiters)} have been waiting there{since}"
    else:
        what = f"entered {first.op} #{first.seq} in {label}" if first.seq is not None else f"joined {label}"
        waited = f"rank(s) {ranks_text(waiters)} have been waiting in it{since}"
    if b not in st.by_rank:
        summ = st.summaries[first.group]
        mism = summ.state == "mismatch" and summ.seq == first.seq
        consequence = (
            f"; the members that did dump disagree at that very collective (rank(s) "
            f"{ranks_text(summ.mismatched)}), so it most likely crashed on the mismatch "
            "(gloo aborts a process on a size mismatch)"
            if mism
            else ": it most likely crashed, was killed or hung hard before dumping"
        )
        text = f"rank {b} wrote no flight-recorder dump and never {what}; {waited}{also}{consequence}"
        return Observation("missing", first.group, first.seq, first.op, first.t, text, strength=-0.4 if mism else -0.05)
    d = st.by_rank[b]
    last = d.entries[-1] if d.entries else None
    if last is not None:
        tail = (
            f"; its last recorded op was {last.op} #{last.seq} in "
            f"{pg_label(last.pg_name, last.pg_desc)} at {iso_ns(last.time_created_ns)}, "
            "which is not waiting on anyone"
        )
    else:
        tail = "; it has no collective in flight anywhere"
    text = (
        f"rank {b} never {what}; {waited}{also}, and nothing rank {b} issued is waiting on another "
        f"rank{tail}: its host stopped issuing collectives (hung or stuck process, e.g. a blocked "
        "thread holding the GIL, or it exited)"
    )
    return Observation("missing", first.group, first.seq, first.op, first.t, text, entry=last)


def _stuck_fallback(st: _State) -> None:
    """Everyone is stuck together (NCCL), nobody obviously missing: the oldest such collective's members."""
    oldest: tuple[int, str, int] | None = None
    for lst in st.stuck_together.values():
        for k2, seq, t in lst:
            cand = (t or 0, k2, seq)
            if oldest is None or cand < oldest:
                oldest = cand
    if oldest is None:
        return
    t0, k0, s0 = oldest
    g0 = st.groups[k0]
    ranks0 = sorted(r for r, lst in st.stuck_together.items() if any(x[0] == k0 and x[1] == s0 for x in lst))
    for r in ranks0:
        st.observations[r].append(
            Observation(
                "stuck",
                k0,
                s0,
                None,
                t0 or None,
                f"every member of {pg_label(g0.name, g0.desc)} entered collective #{s0} and none "
                "saw it complete; no rank is missing, so the fault is below PyTorch (network, NCCL, "
                "or a device "
                f"blocked by work FR does not record); rank {r} is one of {ranks_text(ranks0)}",
            )
        )


def _no_dump(st: _State) -> None:
    """Ranks with no dump that nobody waits on: still a fact worth ranking low."""
    for r in st.missing_dumps:
        if r not in st.observations:
            st.observations[r].append(
                Observation(
                    "no_dump",
                    "",
                    None,
                    None,
                    None,
                    f"rank {r} wrote no flight-recorder dump (crashed, killed, or never dumped)",
                )
            )


def _summaries(st: _State, culprits: list[FRCulprit]) -> list[FRGroupSummary]:
    """Mark each group's origin, explain its missing ranks, and order the groups: active, origin, blamed."""
    culprit_ranks = {c.rank for c in culprits}
    primary_groups = {c.pg for c in culprits if c.pg}
    for k, summ in st.summaries.items():
        for r in summ.missing:
            if r in culprit_ranks:
                continue
            outs = st.out_edges.get(r)
            if outs:
                ed = min(outs, key=lambda e: e.t or 0)
                g2 = st.groups[ed.group]
                summ.explained[r] = (
                    f"waits in {pg_label(g2.name, g2.desc)} {ed.op or ''} #{ed.seq} for rank(s) "
                    f"{ranks_text({b for x in outs if x.group == ed.group for b in x.blockers})}"
                )
            elif r in st.stuck_together:
                k2, s2, _ = st.stuck_together[r][0]
                g2 = st.groups[k2]
                summ.explained[r] = (
                    f"blocked in {pg_label(g2.name, g2.desc)} #{s2} (all members entered, none completed)"
                )
        summ.origin = (
            any((r in culprit_ranks) for r in summ.missing + summ.stalled + summ.mismatched + summ.no_dump)
            or k in primary_groups
            or summ.pg in primary_groups
        )
    order_rank = {c.rank: i for i, c in enumerate(culprits)}
    primary_of = {c.rank: c.pg for c in culprits}

    def group_order(s: FRGroupSummary) -> tuple[Any, ...]:
        active = s.state not in ("ok", "idle")
        blamed = [order_rank[r] for r in s.missing + s.stalled + s.mismatched + s.no_dump if r in order_rank]
        top = min(blamed) if blamed else len(order_rank) + 1
        return (
            not active,
            not s.origin,
            len(s.explained) > 0,
            top,
            not (blamed and primary_of.get(culprits[top].rank) == s.pg),
            s.seq is None,
            s.first_pending_ns or 0,
            len(s.ranks),
            s.pg,
        )

    return sorted(st.summaries.values(), key=group_order)


def _roles(st: _State, culprit_ranks: set[int]) -> dict[str, list[int]]:
    roles: dict[str, list[int]] = defaultdict(list)
    for r in st.world:
        if r in culprit_ranks:
            roles["culprit"].append(r)
        elif r in st.out_edges:
            roles["waiting"].append(r)
        elif r in st.stuck_together:
            roles["blocked"].append(r)
        elif r in st.by_rank:
            roles["idle_or_ok"].append(r)
        else:
            roles["no_dump"].append(r)
    return dict(roles)
