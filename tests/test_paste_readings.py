"""Readings of lone pastes: where an exception was raised, and ranks that never registered."""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze
from tests.paste_text import analyze_text


def test_headless_traceback_keeps_its_frames(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(
        '[rank0]:   File "/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 1997, in no_sync\n'
        "[rank0]:     assert not self.zero_optimization_partition_gradients(), \\\n"
        "[rank0]: AssertionError: no_sync context manager is incompatible with gradient partitioning logic of ZeRO stage 3\n"
    )
    v = analyze(log)
    assert v.root_event is not None
    assert any("site-packages/deepspeed" in line for line in v.root_event.context)
    assert str(v.category) == "software_bug"


def test_ray_labelled_traceback_keeps_its_frames(tmp_path: Path) -> None:
    """Ray's log monitor puts "(Actor pid=N) " before each line and drops the frames' indentation
    (lines from OpenRLHF#922): the frames are the lines with the exception line's own label."""
    ray = "(ActorModelRayActor pid=700388) "
    other = "(LLMRayActor pid=700386) "
    log = tmp_path / "log.txt"
    log.write_text(
        f'{other}File "/srv/venv/lib/python3.12/site-packages/vllm/worker/worker.py", line 9, in f\n'
        f'{ray}File "~/.virtualenvs/x/lib/python3.12/site-packages/openrlhf/trainer/ray/vllm_engine.py", line 58, in init_process_group\n'
        f"{ray}return self.llm.collective_rpc(\n"
        f'{ray}File "~/.virtualenvs/x/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 495, in collective_rpc\n'
        f"{ray}executor = self.llm_engine.model_executor\n"
        f"{ray}^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f"{ray}AttributeError: 'LLMEngine' object has no attribute 'model_executor'\n"
    )
    v = analyze(log)
    assert v.root_event is not None
    assert v.root_event.context[0].startswith('File "~/.virtualenvs/x/lib/python3.12/site-packages/openrlhf')
    assert not any("vllm/worker" in line for line in v.root_event.context)
    assert str(v.category) == "software_bug"
    assert any("inside the library vllm" in r for r in v.reasons)


def test_a_ranks_earlier_lines_are_not_its_frames(tmp_path: Path) -> None:
    """Indented frames under "[rank0]:" end at the rank's first unindented line above them."""
    v = analyze_text(
        tmp_path,
        "[rank0]: step 3 loss 2.1\n"
        '[rank0]:   File "/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 1997, in no_sync\n'
        "[rank0]:     assert not self.zero_optimization_partition_gradients()\n"
        "[rank0]: AssertionError: no_sync context manager is incompatible with gradient partitioning of ZeRO stage 3\n",
    )
    assert v.root_event is not None and v.root_event.context[0].lstrip().startswith('File "')


def test_unrelated_lines_above_are_not_frames(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("[rank0]: step 3 loss 2.1\n[rank0]: RuntimeError: boom in layer 3\n")
    v = analyze(log)
    assert v.root_event is not None and v.root_event.context == ()


def test_ranks_that_never_registered_are_a_start_up_stall(tmp_path: Path) -> None:
    """Lightning announces each rank before init_process_group; 4 of 8 and no "all registered"
    line, with no error anywhere, is a start-up waiting for ranks that never started."""
    log = tmp_path / "log.txt"
    log.write_text("".join(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8\n" for r in (1, 2, 0, 3)))
    v = analyze(log)
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert "4 of 8 ranks registered" in v.summary and "4, 5, 6, 7" in v.summary
    every = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/2\n" for r in (0, 1))
    log.write_text(every + "All distributed processes registered. Starting with 2 processes\n")
    assert str(analyze(log).category) == "none"


def test_a_sample_of_the_announcements_is_no_stall(tmp_path: Path) -> None:
    """Ranks start a node at a time: missing ranks scattered among announced ones are a paste's
    sample of a big start-up (Lightning#10216: 14 lines of a 78-rank one), not ranks that never started."""
    log = tmp_path / "log.txt"
    log.write_text(
        "".join(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/78\n" for r in (72, 36, 10, 19, 32, 12))
    )
    v = analyze(log)
    assert str(v.category) == "none" and "registered" not in v.summary
    # one node's block missing is the stall
    log.write_text("".join(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/12\n" for r in range(6)))
    assert "only 6 of 12 ranks registered" in analyze(log).summary


def test_errors_after_a_requeue_are_its_tear_down(tmp_path: Path) -> None:
    """slurmstepd's requeue cancels the step; the lines after it are its fallout, not a fault."""
    log = tmp_path / "slurm-608.out"
    log.write_text(
        "slurmstepd: error: *** JOB 608 ON node01 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***\n"
        "slurmstepd: error: *** STEP 608.0 ON node01 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***\n"
        "slurmstepd: error: Failed to send MESSAGE_TASK_EXIT: Connection refused\n"
        "srun: error: node01: tasks 2-3: Exited with exit code 1\n"
    )
    v = analyze(log)
    assert str(v.category) == "scheduler" and v.culprit.ranks == []
    assert v.root_event is not None and "DUE TO JOB REQUEUE" in v.root_event.text


def test_bash_says_which_signal_killed_the_job(tmp_path: Path) -> None:
    """A paste ending in bash's note on a killed job is a failure, never "no failure found"."""
    log = tmp_path / "log.txt"
    log.write_text("epoch 1 step 40 loss 2.31\nepoch 1 step 41 loss 2.29\nKilled\n")
    assert str(analyze(log).category) == "host_oom"
    log.write_text("step 3 loss 2.1\n./run.sh: line 7: 40213 Segmentation fault      (core dumped) python train.py\n")
    assert str(analyze(log).category) == "process_crash"


def test_a_set_up_progress_bar_is_not_training(tmp_path: Path) -> None:
    """Loading checkpoint shards through tqdm is start-up: an NCCL system error after it is the set-up's."""
    log = tmp_path / "log.txt"
    log.write_text(
        "Loading checkpoint shards: 100%|██████████| 4/4 [00:14<00:00,  3.59s/it]\n"
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
    )
    assert str(analyze(log).category) == "configuration"


def test_healthy_benchmarks_are_healthy(tmp_path: Path) -> None:
    """Horovod's benchmark ('Iter #3: ...') and nccl-tests' table ('... busbw  error') ran well."""
    log = tmp_path / "log.txt"
    log.write_text("Running benchmark...\nIter #0: 108.3 img/sec per GPU\nIter #1: 107.3 img/sec per GPU\n")
    assert str(analyze(log).category) == "none"
    log.write_text(
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "     8388608       2097152     float     sum    123.4  67.98  118.97  0e+00    123.1  68.10  119.2  0e+00\n"
        "# Avg bus bandwidth    : 67.9217 \n"
        "node-0:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    )
    assert str(analyze(log).category) == "none"


CORPUS = Path(__file__).parent.parent / "corpus" / "threads"


def test_an_untimed_traceback_above_the_launchers_timed_lines_came_first() -> None:
    """Real paste (accelerate#2468): a rank's rendezvous fails with a DistNetworkError (no clock on
    its lines), then DeepSpeed's launcher kills its children and reports "exits with return code =
    1" (timed). The file's order says which came first; the exit code reports the error printed
    above it, so the DistNetworkError is the root, not the launcher's line."""
    v = analyze(CORPUS / "accelerate-2468" / "log.txt")
    assert v.root_event is not None and "DistNetworkError" in v.root_event.text
    assert v.root_event.line == 5 and v.root_event.ts is not None
    launcher = [
        link for link in v.causal_chain if "sigkill_handler" in link.event.text and "return code" in link.event.text
    ]
    assert launcher and launcher[0].explained_by == v.root_event.id


def test_a_signal_exit_is_not_deferred_to_an_earlier_symptom(tmp_path: Path) -> None:
    """A SIGKILL is a cause of its own (the OOM killer, a watchdog): only a plain exit code reports
    an error the process printed."""
    log = tmp_path / "log.txt"
    log.write_text(
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
        "(10.0.0.1, 29500). The client socket has failed to connect to 10.0.0.1:29500 (errno: 113 - No route to host).\n"
        "[2024-02-24 04:37:51,021] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py'] "
        "exits with return code = -9\n"
    )
    v = analyze(log)
    assert v.root_event is not None and "return code = -9" in v.root_event.text


def test_pdsh_names_the_host_of_every_line_it_labels(tmp_path: Path) -> None:
    """pdsh labels each remote line "host: "; a host learnt on a bracketed line is peeled from that
    host's other lines too (a traceback), so the failing rank's host is known."""
    log = tmp_path / "log.txt"
    log.write_text(
        "worker-1: [2024-02-24 04:37:40,100] [INFO] [launch.py:163:main] dist_world_size=16\n"
        "worker-1: Traceback (most recent call last):\n"
        'worker-1:   File "train.py", line 9, in <module>\n'
        "worker-1: FileNotFoundError: [Errno 2] No such file or directory: 'data/train.jsonl'\n"
    )
    v = analyze(log)
    assert v.root_event is not None and v.root_event.text.startswith("FileNotFoundError")
    assert v.root_event.host == "worker-1"


def test_a_tear_down_quoting_its_cause_stands_for_it_when_the_cause_is_not_in_the_log() -> None:
    """Real paste (LLaMA-Factory#8871), one line: rank 19's watchdog re-raised "CUDA error:
    unspecified launch failure" on host 192.168.13.81 (pdsh's prefix). The caught error's own line
    is not in the paste; its words are, so the verdict names rank 19 and the CUDA error's reading,
    not "errors were found but none could be placed"."""
    v = analyze(CORPUS / "llamafactory-8871" / "log.txt")
    assert v.culprit.ranks == [19] and v.culprit.hosts == ["192.168.13.81"]
    assert str(v.category) == "gpu_hardware"
    assert v.root_event is not None and v.root_event.fields["cause_signature"] == "cuda.unspecified_launch_failure"
    assert any("whose own line is not in the log" in r for r in v.reasons)


def test_a_py_spy_dump_is_the_stack_of_a_stuck_process() -> None:
    """Real paste (pytorch#87995): py-spy's dump of rank 0's main thread waiting on the data-loader
    queue, and nothing else. People dump a process that is stuck: a hang, not "not a job log"."""
    v = analyze(CORPUS / "pytorch-87995" / "log.txt")
    assert str(v.category) == "hang"
    assert v.root_event is not None and v.root_event.signature == "pyspy.thread_dump"


def test_no_failure_says_what_it_rests_on(tmp_path: Path) -> None:
    """ "none" should mean the job ended well: the verdict names the line that says so (a
    framework's end-of-training line, or a step counter at its total), or says the end is not in
    the log."""
    log = tmp_path / "log.txt"
    log.write_text(
        "{'loss': 1.2, 'grad_norm': 0.8, 'learning_rate': 1e-05, 'epoch': 2.99}\n"
        "Training completed. Do not forget to share your model on huggingface.co/models =)\n"
    )
    v = analyze(log)
    assert str(v.category) == "none" and "the job ended well" in v.summary and "log.txt:2" in v.summary
    mega = " iteration       {}/      50 | consumed samples: 25600 | elapsed time per iteration (ms): 9969.4 | lm loss: 4.79 |\n"
    log.write_text(mega.format(50))
    v = analyze(log)
    assert str(v.category) == "none" and "training reached its last step" in v.summary
    log.write_text(mega.format(40))
    v = analyze(log)
    assert str(v.category) == "none" and "does not show the job's end" in v.summary


def test_kubernetes_pod_status_reads_as_the_platform_says(tmp_path: Path) -> None:
    """What `kubectl describe pod` prints beside a PyTorchJob's log: the scheduler found no node
    (a job-level wait, no rank), or the container died at its memory limit (host memory)."""
    log = tmp_path / "describe.txt"
    log.write_text(
        "Events:\n  Warning  FailedScheduling  32s   default-scheduler  0/2 nodes are available: "
        "1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.\n"
    )
    v = analyze(log)
    assert str(v.category) == "scheduler" and v.culprit.ranks == []
    log.write_text("    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n")
    assert str(analyze(log).category) == "host_oom"


def test_a_rankless_error_is_the_rank_whose_watchdog_quotes_it() -> None:
    """Real paste (sd-scripts#1434): "RuntimeError: CUDA error: uncorrectable ECC error
    encountered" with no rank, then torch 2.0's "[Rank 1] NCCL watchdog thread terminated with
    exception:" quoting it. The watchdog re-raises in the same process: the ECC error is rank 1's."""
    v = analyze(CORPUS / "sdscripts-1434" / "log.txt")
    assert str(v.category) == "gpu_hardware" and v.culprit.ranks == [1]
    assert any("watchdog quotes it" in w for w in v.warnings)


def test_only_the_default_groups_rank_is_a_global_rank(tmp_path: Path) -> None:
    """ProcessGroupNCCL's "[PG ID n ... Rank r]" names the rank in group n: global only for group 0."""
    log = tmp_path / "log.txt"
    line = (
        "[E1118 20:32:23.970332207 ProcessGroupNCCL.cpp:1895] [PG ID {pg} PG GUID {pg} Rank 3] Process group "
        "watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n"
    )
    log.write_text(line.format(pg=0))
    root = analyze(log).root_event
    assert root is not None and root.rank == 3
    log.write_text(line.format(pg=2))
    root = analyze(log).root_event
    assert root is not None and root.rank is None


def test_a_ray_actor_death_defers_to_why_its_node_died() -> None:
    """Real paste (ray#63807): "The actor died unexpectedly" then Ray's reason for the node's death,
    "the actor's node was preempted: ...": a preemption (scheduler), not a process crash."""
    v = analyze(CORPUS / "ray-63807" / "log.txt")
    assert str(v.category) == "scheduler"
    assert v.root_event is not None and v.root_event.signature == "ray.actor_node_preempted"


def test_terminal_and_ide_endings_are_read(tmp_path: Path) -> None:
    """How a shell or an IDE reports the end of a run: zsh's "killed" (SIGKILL, a suspected OOM
    kill), bash's "Terminated" (SIGTERM from outside), PyCharm's "Process finished with exit
    code", and an OOM paste cut after its first sentence."""
    log = tmp_path / "log.txt"
    cases = {
        "zsh: killed     python3 train.py": "host_oom",
        "zsh: segmentation fault  python main.py": "process_crash",
        "Terminated": "scheduler",
        "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)": "host_oom",
        "torch.cuda.OutOfMemoryError: CUDA out of memory.": "gpu_oom",
        "Process finished with exit code 0": "none",
    }
    for line, category in cases.items():
        log.write_text(f"epoch 1 step 40 loss 2.31\n{line}\n")
        assert str(analyze(log).category) == category, line
    assert "the job ended well" in analyze(log).summary


def test_a_mangled_torchelastic_failure_keeps_its_exit_code() -> None:
    """Real paste (DeepSpeed#3153): Markdown ate ': 2 (pid: 53040) of binary: /' from torchrun's
    "failed (exitcode: -9) local_rank: ..." line; the exit code alone still says SIGKILL."""
    v = analyze(CORPUS / "deepspeed-3153" / "log.txt")
    assert str(v.category) == "host_oom"


def test_nccl_tests_footer_is_a_finished_run_not_an_error(tmp_path: Path) -> None:
    """nccl-tests prints "# Errors with asterisks ..." under every checked table (real lines,
    ROCm/rccl#2078): a footnote, and "Out of bounds values : 0 OK" is the run's good end."""
    v = analyze_text(
        tmp_path,
        (
            " 17179869184    4294967296     float     sum      -1    89235  192.52  360.98      0    89189  192.62  361.17      0\n"
            "# Errors with asterisks indicate errors that have exceeded the maximum threshold.\n"
            "# Out of bounds values : 0 OK\n"
            "# Collective test concluded: all_reduce_perf\n"
        ),
    )
    assert str(v.category) == "none" and "ended well" in v.summary


def test_a_quoted_paste_is_read_as_its_lines(tmp_path: Path) -> None:
    """A log pasted as a Markdown quote keeps "> " on every line, and the rendering ate the '#' of
    nccl-tests' device rows; cuda-gdb's "warning: Cuda API error detected" is its own warning
    (real lines, NVIDIA/nccl#258). A job's log, and no failure in it."""
    log = tmp_path / "log.txt"
    log.write_text(
        ">    Rank  0 Pid  12414 on 51e6e7896958 device  0 [0x1a] Tesla V100-SXM3-32GB\n"
        ">    Rank  1 Pid  12414 on 51e6e7896958 device  1 [0x1b] Tesla V100-SXM3-32GB\n"
        "> [New Thread 0x7fffe6d73700 (LWP 12424)]\n"
        "> warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)\n"
    )
    assert str(analyze(log).category) == "none"


def test_info_lines_of_a_ddp_job_make_it_a_job_log(tmp_path: Path) -> None:
    """DDP's "Reducer buckets have been rebuilt" and ProcessGroupNCCL's barrier warning are a
    distributed job's own lines (real: mlcommons/algorithmic-efficiency#146, pytorch#144599);
    a loss printed as a tensor is training under way. Not "not a job log", and no failure."""
    log = tmp_path / "log.txt"
    log.write_text(
        "I1003 21:30:55.437373 140737350199104 submission_runner.py:295] 26.69s  1       "
        "{'train/loss': tensor(0.1785, device='cuda:0')}\n"
        "I1003 21:30:56.239438 140737350199104 distributed.py:977] Reducer buckets have been rebuilt in this iteration.\n"
    )
    assert str(analyze(log).category) == "none"
    log.write_text(
        "[rank1]:[W106 17:08:03.158159859 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 1]  using GPU 1 to "
        "perform barrier as devices used by this process are currently unknown. This can potentially cause a hang "
        "if this rank to GPU mapping is incorrect. Specify device_ids in barrier() to force use of a particular "
        "device, or call init_process_group() with a device_id.\n"
    )
    assert str(analyze(log).category) == "none"


def test_a_nan_in_a_metrics_column_is_numerical(tmp_path: Path) -> None:
    """A trainer that keeps logging after its loss went NaN never raises (real: NVIDIA-NeMo/Automodel#1883)."""
    v = analyze_text(
        tmp_path,
        (
            "step 10 | loss 2.6030 | grad_norm  9.9375\nstep 11 | loss 2.3224 | grad_norm     nan\n"
            "step 12 | loss    nan | grad_norm     nan\n"
        ),
    )
    assert str(v.category) == "numerical"
    assert v.root_event is not None and v.root_event.text.startswith("step 11")


def test_disk_full_in_any_tools_words_is_storage(tmp_path: Path) -> None:
    """ENOSPC as Rust's io::Error words it (real: bghira/SimpleTuner#2353), not only Python's [Errno 28]."""
    log = tmp_path / "log.txt"
    log.write_text(
        '  File "/opt/venv/lib/python3.12/site-packages/safetensors/torch.py", line 307, in save_file\n'
        "    serialize_file(_flatten(tensors), filename, metadata=metadata)\n"
        "safetensors_rust.SafetensorError: Error while serializing: I/O error: No space left on device (os error 28)\n"
    )
    assert str(analyze(log).category) == "storage_io"


def test_a_launcher_child_killed_by_sigkill_is_an_exit_record(tmp_path: Path) -> None:
    """`accelerate launch` re-raises its child's death by SIGKILL (real: huggingface/autotrain-advanced#456):
    an exit on signal 9 with no error of its own, read as the OOM killer's; the traceback's
    source line ("raise subprocess.CalledProcessError(...)") is code, not an error message."""
    v = analyze_text(
        tmp_path,
        (
            "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py", line 637, in simple_launcher\n'
            "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
            "subprocess.CalledProcessError: Command '['/usr/bin/python3', '-m', 'autotrain.trainers.clm', "
            "'--training_config', 'autotrain-LLM/training_params.json']' died with <Signals.SIGKILL: 9>.\n"
        ),
    )
    assert str(v.category) == "host_oom"
    assert v.root_event is not None and v.root_event.fields.get("exitcode") == "-9"


def test_a_collectors_time_before_an_mpi_tag_is_the_lines_time(tmp_path: Path) -> None:
    """A log collector's time in front of Open MPI's tag (real: NVIDIA/nccl#230): the first of
    three ranks' identical IB errors is the one 4 ms earlier, not one taken from a later line."""
    log = tmp_path / "log.txt"
    line = "container-57:{pid}:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error"
    log.write_text(
        f"2019-06-02T16:13:44.884Z: [1,12]<stdout>:{line.format(pid=815)}\n"
        "2019-06-02T16:13:44.884Z: [1,12]<stdout>:\n"
        f"2019-06-02T16:13:44.888Z: [1,14]<stdout>:{line.format(pid=814)}\n"
        "2019-06-02T16:13:44.888Z: [1,14]<stdout>:\n"
    )
    v = analyze(log)
    assert v.culprit.ranks[:1] == [12]
    assert v.root_event is not None and str(v.root_event.ts_quality) == "exact"


def test_deepspeeds_exit_line_names_the_last_child_it_started_not_the_dead_one(tmp_path: Path) -> None:
    """DeepSpeed's launcher prints a command list before "exits with return code = -9", and a
    terminal wrapped it over lines (real: AnomalyGPT#43). The list is the last process the launcher
    started (``cmd`` left over from its spawn loop, deepspeed/launcher/launch.py sigkill_handler),
    not the one that died: '--local_rank=1' says the node ran two processes, not which was killed
    (a real run: rank 1 SIGKILLed, the line names '--local_rank=3'). Only '--local_rank=0', a node's
    one process, names it."""
    head = "[2023-11-13 16:59:55,650] [ERROR] [launch.py:320:sigkill_handler] ['/opt/conda/bin/python', '-u', "
    tail = (
        "'--model', 'openllama_peft', '--stage', '1', \n"
        "'../data/images/', '--save_path', './ckpt/train_mvtec/'\n"
        "] exits with return code = -9\n"
    )
    killing = "[2023-11-13 16:59:54,760] [INFO] [launch.py:314:sigkill_handler] Killing subprocess 9439\n"
    two = analyze_text(tmp_path, killing + head + "'train_mvtec.py', '--local_rank=1', " + tail, "two.txt")
    assert two.culprit.ranks == [] and str(two.category) == "host_oom"
    one = analyze_text(tmp_path, killing + head + "'train_mvtec.py', '--local_rank=0', " + tail, "one.txt")
    assert one.culprit.ranks == [0] and str(one.category) == "host_oom"


def test_a_throughput_column_is_training_under_way(tmp_path: Path) -> None:
    """tf_cnn_benchmarks prints "images/sec: 47.9 +/- 0.0" per step (real: horovod/horovod#466)."""
    log = tmp_path / "log.txt"
    log.write_text(
        "Step\tImg/sec\ttotal_loss\n"
        "1\timages/sec: 47.9 +/- 0.0 (jitter = 0.0)\t9.066\n"
        "10\timages/sec: 47.3 +/- 0.7 (jitter = 1.1)\t9.068\n"
    )
    assert str(analyze(log).category) == "none"


def test_rays_worker_prefix_is_peeled_like_a_launchers(tmp_path: Path) -> None:
    """Ray's log monitor puts "(RayTrainWorker pid=N) " before a worker's lines: an exception
    line under it is still an exception line, and Lightning's device line a job's (real:
    ray-project/kuberay#1891)."""
    log = tmp_path / "log.txt"
    log.write_text("(RayTrainWorker pid=1584) LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]\n")
    assert str(analyze(log).category) == "none"
    log.write_text(
        "(RayTrainWorker pid=1584) LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]\n"
        "(RayTrainWorker pid=1584, ip=10.0.0.3) FileNotFoundError: [Errno 2] No such file or directory: '/data/train.jsonl'\n"
    )
    v = analyze(log)
    assert v.root_event is not None and v.root_event.text.startswith("FileNotFoundError")


def test_a_hang_up_signal_is_the_terminal_closing(tmp_path: Path) -> None:
    """torchrun passing SIGHUP (signal 1) to its workers: the terminal that started the job
    closed (real: ultralytics/ultralytics#918, a progress bar the warning was printed onto)."""
    v = analyze_text(
        tmp_path,
        (
            "     39/100      13.9G      2.252      3.897      2.851      1.791         48        768:  43%|████▎     | "
            "496/1155 [05:07<06:48,  1.61it/s]WARNING:torch.distributed.elastic.agent.server.api:Received 1 death "
            "signal, shutting down workers\n"
            "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4193 closing signal SIGHUP\n"
        ),
    )
    assert str(v.category) == "configuration"
    assert v.root_event is not None and v.root_event.text.startswith("WARNING:torch.distributed")


def test_tensorflows_nan_check_is_numerical(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("INFO:tensorflow:loss = 2.31, step = 100\nERROR:tensorflow:Model diverged with loss = NaN.\n")
    assert str(analyze(log).category) == "numerical"


def test_a_fatal_pcie_error_behind_which_is_a_gpu_is_the_gpus(tmp_path: Path) -> None:
    """The root port reports the fatal error; the same kernel report goes on to the device
    behind it, here the GPU (real: wilicc/gpu-burn#1, rwth-i6/returnn#1500). A machine's own
    report is never read as a set-up failure, whenever it came."""
    log = tmp_path / "dmesg.txt"
    log.write_text(
        "[74889.542031] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010\n"
        "[74889.542044] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
        "id=0010(Receiver ID)\n"
        "[74889.542234] pcieport 0000:00:02.0: broadcast error_detected message\n"
        "[74889.542239] nvidia 0000:02:00.0: device has no AER-aware driver\n"
    )
    assert str(analyze(log).category) == "gpu_hardware"
    log.write_text("[74889.542031] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010\n")
    assert str(analyze(log).category) == "unknown"


def test_torchs_store_based_barrier_lines_are_a_jobs_start(tmp_path: Path) -> None:
    """torch <= 2.0's init_process_group barrier lines (real: axolotl-ai-cloud/axolotl#276)."""
    log = tmp_path / "log.txt"
    log.write_text(
        "[2023-07-14 12:35:33,253] [INFO] [torch.distributed.distributed_c10d._store_based_barrier:432] [PID:18] "
        "Added key: store_based_barrier_key:2 to store for rank: 1\n"
        "[2023-07-14 12:35:33,277] [INFO] [torch.distributed.distributed_c10d._store_based_barrier:466] [PID:19] "
        "Rank 2: Completed store-based barrier for key:store_based_barrier_key:2 with 3 nodes.\n"
    )
    assert str(analyze(log).category) == "none"


def _timeout(rank: int, seq: int, numel: int) -> str:
    return (
        f"[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=1800000) ran for "
        "1800093 milliseconds before timing out.\n"
    )


def test_a_rank_below_the_highest_seen_exists_even_when_it_printed_nothing(tmp_path: Path) -> None:
    """Ranks are numbered from 0: when ranks 1-3 time out and no line of rank 0 is there, rank 0
    ran and is the one they waited for (real shape: pytorch/pytorch#141069, rank 0 ran out of data).
    The verdict says its silence rests on no line at all."""
    log = tmp_path / "log.txt"
    log.write_text("".join(_timeout(r, 19, 1) for r in (2, 3, 1)))
    v = analyze(log)
    assert str(v.category) == "hang" and v.culprit.ranks == [0]
    assert "printed nothing" in v.summary and any("no line of rank 0" in r for r in v.reasons)


def test_a_victim_in_another_collective_beats_a_rank_no_line_shows(tmp_path: Path) -> None:
    """Rank 0 waits in an earlier, larger all-reduce than its peers (real shape:
    Qwen2-VL-Finetune#17); rank 3's lines are not in the paste. The positive evidence names rank 0."""
    log = tmp_path / "log.txt"
    log.write_text(_timeout(0, 959, 544997376) + "".join(_timeout(r, 963, 2560) for r in (1, 5, 4, 2)))
    v = analyze(log)
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks == [0]


def test_a_job_evidence_line_is_noted_not_kept(tmp_path: Path) -> None:
    """Lines that only show a job printed them (every rank's barrier-device warning) make the
    log a job's but are no events: at 16,384 ranks one each would cost seconds for nothing."""
    line = (
        "[rank{r}]:[W106 17:08:03.158159859 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {r}]  using GPU {r} "
        "to perform barrier as devices used by this process are currently unknown. This can potentially cause a "
        "hang if this rank to GPU mapping is incorrect.\n"
    )
    v = analyze_text(tmp_path, "".join(line.format(r=r) for r in range(4)))
    assert str(v.category) == "none" and v.stats["events"] == 0


def test_torchrun_banner_is_a_job_line(tmp_path: Path) -> None:
    """torchrun's OMP_NUM_THREADS banner shows a job was launched: never "not a job log" (LLaMA-Factory#5560)."""
    banner = "W0927 11:34:43.255000 140277616324736 torch/distributed/run.py:779] "
    v = analyze_text(
        tmp_path,
        f"{banner}\n{banner}*****************************************\n"
        f"{banner}Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
        "system being overloaded, please further tune the variable for optimal performance in your application as needed. \n"
        f"{banner}*****************************************\n",
    )
    assert str(v.category) == "none" and "does not show the job's end" in v.summary


def test_a_paste_cut_inside_the_oom_report_is_an_oom(tmp_path: Path) -> None:
    """The kernel's OOM report starts with "<task> invoked oom-killer"; a paste cut before its
    "Killed process" line (NVIDIA/DALI#585) still shows memory ran out: never "no failure"."""
    v = analyze_text(
        tmp_path,
        "[2612362.231458] python invoked oom-killer: gfp_mask=0x14000c0(GFP_KERNEL), nodemask=(null), order=0, "
        "oom_score_adj=829\n"
        "[2612362.231465] CPU: 6 PID: 208253 Comm: python Tainted: P           O     4.15.15-1.el7.elrepo.x86_64 #1\n",
    )
    assert str(v.category) == "host_oom"


def test_older_detail_mismatch_wording_is_a_collective_mismatch(tmp_path: Path) -> None:
    """torch <= 1.10's ProcessGroupWrapper had each rank print its own fingerprint ("is running
    inconsistent collective"); a terminal wrapped it mid-word (JOTR#4). Not a set-up failure."""
    v = analyze_text(
        tmp_path,
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: "
        "CollectiveFingerPrint(OpType=ALLGATHER, TensorShape\n=[41, 256, 8, 8, 8], TensorDtypes=Float)\n"
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running inconsistent collective: "
        "CollectiveFingerPrint(OpType=ALLGATHER, TensorShape\n=[40, 256, 8, 8, 8], TensorDtypes=Float)\n",
    )
    assert str(v.category) == "collective_mismatch"


def test_a_pasted_memory_limit_kill_is_a_host_oom(tmp_path: Path) -> None:
    """slurmstepd's memory-limit kill alone does not say it came at start-up (facebookresearch/mmf#574:
    RAM grew with the data loader's workers): host_oom, not a set-up fault assumed from silence."""
    v = analyze_text(
        tmp_path,
        "slurmstepd: error: Job 34477 exceeded memory limit (169384386560 > 161061273600), being killed\n"
        "slurmstepd: error: Exceeded job memory limit\n",
    )
    assert str(v.category) == "host_oom"


def test_an_nccl_tests_table_pasted_without_its_hashes_is_a_healthy_run(tmp_path: Path) -> None:
    """nccl-tests prints its header and summary on lines that begin with '#'; a paste rendered as
    Markdown turns them into headings and the '#' is gone. The table's "error" column then read
    as an error line no signature knows ("configuration" at 0.10). Lines of NVIDIA/nccl#583."""
    log = tmp_path / "log.txt"
    log.write_text(
        "nThread 1 nGpus 2 minBytes 32 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "\n"
        "Using devices\n"
        "  Rank  0 Pid 1533050 on AI-A100-Beethoven01 device  0 [0x00] NVIDIA A100-SXM4-40GB\n"
        "  Rank  1 Pid 1533050 on AI-A100-Beethoven01 device  1 [0x00] NVIDIA A100-SXM4-40GB\n"
        "\n"
        "                                                       out-of-place                       in-place\n"
        "       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
        "          32             8     float     sum    10.14    0.00    0.00  0e+00    10.21    0.00    0.00  0e+00\n"
        "          64            16     float     sum    10.14    0.01    0.01  0e+00    10.31    0.01    0.01  0e+00\n"
    )
    assert str(analyze(log).category) == "none"


def test_a_wait_for_the_roots_nccl_id_before_training_is_the_set_up_and_names_whom_it_waited_for(
    tmp_path: Path,
) -> None:
    """A rank that timed out reading rank 0's ncclUniqueId from the store waited for rank 0, which
    never published it (a dataset map on rank 0 that outlasted the process-group timeout: the
    public HALOs README, a ChatGLM2 fine-tune thread whose paste this line is, untagged). Before
    training, with no rank of the waiter's own on the line, it is the set-up's (the timeout was too
    short for rank 0's start-up), no rank is blamed, and the headline does not say rank 0 "is the
    only rank in the log", which has no line of its own. (A waiter's line tagged "[rank1]:" makes
    its peer's silence the reading instead, as a rank that started late does: hang on rank 0.)"""
    log = tmp_path / "log.txt"
    log.write_text(
        "This may indicate a possible application crash on rank 0 or a network set up issue.[7] is setting up "
        "NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
        "store->get('0') got error: Socket Timeout\n"
    )
    v = analyze(log)
    assert str(v.category) == "configuration"
    assert v.culprit.ranks == []
    assert "only rank 0 is in the log" not in v.summary
    assert "rank 0, which the others waited for" in v.summary
