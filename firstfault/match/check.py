"""Self-check of the registry: every example is real text that its signature must match."""

from __future__ import annotations

from firstfault.match.registry import Registry
from firstfault.parse.base import strip_prefixes


def check_registry(reg: Registry) -> list[str]:
    """Problems found: examples that do not match, or that no literal would let through."""
    problems = []
    for sig in reg.signatures:
        if not sig.examples:
            problems.append(f"{sig.id}: no example lines (add the real text it was written from)")
        for ex in sig.examples:
            if not any(lit in ex for lit in sig.literals):
                problems.append(f"{sig.id}: example contains none of the literals {sig.literals}: {ex[:80]}")
            if not sig.pattern.search(strip_prefixes(ex)[0]):
                problems.append(f"{sig.id}: pattern does not match its example: {ex[:80]}")
    return problems
