"""Readings pinned on public pastes of the corpus (``corpus/threads``), each read by a rule that
holds beyond the paste, from what the component that printed the lines does.

Pastes with no clock at all: the order of a process's lines is where they stand in the file. An
exit record (srun's "task 4: Exited with exit code 1", mpirun's "Process name: [[J,S],R]") is
written once the process has ended, after everything it printed; with no time on either line, an
error the exiting process could have printed, above its record, came first. Another rank's line
above it says nothing of the order.

A bare exception header ("pkg.SomeError:") gives way to its message below it, as CPython prints a
message that starts with a newline.

Watchdogs of one group that gave up at different collectives: a collective completes only once
every member joined it, so ranks that wait on a peer wait at one sequence number; ranks at
different ones did not issue the same calls.
"""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze

THREADS = Path(__file__).resolve().parent.parent / "corpus" / "threads"


def test_an_untimed_error_above_bare_exit_records_is_the_failure_not_the_first_exit() -> None:
    """EveryVoice#178: a CUDA OOM (no rank on its line), then srun's records of tasks 4, 0-1, 7, 6
    and 2 exiting with code 1, nothing timed. It read "configuration (first of the ranks to end)"
    on task 4's bare exit, the OOM a cascade of it."""
    v = analyze(THREADS / "EveryVoice-178" / "log.txt")
    assert str(v.category) == "gpu_oom"
    assert v.root_event is not None and v.root_event.signature == "cuda.oom"


def test_another_ranks_untimed_error_above_an_exit_record_does_not_go_before_it() -> None:
    """uniter#31 (Horovod under mpirun, 2 ranks): rank 1's "Horovod has been shut down" above
    mpirun's record that rank 0 exited first. Rank 1 printed it after rank 0 had failed; the
    verdict keeps rank 0 first."""
    v = analyze(THREADS / "uniter-31" / "log.txt")
    assert v.culprit.ranks[:1] == [0]


def test_two_watchdogs_at_different_collectives_read_as_a_mismatch_with_no_rank_named() -> None:
    """accelerate#3250 (FSDP, 2 ranks, after a checkpoint): rank 0 times out in
    _REDUCE_SCATTER_BASE #122, rank 1 in _ALLGATHER_BASE #126; torchrec#189 (uneven last epoch,
    8 ranks): ALLTOALL_BASE #4188 and #4190. Both read "hang" (torchrec's on rank 0, which printed
    nothing). Two sides say the ranks diverged, not which one is odd."""
    for name in ("accelerate-3250", "torchrec-189"):
        v = analyze(THREADS / name / "log.txt")
        assert str(v.category) == "collective_mismatch", name
        assert v.culprit.ranks == [], name


def test_an_exception_header_with_no_message_gives_way_to_the_message_below_it() -> None:
    """Accelerate's troubleshooting guide: DistributedOperationException's message starts with a
    newline, so CPython prints "accelerate.utils.operations.DistributedOperationException:" bare
    and the message ("Cannot apply desired operation due to shape mismatches ...") below it. The
    bare header, a generic exception before training, read "configuration"; the message says
    what failed: the two processes broadcast tensors of different shapes."""
    v = analyze(THREADS / "accelerate-troubleshooting-shape-mismatch" / "log.txt")
    assert str(v.category) == "collective_mismatch"
    assert v.root_event is not None and v.root_event.signature == "accelerate.operation_shape_mismatch"


def test_torchs_flight_recorder_report_names_the_ranks_that_never_joined() -> None:
    """PyTorch's tutorial on debugging hangs: fr_trace's report on a 2-rank job whose rank 1 sleeps
    before an all-reduce, "Not all ranks joining collective, sequence number: 4 ... missing
    ranks: {1}". It read "no failure found"; the report names the rank the other waited for."""
    v = analyze(THREADS / "pytorch-tutorials-debug-hangs-fr-cli" / "log.txt")
    assert str(v.category) == "hang" and v.culprit.ranks == [1]
