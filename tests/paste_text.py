"""A pasted log as a test writes it: the text saved as one file, and firstfault's verdict on it.

Kept apart because the reading tests of pastes (symptoms, pastes, components' own words) all need
exactly this and nothing more.
"""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze
from firstfault.vocab import Verdict


def analyze_text(tmp_path: Path, text: str, name: str = "log.txt") -> Verdict:
    """The verdict on a paste of ``text`` saved as ``name``."""
    log = tmp_path / name
    log.write_text(text)
    return analyze(log)
