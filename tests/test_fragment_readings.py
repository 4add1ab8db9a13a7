"""A failure's fragments: what is left of a report is still a failure, never "no failure found".

A paste often holds only part of what a failed job printed: the backtrace under a watchdog's
exception without its message, the frames of a traceback cut before its exception line, a mismatch
report cut inside its first fingerprint, or the launcher's own stumble over a failure under way.
Each text is a real line from the public thread or real run named beside it; none is invented.
"""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze
from tests.paste_text import analyze_text


def test_a_watchdogs_backtrace_alone_is_not_a_job_that_ended_well(tmp_path: Path) -> None:
    """Lightning-AI/litgpt#1832: the paste is only the backtrace under a watchdog's exception, its
    message cut off above. c10::Error prints "Exception raised from checkTimeout" only as the
    watchdog takes the process down: a tear-down, so the verdict says the fault's own line is
    missing instead of "no failure found"."""
    v = analyze_text(
        tmp_path,
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 "
        "(most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7fe0c139c446 in "
        "/home/mengyan3/.local/lib/python3.9/site-packages/torch/lib/libc10.so)\n",
    )
    assert str(v.category) != "none"
    assert "torn down" in v.summary and "checkTimeout" in v.summary


# ACEsuit/mace#1215: the paste ends inside rank 0's traceback, in DDP's parameter check, before the
# exception's own line
_CUT_IN_DDP = (
    "[rank0]: Traceback (most recent call last):\n"
    '[rank0]:   File "/opt/local/python/mace/conda/lib/python3.11/site-packages/mace/cli/run_train.py", '
    "line 951, in run\n"
    "[rank0]:     distributed_model = DDP(model, device_ids=[local_rank])\n"
    "[rank0]:                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '[rank0]:   File "/home/Software/python/conda/torch/2.8.0/gpu/lib/python3.11/site-packages/torch/nn/parallel/'
    'distributed.py", line 845, in __init__\n'
    "[rank0]:     _verify_param_shape_across_processes(self.process_group, parameters)\n"
    '[rank0]:   File "/home/Software/python/conda/torch/2.8.0/gpu/lib/python3.11/site-packages/torch/distributed/'
    'utils.py", line 281, in _verify_param_shape_across_processes\n'
)


def test_a_paste_that_stops_inside_a_traceback_is_no_healthy_job(tmp_path: Path) -> None:
    """CPython prints the frames first and the exception's line last: frames with no line below
    them say an exception was raised whose message the log lacks. Not "no failure found"."""
    v = analyze_text(tmp_path, _CUT_IN_DDP)
    assert str(v.category) == "unknown"
    assert "stops inside its traceback" in v.summary and "log.txt:7" in v.summary


def test_a_headless_traceback_through_torch_distributed_is_a_jobs_log(tmp_path: Path) -> None:
    """Lightning-AI/pytorch-lightning#19106: two ranks' interleaved frames down to a broadcast, cut
    before the error. Frames in torch.distributed are a distributed job's, not a file to refuse."""
    v = analyze_text(
        tmp_path,
        '  File "/myenv/python3.10/site-packages/lightning_fabric/utilities/distributed.py", line 220, in _sync_ddp\n'
        "    broadcast(object_sizes_tensor, src=src, group=group)\n"
        '  File "/myenv/python3.10/site-packages/torch/distributed/c10d_logger.py", line 47, in wrapper\n'
        "    return func(*args, **kwargs)\n"
        '  File "/myenv/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 1906, in broadcast\n'
        "    torch.distributed.barrier(group=group)\n"
        "    work = default_pg.broadcast([tensor], opts)\n",
    )
    assert str(v.category) == "unknown" and "stops inside its traceback" in v.summary


