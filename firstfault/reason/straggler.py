"""Stragglers only when they are real: a sustained slowdown of one rank, with where it began.

Synchronous training makes every rank's *step* (wall) time the same: the fast ranks wait for
the slow one inside the collective. Only a rank's own work per step (the progress line's
``compute_ms``, ``fwd_bwd_ms``, ...) tells the slow one apart, so only those times are read; a
log with wall times alone gives no straggler verdict (it cannot show one).

For each rank the series of its own times, aligned by step with its peers', becomes a ratio to
the peers' median at the same step. A slowdown is real when

* **effect**: after the change point, its median ratio is at least ``Reasoning.straggler_effect`` (1.3x),
* **sustained**: at least ``Reasoning.straggler_sustained`` of those steps are
  ``Reasoning.straggler_slow_step`` (1.15x) slower,
* **duration**: it lasts ``Reasoning.straggler_min_steps`` steps or more,
* **alone**: no peer's own median ratio over the same steps comes within ``Reasoning.straggler_alone`` of it.

The change point is the split that maximises the gap between the mean ratio before and after
(a single-change-point CUSUM/binary segmentation, as in Page 1954 and the straggler analyses of
large training runs), so the verdict states where the slowdown began, how large it is and how
long it lasted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from firstfault.vocab import settings


@dataclass(frozen=True)
class Slowdown:
    rank: int
    onset_index: int  # index in the aligned window where the slowdown began (0: before the window)
    steps: int  # how many aligned steps it lasted
    effect: float  # median ratio to the peers after the onset
    own_ms: float  # the rank's median own time after the onset
    peers_ms: float  # the peers' median own time over the same steps
    window: int  # how many aligned steps were compared

    def describe(self, step_interval_s: float | None) -> str:
        when = (
            "throughout the steps read"
            if self.onset_index == 0
            else f"from {self.window - self.onset_index} steps before the end"
        )
        dur = f"{self.steps} steps" + (f" (~{self.steps * step_interval_s:.0f} s)" if step_interval_s else "")
        return (
            f"rank {self.rank} slowed down {when}: its own time per step was {self.effect:.2f}x its peers' "
            f"({self.own_ms:.0f} ms against {self.peers_ms:.0f} ms) for {dur}"
        )


def _change_point(ratios: Sequence[float]) -> int:
    """The split k (>=0) maximising mean(after) - mean(before); k=0 means the whole series.

    Prefix sums make it linear in the series' length."""
    n = len(ratios)
    prefix = [0.0]
    for x in ratios:
        prefix.append(prefix[-1] + x)
    best_k, best_gap = 0, 0.0
    for k in range(1, n - settings.current().reasoning.straggler_min_steps + 1):
        gap = (prefix[n] - prefix[k]) / (n - k) - prefix[k] / k
        if gap > best_gap:
            best_k, best_gap = k, gap
    if best_k and prefix[best_k] / best_k >= settings.current().reasoning.straggler_slow_step:
        return 0  # slow before the split too: a slowdown that began before the window
    return best_k


EXACT_PEERS_MAX = 8  # up to this many ranks the peers' median excludes the rank itself
SHORTLIST = 8


def find_slowdown(series: Mapping[int, Sequence[float]]) -> Slowdown | None:
    """The one rank whose own step times show a real, sustained slowdown, or None."""
    usable = {r: list(s) for r, s in series.items() if len(s) >= settings.current().reasoning.straggler_min_steps}
    if len(usable) < 2:
        return None
    n = min(len(s) for s in usable.values())
    aligned = {r: s[-n:] for r, s in usable.items()}  # the last n steps of each rank line up
    exact = len(aligned) <= EXACT_PEERS_MAX
    step_median = [median(s[i] for s in aligned.values()) for i in range(n)]

    def base(r: int, i: int) -> float:
        return median(aligned[o][i] for o in aligned if o != r) if exact else step_median[i]

    ratios = {r: [t / b if (b := base(r, i)) > 0 else 1.0 for i, t in enumerate(s)] for r, s in aligned.items()}
    shortlist = sorted(ratios, key=lambda r: -median(ratios[r]))[:SHORTLIST]
    # a slowdown that began late barely moves the whole-window median: judge each after its change point
    worst = max(shortlist, key=lambda r: median(ratios[r][_change_point(ratios[r]) :]))
    k = _change_point(ratios[worst])
    after = ratios[worst][k:]
    effect = median(after)
    if (
        len(after) < settings.current().reasoning.straggler_min_steps
        or effect < settings.current().reasoning.straggler_effect
    ):
        return None
    if sum(
        1 for x in after if x >= settings.current().reasoning.straggler_slow_step
    ) < settings.current().reasoning.straggler_sustained * len(after):
        return None
    others = [median(ratios[o][k:]) for o in shortlist if o != worst]
    if others and effect < settings.current().reasoning.straggler_alone * max(others):
        return None
    own = median(aligned[worst][k:])
    peers = (
        median(step_median[k:])
        if not exact
        else median(aligned[o][i] for o in aligned if o != worst for i in range(k, n))
    )
    return Slowdown(worst, k, len(after), effect, own, peers, n)
