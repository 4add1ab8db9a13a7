"""One way to write a time: ISO 8601 in UTC with milliseconds, from seconds or nanoseconds.

Every report, reason and warning prints times through these, so the same instant reads the same
everywhere. Out-of-range values (a corrupt dump's nanoseconds, a year 10000) print as ``-`` or
``None``, never raise.
"""

from __future__ import annotations

from datetime import UTC, datetime


def iso(ts: float | None) -> str:
    """Seconds since the epoch -> ``2026-12-04T12:16:27.015Z`` (``-`` when unknown or out of range)."""
    if ts is None:
        return "-"
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return "-"


def iso_ns(ns: int | None) -> str | None:
    """Nanoseconds since the epoch (flight-recorder times) -> ISO, or None when unknown or out of range."""
    if ns is None or ns <= 0:
        return None
    try:
        t = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def year_of(ts: float) -> int:
    return datetime.fromtimestamp(ts, UTC).year
