"""What a launcher's stopping of its surviving processes says: they were alive when the failure came.

Why: torchrun ("Sending process N closing signal SIGTERM") and ``torch.multiprocessing.spawn``
("Terminating process N via signal SIGTERM") stop every process of theirs still running once one
fails. Those processes were alive, not hung in a rank-0-only collective and not gone first; and
each is a rank of the job, so their count bounds the world size from below where nothing names it.
"""

from __future__ import annotations

from firstfault.reason.correlate import TEARDOWN_SIGNALS, Correlation
from firstfault.vocab import Event, Layer, Role


def _launcher_stops(corr: Correlation) -> list[Event]:
    """The launcher's lines stopping surviving processes (torchrun's "Sending process N closing
    signal SIGTERM", torch.multiprocessing.spawn's "Terminating process N via signal SIGTERM")."""
    return [
        e
        for evs in corr.host_events.values()
        for e in evs
        if e.role == Role.TEARDOWN
        and e.layer == Layer.LAUNCHER
        and e.fields.get("pid")
        and e.fields.get("signame") in TEARDOWN_SIGNALS  # not a failed process's own signal
    ]


def survivors_stopped(corr: Correlation) -> int:
    """How many other processes the launcher stopped in one attempt (the most of any): processes
    alive when the failure came. A restarted job's attempts stop new processes each time."""
    pids: dict[int | None, set[str]] = {}
    for e in _launcher_stops(corr):
        pids.setdefault(e.attempt, set()).add(e.fields["pid"])
    return max(map(len, pids.values()), default=0)


def stopped_how(corr: Correlation) -> str:
    """The launcher's first such line, as evidence."""
    first = min(_launcher_stops(corr), key=lambda e: (e.source, e.line))
    return f"{first.source}:{first.line}: {first.text.strip()[:120]}"
