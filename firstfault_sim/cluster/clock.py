"""Per-host clocks and the time formats each program prints, formatted fast.

Every host's clock is off by a fixed offset (NTP-disciplined hosts: tens of ms; a host whose
NTP failed: seconds). Everything a process on host H prints carries H's clock; the truth is
kept on the true clock. Formatting is cached per whole second, so the millions of progress
lines of a 16,384-rank bundle cost one ``strftime`` per second of simulated time.
"""

from __future__ import annotations

import random
import time


class Clock:
    """One host's clock: ``offset`` seconds ahead of true time."""

    __slots__ = ("_cache", "_sec", "offset")

    def __init__(self, offset: float = 0.0):
        self.offset = offset
        self._sec = -1
        self._cache: dict[str, str] = {}

    def _parts(self, t: float) -> tuple[int, float]:
        lt = t + self.offset
        sec = int(lt // 1)
        return sec, lt - sec

    def _fmt(self, sec: int, key: str, pattern: str) -> str:
        if sec != self._sec:
            self._sec = sec
            self._cache = {}
        s = self._cache.get(key)
        if s is None:
            s = time.strftime(pattern, time.gmtime(sec))
            self._cache[key] = s
        return s

    def py(self, t: float) -> str:
        """Python logging asctime: ``2026-12-02 14:57:32,272``."""
        sec, frac = self._parts(t)
        return f"{self._fmt(sec, 'py', '%Y-%m-%d %H:%M:%S')},{int(frac * 1000):03d}"

    def c10(self, t: float) -> tuple[str, str, int]:
        """(MMDD, HH:MM:SS, nanoseconds) of torch's c10 logger: ``E1202 14:57:42.578407236``."""
        sec, frac = self._parts(t)
        return self._fmt(sec, "md", "%m%d"), self._fmt(sec, "hms", "%H:%M:%S"), int(frac * 1e9)

    def glog(self, t: float) -> tuple[str, str, int]:
        """(MMDD, HH:MM:SS, microseconds) of torchelastic's logger: ``W1202 14:57:44.370000``."""
        sec, frac = self._parts(t)
        return self._fmt(sec, "md", "%m%d"), self._fmt(sec, "hms", "%H:%M:%S"), int(frac * 1e6)

    def kern(self, t: float) -> str:
        """``dmesg --time-format iso``: ``2026-12-02T14:57:42,578407+00:00``."""
        sec, frac = self._parts(t)
        return f"{self._fmt(sec, 'iso', '%Y-%m-%dT%H:%M:%S')},{int(frac * 1e6):06d}+00:00"

    def slurm(self, t: float) -> str:
        """SLURM's ``2026-12-02T14:57:42`` (CANCELLED AT ...)."""
        sec, _ = self._parts(t)
        return self._fmt(sec, "iso", "%Y-%m-%dT%H:%M:%S")

    def daemon(self, t: float) -> str:
        """slurmctld's log stamp ``2026-12-02T14:57:42.578`` (LogTimeFormat=iso8601_ms)."""
        sec, frac = self._parts(t)
        return f"{self._fmt(sec, 'iso', '%Y-%m-%dT%H:%M:%S')}.{int(frac * 1000):03d}"

    def record(self, t: float) -> str:
        """torchelastic failure record: ``2026-12-02_14:57:42``."""
        sec, _ = self._parts(t)
        return self._fmt(sec, "rec", "%Y-%m-%d_%H:%M:%S")


def host_offsets(n: int, skew_s: float, rng: random.Random, bad_fraction: float = 0.002) -> list[float]:
    """Clock offsets for ``n`` hosts: normal with sigma ``skew_s``; a few hosts (NTP broken) 20x worse."""
    out = []
    for _ in range(n):
        sigma = skew_s * (20 if rng.random() < bad_fraction else 1)
        out.append(max(-30 * sigma - 1e-9, min(30 * sigma + 1e-9, rng.gauss(0.0, sigma))) if sigma else 0.0)
    return out
