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

Everything here is a pure function of the loaded dumps: no I/O.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from firstfault.flightrec.load import FRDump, FREntry, gc_paused
from firstfault.vocab.flightrec import FRAnalysis, FRCulprit, FRGroupSummary, compress_ranks
from firstfault.vocab.timefmt import iso_ns as _iso

__all__ = [
    "FRAnalysis",
    "FRCulprit",
    "FRGroupSummary",
    "analyze_fr",
    "compress_ranks",
]

# Base scores per culprit kind: how strongly the evidence pins the fault on the rank.
KIND_SCORE: dict[str, float] = {
    "stalled": 0.92,
    "mismatched": 0.90,
    "missing": 0.85,
    "deadlock": 0.62,
    "no_dump": 0.45,
    "straggler": 0.40,
    "stuck": 0.30,
}
_SIZE_FREE_OPS = frozenset(
    {
        "all_to_all",
        "alltoall",
        "alltoall_base",
        "all_to_all_base",
        "_alltoall_base",
        "alltoallv",
        "scatter",
        "gather",
        "barrier",
    }
)
_OUTPUT_SIZED_OPS = frozenset(
    {"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_base", "reduce_scatter_tensor_coalesced"}
)
_TORCH_FRAME_MARKERS = (
    "/torch/distributed/",
    "/torch/nn/parallel/",
    "c10d_logger",
    "/torch/utils/",
    "<frozen ",
)


def _rl(ranks: Iterable[int], limit: int = 12) -> str:
    rs = sorted(set(ranks))
    if len(rs) > limit:
        return compress_ranks(rs)
    return ",".join(str(r) for r in rs)


def _fmt_frames(frames: Sequence[Any], limit: int = 5) -> list[str]:
    """Top user frames (innermost first), skipping torch.distributed plumbing."""
    user = [f for f in frames if not any(m in f.filename for m in _TORCH_FRAME_MARKERS)]
    chosen = user[:limit] if user else list(frames[:3])
    return [f"{f.name} ({f.filename}:{f.line})" for f in chosen]


def _sig(e: FREntry) -> tuple[Any, ...]:
    """What must agree across ranks for one collective (op, relevant sizes, dtypes)."""
    op = e.op
    if op in _SIZE_FREE_OPS or e.op.endswith("coalesced"):
        sizes: Any = None
    elif op in _OUTPUT_SIZED_OPS:
        sizes = tuple(tuple(s) for s in e.output_sizes)
    else:
        sizes = tuple(tuple(s) for s in e.input_sizes)
    dtypes = tuple(sorted(set(e.input_dtypes))) if op not in ("barrier",) else ()
    return (op, sizes, dtypes)


def _changed_since_last_call(
    by_seq: dict[int, dict[int, FREntry]], s: int, sigs: dict[int, tuple[Any, ...]]
) -> dict[int, tuple[Any, ...] | None]:
    """For a mismatch with no majority: each member's signature at its previous call of the
    same op from the same Python frame. The rank whose shape changed since then is the one that
    diverged; the one that kept its shape is the witness."""
    out: dict[int, tuple[Any, ...] | None] = {}
    for r in sigs:
        cur = by_seq[s][r]
        where = cur.frames[0] if cur.frames else None
        out[r] = None
        for prev_s in sorted((x for x in by_seq if x < s), reverse=True):
            prev = by_seq[prev_s].get(r)
            if prev is None or prev.op != cur.op:
                continue
            if where is not None and (prev.frames[0] if prev.frames else None) != where:
                continue
            out[r] = (_sig(prev),)
            break
    return out


def _sig_text(sig: tuple[Any, ...]) -> str:
    op, sizes, dtypes = sig[0]
    parts = [str(op)]
    if sizes is not None:
        parts.append("x".join(str(d) for d in sizes[0]) if len(sizes) == 1 else str([list(s) for s in sizes]))
    if dtypes:
        parts.append("/".join(dtypes))
    extra = f" (+{len(sig) - 1} coalesced)" if len(sig) > 1 else ""
    return " ".join(parts) + extra


def _pg_label(name: str, desc: str) -> str:
    return f"{desc} (pg {name})" if desc and desc != "undefined" else f"pg {name}"


# --------------------------------------------------------------------------- internals


@dataclass(slots=True)
class _Group:
    key: str
    name: str
    desc: str
    members: tuple[int, ...]
    membership: str
    has_p2p: bool = False
    has_coll: bool = False


@dataclass(slots=True)
class _View:
    """One member rank's state in one group (collectives)."""

    f: int | None = None  # frontier: last collective seq entered
    done: int | None = None  # last collective seq known completed
    estimated: bool = False  # f was estimated (only-active dump, no entries)
    entries: list[FREntry] = field(default_factory=list)
    p2p: list[FREntry] = field(default_factory=list)
    has_dump: bool = True


@dataclass(slots=True)
class _Edge:
    """Waiters blocked on blockers at one op of one group (one record per wait,
    not per rank pair, so a 16k-rank group waiting on one rank is one record)."""

    waiters: tuple[int, ...]
    blockers: tuple[int, ...]
    group: str
    seq: int | None
    op: str | None
    t: int | None
    kind: str  # collective | p2p | nodump

    @property
    def waiter(self) -> int:
        return self.waiters[0]

    @property
    def blocker(self) -> int:
        return self.blockers[0]