def test_a_complete_traceback_or_a_faulthandler_dump_is_no_cut_traceback(tmp_path: Path) -> None:
    """The rule reads only a file that ends inside a traceback: one that ends in its exception's
    line keeps that line's reading, and a faulthandler dump ("most recent call first") is none."""
    v = analyze_text(tmp_path, _CUT_IN_DDP + "[rank0]: KeyError: 'lr'\n")
    assert "stops inside its traceback" not in v.summary
    dump = analyze_text(
        tmp_path,
        "Thread 0x00007f7e5e7fc700 (most recent call first):\n"
        '  File "/usr/lib/python3.10/threading.py", line 324 in wait\n',
        "dump.txt",
    )
    assert "stops inside its traceback" not in dump.summary


def test_a_mismatch_report_cut_inside_its_fingerprint_names_no_rank(tmp_path: Path) -> None:
    """ACEsuit/mace#1348: rank 0's DETAIL report, cut before "but Rank N is running". Every rank
    raises it naming itself first, so the printing rank is not shown to be the odd one."""
    v = analyze_text(
        tmp_path,
        "[rank0]: RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=633704, OpType=ALLGATHER, TensorShape=[1], TensorDtypes=Long, "
        "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default\n",
    )
    assert str(v.category) == "collective_mismatch"
    assert v.culprit.ranks == []
    assert any("cut inside the first rank's fingerprint" in r for r in v.reasons)


def test_torchrun_stumbling_over_a_half_written_reply_file_is_a_tear_down(tmp_path: Path) -> None:
    """torch's agent reads each failed worker's error.json as it records the failure; a worker torn
    down while writing it leaves it half-written, and the agent logs "Failed to parse reply file"
    and dies of the JSONDecodeError. That exception is the launcher's, raised by a failure already
    under way: a tear-down, never the job's fault."""
    text = (Path(__file__).parent / "fixtures" / "torchrun" / "reply_file_race.log").read_text()
    v = analyze_text(tmp_path, text)
    assert str(v.category) != "application_error"
    decode = [link for link in v.causal_chain if "JSONDecodeError" in link.event.text]
    assert decode and all(str(link.event.role) == "teardown" for link in decode)


def test_a_tail_whose_traceback_runs_through_backward_is_no_start_up_failure() -> None:
    """The last 60 lines of a real 4-rank torchrun job (tools/realjobs, rank 2 raised at step 6):
    rank 1's "Connection closed by peer" raised inside ``loss.backward()``, then torchrun's summary
    naming rank 2 (exit code 1). No step line is left, but a traceback through autograd's backward
    pass shows the job was training: rank 2's exit is its own error, not a start-up failure."""
    v = analyze(Path(__file__).parent / "fixtures" / "realjobs" / "tail_exception_r2")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [2]
    assert not any("before training" in r or "no line shows training" in r for r in v.reasons)


def test_a_backward_frame_is_training_and_a_start_up_traceback_is_not(tmp_path: Path) -> None:
    """The frame line is torch 2.13's (torch/_tensor.py's ``backward``); a traceback through
    ``init_process_group`` instead stays a start-up failure when nothing shows training."""
    mid_step = (
        "Traceback (most recent call last):\n"
        '  File "/work/tools/realjobs/train.py", line 412, in main\n'
        "    loss.backward()\n"
        '  File "/usr/lib/python3.11/site-packages/torch/_tensor.py", line 625, in backward\n'
        "    torch.autograd.backward(\n"
        "ValueError: the batch holds no labels\n"
    )
    at_start = mid_step.replace(
        '  File "/usr/lib/python3.11/site-packages/torch/_tensor.py", line 625, in backward\n'
        "    torch.autograd.backward(\n",
        "",
    ).replace("loss.backward()", "dist.init_process_group('gloo')")
    assert str(analyze_text(tmp_path, mid_step, "mid_step.log").category) == "application_error"
    assert str(analyze_text(tmp_path, at_start, "at_start.log").category) == "configuration"


