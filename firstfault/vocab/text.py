"""Shortening text for people: one rule for every stage that quotes a line.

Why here: a verdict's summary (reasoning) and every report quote log lines, and a line cut
mid-word reads as a different line; the vocabulary is what both layers may import.
"""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary with an ellipsis, never mid-word."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:—-") + "…"