@dataclass(slots=True)
class _Evidence:
    kind: str
    group: str
    seq: int | None
    op: str | None
    t: int | None
    text: str
    entry: FREntry | None = None
    strength: float = 0.0


def _entry_done(e: FREntry, dump: FRDump) -> bool | None:
    """Whether this op is known complete (True), known pending (False), or unknown."""
    if e.state == "completed" or e.time_completed_ns:
        return True
    if dump.backend == "gloo":
        # gloo never marks entries completed; retired=False means still running.
        return False if e.retired is False else None
    return False


def _resolve_groups(
    dumps: Sequence[FRDump],
    world: list[int],
    group_hints: dict[str, list[int]] | None,
    warnings: list[str],
) -> tuple[dict[str, _Group], dict[tuple[int, str], str]]:
    """Decide each group's members and map (rank, pg name) -> group key.

    Sources, best first: the ranks' own pg_config; group hints (from logs); the
    default group = the whole world; otherwise the ranks that hold entries for
    it (gloo), which cannot see a member that never issued an op in the group.
    """
    # Rank tuples are shared objects (the loader caches them by string), so they
    # are grouped by identity first: hashing a 16k-int tuple once per rank would
    # make this quadratic in the world size.
    by_id: dict[str, dict[int, tuple[int, ...]]] = defaultdict(dict)
    descs: dict[str, Counter[str]] = defaultdict(Counter)
    rank_cfg: dict[tuple[int, str], tuple[int, ...]] = {}
    for d in dumps:
        for name, cfg in d.pg_config.items():
            if cfg.ranks:
                by_id[name].setdefault(id(cfg.ranks), cfg.ranks)
                rank_cfg[(d.rank, name)] = cfg.ranks
            if cfg.desc:
                descs[name][cfg.desc] += 1
    memberships: dict[str, list[tuple[int, ...]]] = {}
    for name, objs in by_id.items():
        distinct: list[tuple[int, ...]] = []
        for t in objs.values():
            if not any(t is u or (len(t) == len(u) and t == u) for u in distinct):
                distinct.append(t)
        memberships[name] = distinct
    seen_in_entries: dict[str, set[int]] = defaultdict(set)
    p2p_groups: set[str] = set()
    coll_groups: set[str] = set()
    for d in dumps:
        for e in d.entries:
            seen_in_entries[e.pg_name].add(d.rank)
            if e.pg_desc and e.pg_desc != "undefined":
                descs[e.pg_name][e.pg_desc] += 1
            (p2p_groups if e.is_p2p else coll_groups).add(e.pg_name)
    hints = group_hints or {}
    groups: dict[str, _Group] = {}
    key_of: dict[tuple[int, str], str] = {}
    world_t = tuple(world)
    for name in sorted(set(memberships) | set(seen_in_entries), key=lambda n: (len(n), n)):
        desc = descs[name].most_common(1)[0][0] if descs[name] else "undefined"
        variants = memberships.get(name)
        if variants and len(variants) > 1:
            # split_group may reuse one name for disjoint groups: key by members.
            for ranks in variants:
                key = f"{name}@{min(ranks)}"
                groups[key] = _Group(key, name, desc, tuple(sorted(ranks)), "pg_config")
                for r in ranks:
                    if rank_cfg.get((r, name)) == ranks or (r, name) not in rank_cfg:
                        key_of[(r, name)] = key
            continue
        if variants:
            members = tuple(sorted(variants[0]))
            source = "pg_config"
        elif name in hints or desc in hints:
            members = tuple(sorted(set(int(r) for r in hints.get(name, hints.get(desc, [])))))
            source = "hint"
        elif desc == "default_pg" or (name == "0" and desc in ("undefined", "")):
            members = world_t
            source = "default_pg"
        else:
            members = tuple(sorted(seen_in_entries[name]))
            source = "inferred"
        extra = seen_in_entries[name] - set(members)
        if extra and source != "inferred":
            warnings.append(f"pg {name}: ranks {_rl(extra)} hold entries for it but are not listed as members; added")
            members = tuple(sorted(set(members) | extra))
        groups[name] = _Group(name, name, desc, members, source)
    for g in groups.values():
        g.has_p2p = g.name in p2p_groups
        g.has_coll = g.name in coll_groups
    _complete_families(groups, world, set(d.rank for d in dumps), warnings)
    single = [g.name for g in groups.values() if g.membership == "inferred" and len(g.members) == 1]
    if single:
        warnings.append(
            f"group(s) {', '.join(single[:8])} show entries from a single rank only; their other members "
            "probably wrote no dump (pass expected_world_size / group hints)"
        )
    inferred = [g for g in groups.values() if g.membership == "inferred"]
    if inferred:
        warnings.append(
            f"membership of {len(inferred)} group(s) inferred from which ranks hold entries "
            f"(no pg_config/hints): {', '.join(g.name for g in inferred[:8])}" + (" ..." if len(inferred) > 8 else "")
        )
    return groups, key_of


_FAMILY = re.compile(r"^(.*?)(\d+)$")


