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

import pytest

from firstfault.pipeline import analyze
from firstfault.vocab.errors import InputError

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


def test_mpiruns_notice_of_a_killed_rank_is_read_whatever_the_tool_is_called() -> None:
    """kubeflow/mpi-operator#90: Horovod's image wraps mpirun around "mpirun.real", and ORTE puts
    the tool's own name in front of its notice (help-orterun.txt: "%s noticed that process rank
    %lu ... exited on signal %d (%s)."). Rank 1 on worker-1, signal 9, later found to be the OOM
    killer. The notice was not read; mpirun's "Per user-direction, the job has been aborted" above
    it was taken for an unknown error of the start-up."""
    v = analyze(THREADS / "mpi-operator-90" / "log.txt")
    assert str(v.category) == "host_oom"
    assert v.culprit.ranks == [1]
    assert v.root_event is not None and v.root_event.signature == "openmpi.rank_exited_on_signal"


def test_mpiruns_per_user_direction_notice_is_a_tear_down_record() -> None:
    """ORTE prints "Primary job terminated normally, but 1 process returned / a non-zero exit code.
    Per user-direction, the job has been aborted." over two lines: a record of the tear-down, never
    an error of its own (help-errmgr-base.txt, normal-termination-but)."""
    from firstfault.match.registry import load_registry

    reg = load_registry()
    for line in (
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code.. Per user-direction, the job has been aborted.",
    ):
        sig = next(s for s in reg.signatures if s.id == "openmpi.aborted_on_nonzero")
        assert sig.pattern.search(line), line
        assert str(sig.role) == "teardown"


def test_a_check_that_reports_it_passed_is_no_error_line() -> None:
    """Azure's node health check, after the fix (azurehpc-health-checks fork): "GPU XID error check
    passed" carries an error word; it read as an unknown error of the start-up, flagging a healthy
    run. A line that also says something failed stays an error line."""
    from firstfault.match.unrecognised import is_error_line

    assert not is_error_line("SUCCESS:  nhc:  Health check passed:  check_gpu_xid:  GPU XID error check passed.")
    assert not is_error_line("PASSED tests/test_errors.py::test_error_path")
    assert is_error_line("ERROR: nhc: Health check failed: check_gpu_xid: GPU XID error check failed")
    assert is_error_line("2 tests passed, 1 failed: ConnectionError")
    # with no error line left, the health check's own log is no training job's: said so, not flagged
    with pytest.raises(InputError, match="does not look like the output of a training job"):
        analyze(THREADS / "azurehpc-health-checks-fork-nhc-pass-after-rdma-naming" / "log.txt")


def test_tensorflows_cloud_storage_giving_up_is_a_storage_failure() -> None:
    """google-research/text-to-text-transfer-transformer#280 (T5 11B, TPU v3-512): while saving a
    checkpoint to gs://, TSL's retrying file system gave up ("All 10 retry attempts failed. The
    last failure: ... HTTP response code 503"). It read as an unknown error of the start-up."""
    v = analyze(THREADS / "t5-280" / "log.txt")
    assert str(v.category) == "storage_io"
    assert v.root_event is not None and v.root_event.signature == "tensorflow.cloud_storage_retries_exhausted"


def test_a_fault_quoted_with_escaped_newlines_is_not_taken_by_the_advice_beside_it() -> None:
    """DLRover's job master logs a failed worker's torchelastic error record as JSON: "RuntimeError:
    CUDA error: uncorrectable NVLink error detected during the execution\\nCUDA kernel errors might be
    asynchronously reported ..." is one line. The advice's noise signature (priority 30) took it;
    the NVLink error (gpu_hardware) is what the line says. Noise keeps a line of its own, and one
    where a warning carries an error's words (a cuDNN UserWarning quoting its exception)."""
    from firstfault.match.registry import load_registry

    v = analyze(THREADS / "dlrover-nvlink-error-log-collection" / "log.txt")
    assert str(v.category) == "gpu_hardware"
    assert v.root_event is not None and v.root_event.signature == "cuda.nvlink_uncorrectable"
    reg = load_registry()
    advice = "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
    assert reg.match(advice, "app_log").id == "cuda.advice_async"  # type: ignore[union-attr]
    joined = "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution " + advice
    assert reg.match(joined, "app_log").id == "cuda.advice_async"  # type: ignore[union-attr]  # no escaped newline


def test_the_launch_command_is_a_job_mark_with_the_interpreters_flags() -> None:
    """ML Engineering's all_reduce_bench run: "$ python -u -m torch.distributed.run
    --nproc_per_node=8 all_reduce_bench.py" above its table of bandwidths. The launch command marks
    the output as a distributed job's; with "-u" between python and "-m" it was not read, and the
    healthy run was refused as no job's log."""
    v = analyze(THREADS / "ml-engineering-all-reduce-bench-h200-healthy" / "log.txt")
    assert str(v.category) == "none"
