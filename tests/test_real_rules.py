"""Each reasoning rule of issue 11, pinned by a real bundle (tests/fixtures/realjobs/README.md).

These bundles come from real torchrun and SLURM jobs of ``tools/realjobs`` (a workload written apart
from the simulator), so the rules are checked against output firstfault was not built from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.pipeline import analyze

FIX = Path(__file__).parent / "fixtures" / "realjobs"


def _v(name: str):  # type: ignore[no-untyped-def]
    return analyze(FIX / name)


@pytest.mark.parametrize(("case", "sender", "witness"), [("size_mismatch_r1", 1, 0), ("size_mismatch_r3", 3, 2)])
def test_receiver_of_odd_buffer_is_a_witness(case: str, sender: int, witness: int) -> None:
    v = _v(case)
    assert str(v.category) == "collective_mismatch"
    assert v.culprit.ranks[:2] == [sender, witness]
    assert any("witness" in r for r in v.reasons)


def test_victims_name_the_rank_they_waited_for() -> None:
    v = _v("init_late_r2")
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [2]
    assert any("name rank 2 as the rank they waited for" in r for r in v.reasons)


def test_group_local_ranks_are_mapped_to_global() -> None:
    v = _v("detail_mismatch_r3")
    assert str(v.category) == "collective_mismatch"
    assert v.culprit.ranks[0] == 3  # "Rank 1" of group [2, 3]
    assert any("group rank 1 = global rank 3" in r for r in v.reasons)


@pytest.mark.parametrize("case", ["missing_file_all", "import_error"])
def test_every_rank_failing_the_same_way_before_training_is_configuration(case: str) -> None:
    v = _v(case)
    assert str(v.category) == "configuration"
    assert v.culprit.ranks == []
    assert "every rank" in v.summary
    assert any("before training started" in r for r in v.reasons)


def test_rankless_traceback_belongs_to_the_only_failed_rank() -> None:
    # torchrun stopped the other ranks first; the failure names rank 1's own input ("shard-00001"),
    # so it is rank 1's, not every rank's set-up (refine._names_rank)
    v = _v("missing_file_r1")
    assert str(v.category) == "configuration" and v.culprit.ranks[:1] == [1]
    assert v.root_event is not None and "No such file or directory" in v.root_event.text


def test_every_rank_killed_by_the_same_signal_names_no_rank() -> None:
    v = _v("detail_ddp_segv_all")
    assert str(v.category) == "process_crash" and v.culprit.ranks == []


def test_healthy_run_with_warnings_is_none() -> None:
    v = _v("healthy_warnings")
    assert str(v.category) == "none" and v.culprit.ranks == []


def test_disk_full_during_save_is_storage() -> None:
    v = _v("diskfull_r0")
    assert str(v.category) == "storage_io" and v.culprit.ranks[:1] == [0]


def test_silent_sigkill_precedes_the_peers_errors() -> None:
    v = _v("s_sigkill_r3")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [3]  # no kernel log: a suspected OOM kill
    assert any("SIGKILL" in r and "no kernel log to confirm" in r for r in v.reasons)


def test_stall_before_time_limit_is_a_hang_without_a_made_up_culprit() -> None:
    v = _v("s_hang_timelimit_r1")
    assert str(v.category) == "hang"
    assert v.culprit.ranks == []  # every rank stopped at the same step; no stack dump says which hung
    assert any("before the time limit" in r for r in v.reasons)


def test_scheduler_memory_limit_before_training_is_configuration() -> None:
    v = _v("s_memlimit_start")
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert "exceeded memory limit" in v.summary


def test_user_cancel_names_no_rank() -> None:
    v = _v("s_scancel")
    assert str(v.category) == "scheduler" and v.culprit.ranks == [] and str(v.action) == "none"


def _with_dmesg(tmp_path: Path, when: str) -> Path:
    """s_sigkill_r3 with node02's kernel log holding the Xid 79 of tests/fixtures/scenarios (real
    wording, NVIDIA/akash#209), either at its own 2024 date or moved to the moment rank 3 died."""
    import shutil

    b = tmp_path / "bundle"
    shutil.copytree(FIX / "s_sigkill_r3", b)
    text = (Path(__file__).parent / "fixtures" / "scenarios" / "xid79_akash209.dmesg").read_text()
    if when == "in_window":
        text = text.replace("Fri Apr  5 21:29:39 2024", "Fri Dec  4 12:16:27 2026")
    (b / "host-node02").mkdir(exist_ok=True)
    (b / "host-node02" / "dmesg.log").write_text(text)
    return b