def test_an_exit_status_that_says_only_failed_is_less_sure_than_a_kill() -> None:
    """Exit code 1 (CPython's status for an uncaught exception) or SIGABRT says a process failed,
    not why; a SIGKILL says it was killed. On excerpts of real consoles, verdicts resting on exit
    code 1 or SIGABRT alone were right about a third of the time at 0.8 (docs/accuracy.md)."""
    tail = analyze(Path(__file__).parent / "fixtures" / "realjobs" / "tail_exception_r2")
    kill = analyze(Path(__file__).parent / "fixtures" / "realjobs" / "s_sigkill_r3")
    said = "exit status says the process failed, not why"
    assert any(said in r for r in tail.reasons) and tail.confidence < 0.7
    assert not any(said in r for r in kill.reasons)


_REALJOBS = Path(__file__).parent / "fixtures" / "realjobs"


def test_bare_exits_as_a_peers_wait_ran_out_are_waiters_giving_up() -> None:
    """The last 60 lines of a real 4-rank torchrun job (tools/realjobs, rank 0 stalled at step 4):
    rank 2's gloo recv timed out after 15 s, ranks 1 and 3 exited with code 1 (their own timeouts
    cut off above), torchrun stopped ranks 0 and 2. Two bare exits at the second the wait ran out
    are not "a crash on every rank": the wait began 15 s earlier, and rank 0 is the rank that
    neither waited nor ended on its own."""
    v = analyze(_REALJOBS / "tail_hang_r0_print")
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [0]
    assert any("waiters giving up" in r for r in v.reasons)


def test_several_ranks_the_launcher_stopped_leave_the_stalled_one_unnamed() -> None:
    """The same cut of a job whose rank 2 stalled: rank 3 timed out, rank 0 exited with code 1,
    torchrun stopped ranks 1 and 2. Which of the two stopped ranks stalled is not in the log: a
    hang, and no rank named rather than the lower one."""
    v = analyze(_REALJOBS / "tail_hang_r2")
    assert str(v.category) == "hang" and v.culprit.ranks == []
    assert any("rank(s) 1, 2 neither timed out" in r for r in v.reasons)


def test_an_exit_a_whole_timeout_before_the_wait_ran_out_keeps_its_reading(tmp_path: Path) -> None:
    """An exit at the start of a peer's wait may be what the peer waited for (under srun without
    --kill-on-bad-exit a crash leaves its peers to time out one timeout later): the same lines with
    torchrun's records dated 14 s before the timeout keep the exit's reading."""
    text = (_REALJOBS / "tail_hang_r0_print" / "console.log").read_text()
    assert "time      : 2026-12-07_05:43:15" in text
    early = text.replace("time      : 2026-12-07_05:43:15", "time      : 2026-12-07_05:43:01")
    early = early.replace("E1207 05:43:15.395000", "E1207 05:43:01.395000")
    v = analyze_text(tmp_path, early, "console.log")
    assert str(v.category) != "hang"
    assert not any("waiters giving up" in r for r in v.reasons)


def test_an_exception_torchs_excepthook_wrote_is_never_one_a_trainer_caught() -> None:
    """80 lines from the first error of a real torchrun job (tools/realjobs set 6): ranks 2 and 3
    raise in FSDP2's mesh set-up while ranks 0 and 1 train on, and the paste stops before torchrun's
    records. The "[rank2]: " before every line of the report is torch's ``_distributed_excepthook``,
    which CPython calls only for an exception that ends the program: the training lines after it
    are the other ranks', and the job did not go on from it."""
    v = analyze(_REALJOBS / "from_error_mesh_too_small")
    assert str(v.category) != "none"
    assert v.root_event is not None and "IndexError" in v.root_event.text
    assert not any("a trainer caught" in w for w in v.warnings)


def test_exit_code_1_on_every_rank_is_no_shared_cause() -> None:
    """The last 60 lines of a real 6-rank torchrun job whose rank 3 stalled: only torchrun's summary
    is left, five ranks with exit code 1 (their gloo timeouts cut off above) and rank 3 stopped by
    SIGTERM. Exit code 1 is CPython's for any uncaught exception: five of them say five ranks
    failed, not that one cause failed them all (a crash on every rank, 0.90, was read before). A
    signal every rank died of (SIGSEGV) still is one (``configuration._common_exit``)."""
    v = analyze(_REALJOBS / "tail_summary_only_6r")
    assert str(v.category) != "process_crash"
    assert not any("failed the same way" in r for r in v.reasons)
    assert v.confidence <= 0.3
    assert any("runner-up only 0 ms later" in r for r in v.reasons)


