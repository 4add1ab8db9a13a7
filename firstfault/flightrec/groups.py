"""Which process groups the dumps describe, and who is in each: one key per group across ranks.

Dumps name groups by a rank-local name (``pg_name``) and a description; NCCL dumps list members,
gloo dumps often do not. Groups are resolved across dumps by (name, description, members), families
of sub-groups are completed from what the members say, and hints from the logs (``new_group``
lines) fill what no dump records.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from firstfault.flightrec.common import Group, ranks_text
from firstfault.flightrec.records import FRDump

_FAMILY = re.compile(r"^(.*?)(\d+)$")


def resolve_groups(
    dumps: Sequence[FRDump],
    world: list[int],
    group_hints: dict[str, list[int]] | None,
    warnings: list[str],
) -> tuple[dict[str, Group], dict[tuple[int, str], str]]:
    """Decide each group's members and map (rank, pg name) -> group key.

    Sources, best first: the ranks' own pg_config; group hints (from logs); the
    default group = the whole world; otherwise the ranks that hold entries for
    it (gloo), which cannot see a member that never issued an op in the group.
    """
    memberships, descs, rank_cfg = _memberships(dumps)
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
    groups: dict[str, Group] = {}
    key_of: dict[tuple[int, str], str] = {}
    for name in sorted(set(memberships) | set(seen_in_entries), key=lambda n: (len(n), n)):
        desc = descs[name].most_common(1)[0][0] if descs[name] else "undefined"
        variants = memberships.get(name)
        if variants and len(variants) > 1:
            # split_group may reuse one name for disjoint groups: key by members.
            for ranks in variants:
                key = f"{name}@{min(ranks)}"
                groups[key] = Group(key, name, desc, tuple(sorted(ranks)), "pg_config")
                for r in ranks:
                    if rank_cfg.get((r, name)) == ranks or (r, name) not in rank_cfg:
                        key_of[(r, name)] = key
            continue
        members, source = _members(name, desc, variants, hints, tuple(world), seen_in_entries[name])
        extra = seen_in_entries[name] - set(members)
        if extra and source != "inferred":
            warnings.append(
                f"pg {name}: ranks {ranks_text(extra)} hold entries for it but are not listed as members; added"
            )
            members = tuple(sorted(set(members) | extra))
        groups[name] = Group(name, name, desc, members, source)
    for g in groups.values():
        g.has_p2p = g.name in p2p_groups
        g.has_coll = g.name in coll_groups
    complete_families(groups, world, set(d.rank for d in dumps), warnings)
    _membership_warnings(groups, warnings)
    return groups, key_of


def _memberships(
    dumps: Sequence[FRDump],
) -> tuple[dict[str, list[tuple[int, ...]]], dict[str, Counter[str]], dict[tuple[int, str], tuple[int, ...]]]:
    """Per group name, the distinct member lists the dumps' pg_config give, and the descriptions.

    Rank tuples are shared objects (the loader caches them by string), so they are grouped by
    identity first: hashing a 16k-int tuple once per rank would make this quadratic in the world.
    """
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
    return memberships, descs, rank_cfg


def _members(
    name: str,
    desc: str,
    variants: list[tuple[int, ...]] | None,
    hints: dict[str, list[int]],
    world: tuple[int, ...],
    seen: set[int],
) -> tuple[tuple[int, ...], str]:
    """A group's members and where they came from: pg_config, a hint, the default group, or its entries."""
    if variants:
        return tuple(sorted(variants[0])), "pg_config"
    if name in hints or desc in hints:
        return tuple(sorted(set(int(r) for r in hints.get(name, hints.get(desc, []))))), "hint"
    if desc == "default_pg" or (name == "0" and desc in ("undefined", "")):
        return world, "default_pg"
    return tuple(sorted(seen)), "inferred"


def _membership_warnings(groups: dict[str, Group], warnings: list[str]) -> None:
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


def complete_families(groups: dict[str, Group], world: list[int], dumped: set[int], warnings: list[str]) -> None:
    """Add ranks that wrote no dump to the inferred groups they must belong to.

    Why: gloo dumps have no pg_config, so a group's membership is inferred from
    the ranks holding entries for it, and a rank that died without a dump drops
    out of every group; its peers then look idle instead of waiting on it.
    Groups created as a family (``tp0``, ``tp1``... / ``dp0``, ``dp1``...) have
    one size and one rank stride; a short group is completed with non-dumped
    ranks when exactly one arithmetic run of that stride fits.  ``world`` may be
    extended when a family needs more ranks than the dumps show.
    """
    fams: dict[str, list[Group]] = defaultdict(list)
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
                    f"pg {g.name} ({g.desc}): assumed rank(s) {ranks_text(added)} (no dump) are members, since the "
                    f"'{fam}*' groups have {target} members with stride {stride}"
                )


def uid_maps(d: FRDump) -> dict[str, str]:
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