def test_stale_host_evidence_is_context_not_the_root(tmp_path: Path) -> None:
    v = analyze(_with_dmesg(tmp_path, "stale"))
    assert str(v.category) == "process_crash" and v.culprit.ranks[:1] == [3]
    assert any("fallen off the bus" in e.text for e in v.context)


def test_host_fault_inside_the_window_explains_the_rank(tmp_path: Path) -> None:
    v = analyze(_with_dmesg(tmp_path, "in_window"))
    assert str(v.category) == "gpu_hardware" and v.culprit.ranks[:1] == [3] and v.culprit.hosts[:1] == ["node02"]


# Ray Train (tools/realjobs/make_ray_set.py): the driver's console of a real TorchTrainer run on a
# local Ray cluster, with Ray's terminal colour codes as the redirected file holds them.


def test_ray_error_snippet_names_the_rank() -> None:
    v = _v("ray_exception_r2")  # "[Rank 2 Error Snippet]:" over the controller's copy of the KeyError
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [2]
    assert v.root_event is not None and "KeyError: 6" in v.root_event.text


def test_ray_worker_pid_is_placed_by_the_worker_table() -> None:
    v = _v("ray_segfault_r2")  # "(RayTrainWorker pid=5304)", "- (ip=..., pid=5304) world_rank=2, ..."
    assert str(v.category) == "process_crash" and v.culprit.ranks[:1] == [2]


def test_ray_worker_gone_without_a_word_is_read_as_a_bare_sigkill() -> None:
    # the raylet's "A worker died or was killed ... connection error code 2. End of file" and no
    # word from the worker itself: a suspected OOM kill, as a bare SIGKILL under torchrun is
    v = _v("ray_sigkill_r1")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [1]
    assert any("killed without a word" in r for r in v.reasons)


def test_ray_worker_that_said_it_crashed_is_a_crash_not_a_silent_kill() -> None:
    # the same raylet report, but the worker's faulthandler dump follows it in the console: the
    # report gives way to the worker's own words, and the controller's "The actor died
    # unexpectedly" (a report of that death, timed by a neighbour line) does not make it a victim
    v = _v("ray_segfault_r2")
    assert str(v.category) == "process_crash" and v.culprit.ranks[:1] == [2]
    assert v.root_event is not None and "Segmentation fault" in v.root_event.text


def test_ray_death_report_printed_first_gives_way_to_the_workers_own_error() -> None:
    # rank 3 all-reduces a bigger buffer; the raylet's report of rank 2's death reaches the driver's
    # console before rank 2's own gloo abort: the abort is the root, and names its ring sender
    v = _v("ray_size_mismatch_report_r3")
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks[:1] == [3]


def test_ray_barrier_report_names_the_rank_the_others_wait_for() -> None:
    # rank 1 sleeps after step 5; the others wait in Ray's ray.train.report barrier, where no torch
    # timeout fires; the synchronisation actor's warning names rank 1, then the driver is killed
    v = _v("ray_hang_r1")
    assert str(v.category) == "hang" and v.culprit.ranks == [1]
    assert str(v.action) == "restart"


def test_ray_system_exit_in_a_worker_is_its_failure() -> None:
    v = _v("ray_exit_r1")  # the worker thread's traceback ends "SystemExit: 3"
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]


def test_ray_healthy_run_with_its_state_api_warnings_is_not_flagged() -> None:
    v = _v("ray_healthy_4w")  # PlacementGroupCleaner's "Failed to query ... Continuing to monitor." throughout
    assert str(v.category) == "none"


