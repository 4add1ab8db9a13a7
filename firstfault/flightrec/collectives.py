"""Collectives of one process group: which members disagree, stalled, wait, or are missing.

In a group, the ranks with the lowest frontier block the others: the members that entered the next
collective wait there for them (``waiting``), and the laggards are ``missing`` there. A member whose
peers *completed* a collective it entered but never saw complete is ``stalled``. Members that
issued a different op, size or dtype at the same sequence id are ``mismatched``.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from firstfault.flightrec.common import (
    Edge,
    Group,
    Observation,
    View,
    changed_since_last_call,
    entry_done,
    entry_signature,
    ranks_text,
    signature_text,
)
from firstfault.flightrec.records import FRDump, FREntry
from firstfault.vocab.flightrec import FRGroupSummary
from firstfault.vocab.timefmt import iso_ns


@dataclass
class _Pass:
    """One group's collectives, as the phases below read them."""

    k: str
    label: str
    summ: FRGroupSummary
    by_rank: dict[int, FRDump]
    edges: list[Edge]
    observations: dict[int, list[Observation]]
    known: dict[int, View]  # members with a dump and a known frontier
    nodump: list[int]
    unknown: list[int]  # members with a dump but no progress info (ring buffer wrapped)
    by_seq: dict[int, dict[int, FREntry]] = field(default_factory=lambda: defaultdict(dict))
    multi: dict[tuple[int, int], list[FREntry]] = field(default_factory=lambda: defaultdict(list))

    def entry_at(self, r: int, s: int) -> FREntry | None:
        return self.by_seq.get(s, {}).get(r)


def analyse_collectives(
    k: str,
    g: Group,
    gv: dict[int, View],
    by_rank: dict[int, FRDump],
    label: str,
    summ: FRGroupSummary,
    edges: list[Edge],
    observations: dict[int, list[Observation]],
    stuck_together: dict[int, list[tuple[str, int, int | None]]],
) -> None:
    """Classify the members of one group for its collectives (see the module's docstring)."""
    known = {r: v for r, v in gv.items() if v.f is not None and v.has_dump}
    if not known:
        summ.state = "unknown"
        return
    p = _Pass(
        k,
        label,
        summ,
        by_rank,
        edges,
        observations,
        known,
        nodump=sorted(r for r, v in gv.items() if not v.has_dump),
        unknown=sorted(r for r, v in gv.items() if v.f is None and v.has_dump),
    )
    for r, v in known.items():
        for e in v.entries:
            if e.collective_seq_id in p.by_seq and r in p.by_seq[e.collective_seq_id]:
                p.multi[(r, e.collective_seq_id)].append(e)
            else:
                p.by_seq[e.collective_seq_id][r] = e
    mism_seq = _mismatch(p)
    fmin = min(v.f for v in known.values() if v.f is not None)
    fmax = max(v.f for v in known.values() if v.f is not None)
    have_done = [r for r, v in known.items() if v.done is not None]
    stalled = _stalled(p, have_done)
    t_first = _waiting(p, fmin, fmax)
    t_first = _stuck_or_stalled(p, stalled, len(have_done), mism_seq, fmin, stuck_together, t_first)
    _finish(p, t_first)