def _complete_families(groups: dict[str, _Group], world: list[int], dumped: set[int], warnings: list[str]) -> None:
    """Add ranks that wrote no dump to the inferred groups they must belong to.

    Why: gloo dumps have no pg_config, so a group's membership is inferred from
    the ranks holding entries for it, and a rank that died without a dump drops
    out of every group; its peers then look idle instead of waiting on it.
    Groups created as a family (``tp0``, ``tp1``... / ``dp0``, ``dp1``...) have
    one size and one rank stride; a short group is completed with non-dumped
    ranks when exactly one arithmetic run of that stride fits.  ``world`` may be
    extended when a family needs more ranks than the dumps show.
    """
    fams: dict[str, list[_Group]] = defaultdict(list)
    for g in groups.values():
        m = _FAMILY.match(g.desc)
        if g.membership == "inferred" and m and m.group(1):
            fams[m.group(1)].append(g)
    for fam, gs in sorted(fams.items()):
        if len(gs) < 2:
            continue
        target = max(len(g.members) for g in gs)
        full = [g for g in gs if len(g.members) == target]
        short = [g for g in gs if len(g.members) < target]
        if not short or target < 2:
            continue
        strides = {b - a for g in full for a, b in zip(g.members, g.members[1:], strict=False)}
        if len(strides) != 1:
            continue
        stride = strides.pop()
        covered = {r for g in gs for r in g.members}
        if len(covered) != sum(len(g.members) for g in gs):
            continue  # not a partition
        need = target * len(gs)
        if need > len(world):
            world.extend(range(len(world), need))
        free = set(world) - covered - dumped
        if not free:
            continue
        for g in short:
            have = set(g.members)
            cands = []
            for start in range(min(have) - stride * (target - 1), min(have) + 1, stride):
                run = {start + i * stride for i in range(target)}
                if start >= 0 and have <= run and run - have <= free:
                    cands.append(run)
            if len(cands) == 1:
                added = sorted(cands[0] - have)
                free -= set(added)
                g.members = tuple(sorted(cands[0]))
                g.membership = "inferred+completed"
                warnings.append(
                    f"pg {g.name} ({g.desc}): assumed rank(s) {_rl(added)} (no dump) are members, since the "
                    f"'{fam}*' groups have {target} members with stride {stride}"
                )


def _uid_maps(d: FRDump) -> dict[str, str]:
    """Map this rank's pg_status uids to group names.

    Direct from entries (pg_id -> process_group name).  For uids without entries,
    by creation order: PyTorch numbers groups globally (names) and per process
    (uids) in the same creation order, so sorted names pair with sorted uids when
    both lists have the same length; used only if it agrees with every direct pair.
    """
    direct: dict[str, str] = {}
    for e in d.entries:
        direct.setdefault(str(e.pg_id), e.pg_name)
    if not d.pg_status or not d.pg_config:
        return direct
    names = list(d.pg_config)
    uids = list(d.pg_status)
    if len(names) == len(uids) and all(n.isdigit() for n in names) and all(u.isdigit() for u in uids):
        pos = dict(zip(sorted(uids, key=int), sorted(names, key=int), strict=True))
        if all(pos.get(u) == n for u, n in direct.items()):
            return pos
    return direct


# --------------------------------------------------------------------------- analysis


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
        return _analyze(dumps, expected_world_size=expected_world_size, group_hints=group_hints)


