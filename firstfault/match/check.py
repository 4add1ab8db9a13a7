"""Self-check of the registry: every signature is real text, wins on its own examples, and is
cheap on hostile lines.

Three promises keep signatures honest as the registry grows to hundreds of entries:

* **real wording**: every example is a line from a real run or a public source, it contains a
  literal (or the prefilter would never let it through) and its pattern matches it;
* **no silent shadowing**: on each of its examples the signature is the one the registry picks
  (a new, broader signature must not steal lines from an existing, more specific one; an
  example the winner lists too is a deliberate overlap);
* **bounded time**: a regex that backtracks badly turns one 64 KiB line into seconds of CPU.
  Each pattern is searched over long adversarial lines built from its own literals and examples;
  catastrophic patterns take seconds there, linear ones a few milliseconds, so a bound of
  ``WORST_CASE_S`` separates them by two orders of magnitude even on a loaded machine.
"""

from __future__ import annotations

import re
import time
from collections import Counter

from firstfault.match.registry import Registry, Signature, builtin_files, load_file
from firstfault.vocab.identity import strip_prefixes

PROBE_CHARS = 16 * 1024
WORST_CASE_S = 0.25
_FILLS = ("a", "1", " ", ":", "a ", "1.", "0x1 ", "a:", "[1]", "-", "/", "\\", "'", "(", ",", "=")


def adversarial_lines(sig: Signature, size: int = PROBE_CHARS) -> list[str]:
    """Long lines that make a backtracking pattern show itself."""
    out = []
    for ex in sig.examples:
        out.append((ex * (size // max(len(ex), 1) + 1))[:size])
        half = ex[: max(1, len(ex) // 2)]
        out.append((half * (size // len(half) + 1))[:size])
    for lit in sig.literals[:2]:
        for fill in _FILLS:
            out.append((lit + " " + fill * (size // len(fill)))[:size])
            out.append((fill * (size // len(fill)) + lit)[:size])
    return out


def worst_case_seconds(sig: Signature, size: int = PROBE_CHARS, stop_after: float = 2.0) -> float:
    """The longest single search of ``sig``'s pattern over its adversarial lines, in CPU seconds."""
    worst = 0.0
    for line in adversarial_lines(sig, size):
        # CPU time of this thread, not wall time: a loaded machine stretches the wall clock (a
        # 0.25 s bound was crossed under two CPU hogs), never the work a pattern costs
        t = time.thread_time()
        sig.pattern.search(line)
        worst = max(worst, time.thread_time() - t)
        if worst > stop_after:
            break
    return worst


def _kind(sig: Signature) -> str:
    return sig.applies_to[0] if sig.applies_to else "app_log"


def check_signature(reg: Registry, sig: Signature, timing: bool = True) -> list[str]:
    problems = []
    try:
        sig.pattern.compiled()  # built-in patterns compile on first use; here, every one is compiled
    except re.error as exc:
        return [f"{sig.id}: bad pattern: {exc}"]
    if not sig.examples:
        problems.append(f"{sig.id}: no example lines (add the real text it was written from)")
    if not sig.source.strip():
        problems.append(f"{sig.id}: no source (the file and version, or URL, its wording comes from)")
    for ex in sig.examples:
        line = strip_prefixes(ex)[0]
        if not any(lit in ex for lit in sig.literals):
            problems.append(f"{sig.id}: example contains none of the literals {sig.literals}: {ex[:80]}")
        if not sig.pattern.search(line):
            problems.append(f"{sig.id}: pattern does not match its example: {ex[:80]}")
            continue
        winner = reg.match(line, _kind(sig))
        if winner is not None and winner.id != sig.id and ex not in winner.examples:
            problems.append(f"{sig.id}: its example is taken by {winner.id} (priority {winner.priority}): {ex[:80]}")
    if timing:
        worst = worst_case_seconds(sig)
        if worst > WORST_CASE_S:
            problems.append(
                f"{sig.id}: pattern takes {worst:.2f} s on a {PROBE_CHARS // 1024} KiB hostile line "
                f"(catastrophic backtracking; bound {WORST_CASE_S} s)"
            )
    return problems


def check_registry(reg: Registry, timing: bool = True) -> list[str]:
    """Problems found in the whole registry (empty when it is sound)."""
    problems: list[str] = []
    ids = Counter(s.id for name, text in builtin_files() for s in load_file(name, text))
    problems += [f"{sid}: defined {n} times among the built-in files" for sid, n in ids.items() if n > 1]
    for sig in reg.signatures:
        problems.extend(check_signature(reg, sig, timing))
    return problems
