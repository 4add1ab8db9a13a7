"""The verdict as JSON, streamed: a 16,384-rank chain has hundreds of thousands of links.

Building every link's dict and then one 90 MB string doubles the memory of the whole analysis
and costs seconds; here the links are encoded one at a time into the output. The result is
byte-for-byte what ``json.dumps(verdict.to_dict())`` gives (indented for a chain people can
read, compact past ``INDENT_MAX_LINKS``).
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from firstfault.vocab import Role, Verdict

INDENT_MAX_LINKS = 20_000
_HOLE = "\u0000causal_chain\u0000"


def write_json(verdict: Verdict, out: TextIO) -> None:
    big = len(verdict.causal_chain) > INDENT_MAX_LINKS
    head = verdict.to_dict(chain=False)
    head["causal_chain"] = _HOLE
    indent = None if big else 2
    seps = (",", ":") if big else (",", ": ")
    text = json.dumps(head, indent=indent, separators=seps)
    before, after = text.split(json.dumps(_HOLE), 1)
    out.write(before)
    if not verdict.causal_chain:
        out.write("[]")
    elif big:
        out.write("[")
        for i, link in enumerate(verdict.causal_chain):
            if i:
                out.write(",")
            out.write(json.dumps(link.to_dict(), separators=seps))
        out.write("]")
    else:
        out.write(_indented_list(verdict, 2))
    out.write(after + "\n")


def _indented_list(verdict: Verdict, indent: int) -> str:
    """The chain as ``json.dumps(..., indent=2)`` prints it one level down (small chains only)."""
    text = json.dumps([link.to_dict() for link in verdict.causal_chain], indent=indent)
    return text.replace("\n", "\n" + " " * indent)


def terminal_dict(verdict: Verdict, keep: int = 200) -> dict[str, Any]:
    """What the terminal report reads: every field but only the links it can show (the roots and
    the earliest others), with the role counts and total of the whole chain."""
    d = verdict.to_dict(chain=False)
    chain = verdict.causal_chain
    roots = [c for c in chain if c.role == Role.ROOT]
    rest = sorted((c for c in chain if c.role != Role.ROOT), key=lambda c: c.event.ts or 0.0)[:keep]
    d["causal_chain"] = [c.to_dict() for c in roots[:keep] + rest]
    counts: dict[str, int] = {}
    for c in chain:
        counts[str(c.role)] = counts.get(str(c.role), 0) + 1
    d["causal_chain_roles"] = counts
    d["causal_chain_total"] = len(chain)
    return d