def test_an_error_above_a_long_consoles_first_steps_was_gone_on_from() -> None:
    """ray.get timed out twice at start-up and Ray retried; the steps came after, far above the
    console's tail. The failure is the gloo size mismatch at step 5 (rank 3 sent the odd buffer)."""
    v = _v("ray_size_mismatch_r3")
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks[:1] == [3]
    assert any("went on" in w for w in v.warnings)


def test_the_rank_its_peers_lost_owns_the_rankless_error_before_them() -> None:
    """Lightning's launcher, a plain logging format: rank 1 logs an ERROR and calls sys.exit(3);
    ranks 0, 2 and 3 then lose their connections to it. No line names rank 1."""
    v = _v("pl_exit_r1")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]
    assert v.root_event is not None and "validation data is empty" in v.root_event.text
    assert any("printed an error before it left" in r for r in v.reasons)


def test_an_unprefixed_abort_is_the_lost_ranks_and_names_its_sender() -> None:
    """Lightning's launcher: gloo's ``terminate called``/``what():`` reach stderr without the
    ``[rankN]:`` prefix; ranks 0, 1 and 3 lose their connections, so the abort is rank 2's, the
    receiver, and rank 3 sent the odd buffer."""
    v = _v("pl_size_mismatch_r3")
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks[:2] == [3, 2]
    assert any("taken to be rank 2's" in w for w in v.warnings)


def test_lightning_healthy_run_is_not_flagged() -> None:
    v = _v("pl_healthy_4r")  # the SLURM hint, a Tip, deprecation warnings; "`Trainer.fit` stopped"
    assert str(v.category) == "none"


def test_a_batch_hand_over_cut_short_is_a_dead_data_loader_worker() -> None:
    """A DataLoader worker SIGKILLed while the main process receives its batch: torch does not say
    "killed by signal", only multiprocessing's ConnectionResetError under rebuild_storage_fd."""
    v = _v("dl_worker_kill_fd_r3")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [3]
    assert any("DataLoader worker" in r for r in v.reasons)


def test_the_data_loaders_own_report_of_the_signal_speaks_for_the_lost_worker() -> None:
    """`mp.spawn`: rank 3's DataLoader worker segfaults while its batch is handed over. The main
    process meets the dead socket first (ConnectionResetError under rebuild_storage_fd), and while
    handling it torch raises "DataLoader worker (pid N) is killed by signal: Segmentation fault": a
    crash, not the OOM killer a kill without a word would suggest."""
    v = _v("sd_dl_worker_segv_r3")
    assert str(v.category) == "process_crash" and v.culprit.ranks[:1] == [3]
    assert any("torch's DataLoader says how" in r and "Segmentation fault" in r for r in v.reasons)


def test_a_stall_ended_from_outside_is_a_hang_on_the_rank_behind() -> None:
    """Transformers' Trainer under torchrun: rank 0 stops at step 4, its peers wait in the
    all-reduce with no timeout firing; 220 s later torchrun is sent SIGTERM. No error of the job's own."""
    v = _v("hf_hang_r0")
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [0]
    assert any("stop from outside" in r for r in v.reasons)


def test_a_launcher_stopped_while_its_ranks_trained_is_stopped_from_outside() -> None:
    """torchrun sent SIGTERM while both ranks made steps: nothing of the job's own failed."""
    v = _v("stopped_while_training")
    assert str(v.category) == "scheduler" and v.culprit.ranks == [] and str(v.action) == "none"


def test_the_controllers_summary_below_a_snippet_is_not_that_ranks_error() -> None:
    """Ray Train's controller prints "[Rank 1 Error Snippet]:" with rank 1's SystemExit, then its own
    "ray.train.WorkerGroupError: Training failed due to worker errors:" with the snippet again. The
    copies inherit an earlier second than the worker's own line; the summary is not rank 1's."""
    v = _v("ray_exit_report_r1")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]


