"""A training loss that climbs away at the end of a log: a divergence, with no error line.

Why: "none" must mean the job ended well. A diverging run prints no error: the trainer goes on
stepping while the loss rises (BigScience's 104B chronicles: "lm loss" from 6.4 to 10.2 over its
last five logged iterations, then the run was stopped by hand), and a NaN comes later, if ever.
The log's last values are that run's evidence, so a log that ends on them is read as
``numerical``, at low confidence: it rests on values, not on a line that says what failed.

What counts (each series apart, ``parse.losses``): the series ends on a climb of at least
``RISES`` rises in a row, and its last value is at least ``FACTOR`` times the value it climbed
from. Both, so that neither a single spike (one jump, then the paste ends) nor the slow drift of
a noisy loss reads as a divergence; a loss at or below zero (an RL objective, a log-likelihood) is no series this
reads. A log that shows its end (a line that marks completion, a step counter at its total) is
not read: the job ended, whatever its loss did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from firstfault.parse.losses import Point, Series

RISES = 3  # rises in a row the series ends on
FACTOR = 1.5  # its last value against the value it climbed from


@dataclass(frozen=True)
class Divergence:
    """A series whose last values climbed: where, whose, and from what to what."""

    source: str
    rank: int | None
    first_line: int  # the line of the climb's first value
    last_line: int
    start: float  # the climb's first value, where it began
    end: float  # its last value
    values: int  # how many values the climb spans

    def describe(self) -> str:
        who = f"rank {self.rank}'s" if self.rank is not None else "the"
        return (
            f"{who} training loss rose at each of its last {self.values} logged values, from {self.start:.4g} "
            f"to {self.end:.4g} ({self.end / self.start:.1f}x; {self.source}:{self.first_line}-{self.last_line}), "
            "and no error line follows"
        )


def diverged(losses: dict[str, Series]) -> Divergence | None:
    """The first series (by file, then rank) whose last values climbed away, or None; it names its
    rank only where that rank's loss climbed and another rank's, in the same log, did not."""
    found: list[Divergence] = []
    for source, series in losses.items():
        for rank, values in series.items():
            d = _climb(source, rank, values)
            if d is not None:
                found.append(d)
    if not found:
        return None
    first = min(found, key=lambda d: (d.source, -1 if d.rank is None else d.rank))
    kept = sum(len(series) for series in losses.values())
    if first.rank is not None and (len(found) > 1 or kept == 1):
        # every rank of a data-parallel job computes on the same weights: a climb on several ranks,
        # or on the only one the log shows, is the run's, not one rank's
        first = replace(first, rank=None)
    return first


def _climb(source: str, rank: int | None, climb: list[Point]) -> Divergence | None:
    """``climb`` is the series' trailing climb (``parse.losses.fold``): each value above the one before."""
    if len(climb) < RISES + 1 or climb[0][1] <= 0:
        return None
    start, end = climb[0][1], climb[-1][1]
    if end < FACTOR * start:
        return None
    return Divergence(source, rank, climb[0][0], climb[-1][0], start, end, len(climb))
