"""Checkpoint interval and goodput: Young's and Daly's optimum, lost work per failure.

* Young, J. W. (1974), "A first order approximation to the optimum checkpoint interval",
  Communications of the ACM 17(9): ``tau = sqrt(2 * delta * M)``, with ``delta`` the time to
  write a checkpoint and ``M`` the mean time between failures.
* Daly, J. T. (2006), "A higher order estimate of the optimum checkpoint interval for restart
  dumps", Future Generation Computer Systems 22(3): for ``delta < 2M``,
  ``tau = sqrt(2 delta M) * (1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9) - delta``, else ``M``.

Waste (first order, Young's model): writing costs ``delta / tau`` of the time; each failure
loses half an interval of work on average, plus the time to notice it (the audit's detection
time of the failing class) and to restart; goodput is what is left. Without a spare, a
failure that takes hardware out also waits for the repair (an assumed time, from the layout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def young(delta_s: float, mtbf_s: float) -> float:
    return math.sqrt(2.0 * delta_s * mtbf_s)


def daly(delta_s: float, mtbf_s: float) -> float:
    if delta_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = delta_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * delta_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta_s


@dataclass(frozen=True, slots=True)
class ClassCost:
    cls: str
    rate_per_hour: float
    detect_s: float  # the middle of the predicted detection window
    lost_s: float  # wall time lost per failure (half an interval + detection + restart [+ repair])
    lost_gpu_hours: float


@dataclass(frozen=True, slots=True)
class Goodput:
    mtbf_s: float
    young_s: float
    daly_s: float
    interval_s: float
    lost_per_failure_s: float  # failure-weighted mean over the classes
    goodput_with_spares: float
    goodput_without_spares: float
    goodput_at_daly: float
    classes: tuple[ClassCost, ...]


def waste(interval_s: float, delta_s: float, mtbf_s: float, lost_s: float) -> float:
    """Share of wall time lost: writing checkpoints plus what failures lose."""
    return min(1.0, delta_s / interval_s + lost_s / mtbf_s)


def goodput(
    rates: dict[str, float],
    detect_s: dict[str, float],
    *,
    world: int,
    interval_s: float,
    delta_s: float,
    restart_s: float,
    repair_s: float,
    spares: bool,
) -> Goodput:
    """``rates``: failures per hour by class; ``detect_s``: seconds to notice each class."""
    total = sum(rates.values())
    mtbf = 3600.0 / total if total > 0 else math.inf
    hardware = {c for c in rates if c != "other"}
    costs: list[ClassCost] = []
    lost_sp = lost_nosp = 0.0
    for cls, rate in rates.items():
        base = interval_s / 2.0 + detect_s.get(cls, 0.0) + restart_s
        nosp = base + (repair_s if cls in hardware else 0.0)
        mine = base if spares else nosp
        costs.append(ClassCost(cls, rate, detect_s.get(cls, 0.0), mine, mine * world / 3600.0))
        if total > 0:
            lost_sp += rate / total * base
            lost_nosp += rate / total * nosp
    d = daly(delta_s, mtbf) if math.isfinite(mtbf) else math.inf
    lost_daly = lost_sp - interval_s / 2.0 + d / 2.0
    return Goodput(
        mtbf_s=mtbf,
        young_s=young(delta_s, mtbf) if math.isfinite(mtbf) else math.inf,
        daly_s=d,
        interval_s=interval_s,
        lost_per_failure_s=lost_sp if spares else lost_nosp,
        goodput_with_spares=1.0 - waste(interval_s, delta_s, mtbf, lost_sp),
        goodput_without_spares=1.0 - waste(interval_s, delta_s, mtbf, lost_nosp),
        goodput_at_daly=1.0 - waste(d, delta_s, mtbf, lost_daly) if math.isfinite(d) else 1.0,
        classes=tuple(costs),
    )
