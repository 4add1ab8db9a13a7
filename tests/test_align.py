"""Unit tests of the align stage (firstfault/align.py): folding copies, clocks, attempts."""

from __future__ import annotations

from stage_events import ev

from firstfault.align import (
    align,
    bound_inherited,
    console_attempt_starts,
    correct_clocks,
    estimate_offsets,
    fold_duplicates,
    split_attempts,
)
from firstfault.vocab import Role, TsQuality

T0 = 1_764_000_000.0


def test_copies_of_one_line_fold_and_the_per_rank_copy_wins() -> None:
    text = "RuntimeError: boom"
    console = ev(text, rank=1, ts=T0 + 0.2, source="launcher.log", line=40)
    per_rank = ev(text, rank=1, ts=None, source="logs/run/attempt_0/1/stderr.log", line=7)
    kept, folded = fold_duplicates([console, per_rank])
    assert folded == 1 and len(kept) == 1
    assert kept[0].source.endswith("stderr.log")  # it knows rank and attempt
    assert kept[0].ts == T0 + 0.2  # and borrows the console's time
    assert kept[0].fields["console_line"] == "launcher.log:40"


def test_the_same_line_far_apart_in_time_is_two_facts() -> None:
    a = ev("RuntimeError: boom", rank=1, ts=T0)
    b = ev("RuntimeError: boom", rank=1, ts=T0 + 3600)
    kept, folded = fold_duplicates([a, b])
    assert folded == 0 and len(kept) == 2


def _fanout(host: str, ranks: range, at: float) -> list:
    return [ev("Connection closed by peer", role=Role.CASCADE, rank=r, host=host, ts=at + 0.01 * r) for r in ranks]


def test_a_host_whose_peers_saw_the_failure_30s_late_is_corrected() -> None:
    events = _fanout("gpu-a", range(0, 4), T0) + _fanout("gpu-b", range(4, 8), T0 + 30)
    offsets = estimate_offsets(events, reference="gpu-a")
    assert [(o.host, round(o.seconds)) for o in offsets] == [("gpu-b", -30)]
    tl = align(events)
    offs, warnings = correct_clocks(tl.events, "gpu-a")
    assert offs and any("clock of host gpu-b corrected by -30.0 s" in w for w in warnings)
    assert max(e.ts for e in tl.events) - min(e.ts for e in tl.events) < 1.0


def test_a_second_wave_minutes_later_is_not_a_clock() -> None:
    events = _fanout("gpu-a", range(0, 4), T0) + _fanout("gpu-b", range(4, 8), T0 + 600)
    assert estimate_offsets(events, reference="gpu-a") == []


def test_one_host_has_nothing_to_compare() -> None:
    assert estimate_offsets(_fanout("gpu-a", range(0, 4), T0)) == []


def test_an_inherited_time_is_bounded_by_the_next_timed_line() -> None:
    src = "logs/run/attempt_0/0/stderr.log"
    first = ev("start", ts=T0, source=src, line=1)
    inherited = ev("Traceback", ts=T0, source=src, line=2, quality=TsQuality.INHERITED)
    after = ev("exit", ts=T0 + 42, source=src, line=3)
    last = ev("tail", ts=T0, source=src, line=4, quality=TsQuality.INHERITED)
    bound_inherited([first, inherited, after, last], end=T0 + 100)
    assert inherited.ts_hi == T0 + 42
    assert last.ts_hi == T0 + 100  # nothing timed below it: the job's end
    assert first.ts_hi is None


def test_restarts_keep_the_first_failed_attempt() -> None:
    a0 = ev("RuntimeError: first", rank=1, ts=T0 + 5)
    a1 = ev("RuntimeError: again", rank=2, ts=T0 + 65)
    now, later, first = split_attempts([a0, a1], {0: T0, 1: T0 + 60})
    assert first == 0 and now == [a0] and later == [a1]


def test_an_attempt_with_no_timed_line_still_ran_before_the_next() -> None:
    """Only attempt 1's files have a timed line: what the console says before it is attempt 0's."""
    killed = _failed(T0 + 5)
    a1 = ev("RuntimeError: Gloo connectFullMesh failed", rank=2, ts=T0 + 80, source="logs/r/attempt_1/2/stderr.log")
    a1.attempt = 1
    now, later, first = split_attempts([killed, a1], {1: T0 + 60})
    assert killed.attempt == 0 and first == 0
    assert now == [killed] and later == [a1]


def _failed(ts: float, source: str = "console.log"):  # type: ignore[no-untyped-def]
    return ev(
        "failed (exitcode: 1) local_rank: 1 (pid: 7) of binary: python",
        ts=ts,
        source=source,
        signature="torchelastic.worker_failed",
        role=Role.TEARDOWN,
    )


def test_a_consoles_attempts_end_at_each_failure_line_but_the_last() -> None:
    evs = [ev("x", ts=90.0, source="console.log"), _failed(100.0), _failed(200.0), _failed(300.0)]
    assert console_attempt_starts(evs) == {0: 90.0, 1: 100.001, 2: 200.001}


def test_one_failure_line_or_two_consoles_split_nothing() -> None:
    assert console_attempt_starts([_failed(100.0)]) == {}
    assert console_attempt_starts([_failed(100.0, "node0.log"), _failed(100.5, "node1.log")]) == {}