def test_mp_spawn_header_names_whose_traceback_follows() -> None:
    # torch.multiprocessing.spawn's parent prints the child's traceback under "-- Process 2
    # terminated with the following error:"; no line of it carries a rank
    v = _v("sp_exception_r2")
    assert str(v.category) == "application_error" and v.culprit.ranks == [2]
    assert v.root_event is not None and v.root_event.text.strip() == "KeyError: 6"


def test_mp_spawn_signal_death_is_an_exit_record() -> None:
    # "process 1 terminated with signal SIGKILL": a bare SIGKILL of rank 1, read as under torchrun
    v = _v("sp_sigkill_r1")
    assert str(v.category) == "host_oom" and v.culprit.ranks == [1]


def test_processes_the_launcher_stopped_bound_the_world_size() -> None:
    # rank 0 aborts on rank 1's bigger buffer; nothing names the world size, but mp.spawn
    # terminated three other processes: the ring sender (0 + 1) % world is rank 1
    v = _v("sp_size_mismatch_r1")
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks[:1] == [1]


def test_a_lone_timeout_is_not_rank_0_alone_when_the_launcher_stopped_live_peers() -> None:
    # rank 2 hangs; mp.spawn reports rank 0's recv timeout and terminates ranks 1-3, whose
    # silence is the tear-down's: a hang whose stuck rank the log does not show, no culprit
    v = _v("sp_hang_r2")
    assert str(v.category) == "hang" and v.culprit.ranks == []
    assert any("stopped 3 other process(es)" in r for r in v.reasons)
    # the untagged step lines come four to a step: ranks 1-3 printed, so none is "the rank that
    # printed nothing" named as the lowest; which one stopped is not in the log
    assert any("untagged progress lines show 4 processes" in r for r in v.reasons)


def test_untagged_step_lines_count_the_ranks_that_printed_them() -> None:
    # three ranks print "iter N/20 | ..." with no rank tag; rank 2 stops early (exit 0, no error) and
    # ranks 0 and 1 lose their connections to it. No line states the world size, but each step's
    # line comes three times: a third rank ran, and it is the one its peers lost
    v = _v("i_exit0_r2_3r")
    assert v.culprit.ranks == [2]
    assert any("untagged progress lines show 3 processes" in r for r in v.reasons)


def test_argparse_refusing_the_launchers_local_rank_is_configuration() -> None:
    # the deprecated torch.distributed.launch passes --local-rank=N to a script written for torchrun
    v = _v("launch_local_rank_arg")
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert v.root_event is not None and "unrecognized arguments: --local-rank=" in v.root_event.text


def test_a_setup_failure_whose_peers_were_torn_down_first_names_no_rank() -> None:
    # every rank lacks the module, but torchrun stopped ranks 1-3 (SIGTERM) before they got to the
    # import: only rank 0's error is in the log, and the others showed nothing of their own
    v = _v("import_error_torn_down")
    assert str(v.category) == "configuration" and v.culprit.ranks == []


def test_the_ring_wraps_at_the_stopped_plus_the_ended_processes() -> None:
    # 3 ranks under mp.spawn: rank 2 all-reduces a bigger buffer, rank 1 aborts (SIGABRT, its own
    # end) and the parent terminates the other two: the world is at least 2 + 1, and rank 1
    # receives from (1 + 1) % 3 = 2, not from rank 0
    v = _v("sp_size_mismatch_wrap_r2")
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks[:1] == [2]


def test_a_nodes_console_gives_its_rankless_traceback_to_its_own_failed_rank() -> None:
    # two torchrun agents, one console each: node 1's rank 2 misses its shard (a traceback with no
    # rank), node 0's ranks time out waiting for it; each console's failure records are read alone,
    # and the agent's "local_rank: 0" line is global rank 2 by its pid in the failure record
    v = _v("mn_missing_file_r2")
    assert str(v.category) == "configuration" and v.culprit.ranks == [2]


def test_a_console_that_stopped_as_its_peers_lost_it_holds_the_lost_processes() -> None:
    # node 1's agent and workers are SIGKILLed at once mid-training: node1.log just stops, and
    # node 0's ranks lose their connections at that moment; a crash of node 1's processes, not a hang
    v = _v("mn_node1_lost")
    assert str(v.category) == "process_crash"
    assert any("node1.log stops at" in r for r in v.reasons)


