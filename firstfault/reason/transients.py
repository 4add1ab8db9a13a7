"""Faults that healed: a port that went down and came back before anything gave up on it.

A 1-second InfiniBand flap is common and harmless: NCCL's IB transport retries for about
``4.096 us * 2**NCCL_IB_TIMEOUT * (NCCL_IB_RETRY_CNT + 1)`` (~34 s with the defaults 20 and 7)
before a work request fails, so a port that is ``ACTIVE`` again within that window costs a few
retries and nothing else. Such a pair must not be taken for the root of an unrelated failure
minutes later. Which events heal which is data: a signature says
``sets = { recovered_by = "SIG[:FIELD=VALUE][,SIG...]", recovery_window_s = "30" }``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from firstfault.vocab import Event, Role, Severity

# Fields that, when both events carry them, must agree (same HCA, same port, same process).
_SAME = ("ib_dev", "ib_port", "nic_pci", "pid")


@dataclass(frozen=True)
class Recovery:
    fault: Event
    healed_by: Event

    @property
    def seconds(self) -> float | None:
        if self.fault.ts is None or self.healed_by.ts is None:
            return None
        return self.healed_by.ts - self.fault.ts

    def describe(self) -> str:
        dt = self.seconds
        took = f"after {dt:.1f} s" if dt is not None else "shortly after"
        where = self.fault.host or self.fault.source
        return (
            f"transient on {where}: '{self.fault.text.strip()[:100]}' recovered {took} "
            f"('{self.healed_by.text.strip()[:60]}'); not counted as a fault"
        )


def _rules(e: Event) -> list[tuple[str, str | None, str | None]]:
    spec = e.fields.get("recovered_by")
    if not spec:
        return []
    out = []
    for part in spec.split(","):
        sig, _, cond = part.strip().partition(":")
        key, _, val = cond.partition("=")
        out.append((sig, key or None, val or None))
    return out


def _heals(fault: Event, cand: Event, window: float) -> bool:
    if cand.host != fault.host or (cand.host is None and cand.source != fault.source):
        return False
    for k in _SAME:
        a, b = fault.fields.get(k), cand.fields.get(k)
        if a and b and a != b:
            return False
    if fault.ts is not None and cand.ts is not None:
        return 0.0 <= cand.ts - fault.ts <= window
    return cand.source == fault.source and cand.line > fault.line


def demote_recovered(events: Sequence[Event]) -> list[Recovery]:
    """Mark each fault that its own recovery event followed within the window as noise."""
    faults = [e for e in events if e.role == Role.ROOT and "recovered_by" in e.fields]
    if not faults:
        return []
    wanted = {sig for f in faults for sig, _, _ in _rules(f)}
    by_sig: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.signature in wanted:
            by_sig[e.signature].append(e)
    out = []
    for f in faults:
        try:
            window = float(f.fields.get("recovery_window_s", "30"))
        except ValueError:
            window = 30.0
        for sig, key, val in _rules(f):
            healed = next(
                (c for c in by_sig.get(sig, ()) if (key is None or c.fields.get(key) == val) and _heals(f, c, window)),
                None,
            )
            if healed is not None:
                f.role = Role.NOISE
                f.severity = Severity.WARNING
                f.set_field("recovered_after_s", f"{(healed.ts or 0) - (f.ts or 0):.1f}")
                out.append(Recovery(f, healed))
                break
    return out
