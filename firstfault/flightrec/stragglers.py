"""Stragglers, when nothing hangs: the rank that entered collectives last, consistently."""

from __future__ import annotations

from collections import Counter, defaultdict

from firstfault.flightrec.common import Group, Observation, View, pg_label
from firstfault.flightrec.records import FRDump, FREntry


def find_stragglers(
    groups: dict[str, Group], views: dict[str, dict[int, View]], by_rank: dict[int, FRDump]
) -> list[tuple[int, Observation]]:
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
    out: list[tuple[int, Observation]] = []
    top_r, top_lag = ranked[0]
    second = ranked[1][1]
    share = last_counts[top_r] / max(1, total_counts[top_r])
    if top_lag >= 20e6 and top_lag >= 3 * max(second, 1e6) and share >= 0.6 and top_r in where:
        k, s, e = where[top_r]
        g = groups[k]
        out.append(
            (
                top_r,
                Observation(
                    "straggler",
                    k,
                    s,
                    e.op,
                    e.time_created_ns,
                    f"rank {top_r} arrived last at {last_counts[top_r]} of {total_counts[top_r]} "
                    "collectives it shared "
                    f"with all its peers, a median {top_lag / 1e6:.0f} ms after the first rank (next slowest "
                    f"{second / 1e6:.0f} ms); worst at {e.op} #{s} of {pg_label(g.name, g.desc)}: "
                    "a straggler "
                    "(slow host, data loading, throttled or contended device)",
                    entry=e,
                ),
            )
        )
    return out