def test_an_untimed_console_that_stopped_holds_the_processes_its_peers_say_left() -> None:
    # the same node loss with print-style lines (no times): node 0's ranks say the peer closed the
    # connection ("Connection closed by peer"), and node1.log has no error, exit or end of its own
    v = _v("mn_node1_lost_untimed")
    assert str(v.category) == "process_crash"


@pytest.mark.parametrize(
    ("case", "odd", "site"), [("c_rank0_barrier", 0, "dist.barrier()"), ("c_uneven_data_r3", 3, "dist.barrier()")]
)
def test_the_rank_waiting_at_another_line_of_the_program_took_another_path(case: str, odd: int, site: str) -> None:
    # every rank times out in gloo (no op named), but the tracebacks say where each waited: three in
    # loss.backward() (DDP's all-reduce), one in a barrier only it reached (a rank-0-only save
    # branch; a rank whose data ran out and went on to the end): that one took another path
    v = _v(case)
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks == [odd]
    assert any(f"rank(s) {odd} timed out waiting at train.py:" in r and site in r for r in v.reasons)


def test_the_rank_whose_reported_model_differs_from_the_majoritys_is_named() -> None:
    # every rank raises DDP's "expects same model across all ranks" (one failure, shared); their
    # copies give each rank's parameter count: 4, 6, 4, 4, so rank 1 built another model
    v = _v("c_model_mismatch_r1")
    assert str(v.category) == "configuration" and v.culprit.ranks == [1]
    assert any("3 rank(s) built a model of 4 parameters, rank(s) 1 one of 6" in r for r in v.reasons)


def test_waiting_for_a_rank_the_launcher_never_started_is_configuration() -> None:
    # init_process_group(world_size=8) under torchrun --nproc-per-node 4: every rank waits in the
    # store for rank 4, which torchrun's summary (ranks 0-3) shows was never started
    v = _v("c_world_size_arg")
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert any("which the launcher never started" in r for r in v.reasons)


@pytest.mark.parametrize(
    ("case", "category", "ranks", "signature"),
    [
        ("c_cuda_device_cpu", "configuration", [], "torch_config.cpu_build_cuda_call"),
        ("c_dl_timeout_r2", "hang", [2], "torch.dataloader_timeout"),
    ],
)
def test_torch_wording_mined_for_real_first_run_mistakes(
    case: str, category: str, ranks: list[int], signature: str
) -> None:
    # torch.cuda.set_device on the CPU build (an AttributeError, not "Torch not compiled with CUDA
    # enabled"), and a DataLoader whose worker never delivered a batch within its timeout
    v = _v(case)
    assert str(v.category) == category and v.culprit.ranks == ranks
    assert v.root_event is not None and v.root_event.signature == signature


def test_a_checkpoint_exceptions_quoted_traceback_is_the_named_ranks() -> None:
    # torch.distributed.checkpoint.save: rank 0's shard file is on a full device; DCP gathers the
    # exception and every rank raises "CheckpointException ranks:dict_keys([0])", each copy quoting
    # rank 0's OSError under "Traceback (most recent call last): (RANK 0)" (parse.headers, quoted)
    v = _v("e_dcp_full_r0_print")
    assert str(v.category) == "storage_io" and v.culprit.ranks == [0]
    assert v.root_event is not None and "No space left on device" in v.root_event.text


def test_a_checkpoint_every_rank_failed_to_write_names_no_rank() -> None:
    # every rank's shard on a full device: "ranks:dict_keys([0, 1, 2, 3])", one quoted error per rank
    v = _v("e_dcp_full_all")
    assert str(v.category) == "storage_io" and v.culprit.ranks == []


def test_an_exception_every_rank_raised_after_training_started_is_the_set_ups() -> None:
    # DDP without find_unused_parameters and a head the forward pass never calls: every rank raises
    # "Expected to have finished reduction in the prior iteration" at its second step
    v = _v("c_unused_param_all")
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert any("every rank raised it the same way" in r for r in v.reasons)


