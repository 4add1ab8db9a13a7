"""The Poisson tail and the multiple-testing threshold of the lemon test.

Why Poisson: if every node of a kind (host, GPU) fails jobs at the fleet's rate, the number of
distinct jobs one node is blamed for over a period is Poisson with mean ``rate x exposure``. A
lemon is a node whose count is improbably high under that model. Why Bonferroni: the test is run
once per node, thousands of times; without a correction, a fleet of 2,000 healthy nodes at
p < 0.01 would show 20 "lemons" by chance alone. Standard library only (no SciPy).
"""

from __future__ import annotations

import math


def poisson_sf(k: int, mean: float) -> float:
    """P(X >= k) for X ~ Poisson(mean), summed from the upper terms (no 1 - cdf cancellation)."""
    if k <= 0:
        return 1.0
    if mean <= 0:
        return 0.0
    log_term = -mean + k * math.log(mean) - math.lgamma(k + 1)
    total, term, i = 0.0, math.exp(log_term), k
    while term > 0 and (term > total * 1e-17 or i < mean):
        total += term
        i += 1
        term *= mean / i
        if i > k + 10_000:  # pragma: no cover - mean beyond any fleet's counts
            break
    return min(1.0, total)


def bonferroni(p: float, tests: int) -> float:
    """The p-value corrected for ``tests`` tests (capped at 1)."""
    return min(1.0, p * max(1, tests))
