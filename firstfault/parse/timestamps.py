"""Timestamps as training logs really write them.

Python ``logging`` writes ``2026-12-02 14:31:33,123``; torch's C++ (c10) and torchelastic's
Python loggers write glog style ``W1202 14:31:33.764000 3532 file.py:874]``, which has no
year; ISO 8601 with a zone appears in JSON loggers and ``journalctl -o short-iso``. Naive
times are read as UTC: inside one host that keeps the order, and the align stage corrects
offsets between hosts.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

_ISO = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[T ](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)
# glog: severity letter, MMDD, time with microseconds, thread id. Torch's c10 logger wraps it
# in brackets: "[E1202 12:46:34.764000 3532 torch/csrc/...]"; newer c10 drops the thread id:
# "[rank3]:[E1202 14:57:42.578407236 ProcessGroupNCCL.cpp:683]".
_GLOG = re.compile(
    r"(?:^|[\[\s:])[IWEF](?P<mo>\d{2})(?P<d>\d{2}) (?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"\.(?P<frac>\d{1,9})\s+(?:\d+\s)?"
)


def _frac(frac: str | None) -> float:
    return int(frac) / 10 ** len(frac) if frac else 0.0


def _tz(tz: str | None) -> timezone:
    if not tz or tz == "Z":
        return UTC
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4])))


def parse_timestamp(text: str, year_hint: int | None = None) -> float | None:
    """Seconds since the epoch for the first timestamp in ``text``, or None.

    Only the first 120 characters are searched: a timestamp that matters leads its line,
    and a date inside a message (a checkpoint name) must not be taken for the line's time.
    """
    head = text[:120]
    if ":" not in head:  # both shapes hold a clock (hh:mm:ss): a frame or message line is passed at C speed
        return None
    m = _ISO.search(head)
    if m:
        try:
            dt = datetime(
                int(m["y"]),
                int(m["mo"]),
                int(m["d"]),
                int(m["h"]),
                int(m["mi"]),
                int(m["s"]),
                tzinfo=_tz(m["tz"]),
            )
        except ValueError:
            return None
        return dt.timestamp() + _frac(m["frac"])
    m = _GLOG.search(head)
    if m:
        year = year_hint or datetime.now(UTC).year
        try:
            dt = datetime(year, int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), tzinfo=UTC)
        except ValueError:
            return None
        return dt.timestamp() + _frac(m["frac"])
    return None
