"""The causal chain: every error event's role and the event that explains it.

The root, any independent second roots, then each other error: a cascade of the root (a peer's
timeout, a closed connection, a later error of the culprit itself), a tear-down by the launcher
or scheduler, or, when it came before the root and nothing explains it, an open question. The
flight recorder's findings and the events of restart attempts join the chain with their rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from firstfault.reason.correlate import Candidate, Correlation, exit_signal, is_exit_record
from firstfault.vocab import ChainLink, Event, Role, Severity


def chain(corr: Correlation, win: Candidate | None, seconds: list[Candidate]) -> tuple[list[ChainLink], float]:
    links: list[ChainLink] = []
    root_ev = win.event if win else None
    root_id = root_ev.id if root_ev else None
    root_ts = win.ts if win else None
    second_ids = {c.event.id for c in seconds if c.event is not None}
    support_ids = {e.id for e in win.supporting} if win else set()
    explained = 0
    for e in corr.errors:
        role = e.role
        by: int | None = None
        if root_ev is not None and e.id == root_id:
            role, rule = Role.ROOT, "earliest independent fault"
        elif e.id in second_ids:
            role, rule = Role.ROOT, "independent fault on another rank (second root)"
        elif win is None:
            rule = "no root found"
        elif root_ts is not None and e.ts is not None and e.ts < root_ts - 1.0 and e.id not in support_ids:
            rule = "happened before the root; not explained by it"
        else:
            by = root_id
            if e.id in support_ids:
                role, rule = Role.CASCADE, "explained by a lower-layer fault on the same host"
            elif e.role == Role.TEARDOWN or (is_exit_record(e) and exit_signal(e) in ("SIGTERM", "SIGINT")):
                role, rule = Role.TEARDOWN, "launcher or scheduler tear-down after the first failure"
            elif win.rank is not None and e.rank == win.rank:
                role, rule = Role.CASCADE, "later error on the culprit rank itself"
            elif e.role == Role.CASCADE:
                rule = "peer of the culprit failing in a collective or connection"
            else:
                role, rule = Role.CASCADE, "error on a rank that was already a victim"
        if e.id == root_id or e.id in second_ids or by is not None:
            explained += 1
        links.append(ChainLink(e, role, by, rule))
    total = len(corr.errors)
    frac = explained / total if total else 1.0
    if win is not None and root_ev is None and total:
        # A silent culprit explains its peers' timeouts even though it has no event of its own.
        frac = sum(1 for link in links if link.rule != "happened before the root; not explained by it") / total
    return links, frac


def fr_links(fr_events: Sequence[Event], win: Candidate, culprits: Sequence[int]) -> list[ChainLink]:
    """The flight recorder's evidence in the chain: it confirms the culprit(s) or names others."""
    out = []
    root = win.event
    for e in fr_events:
        if root is not None and e.id == root.id:
            continue  # already the root of the chain
        if e.rank in culprits:
            rule = "flight recorder confirms this culprit"
            by = root.id if root is not None else None
            out.append(ChainLink(e, Role.ROOT if by is None else Role.CASCADE, by, rule))
        else:
            out.append(ChainLink(e, Role.ROOT, None, "flight recorder names another culprit rank"))
    return out


def later_links(later: Sequence[Event], win: Candidate) -> list[ChainLink]:
    """Events of restart attempts: the restart itself was caused by the root."""
    out = []
    root = win.event
    for e in later:
        if e.role == Role.NOISE or e.severity not in (Severity.ERROR, Severity.WARNING):
            continue
        if root is not None and e.rank == root.rank and e.signature == root.signature:
            rule = f"the same failure recurred in restart attempt {e.attempt}"
        else:
            rule = f"in restart attempt {e.attempt}, after the root fault"
        role = Role.TEARDOWN if e.role == Role.TEARDOWN else Role.CASCADE
        out.append(ChainLink(e, role, root.id if root else None, rule))
    return out


def recurrences(corr: Correlation, win: Candidate, later: Sequence[Event] = ()) -> list[int]:
    if win.event is None or win.event.attempt is None:
        return []
    out = set()
    for e in list(corr.errors) + list(later):
        if e.rank == win.rank and e.signature == win.event.signature and e.attempt not in (None, win.event.attempt):
            out.add(e.attempt)
    return sorted(a for a in out if a is not None)


def restart_failed_otherwise(later: Sequence[Event], recurred: Sequence[int]) -> str | None:
    """What a restart that failed in other words said first, when the root did not recur.

    Why: a restart that fails again the same way says the fault is deterministic; one that fails
    differently (a process group that could not form again, a port still held) is a second fault
    the user must see, not one more symptom of the first."""
    errs = [e for e in later if e.role in (Role.ROOT, Role.CASCADE) and e.severity == Severity.ERROR]
    if recurred or not errs:
        return None
    first = min(errs, key=lambda e: (e.attempt or 0, e.ts if e.ts is not None else float("inf"), e.line))
    where = f"rank {first.rank}" if first.rank is not None else f"{first.source}:{first.line}"
    return (
        f"torchrun restarted the job, and attempt {first.attempt} failed too, in other words ({where}: "
        f"{first.text.strip()[:200]}): a second fault of its own, not this one recurring"
    )
