"""Culprits: each blamed rank's strongest observation, scored, with its victims, best first."""

from __future__ import annotations

import bisect

from firstfault.flightrec.common import KIND_SCORE, Edge, Group, Observation, frames_text
from firstfault.flightrec.records import FRDump
from firstfault.vocab.enums import FRKind
from firstfault.vocab.flightrec import FRCulprit, FRGroupSummary


def build_culprits(
    evidence: dict[int, list[Observation]],
    in_edges: dict[int, list[Edge]],
    groups: dict[str, Group],
    by_rank: dict[int, FRDump],
    world_n: int,
) -> list[FRCulprit]:
    """Pick each blamed rank's strongest evidence, score it, and rank best-first."""
    priority = ["stalled", "mismatched", "missing", "deadlock", "stuck", "straggler", "no_dump"]
    # victims: ranks that (transitively) wait on each culprit
    rev: dict[int, list[Edge]] = in_edges
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
        frames: list[str] = frames_text(e.frames) if e is not None and e.frames else []
        grp = groups.get(best.group)
        extra = [ev.text for ev in evs_sorted[1:4]]
        if len(evs_sorted) > 4:
            extra.append(f"... and {len(evs_sorted) - 4} more observation(s)")
        out.append(
            FRCulprit(
                rank=r,
                kind=FRKind(kind_out),
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


def fr_verdict_text(culprits: list[FRCulprit], groups: list[FRGroupSummary]) -> str:
    strong = [c for c in culprits if c.kind not in ("no_dump",)]
    if not strong and not culprits:
        hung = [g for g in groups if g.state not in ("ok", "idle")]
        return "no fault visible in the flight recorder" + (f" ({len(hung)} group(s) not idle)" if hung else "")
    lst = strong or culprits
    head = ", ".join(f"rank {c.rank} ({c.kind})" for c in lst[:6])
    more = f" and {len(lst) - 6} more" if len(lst) > 6 else ""
    return f"culprit(s): {head}{more}"