def test_a_restarted_console_is_split_into_attempts_and_a_different_second_failure_is_said() -> None:
    # --max-restarts 1: rank 1 is SIGKILLed in attempt 0 (torchrun: "failed (exitcode: -9) local_rank:
    # 1"); the restart could not form gloo's mesh again. One console, no per-rank files: each
    # "failed (exitcode" line but the last ends an attempt (align.console_attempt_starts)
    v = _v("restart_sigkill_r1")
    assert str(v.category) == "host_oom" and v.culprit.ranks == [1]
    assert any("attempt 1 failed too, in other words" in r and "connectFullMesh" in r for r in v.reasons)
    assert any(link.rule.startswith("in restart attempt 1") for link in v.causal_chain)


def test_an_exception_its_rank_died_of_is_not_one_the_job_went_on_from() -> None:
    """Steps that name no rank after rank 3's traceback are ranks 0 and 1's, training on in their own
    sub-mesh; torchrun records rank 3's exit with status 1, so the IndexError was not caught."""
    v = _v("f_mesh_too_small")
    assert v.root_event is not None and "IndexError" in v.root_event.text
    assert v.culprit.ranks[:1] in ([2], [3])
    assert not any("went on from them" in w for w in v.warnings)


def test_an_all_gather_witness_received_from_its_left_neighbour() -> None:
    """gloo's all-gather receives from rank - 1 (allgather.cc), its all-reduce from rank + 1: the
    peers' tracebacks (``distributed_c10d.py ... in all_gather_single``) say which it was."""
    v = _v("f_fsdp_mismatch_r1_w0")
    assert str(v.category) == "collective_mismatch"
    assert v.culprit.ranks[:2] == [1, 2]
    assert any("show an all-gather" in r for r in v.reasons)


def test_a_witness_whose_collective_no_traceback_names_costs_confidence() -> None:
    """The receiver's abort alone leaves two ring neighbours: the verdict names the all-reduce's
    and says which rank an all-gather's sender would be, at a lower confidence."""
    unknown, known = _v("size_mismatch_r1"), _v("f_fsdp_mismatch_r1_w0")
    assert unknown.culprit.ranks[:2] == [1, 0]
    assert any("were it an all-gather, rank 3 sent the buffer" in r for r in unknown.reasons)
    assert not any("were it an all-gather" in r for r in known.reasons)
    assert unknown.confidence < known.confidence


@pytest.mark.parametrize(("case", "rank"), [("g_ctrlc_hang_r2", 2), ("g_ctrlc_hang_r0_3r", 0)])
def test_a_hang_ended_by_ctrl_c_is_a_hang_on_the_rank_its_peers_waited_for(case: str, rank: int) -> None:
    """The user pressed Ctrl-C on a job that had stopped making steps: the stuck rank leaves on
    KeyboardInterrupt (no error line), and only then do its peers' connections close. Everything
    followed the stop, so the stop explains the departures; the stall before it is the fault."""
    v = _v(case)
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [rank]
    assert any("before a stop from outside (SIGINT)" in r for r in v.reasons)


@pytest.mark.parametrize(("case", "rank"), [("g_pickle_bcast_r0", 0), ("sd_pickle_bcast_r1_3r", 1)])
def test_an_object_pickle_refuses_is_the_callers_mistake(case: str, rank: int) -> None:
    """Under torchrun every rank's lines are in the console; under mp.spawn only the source's
    traceback, at start-up. A start-up mistake seen on the only rank in the log is every rank's,
    but not this one: broadcast_object_list pickles on its source rank alone (torch's
    distributed_c10d.py), so its peers never meet the error. It read no rank under mp.spawn."""
    v = _v(case)
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [rank]
    assert v.root_event is not None and v.root_event.signature == "python.unpicklable_object"


def test_a_folder_the_job_may_not_create_is_the_set_ups_on_the_rank_that_writes() -> None:
    v = _v("h_perm_ckpt_r0")
    assert str(v.category) == "configuration" and v.culprit.ranks[:1] == [0]
    assert v.root_event is not None and "Operation not permitted" in v.root_event.text


