"""Text from a bundle, made safe for where a report puts it.

A log is input from whoever wrote it: it may hold terminal escape sequences (clear the screen,
set the title, write the clipboard with OSC 52, draw OSC 8 links), Rich markup, or Markdown and
HTML that a ticket system would render (a fence closed early, a remote image, an ``onerror``).
Every report passes bundle text through here: control characters become visible ``\\xNN``
escapes, and Markdown gets its punctuation escaped and code fences longer than any run of
backticks inside them.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
_MD_PUNCT = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def visible(text: str) -> str:
    """Control characters (ESC, BEL, C1 controls, ...) as visible ``\\xNN``; newlines and tabs kept."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text) if _CONTROL.search(text) else text


def visible_tree(obj: Any) -> Any:
    """:func:`visible` applied to every string of a verdict dict (keys and values)."""
    if isinstance(obj, str):
        return visible(obj)
    if isinstance(obj, dict):
        return {visible(k) if isinstance(k, str) else k: visible_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [visible_tree(x) for x in obj]
    return obj


def md_text(text: str) -> str:
    """Bundle text for Markdown prose or a table cell: one line, punctuation escaped, control visible."""
    return _MD_PUNCT.sub(r"\\\1", visible(text).replace("\n", " "))


def md_fence(lines: list[str]) -> list[str]:
    """A code block that no line inside can close: its fence is longer than any backtick run."""
    body = [visible(x) for x in lines]
    longest = max((len(m) for x in body for m in re.findall(r"`+", x)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *body, fence]
