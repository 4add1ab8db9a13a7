"""The flight recorder's culprits as events, so they take a place in the causal chain."""

from __future__ import annotations

from collections.abc import Mapping

from firstfault.vocab import Category, Event, FRAnalysis, FRCulprit, FRKind, Layer, Role, Severity, TsQuality

FR_CATEGORY = {
    FRKind.MISSING: Category.HANG,
    FRKind.STALLED: Category.HANG,
    FRKind.MISMATCHED: Category.COLLECTIVE_MISMATCH,
    FRKind.STRAGGLER: Category.STRAGGLER,
}


def fr_events(fr: FRAnalysis | None, dumps: Mapping[int, str], start_id: int) -> list[Event]:
    """One event per culprit, pointing at the culprit's dump (or, for a rank that wrote none, the
    dump directory). ``dumps`` maps a rank to its dump's path in the bundle."""
    if fr is None:
        return []
    any_dump = next(iter(dumps.values()), "fr")
    out = []
    for i, c in enumerate(fr.culprits):
        t = c.time_ns
        out.append(
            Event(
                id=start_id + i,
                source=dumps.get(c.rank, any_dump.rsplit("/", 1)[0] if "/" in any_dump else any_dump),
                line=1,
                text=f"flight recorder: {c.reason}",
                signature=f"flightrec.{c.kind}",
                category=FR_CATEGORY.get(c.kind, Category.HANG),
                layer=Layer.FRAMEWORK,
                role=Role.ROOT,
                severity=Severity.ERROR,
                ts=int(t) / 1e9 if isinstance(t, (int, float)) else None,
                ts_quality=TsQuality.EXACT if t else TsQuality.NONE,
                rank=c.rank,
                fields={
                    "fr_kind": str(c.kind),
                    "pg": str(c.pg or ""),
                    "seq": str(c.seq or ""),
                    "op": str(c.op or ""),
                    "score": str(c.score or ""),
                },
                context=tuple(str(f) for f in (c.frames or [])[:12]),
            )
        )
    return out


# How sure the flight recorder must be of another rank to name it beside the winner's
COMPANION_MIN_SCORE = 0.8


def fr_companions(root: Event | None, fr: FRAnalysis | None) -> list[FRCulprit]:
    """Other ranks the flight recorder blames the same way as the verdict's own culprit.

    Why: faults are not always alone. Two GPUs can fail in one job (NVIDIA's fault-injection runs
    fault two ranks in two tensor-parallel groups), and the dumps show each stuck in its own
    group's collective: both are culprits, not one culprit and one victim. When the winner is the
    flight recorder's culprit, its other culprits of the same kind (stalled, missing or mismatched)
    with a firm score, from their own dumps, are named beside it, in the recorder's order.
    """
    if fr is None or root is None or not root.signature.startswith("flightrec."):
        return []
    kind = root.fields.get("fr_kind")
    absent = set(fr.missing_dumps)
    return [
        c
        for c in fr.culprits
        if c.rank != root.rank and str(c.kind) == kind and c.score >= COMPANION_MIN_SCORE and c.rank not in absent
    ]