def _mismatch(p: _Pass) -> int | None:
    """The first sequence id where the members present disagree (op, size, dtype): who diverged."""
    # ---- mismatch: first seq where present members disagree
    for s in sorted(p.by_seq):
        present = p.by_seq[s]
        if len(present) < 2:
            continue
        sigs = {
            r: (entry_signature(e), *(entry_signature(x) for x in p.multi.get((r, s), []))) for r, e in present.items()
        }
        counts = Counter(sigs.values())
        if len(counts) < 2:
            continue
        (major, nmaj), *rest = counts.most_common()
        tie = rest and rest[0][1] == nmaj
        odd = sorted(r for r, sg in sigs.items() if sg != major) if not tie else sorted(sigs)
        p.summ.state = "mismatch"
        p.summ.seq = s
        p.summ.op = present[min(present)].op
        p.summ.mismatched = odd
        agree = sorted(r for r, sg in sigs.items() if sg == major)
        changed = changed_since_last_call(p.by_seq, s, sigs) if tie else {}
        for r in odd:
            e = present[r]
            before = changed.get(r) if tie else None
            if before is not None:
                if before != sigs[r]:
                    text = (
                        f"at collective #{s} of {p.label} rank {r} issued {signature_text(sigs[r])} "
                        "where its previous call "
                        f"from the same place issued {signature_text(before)}; the other member(s) kept their shape: "
                        "rank {r} changed what it sends (the first divergence)".replace("{r}", str(r))
                    )
                    strength = 0.2
                else:
                    text = (
                        f"at collective #{s} of {p.label} the members disagree with no majority; rank {r} issued "
                        f"{signature_text(sigs[r])}, the same as its previous call from the same place"
                    )
                    strength = -0.5
                p.observations[r].append(
                    Observation("mismatched", p.k, s, e.op, e.time_created_ns, text, entry=e, strength=strength)
                )
                continue
            if tie:
                text = (
                    f"at collective #{s} of {p.label} the members disagree with no majority: "
                    + "; ".join(
                        f"rank(s) {ranks_text([x for x, sg in sigs.items() if sg == c])}: {signature_text(c)}"
                        for c, _ in counts.most_common()
                    )
                    + f" (first divergence); rank {r} is one of them"
                )
            else:
                text = (
                    f"at collective #{s} of {p.label} rank {r} issued {signature_text(sigs[r])} while rank(s) "
                    f"{ranks_text(agree)} issued {signature_text(major)}: the first divergence (desynchronised "
                    "program order, "
                    "wrong size or dtype)"
                )
            p.observations[r].append(
                Observation(
                    "mismatched",
                    p.k,
                    s,
                    e.op,
                    e.time_created_ns,
                    text,
                    entry=e,
                    strength=0.0 if not tie else -0.3,
                )
            )
        return s

    return None


def _stalled(p: _Pass, have_done: list[int]) -> list[int]:
    """Members whose peers completed a collective they entered but never saw complete."""
    # ---- stalled: peers completed a collective this member entered but never saw complete
    stalled: list[int] = []
    if len(have_done) >= 2:
        done_vals = {r: p.known[r].done or 0 for r in have_done}
        order = sorted(have_done, key=lambda x: done_vals[x])
        sorted_done = [done_vals[x] for x in order]
        peer_max_all = sorted_done[-1]
        for r in have_done:
            v = p.known[r]
            dr = v.done
            assert dr is not None and v.f is not None
            if v.f <= dr or dr >= peer_max_all:
                continue
            s = dr + 1
            i = bisect.bisect_left(sorted_done, s)
            peers_done = sorted(order[i:])
            if not peers_done:
                continue
            e = p.entry_at(r, s)
            peer_max = peer_max_all
            stalled.append(r)
            op = e.op if e else None
            what = f"{op} #{s}" if op else f"collective #{s}"
            p.observations[r].append(
                Observation(
                    "stalled",
                    p.k,
                    s,
                    op,
                    e.time_created_ns if e else None,
                    f"rank {r} entered {what} in {p.label}"
                    + (f" at {iso_ns(e.time_created_ns)}" if e and e.time_created_ns else "")
                    + f" but never saw it complete, while rank(s) {ranks_text(peers_done)} completed it"
                    + (f" and later ones (up to #{peer_max})" if peer_max > s else "")
                    + f"; rank {r} is stuck at #{s} with {v.f - dr} collective(s) outstanding: its device "
                    "stopped making progress or reporting completion (GPU fault, device-side assert, "
                    "hung kernel)",
                    entry=e,
                    strength=min(0.05, 0.005 * (peer_max - dr)),
                )
            )
    p.summ.stalled = sorted(stalled)
    return stalled


