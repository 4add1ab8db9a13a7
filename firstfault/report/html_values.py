"""Coercion and wording helpers for the HTML report's model.

The verdict JSON reaching the page may be hand-edited or from another version, so every value is
coerced defensively (a bool is not a rank, NaN is not a time); the short texts here are the ones
the page's graph and summaries show.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from typing import Any

#: Ranks listed by number in a group's summary before it switches to a count.
MAX_RANKS_LISTED = 12


def natural_key(s: str) -> tuple[Any, ...]:
    """node2 before node10: hosts are numbered without padding often enough to matter."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


def int_or_none(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and abs(f) != float("inf") else None


def utc(ts: float | None) -> str | None:
    if ts is None:
        return None
    try:
        d = _dt.datetime.fromtimestamp(ts, tz=_dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return d.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def ranks_text(ranks: Sequence[int]) -> str:
    """'1, 5, 9' for a few ranks, '0–4095 (4,095 ranks)' style ranges for many."""
    if not ranks:
        return ""
    rs = sorted(set(ranks))
    if len(rs) <= MAX_RANKS_LISTED:
        return ", ".join(str(r) for r in rs)
    return f"{rs[0]}–{rs[-1]} ({len(rs):,} ranks)"


def humanize(signature: str) -> str:
    """Short label from a signature id: 'torch.nccl_watchdog_timeout' -> 'nccl watchdog timeout'."""
    parts = [p for p in (signature or "unclassified").split(".") if p]
    tail = parts[-1] if parts else "unclassified"
    if len(parts) > 1 and (tail.isdigit() or len(tail) < 3):
        tail = f"{parts[-2]} {tail}"  # 'nvidia.xid.79' -> 'xid 79'
    return tail.replace("_", " ").replace("-", " ").strip() or signature


def group_label(name: str, role: str, n_events: int, n_ranks: int, n_hosts: int) -> str:
    """The node text of the propagation graph, e.g. 'watchdog timeout on 4,095 ranks'."""
    if n_ranks > 1:
        where = f" on {n_ranks:,} ranks"
    elif n_ranks == 1:
        where = " on 1 rank"
    elif n_hosts > 1:
        where = f" on {n_hosts:,} hosts"
    elif n_hosts == 1:
        where = " on 1 host"
    else:
        where = ""
    times = f" ({n_events:,}×)" if n_events > max(n_ranks, n_hosts, 1) else ""
    return f"{name}{where}{times}"
