"""Unit tests of parse/hooks.py and of what makes a file a job's log (parse/run.py)."""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze
from firstfault.vocab import Category


def test_mpirun_signal_death_is_an_exit_record_like_torchruns(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(
        "[compute-0-2:4257] *** Process received signal ***\n"
        "[compute-0-2:4257] Signal: Segmentation fault (11)\n"
        "[compute-0-2:4257] Signal code: Address not mapped (1)\n"
        "--------------------------------------------------------------------------\n"
        "mpirun noticed that process rank 14 with PID 4257 on node compute-0-2.local exited on signal 11 "
        "(Segmentation fault).\n"
    )
    v = analyze(log)
    exits = [lk.event for lk in v.causal_chain if lk.event.signature == "openmpi.rank_exited_on_signal"]
    assert exits and exits[0].rank == 14
    assert (exits[0].fields["exitcode"], exits[0].fields["signame"]) == ("-11", "SIGSEGV")
    assert v.category == Category.PROCESS_CRASH


def test_a_paste_of_nccl_lines_is_a_job_log_not_refused(tmp_path: Path) -> None:
    """NCCL INFO lines name no fault, but they are what a job printed: an answer, not 'not a job log'."""
    log = tmp_path / "nccl.txt"
    log.write_text(
        "rtptest1621:405884:407462 [0] NCCL INFO NCCL_IB_FIFO_TC set by environment to 224.\n"
        "rtptest1620:935572:937467 [0] NCCL INFO RAS client listening socket at ::1<28028>\n"
        "[rtptest1621:405884] *** Process received signal ***\n"
    )
    v = analyze(log)
    assert v.category == Category.PROCESS_CRASH


def test_a_missing_launcher_is_configuration(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(
        "08/20/2024 19:04:44 - INFO - llamafactory.cli - Initializing distributed tasks at: 10.0.0.1:2951\n"
        "/bin/sh: 1: torchrun: not found\n"
    )
    v = analyze(log)
    assert v.category == Category.CONFIGURATION and v.root_event is not None
    assert v.root_event.fields["command"] == "torchrun"
