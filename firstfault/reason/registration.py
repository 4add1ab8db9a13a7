"""Ranks that never registered: a start-up waiting for processes that never started.

Frameworks print one line per rank as it joins the process group (Lightning's ``Initializing
distributed: GLOBAL_RANK: 3, MEMBER: 4/8``) and, on rank 0, one line once all have joined.
A log with fewer announcements than the world size, no "all registered" line and no error is a
job blocked in ``init_process_group``: the missing ranks never started (a launch that started
one node's tasks, a wrong task count). Silence is the evidence here; without this reading such
a log would say "no failure", or be refused as not a job's output.

Ranks are started a node at a time, so the ones that never started are whole nodes: a run of
consecutive ranks (two at most: the node's ranks may be numbered apart from the rest). Missing
ranks scattered among announced ones are not a launch that left nodes out: a paste that holds a
sample of the announcements (a user copying a few lines of a 78-rank start-up) shows that, and
is no evidence of a stall. Neither is a log that shows training under way after the
announcements: a step needs every rank in the process group, so a paste that kept rank 0's
line alone has only left the others' out (``attribute`` asks this only when no training is seen).

Which lines count is data: a signature with ``sets = { registers = "1" }`` names the rank it
announces (``global_rank``) and the world size (``world``); one with ``registered_all = "1"``
says every rank joined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from firstfault.vocab import Event

REGISTERS = "registers"
REGISTERED_ALL = "registered_all"


@dataclass(frozen=True)
class Registration:
    """A start-up where fewer ranks announced themselves than the world holds."""

    world: int
    announced: frozenset[int]

    @property
    def missing(self) -> list[int]:
        return sorted(set(range(self.world)) - self.announced)


def unregistered(events: Sequence[Event]) -> Registration | None:
    """The incomplete registration these events show, or None (complete, or nothing announced)."""
    world = 0
    announced: set[int] = set()
    for e in events:
        if e.fields.get(REGISTERED_ALL) == "1":
            return None
        if e.fields.get(REGISTERS) == "1":
            try:
                world = max(world, int(e.fields["world"]))
                announced.add(int(e.fields["global_rank"]))
            except (KeyError, ValueError):
                continue
    if world < 2 or len(announced) >= world:
        return None
    reg = Registration(world, frozenset(announced))
    return reg if _runs(reg.missing) <= MAX_MISSING_RUNS else None


MAX_MISSING_RUNS = 2  # whole nodes left out: one block of ranks, or two


def _runs(ranks: Sequence[int]) -> int:
    """How many runs of consecutive numbers ``ranks`` (sorted) makes."""
    return sum(1 for i, r in enumerate(ranks) if i == 0 or r != ranks[i - 1] + 1)
