"""Hand-made events for the stage unit tests: the few fields a stage reads, the rest defaulted."""

from __future__ import annotations

from itertools import count
from typing import Any

from firstfault.vocab import Category, Event, Layer, Role, Severity, TsQuality

_ids = count(1)


def ev(
    text: str,
    *,
    role: Role = Role.ROOT,
    category: Category = Category.APPLICATION_ERROR,
    layer: Layer = Layer.APPLICATION,
    ts: float | None = None,
    rank: int | None = None,
    host: str | None = None,
    source: str | None = None,
    line: int = 1,
    signature: str = "test.sig",
    severity: Severity = Severity.ERROR,
    quality: TsQuality | None = None,
    **kw: Any,
) -> Event:
    if source is None:
        source = f"logs/run/attempt_0/{rank}/stderr.log" if rank is not None else f"{host or 'x'}/kern.log"
    return Event(
        id=next(_ids),
        source=source,
        line=line,
        text=text,
        signature=signature,
        category=category,
        layer=layer,
        role=role,
        severity=severity,
        ts=ts,
        ts_quality=quality or (TsQuality.EXACT if ts is not None else TsQuality.NONE),
        rank=rank,
        host=host,
        **kw,
    )
