"""Host names to SLURM's compact hostlist form (``node[01-03,07]``), the inverse of
:func:`firstfault.parse.slurm.expand_hostlist`.

Why here and not a call to ``scontrol show hostlist``: the operator output is printed where SLURM
may not be installed (a laptop reading a verdict), and the test checks this against the real
``scontrol`` instead. SLURM's rule for a range is kept: ``node[09-10]`` expands with the width of
its first number, so two names join a range only when the later one is written exactly as that
width would write it (``node9,node10`` -> ``node[9-10]``; ``node1,node01`` stay apart).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TAIL = re.compile(r"^(.*?)(\d+)$")


def _ranges(numbers: list[str]) -> list[str]:
    """Sorted digit strings of one prefix -> range terms (``01-03``, ``07``)."""
    terms: list[str] = []
    start = prev = numbers[0]
    for cur in numbers[1:]:
        if int(cur) == int(prev) + 1 and cur == f"{int(cur):0{len(start)}d}":
            prev = cur
            continue
        terms.append(start if start == prev else f"{start}-{prev}")
        start = prev = cur
    terms.append(start if start == prev else f"{start}-{prev}")
    return terms


def compress_hostlist(hosts: Iterable[str]) -> str:
    """``["node01", "node02", "node03", "node07"]`` -> ``"node[01-03,07]"``.

    Duplicates are dropped and names sorted (by prefix, then number); names without a trailing
    number are kept as they are. An empty input gives ``""``.
    """
    groups: dict[str, set[str]] = {}
    plain: set[str] = set()
    for h in hosts:
        h = h.strip()
        if not h:
            continue
        m = _TAIL.match(h)
        if m is None or any(c in h for c in "[],"):
            plain.add(h)
        else:
            groups.setdefault(m[1], set()).add(m[2])
    parts: list[tuple[str, str]] = [(h, h) for h in plain]
    for prefix, nums in groups.items():
        ordered = sorted(nums, key=lambda s: (int(s), len(s)))
        terms = _ranges(ordered)
        text = f"{prefix}{terms[0]}" if len(terms) == 1 and "-" not in terms[0] else f"{prefix}[{','.join(terms)}]"
        parts.append((prefix, text))
    return ",".join(text for _key, text in sorted(parts))