def test_a_paste_of_the_launchers_records_alone_is_no_start_up_failure() -> None:
    """The last 60 lines of a real 6-rank torchrun job whose rank 3 raised at step 6: only torchrun's
    summary is left (rank 3's "Root Cause" record, exit code 1; the rest stopped by SIGTERM). No line
    shows training, but no line shows anything the ranks did: the start-up reading rested on that
    absence and named no rank ("configuration", 0.40). The records place the failure nowhere, so
    the rank torchrun saw end first keeps the name, and its bare exit code costs confidence."""
    v = analyze(_REALJOBS / "tail_summary_only_exc_r3_6r")
    assert str(v.category) == "application_error"
    assert list(v.culprit.ranks) == [3]
    assert not any("no line shows training" in r for r in v.reasons)
    assert v.confidence <= 0.6


def test_torchruns_signal_exception_is_the_stop_from_outside() -> None:
    """The last 60 lines of a real torchrun job stopped by SIGTERM at step 590 of 100000 (a
    preemption): torchrun's "Received 15 death signal" warning is cut off above, and its traceback
    ends "SignalException: Process 11669 got signal: 15", which _terminate_process_handler raises
    for the same stop. It was a tear-down line, and the verdict said errors were found but none
    could be placed."""
    v = analyze(_REALJOBS / "tail_preempted")
    assert str(v.category) == "scheduler"
    assert v.root_event is not None and "got signal: 15" in v.root_event.text


def test_each_ranks_steps_are_found_above_another_ranks_last_block() -> None:
    """The last 60 lines of a real healthy 3-rank torchrun job: ranks 1 and 2 each catch a
    FileNotFoundError of an index at step 3 and train on to 20/20. torchrun passes each worker's
    output on in blocks, so the console ends with rank 1's block; the read back for steps after an
    error stopped once the ranks seen so far (rank 1) had theirs, and rank 2's caught error, with
    its own steps 4 to 20 above rank 1's block, was read as the failure (configuration, 0.90)."""
    v = analyze(_REALJOBS / "tail_healthy_caught_io_3r")
    assert str(v.category) == "none"
    assert any("a trainer caught" in w for w in v.warnings)


def test_a_traceback_through_ray_trains_report_shows_training_under_way() -> None:
    """The last 60 lines of a real 3-worker Ray Train job whose rank 2 called sys.exit(3) after step
    6: the controller's "[Rank 2 Error Snippet]" and a peer's ActorDiedError raised inside
    ``ray.train.report`` (ray/train/v2/api/train_fn_utils.py), with no step line left. A training
    function reports a step's metrics there, so training was under way: no start-up failure
    ("configuration, only rank 2 in the log" was read), rank 2's own exit."""
    v = analyze(_REALJOBS / "tail_ray_exit_r2_3w")
    assert str(v.category) == "application_error"
    assert list(v.culprit.ranks) == [2]
    assert not any("no line shows training" in r for r in v.reasons)


def test_a_peer_that_closed_its_connection_is_no_hang() -> None:
    """The last 60 lines of a real 4-rank job under PyTorch Lightning's DDP launcher whose rank 2
    raised at step 6: only rank 0's traceback is left, ending in gloo's "Connection closed by peer".
    The peer's process left first (it exited, crashed or was killed): nothing waited, so it is no
    hang ("every rank that printed timed out", 0.65, was read), and its cause is not in the log."""
    v = analyze(_REALJOBS / "tail_pl_peer_closed_r2")
    assert str(v.category) == "unknown"
    assert v.culprit.ranks == []
    assert any("closed the connection" in r for r in v.reasons)
    assert not any("failure of the start-up" in r for r in v.reasons)


