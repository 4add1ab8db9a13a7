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


def test_a_rank_that_aborts_in_teardown_is_not_the_root_torchrun_records() -> None:
    """torch 2.13's gloo teardown aborts rank 0 ("terminate called without an active exception")
    after rank 1 raised; torchrun's "Root Cause (first observed failure)" is rank 0's SIGABRT. The
    rank that raised is the root, the abort its peer's exit."""
    v = analyze(FIX / "exception_peer_aborts_at_exit")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]
    assert v.root_event is not None and "RuntimeError" in v.root_event.text


def test_a_ranks_own_error_keeps_it_when_its_exit_is_a_teardown_abort() -> None:
    """Rank 3's loss goes NaN and it raises; its process then aborts in gloo's teardown, so
    torchrun records its exit as SIGABRT (CI, stop 44, saw this shape). Its own error is the root,
    not a crash."""
    v = analyze(FIX / "nan_rank_aborts_at_exit")
    assert str(v.category) == "numerical" and v.culprit.ranks[:1] == [3]