def _waiting(p: _Pass, fmin: int, fmax: int) -> int | None:
    """Members that entered the next collective and wait there for the laggards (or the undumped):
    the group's wait edges. Returns the time the first waiter entered, if any."""
    # ---- waiting / missing
    t_first: int | None = None
    if fmin < fmax or p.nodump:
        target = fmin + 1 if fmin < fmax else fmax
        blockers = sorted(r for r, v in p.known.items() if v.f is not None and v.f < target)
        waiters = []
        for r, v in p.known.items():
            if v.f is None or v.f < target:
                continue
            if v.done is not None and v.done >= target:
                continue
            d = p.by_rank[r]
            e = p.entry_at(r, target)
            if e is None and d.only_active and v.done is None:
                continue  # only-active dump without the entry: it completed there
            if d.backend == "gloo" and e is not None and e.retired is not False and e is not d.entries[-1]:
                continue  # gloo ops are synchronous: it moved on, so this one finished
            waiters.append(r)
        blk = blockers + p.nodump
        if waiters and blk:
            if p.summ.state != "mismatch":
                p.summ.state = "waiting"
            e0 = None
            for r in waiters:
                e = p.entry_at(r, target)
                if e is not None and (e0 is None or (e.time_created_ns or 0) < (e0.time_created_ns or 0)):
                    e0 = e
            p.summ.seq = p.summ.seq if p.summ.state == "mismatch" else target
            p.summ.op = p.summ.op if p.summ.state == "mismatch" else (e0.op if e0 else None)
            p.summ.waiting = sorted(waiters)
            p.summ.missing = blockers
            p.summ.no_dump = p.nodump
            t_first = e0.time_created_ns if e0 else None
            blockers_t = tuple(blockers)
            if blockers_t:
                p.edges.append(
                    Edge(
                        tuple(sorted(waiters)),
                        blockers_t,
                        p.k,
                        target,
                        e0.op if e0 else None,
                        t_first,
                        "collective",
                    )
                )
            if p.nodump:
                p.edges.append(
                    Edge(
                        tuple(sorted(waiters)),
                        tuple(p.nodump),
                        p.k,
                        target,
                        e0.op if e0 else None,
                        t_first,
                        "p.nodump",
                    )
                )
    return t_first


def _stuck_or_stalled(
    p: _Pass,
    stalled: list[int],
    n_done: int,
    mism_seq: int | None,
    fmin: int,
    stuck_together: dict[int, list[tuple[str, int, int | None]]],
    t_first: int | None,
) -> int | None:
    """Everyone entered and nobody completed (NCCL): stuck together; or only stalled members."""
    # ---- everyone entered, nobody completed (NCCL): stuck together
    if not p.summ.waiting and not stalled and n_done == len(p.known) and mism_seq is None:
        dmin = min((v.done for v in p.known.values() if v.done is not None), default=None)
        if dmin is not None and dmin < fmin:
            s = dmin + 1
            p.summ.state = "stuck"
            p.summ.seq = s
            es = [p.entry_at(r, s) for r in p.known]
            e0 = min((e for e in es if e is not None), key=lambda e: e.time_created_ns or 0, default=None)
            p.summ.op = e0.op if e0 else None
            t_first = e0.time_created_ns if e0 else None
            p.summ.waiting = sorted(p.known)
            for r in p.known:
                stuck_together[r].append((p.k, s, t_first))
    elif stalled and not p.summ.waiting:
        p.summ.state = "stalled"
        s = min(p.known[r].done or 0 for r in stalled) + 1
        p.summ.seq = s
        e = p.entry_at(stalled[0], s)
        p.summ.op = e.op if e else None
        t_first = e.time_created_ns if e else None
    return t_first


def _finish(p: _Pass, t_first: int | None) -> None:
    """The group's final state, its note, and the time of its earliest pending op."""
    if p.summ.state == "idle":
        p.summ.state = "ok"
    if p.unknown:
        p.summ.note = (
            p.summ.note + " " if p.summ.note else ""
        ) + f"no progress info for rank(s) {ranks_text(p.unknown)} (ring buffer wrapped)"
    # earliest pending op in the group
    pend_times = [
        e.time_created_ns
        for r, v in p.known.items()
        for e in v.entries
        if e.time_created_ns
        and (v.done is None or e.collective_seq_id > v.done)
        and entry_done(e, p.by_rank[r]) is not True
    ]
    if p.summ.state != "ok":
        p.summ.first_pending_ns = min(pend_times) if pend_times else t_first