@pytest.mark.parametrize(
    ("case", "warned"),
    [
        # every rank logged a FileNotFoundError (python.file_not_found) with its traceback and
        # trained on to step 20
        ("i_healthy_noise_io_print", "Python exception(s) a trainer caught"),
        # the job script ran nvidia-smi (not found), set a locale the node lacks, failed a mkdir and
        # a pip install and ran a GPU check that raised on the CPU node, then torchrun trained to 20/20
        ("l_healthy_all_3r", "before training that reached its end"),
    ],
)
def test_errors_in_a_job_that_ended_well_are_no_failure(case: str, warned: str) -> None:
    """The job ended well: the errors it went on from are named in a warning, not its failure."""
    v = _v(case)
    assert str(v.category) == "none"
    assert any(warned in w for w in v.warnings)


def test_an_exception_a_rank_went_on_from_is_not_its_later_failure() -> None:
    v = _v("i_noise_then_exception_r1")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]
    assert v.root_event is not None and v.root_event.text.startswith("KeyError")


def test_an_exception_every_rank_went_on_from_in_a_console_is_not_the_failure() -> None:
    """A console whose steps name no rank: each of the 4 ranks printed the same caught
    FileNotFoundError, and steps followed. Every rank printed it, so the steps after it are
    steps of ranks that went on from it; rank 3's later stall is the failure."""
    v = _v("i_noise_then_hang_r3_print")
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [3]
    assert any("a trainer caught" in w for w in v.warnings)


def test_an_exception_naming_a_step_is_no_step_the_job_went_on_to() -> None:
    """Ray's console: each worker's FloatingPointError "loss is nan at step 5", then the
    controller's snippet quoting it. The quotes name a step and a loss but are no training: every
    rank died of its NaN."""
    v = _v("ray_nan_all")
    assert str(v.category) == "numerical"
    assert not any("a trainer caught" in w for w in v.warnings)


@pytest.mark.parametrize(
    ("case", "rank", "said"),
    [
        ("i_exit0_r0", 0, "exited with status 0"),
        # two agents, one console each: node 0's summary lists ranks 0 and 1, node 1's rank 3 (its
        # local rank 1); node 1's local rank 0, global rank 2, is in neither
        ("mp_exit0_r2", 2, "(0, 1, 3) and not rank 2"),
    ],
)
def test_a_rank_torchruns_summary_leaves_out_exited_zero_on_its_own(case: str, rank: int, said: str) -> None:
    v = _v(case)
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [rank]
    assert any(said in r for r in v.reasons)


def test_a_restart_that_failed_otherwise_does_not_hide_the_first_attempts_fault() -> None:
    """Rank 1 was SIGKILLed in attempt 0 (print-style logs: no timed line in its files); torchrun
    restarted the workers, and every rank of attempt 1 failed to connect. The first fault is attempt
    0's kill, not the restart's shared network error."""
    v = _v("j_restart_fails_kill_r1")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [1]
    assert v.root_event is not None and "exitcode: -9" in v.root_event.text
    assert any("torchrun restarted the job; attempt 0 failed first" in w for w in v.warnings)


def test_quiet_ranks_tied_at_one_step_name_no_culprit() -> None:
    """mp.spawn terminated ranks 1-3 when rank 0's all-reduce timed out; their JSON-line logs (which
    name each rank) all end at step 5 within a few milliseconds. Which one hung is not in the log:
    no rank is named rather than the one whose last line the scheduler happened to print first."""
    v = _v("sd_json_hang_r3")
    assert str(v.category) == "hang" and v.culprit.ranks == []
    assert any("ranks 1, 2, 3 reported no error and their logs all end at step 5" in r for r in v.reasons)


def test_the_same_errors_before_a_fault_do_not_hide_it() -> None:
    v = _v("l_gpu_check_then_exception_r2")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [2]


