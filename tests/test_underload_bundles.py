"""Bundles whose shape a loaded machine decided (tests/fixtures/underload/README.md)."""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze

FIX = Path(__file__).parent / "fixtures" / "underload"


def test_witness_holds_when_only_the_sender_dumped() -> None:
    """The flight recorder blames the ranks with no dump; the receiver's size check names the sender."""
    v = analyze(FIX / "desync_one_dump")
    assert v.flight_recorder is not None and v.flight_recorder.missing_dumps == [0, 2, 3]
    assert str(v.category) == "collective_mismatch"
    assert v.culprit.ranks[0] == 1
    assert any("is a witness" in r for r in v.reasons)
    # the flight recorder named rank 0 (no dump) first: that is no agreement with rank 1
    assert not any("names the same rank first" in r for r in v.reasons)