def test_a_process_aborting_at_exit_after_training_ended_is_no_failure() -> None:
    """The last 60 lines of a real 4-rank PyTorch Lightning job (5000 steps; exit status 0): every
    rank's "step 5000/5000", Lightning's "`Trainer.fit` stopped: `max_steps=5000` reached.", then
    libstdc++'s "terminate called without an active exception" (a process exiting with a thread
    still running). It read "process crash" at 0.90: training had reached its end, and the abort is
    the shutdown's, named in a warning."""
    v = analyze(_REALJOBS / "tail_pl_healthy_terminate_at_exit")
    assert str(v.category) == "none"
    assert any("terminate called without an active exception" in w for w in v.warnings)


def test_a_witness_at_the_edge_of_the_ranks_shown_doubts_the_wrap() -> None:
    """The last 60 lines of node 0's console of a real two-node torchrun job (ranks 0-1 here, 2-3 on
    node 1; rank 2 sent a larger tensor): rank 1's gloo aborts on the odd buffer. With only ranks 0
    and 1 in the log, its ring neighbour, (1 + 1) % 2, is rank 0, read at 0.90; were the world
    larger (it was 4), it is rank 2, which no line shows. The verdict keeps the reading but says the
    world size is not in the log and costs it confidence."""
    v = analyze(_REALJOBS / "tail_node0_size_mismatch_r2")
    assert str(v.category) == "collective_mismatch"
    assert any("the world size is not in the log: were it larger than 2" in r for r in v.reasons)
    assert v.confidence <= 0.75


def test_a_store_host_waiting_for_its_clients_names_the_rank_that_never_joined() -> None:
    """The last 60 lines of a real SLURM job's slurm-N.out (4 tasks on two nodes; rank 1 died at
    start-up on a missing file, its lines cut off above): rank 0's TCPStore "Timed out after 16
    seconds waiting for clients. 3/4 clients joined.", ranks 2 and 3 timing out in
    init_process_group. Rank 0 only waited (0.90 named it): the one rank of the four with no line
    of its own is the client that never joined."""
    v = analyze(_REALJOBS / "tail_store_clients_r1")
    assert list(v.culprit.ranks) == [1]
    assert any("hosts the store and waited for its clients" in r for r in v.reasons)


def test_an_error_read_in_a_bare_exits_second_goes_before_it() -> None:
    """The last 60 lines of a real torchrun console (`make_set.py --set 2`'s b_divisible_4r, 4
    ranks): rank 2's ValueError opens the paste, untimed above the tear-down's first clock, and
    torchrun's summary records ranks 0, 2 and 3 exiting with code 1 in the same second, no
    traceback of their own in the paste. Nothing but the midpoint of that second ordered rank 0's
    bare exit before the error (read "configuration on ranks 0, 2"): the error read in that second
    says why, the exit only that it happened."""
    v = analyze(_REALJOBS / "tail_divisible_4r")
    assert str(v.category) == "configuration" and list(v.culprit.ranks) == []
    assert v.root_event is not None and "is not divisible by" in v.root_event.text
    assert any("runner-up at the same moment (no clock orders the two)" in r for r in v.reasons)


def test_a_time_limit_after_the_ranks_timed_out_waiting_ended_a_hang() -> None:
    """80 lines of a real slurm-N.out from its first error (SLURM set 4, srun, `--time=1`): ranks 0,
    2 and 3 time out in the all-reduce and exit, then slurmstepd cancels the step at its time limit
    and srun reports task 1 Terminated. No step line is left to place the stall: the timeouts above
    the limit do. It read "scheduler on the whole job" at 0.95."""
    v = analyze(_REALJOBS / "cut_timelimit_hang_r1")
    assert str(v.category) == "hang" and list(v.culprit.ranks)[:1] == [1]
    assert any("timed out waiting in a collective before the time limit" in r for r in v.reasons)
