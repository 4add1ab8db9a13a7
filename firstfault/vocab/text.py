"""Shortening text for people: one rule for every stage that quotes a line.

Why here: a verdict's summary (reasoning) and every report quote log lines, and a line cut
mid-word reads as a different line; the vocabulary is what both layers may import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A terminal's colour and cursor codes ("\x1b[36m(RayTrainWorker pid=N)\x1b[0m ..."): Ray's log
# monitor, DeepSpeed's "[WARNING]" and NeMo's level tags print them even into a file, and a prefix
# or a pattern anchored at a line's start must not see them (ECMA-48 CSI: ESC [ params letter).
_ANSI_CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# A traceback's last line: an exception's (dotted) class, a colon or the end (CPython traceback.c).
# Matched against a stripped line: the parse stage reads it to tell a failure report naming a step
# from a step, the reasoning to tell a caught exception from a framework's or a host's report.
EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::|$)")


def no_ansi(text: str) -> str:
    """``text`` without terminal escape codes (unchanged, and no regex run, when it has none)."""
    return _ANSI_CSI.sub("", text) if "\x1b" in text else text


def rank_list(ranks: Sequence[int]) -> str:
    """Ranks for a reason's text: the first eight, and how many in all beyond that."""
    return ", ".join(map(str, ranks[:8])) + (f", ... ({len(ranks)} ranks)" if len(ranks) > 8 else "")


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary with an ellipsis, never mid-word."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:—-") + "…"