def _analyze(
    dumps: Sequence[FRDump],
    *,
    expected_world_size: int | None,
    group_hints: dict[str, list[int]] | None,
) -> FRAnalysis:
    warnings: list[str] = []
    by_rank: dict[int, FRDump] = {}
    for d in dumps:
        if d.rank in by_rank:
            warnings.append(f"rank {d.rank}: duplicate dump {d.path} ignored")
            continue
        by_rank[d.rank] = d
    if not by_rank:
        return FRAnalysis([], [], ["no dumps to analyse"], expected_world_size or 0, 0, [], "", "no dumps")

    # ---- world
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
    world = list(range(world_n))
    missing_dumps = [r for r in world if r not in by_rank]
    if missing_dumps:
        warnings.append(f"{len(missing_dumps)} rank(s) wrote no dump: {_rl(missing_dumps, 20)}")
    backend = Counter(d.backend for d in by_rank.values() if d.backend).most_common(1)
    backend_s = backend[0][0] if backend else ""

    groups, key_of = _resolve_groups(list(by_rank.values()), world, group_hints, warnings)
    if len(world) > world_n:
        world_n = len(world)
        missing_dumps = [r for r in world if r not in by_rank]

    def gkey(rank: int, name: str) -> str:
        return key_of.get((rank, name), name)

    # ---- per (group, rank) views
    views: dict[str, dict[int, _View]] = {k: {} for k in groups}
    for d in by_rank.values():
        rank = d.rank
        local: dict[str, _View] = {}
        for e in d.entries:
            v = local.get(e.pg_name)
            if v is None:
                k = key_of.get((rank, e.pg_name), e.pg_name)
                gv0 = views.get(k)
                if gv0 is None:
                    continue
                v = gv0.get(rank)
                if v is None:
                    v = gv0[rank] = _View()
                local[e.pg_name] = v
            (v.p2p if e.is_p2p else v.entries).append(e)
    for k, g in groups.items():
        for r in g.members:
            if r not in views[k]:
                views[k][r] = _View(has_dump=r in by_rank)

    # pg_status (NCCL only: gloo's counters include unrecorded p2p and mark failed
    # work completed), for groups that only ever ran collectives.
    for d in by_rank.values():
        if d.backend == "gloo" or not d.pg_status:
            continue
        for uid, name in _uid_maps(d).items():
            st = d.pg_status.get(uid)
            k = gkey(d.rank, name)
            if st is None or k not in groups or groups[k].has_p2p:
                continue
            v = views[k].get(d.rank)
            if v is None:
                continue
            if st.last_enqueued is not None and st.last_enqueued >= 0:
                v.f = st.last_enqueued
            if st.last_completed is not None and st.last_completed >= 0:
                v.done = st.last_completed

    for k in groups:
        for r, v in views[k].items():
            dr_ = by_rank.get(r)
            if dr_ is None:
                v.has_dump = False
                continue
            if v.entries:
                fmax = max(e.collective_seq_id for e in v.entries)
                v.f = fmax if v.f is None else max(v.f, fmax)
                done_seqs = [e.collective_seq_id for e in v.entries if _entry_done(e, dr_) is True]
                pend = [e.collective_seq_id for e in v.entries if _entry_done(e, dr_) is False]
                if done_seqs:
                    v.done = max(v.done or 0, max(done_seqs))
                if dr_.only_active and pend:
                    v.done = max(v.done or 0, min(pend) - 1) if v.done is None else v.done
                elif dr_.backend != "gloo" and v.done is None and not pend and not dr_.ring_wrapped:
                    v.done = v.f
            elif v.f is None:
                if dr_.only_active:
                    v.estimated = True  # filled in per group below
                elif not dr_.ring_wrapped:
                    v.f = 0
                    if dr_.backend != "gloo":
                        v.done = 0

    edges: list[_Edge] = []
    evidence: dict[int, list[_Evidence]] = defaultdict(list)
    summaries: dict[str, FRGroupSummary] = {}
    # (rank) -> list of (group key, seq) where it waits / is stuck with all peers present
    stuck_together: dict[int, list[tuple[str, int, int | None]]] = defaultdict(list)

    for k, g in groups.items():
        gv = views[k]
        label = _pg_label(g.name, g.desc)
        summ = FRGroupSummary(pg=g.name, desc=g.desc, ranks=list(g.members), membership=g.membership, state="idle")
        summaries[k] = summ
        if not g.has_coll and not g.has_p2p:
            # No entries anywhere: only pg_status progress, nothing in flight to analyse.
            if any(v.f is not None for v in gv.values()):
                summ.state = "ok"
            continue

        # estimated frontiers for only-active members with no entries: they hold
        # nothing in flight, so they have not entered the oldest pending seq.
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

        if g.has_coll:
            _analyse_collectives(k, g, gv, by_rank, label, summ, edges, evidence, stuck_together)
        if g.has_p2p:
            _analyse_p2p(k, g, gv, by_rank, label, summ, edges, stuck_together)

    # ---- roots: stalled/mismatched ranks, and blockers nothing explains
    out_edges: dict[int, list[_Edge]] = defaultdict(list)
    in_edges: dict[int, list[_Edge]] = defaultdict(list)
    for ed in edges:
        for w in ed.waiters:
            out_edges[w].append(ed)
        for b in ed.blockers:
            in_edges[b].append(ed)

    gloo_like = backend_s == "gloo"
    hard = {r for r, evs in evidence.items() if any(ev.kind in ("stalled", "mismatched") for ev in evs)}
    missing_roots: set[int] = set()
    for b in in_edges:
        if b in hard:
            continue
        if b not in by_rank or not (out_edges.get(b) or (b in stuck_together and not gloo_like)):
            missing_roots.add(b)
    all_roots = hard | missing_roots
    blockers_of: dict[str, set[int]] = defaultdict(set)
    for ed in edges:
        blockers_of[ed.group].update(ed.blockers)
    for b in sorted(missing_roots):
        # The group where the hang started for b: one whose blockers are all roots
        # (nobody there is absent because of a wait elsewhere), a collective over a
        # p2p wait, and the oldest wait.
        waits_on_b = sorted(
            in_edges[b],
            key=lambda ed: (
                not (blockers_of[ed.group] <= all_roots),
                ed.kind == "p2p",
                ed.t or 1 << 62,
            ),
        )
        first = waits_on_b[0]
        waiters = sorted({w for ed in in_edges[b] if ed.group == first.group for w in ed.waiters})
        others = sorted({w for ed in in_edges[b] for w in ed.waiters} - set(waiters))
        grp = groups[first.group]
        label = _pg_label(grp.name, grp.desc)
        since = f" since {_iso(first.t)}" if first.t else ""
        also = f" (rank(s) {_rl(others)} wait for it elsewhere too)" if others else ""
        if first.kind == "p2p" or (first.op or "").startswith(("send", "recv")):
            mine = "recv" if (first.op or "").startswith("send") else "send"
            what = (
                f"posted the {mine} matching rank {first.waiter}'s pending {first.op} (its p2p #{first.seq}) in {label}"
            )
            waited = f"rank(s) {_rl(waiters)} have been waiting there{since}"
        else:
            what = f"entered {first.op} #{first.seq} in {label}" if first.seq is not None else f"joined {label}"
            waited = f"rank(s) {_rl(waiters)} have been waiting in it{since}"
        if b not in by_rank:
            mism = summaries[first.group].state == "mismatch" and summaries[first.group].seq == first.seq
            consequence = (
                f"; the members that did dump disagree at that very collective (rank(s) "
                f"{_rl(summaries[first.group].mismatched)}), so it most likely crashed on the mismatch "
                "(gloo aborts a process on a size mismatch)"
                if mism
                else ": it most likely crashed, was killed or hung hard before dumping"
            )
            evidence[b].append(
                _Evidence(
                    "missing",
                    first.group,
                    first.seq,
                    first.op,
                    first.t,
                    f"rank {b} wrote no flight-recorder dump and never {what}; {waited}{also}{consequence}",
                    strength=-0.4 if mism else -0.05,
                )
            )
            continue
        d = by_rank[b]
        last = d.entries[-1] if d.entries else None
        if last is not None:
            tail = (
                f"; its last recorded op was {last.op} #{last.seq} in "
                f"{_pg_label(last.pg_name, last.pg_desc)} at {_iso(last.time_created_ns)}, "
                "which is not waiting on anyone"
            )
        else:
            tail = "; it has no collective in flight anywhere"
        evidence[b].append(
            _Evidence(
                "missing",
                first.group,
                first.seq,
                first.op,
                first.t,
                f"rank {b} never {what}; {waited}{also}, and nothing rank {b} issued is waiting on another "
                f"rank{tail}: its host stopped issuing collectives (hung or stuck process, e.g. a blocked "
                "thread holding the GIL, or it exited)",
                entry=last,
            )
        )

    # ---- cycles among ranks that are only 'explained' by waiting on each other
    roots = {r for r, evs in evidence.items() if evs}
    _resolve_cycles(out_edges, in_edges, roots, groups, evidence)
    roots = {r for r, evs in evidence.items() if evs}

    # ---- fallback: everyone is stuck together (NCCL), nobody obviously missing
    if not roots and stuck_together:
        oldest: tuple[int, str, int] | None = None
        for lst in stuck_together.values():
            for k2, seq, t in lst:
                cand = (t or 0, k2, seq)
                if oldest is None or cand < oldest:
                    oldest = cand
        if oldest is not None:
            t0, k0, s0 = oldest
            g0 = groups[k0]
            ranks0 = sorted(r for r, lst in stuck_together.items() if any(x[0] == k0 and x[1] == s0 for x in lst))
            for r in ranks0:
                evidence[r].append(
                    _Evidence(
                        "stuck",
                        k0,
                        s0,
                        None,
                        t0 or None,
                        f"every member of {_pg_label(g0.name, g0.desc)} entered collective #{s0} and none "
                        "saw it complete; no rank is missing, so the fault is below PyTorch (network, NCCL, "
                        "or a device "
                        f"blocked by work FR does not record); rank {r} is one of {_rl(ranks0)}",
                    )
                )
        roots = {r for r, evs in evidence.items() if evs}

    # ---- ranks with no dump that nobody waits on: still a fact worth ranking low
    for r in missing_dumps:
        if r not in evidence:
            evidence[r].append(
                _Evidence(
                    "no_dump",
                    "",
                    None,
                    None,
                    None,
                    f"rank {r} wrote no flight-recorder dump (crashed, killed, or never dumped)",
                )
            )

    # ---- stragglers when there is no hang evidence at all
    if not roots:
        for ev_rank, ev in _stragglers(groups, views, by_rank):
            evidence[ev_rank].append(ev)

    # ---- victims (reverse reachability in the wait-for graph)
    culprits = _build_culprits(evidence, in_edges, groups, by_rank, world_n)

    # ---- group summaries: mark origin, explain missing ranks, order
    culprit_ranks = {c.rank for c in culprits}
    primary_groups = {c.pg for c in culprits if c.pg}
    for k, summ in summaries.items():
        for r in summ.missing:
            if r in culprit_ranks:
                continue
            outs = out_edges.get(r)
            if outs:
                ed = min(outs, key=lambda e: e.t or 0)
                g2 = groups[ed.group]
                summ.explained[r] = (
                    f"waits in {_pg_label(g2.name, g2.desc)} {ed.op or ''} #{ed.seq} for rank(s) "
                    f"{_rl({b for x in outs if x.group == ed.group for b in x.blockers})}"
                )
            elif r in stuck_together:
                k2, s2, _ = stuck_together[r][0]
                g2 = groups[k2]
                summ.explained[r] = (
                    f"blocked in {_pg_label(g2.name, g2.desc)} #{s2} (all members entered, none completed)"
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

    ordered = sorted(summaries.values(), key=group_order)

    roles: dict[str, list[int]] = defaultdict(list)
    for r in world:
        if r in culprit_ranks:
            roles["culprit"].append(r)
        elif r in out_edges:
            roles["waiting"].append(r)
        elif r in stuck_together:
            roles["blocked"].append(r)
        elif r in by_rank:
            roles["idle_or_ok"].append(r)
        else:
            roles["no_dump"].append(r)

    for d in by_rank.values():
        for note in d.notes:
            if "malformed" in note:
                warnings.append(f"rank {d.rank}: {note}")

    verdict = _verdict(culprits, ordered)
    return FRAnalysis(
        culprits=culprits,
        groups=ordered,
        warnings=warnings,
        world_size=world_n,
        ranks_with_dumps=len(by_rank),
        missing_dumps=missing_dumps,
        backend=backend_s,
        verdict=verdict,
        roles=dict(roles),
    )


def _analyse_collectives(
    k: str,
    g: _Group,
    gv: dict[int, _View],
    by_rank: dict[int, FRDump],
    label: str,
    summ: FRGroupSummary,
    edges: list[_Edge],
    evidence: dict[int, list[_Evidence]],
    stuck_together: dict[int, list[tuple[str, int, int | None]]],
) -> None:
    """Classify the members of one group for its collectives (see module doc)."""
    e: FREntry | None
    known = {r: v for r, v in gv.items() if v.f is not None and v.has_dump}
    nodump = sorted(r for r, v in gv.items() if not v.has_dump)
    unknown = sorted(r for r, v in gv.items() if v.f is None and v.has_dump)
    if not known:
        summ.state = "unknown"
        return
    by_seq: dict[int, dict[int, FREntry]] = defaultdict(dict)
    multi: dict[tuple[int, int], list[FREntry]] = defaultdict(list)
    for r, v in known.items():
        for e in v.entries:
            if e.collective_seq_id in by_seq and r in by_seq[e.collective_seq_id]:
                multi[(r, e.collective_seq_id)].append(e)
            else:
                by_seq[e.collective_seq_id][r] = e

    def entry_at(r: int, s: int) -> FREntry | None:
        return by_seq.get(s, {}).get(r)

    # ---- mismatch: first seq where present members disagree
    mism_seq: int | None = None
    for s in sorted(by_seq):
        present = by_seq[s]
        if len(present) < 2:
            continue
        sigs = {r: (_sig(e), *(_sig(x) for x in multi.get((r, s), []))) for r, e in present.items()}
        counts = Counter(sigs.values())
        if len(counts) < 2:
            continue
        (major, nmaj), *rest = counts.most_common()
        tie = rest and rest[0][1] == nmaj
        odd = sorted(r for r, sg in sigs.items() if sg != major) if not tie else sorted(sigs)
        mism_seq = s
        summ.state = "mismatch"
        summ.seq = s
        summ.op = present[min(present)].op
        summ.mismatched = odd
        agree = sorted(r for r, sg in sigs.items() if sg == major)
        changed = _changed_since_last_call(by_seq, s, sigs) if tie else {}
        for r in odd:
            e = present[r]
            before = changed.get(r) if tie else None
            if before is not None:
                if before != sigs[r]:
                    text = (
                        f"at collective #{s} of {label} rank {r} issued {_sig_text(sigs[r])} where its previous call "
                        f"from the same place issued {_sig_text(before)}; the other member(s) kept their shape: "
                        "rank {r} changed what it sends (the first divergence)".replace("{r}", str(r))
                    )
                    strength = 0.2
                else:
                    text = (
                        f"at collective #{s} of {label} the members disagree with no majority; rank {r} issued "
                        f"{_sig_text(sigs[r])}, the same as its previous call from the same place"
                    )
                    strength = -0.5
                evidence[r].append(
                    _Evidence("mismatched", k, s, e.op, e.time_created_ns, text, entry=e, strength=strength)
                )
                continue
            if tie:
                text = (
                    f"at collective #{s} of {label} the members disagree with no majority: "
                    + "; ".join(
                        f"rank(s) {_rl([x for x, sg in sigs.items() if sg == c])}: {_sig_text(c)}"
                        for c, _ in counts.most_common()
                    )
                    + f" (first divergence); rank {r} is one of them"
                )
            else:
                text = (
                    f"at collective #{s} of {label} rank {r} issued {_sig_text(sigs[r])} while rank(s) "
                    f"{_rl(agree)} issued {_sig_text(major)}: the first divergence (desynchronised "
                    "program order, "
                    "wrong size or dtype)"
                )
            evidence[r].append(
                _Evidence(
                    "mismatched",
                    k,
                    s,
                    e.op,
                    e.time_created_ns,
                    text,
                    entry=e,
                    strength=0.0 if not tie else -0.3,
                )
            )
        break

    fmin = min(v.f for v in known.values() if v.f is not None)
    fmax = max(v.f for v in known.values() if v.f is not None)
    have_done = [r for r, v in known.items() if v.done is not None]

    # ---- stalled: peers completed a collective this member entered but never saw complete
    stalled: list[int] = []
    if len(have_done) >= 2:
        done_vals = {r: known[r].done or 0 for r in have_done}
        order = sorted(have_done, key=lambda x: done_vals[x])
        sorted_done = [done_vals[x] for x in order]
        peer_max_all = sorted_done[-1]
        for r in have_done:
            v = known[r]
            dr = v.done
            assert dr is not None and v.f is not None
            if v.f <= dr or dr >= peer_max_all:
                continue
            s = dr + 1
            i = bisect.bisect_left(sorted_done, s)
            peers_done = sorted(order[i:])
            if not peers_done:
                continue
            e = entry_at(r, s)
            peer_max = peer_max_all
            stalled.append(r)
            op = e.op if e else None
            what = f"{op} #{s}" if op else f"collective #{s}"
            evidence[r].append(
                _Evidence(
                    "stalled",
                    k,
                    s,
                    op,
                    e.time_created_ns if e else None,
                    f"rank {r} entered {what} in {label}"
                    + (f" at {_iso(e.time_created_ns)}" if e and e.time_created_ns else "")
                    + f" but never saw it complete, while rank(s) {_rl(peers_done)} completed it"
                    + (f" and later ones (up to #{peer_max})" if peer_max > s else "")
                    + f"; rank {r} is stuck at #{s} with {v.f - dr} collective(s) outstanding: its device "
                    "stopped making progress or reporting completion (GPU fault, device-side assert, "
                    "hung kernel)",
                    entry=e,
                    strength=min(0.05, 0.005 * (peer_max - dr)),
                )
            )
    summ.stalled = sorted(stalled)

    # ---- waiting / missing
    t_first: int | None = None
    if fmin < fmax or nodump:
        target = fmin + 1 if fmin < fmax else fmax
        blockers = sorted(r for r, v in known.items() if v.f is not None and v.f < target)
        waiters = []
        for r, v in known.items():
            if v.f is None or v.f < target:
                continue
            if v.done is not None and v.done >= target:
                continue
            d = by_rank[r]
            e = entry_at(r, target)
            if e is None and d.only_active and v.done is None:
                continue  # only-active dump without the entry: it completed there
            if d.backend == "gloo" and e is not None and e.retired is not False and e is not d.entries[-1]:
                continue  # gloo ops are synchronous: it moved on, so this one finished
            waiters.append(r)
        blk = blockers + nodump
        if waiters and blk:
            if summ.state != "mismatch":
                summ.state = "waiting"
            e0 = None
            for r in waiters:
                e = entry_at(r, target)
                if e is not None and (e0 is None or (e.time_created_ns or 0) < (e0.time_created_ns or 0)):
                    e0 = e
            summ.seq = summ.seq if summ.state == "mismatch" else target
            summ.op = summ.op if summ.state == "mismatch" else (e0.op if e0 else None)
            summ.waiting = sorted(waiters)
            summ.missing = blockers
            summ.no_dump = nodump
            t_first = e0.time_created_ns if e0 else None
            blockers_t = tuple(blockers)
            if blockers_t:
                edges.append(
                    _Edge(
                        tuple(sorted(waiters)),
                        blockers_t,
                        k,
                        target,
                        e0.op if e0 else None,
                        t_first,
                        "collective",
                    )
                )
            if nodump:
                edges.append(
                    _Edge(
                        tuple(sorted(waiters)),
                        tuple(nodump),
                        k,
                        target,
                        e0.op if e0 else None,
                        t_first,
                        "nodump",
                    )
                )
    # ---- everyone entered, nobody completed (NCCL): stuck together
    if not summ.waiting and not stalled and len(have_done) == len(known) and mism_seq is None:
        dmin = min((v.done for v in known.values() if v.done is not None), default=None)
        if dmin is not None and dmin < fmin:
            s = dmin + 1
            summ.state = "stuck"
            summ.seq = s
            es = [entry_at(r, s) for r in known]
            e0 = min((e for e in es if e is not None), key=lambda e: e.time_created_ns or 0, default=None)
            summ.op = e0.op if e0 else None
            t_first = e0.time_created_ns if e0 else None
            summ.waiting = sorted(known)
            for r in known:
                stuck_together[r].append((k, s, t_first))
    elif stalled and not summ.waiting:
        summ.state = "stalled"
        s = min(known[r].done or 0 for r in stalled) + 1
        summ.seq = s
        e = entry_at(stalled[0], s)
        summ.op = e.op if e else None
        t_first = e.time_created_ns if e else None
    if summ.state == "idle":
        summ.state = "ok"
    if unknown:
        summ.note = (
            summ.note + " " if summ.note else ""
        ) + f"no progress info for rank(s) {_rl(unknown)} (ring buffer wrapped)"
    # earliest pending op in the group
    pend_times = [
        e.time_created_ns
        for r, v in known.items()
        for e in v.entries
        if e.time_created_ns
        and (v.done is None or e.collective_seq_id > v.done)
        and _entry_done(e, by_rank[r]) is not True
    ]
    if summ.state != "ok":
        summ.first_pending_ns = min(pend_times) if pend_times else t_first


def _analyse_p2p(
    k: str,
    g: _Group,
    gv: dict[int, _View],
    by_rank: dict[int, FRDump],
    label: str,
    summ: FRGroupSummary,
    edges: list[_Edge],
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
            if _entry_done(e, d) is not False or e.peer is None or e.peer >= len(members):
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
                _Edge(
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


def _resolve_cycles(
    out_edges: dict[int, list[_Edge]],
    in_edges: dict[int, list[_Edge]],
    roots: set[int],
    groups: dict[str, _Group],
    evidence: dict[int, list[_Evidence]],
) -> None:
    """Find sink strongly-connected components of the wait-for graph with no root.

    Such a component is a set of ranks each waiting on another member: an order
    inversion (deadlock) or a hang whose cause FR cannot see.  The wait that
    started first names the rank that failed to show up first.
    """
    nodes = set(out_edges) | set(in_edges)
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    comps: list[list[int]] = []
    counter = 0
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
            succ = sorted({b for e in out_edges.get(node, []) for b in e.blockers})
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
            _Evidence(
                "deadlock",
                first.group,
                first.seq,
                first.op,
                first.t,
                f"ranks {_rl(comp)} wait on each other in a cycle; the oldest wait is rank {waiter} in "
                f"{first.op} #{first.seq} of {_pg_label(grp.name, grp.desc)} since {_iso(first.t)}, "
                "which rank "
                f"{blocker} never entered because it went on to wait elsewhere (order inversion between "
                f"rank {blocker} and {_rl(others)}, or rank {blocker} hung)",
            )
        )


def _stragglers(
    groups: dict[str, _Group], views: dict[str, dict[int, _View]], by_rank: dict[int, FRDump]
) -> list[tuple[int, _Evidence]]:
    """Ranks that arrive last at collectives by a wide margin (no hang needed).

    Why: a slow rank does not hang the job, it slows every collective; FR shows it
    as the member whose entries are created consistently after its peers'.
    """
    lag_samples: dict[int, list[int]] = defaultdict(list)
    last_counts: Counter[int] = Counter()
    total_counts: Counter[int] = Counter()
    where: dict[int, tuple[str, int, FREntry]] = {}
    for k, g in groups.items():
        if len(g.members) < 2:
            continue
        per_seq: dict[int, dict[int, FREntry]] = defaultdict(dict)
        for r, v in views[k].items():
            for e in v.entries:
                if e.time_created_ns:
                    per_seq[e.collective_seq_id].setdefault(r, e)
        for s, es in per_seq.items():
            if len(es) != len(g.members):
                continue
            times = sorted((e.time_created_ns or 0, r) for r, e in es.items())
            t0 = times[0][0]
            for t, r in times:
                lag_samples[r].append(t - t0)
                total_counts[r] += 1
            tl, rl = times[-1]
            last_counts[rl] += 1
            if rl not in where or (tl - t0) > ((where[rl][2].time_created_ns or 0) - t0):
                where[rl] = (k, s, es[rl])
    if not lag_samples:
        return []
    med: dict[int, float] = {}
    for r, xs in lag_samples.items():
        xs.sort()
        med[r] = float(xs[len(xs) // 2])
    ranked = sorted(med.items(), key=lambda x: -x[1])
    if len(ranked) < 2:
        return []
    out: list[tuple[int, _Evidence]] = []
    top_r, top_lag = ranked[0]
    second = ranked[1][1]
    share = last_counts[top_r] / max(1, total_counts[top_r])
    if top_lag >= 20e6 and top_lag >= 3 * max(second, 1e6) and share >= 0.6 and top_r in where:
        k, s, e = where[top_r]
        g = groups[k]
        out.append(
            (
                top_r,
                _Evidence(
                    "straggler",
                    k,
                    s,
                    e.op,
                    e.time_created_ns,
                    f"rank {top_r} arrived last at {last_counts[top_r]} of {total_counts[top_r]} "
                    "collectives it shared "
                    f"with all its peers, a median {top_lag / 1e6:.0f} ms after the first rank (next slowest "
                    f"{second / 1e6:.0f} ms); worst at {e.op} #{s} of {_pg_label(g.name, g.desc)}: "
                    "a straggler "
                    "(slow host, data loading, throttled or contended device)",
                    entry=e,
                ),
            )
        )
    return out


def _build_culprits(
    evidence: dict[int, list[_Evidence]],
    in_edges: dict[int, list[_Edge]],
    groups: dict[str, _Group],
    by_rank: dict[int, FRDump],
    world_n: int,
) -> list[FRCulprit]:
    """Pick each blamed rank's strongest evidence, score it, and rank best-first."""
    priority = ["stalled", "mismatched", "missing", "deadlock", "stuck", "straggler", "no_dump"]
    # victims: ranks that (transitively) wait on each culprit
    rev: dict[int, list[_Edge]] = in_edges
    out: list[FRCulprit] = []
    times = sorted(ev.t for evs in evidence.values() for ev in evs if ev.t)
    for r, evs in evidence.items():
        if not evs:
            continue
        evs_sorted = sorted(evs, key=lambda ev: (priority.index(ev.kind), ev.t or 1 << 62))
        best = evs_sorted[0]
        seen = {r}
        todo = [r]
        done_recs: set[int] = set()
        while todo:
            x = todo.pop()
            for rec in rev.get(x, ()):
                if id(rec) in done_recs:
                    continue
                done_recs.add(id(rec))
                for w in rec.waiters:
                    if w not in seen:
                        seen.add(w)
                        todo.append(w)
        victims = len(seen) - 1
        kind = best.kind
        kind_out = kind
        score = KIND_SCORE.get(kind, 0.3) + best.strength
        score += 0.03 * min(1.0, victims / max(1, world_n - 1))
        # small earliness bonus so that equal evidence ranks the earliest first
        if best.t and times:
            pos = bisect.bisect_left(times, best.t) / max(1, len(times))
            score += 0.01 * (1.0 - pos)
        score = round(max(0.0, min(1.0, score)), 4)
        e = best.entry
        frames: list[str] = _fmt_frames(e.frames) if e is not None and e.frames else []
        grp = groups.get(best.group)
        extra = [ev.text for ev in evs_sorted[1:4]]
        if len(evs_sorted) > 4:
            extra.append(f"... and {len(evs_sorted) - 4} more observation(s)")
        out.append(
            FRCulprit(
                rank=r,
                kind=kind_out,
                reason=best.text,
                pg=grp.name if grp else None,
                seq=best.seq,
                op=best.op,
                frames=frames,
                time_ns=best.t,
                score=score,
                pg_desc=grp.desc if grp else None,
                victims=victims,
                evidence=extra,
            )
        )
    out.sort(key=lambda c: (-c.score, c.time_ns or 1 << 62, c.rank))
    return out


def _verdict(culprits: list[FRCulprit], groups: list[FRGroupSummary]) -> str:
    strong = [c for c in culprits if c.kind not in ("no_dump",)]
    if not strong and not culprits:
        hung = [g for g in groups if g.state not in ("ok", "idle")]
        return "no fault visible in the flight recorder" + (f" ({len(hung)} group(s) not idle)" if hung else "")
    lst = strong or culprits
    head = ", ".join(f"rank {c.rank} ({c.kind})" for c in lst[:6])
    more = f" and {len(lst) - 6} more" if len(lst) > 6 else ""
    return f"culprit(s): {head}{more}"