def test_srun_torchrun_agents_are_nodes_not_restarts() -> None:
    """Under ``srun torchrun`` two nodes' agents print their summaries into one job output: two
    attempts' worth of failure lines from two hosts are one attempt, and the summary's "rank : 3
    (local_rank: 1)" under label 1 places agent 1's workers, so the quiet rank 3 is found."""
    v = _v("s2_hang_r3_torchrun")
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [3]
    assert not any("restarted the job" in r for r in v.reasons)


def test_steps_no_rank_can_be_given_still_date_the_stall_before_a_time_limit() -> None:
    """An agent's srun label is a node, so its workers' step lines belong to no rank; they still
    say the job stopped moving long before the time limit ended it."""
    v = _v("s2_hang_timelimit_torchrun_r2")
    assert str(v.category) == "hang"
    assert any("before the time limit" in r for r in v.reasons)
    assert all(p.rank >= 0 for p in v.progress)  # no rank made up for the node's lines


def test_the_task_srun_never_names_ended_with_status_zero() -> None:
    """srun names every task that did not exit 0; the one it leaves out, whose peers lost it,
    ended its program itself (an early stop on one rank), not a crash."""
    v = _v("s2_exit0_r2")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [2]
    assert any("srun reports how every other task ended" in r for r in v.reasons)


def test_a_memory_kill_is_not_preceded_by_the_cancel_stamped_in_its_second() -> None:
    """slurmstepd's "CANCELLED AT 20:51:07" names a whole second; the memory-limit kill above it,
    after a step stamped 20:51:07.120, came first: the fault is memory, not the scheduler."""
    v = _v("s2_leak_r1")
    assert str(v.category) == "host_oom"
    assert "exceeded memory limit" in v.summary


def test_jax_runtime_lines_of_a_healthy_run_are_no_fault() -> None:
    v = _v("j3_healthy")
    assert str(v.category) == "none"


def test_a_jax_process_killed_silently_is_the_root_its_peers_confirm() -> None:
    v = _v("j3_sigkill_r2")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [2]


def test_tasks_aborted_by_their_own_fatal_report_of_a_dead_peer_are_not_the_root() -> None:
    """JAX's LOG(FATAL) "another task died" raises SIGABRT, which srun reports as "Aborted": an
    exit record each task's own report explains. The task srun reports Killed, with no line of its
    own, is the one that died."""
    v = _v("j3_sigkill_r0")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [0]


def test_a_time_limit_below_a_ranks_traceback_does_not_explain_it() -> None:
    """The exception's time is inherited (a lower bound) and slurmstepd's cancel 80 s later is the
    next timed line: the times allow either order, the file does not."""
    v = _v("j3_exception_r1")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]


def test_mpiruns_non_zero_exit_notice_is_the_ranks_exit_record() -> None:
    v = _v("mpi_exit_r1")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]


def test_iteration_counters_under_mpiruns_tags_are_the_ranks_progress() -> None:
    v = _v("mpi_tag_hang_r3_print")
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [3]
    assert {p.rank: p.last_step for p in v.progress}.get(3) == 4


def test_a_witness_whose_ring_is_counted_from_untagged_step_lines_names_the_sender() -> None:
    # mpirun passes on four ranks' untagged "step N/20" lines, four to a step: the world is at least
    # 4, so the aborting receiver's ring neighbour, (0 + 1) % 4, sent the odd buffer; the receiver
    # itself is only a witness
    v = _v("mpi_size_mismatch_r1")
    assert str(v.category) == "collective_mismatch"
    assert v.culprit.ranks[:1] == [1]
    assert any("witness" in r and "(r + 1) % 4" in r for r in v.reasons)


def test_a_ranks_exception_comes_before_the_terminate_of_its_dying_process() -> None:
    # Transformers' Trainer under torchrun, 3 ranks: rank 1's KeyError (untimed, "[rank1]: ...") and,
    # on the very next line, the rank-less "terminate called without an active exception" of that
    # process dying (its status: SIGABRT). Both took their time from the same neighbour; the deeper
    # layer won the tie and the verdict read a crash. Lines of one file a few lines apart are in
    # the file's order: the exception is the root
    v = _v("hfb_exception_r1_3r")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]
    assert v.root_event is not None and "KeyError" in v.root_event.text
