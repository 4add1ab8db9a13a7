"""Failures (and healthy runs) in the words of the component that printed them, read as what
those words mean: torch's serialization, the kubelet, DeepSpeed's loss scaler and DeepSpeed-Chat,
NCCL, Python's OSError, PyTorch on ROCm, accelerate, Open MPI and srun.

Each row was misread or refused by a blind round (21 to 24) before its signature was mined. Each
text is a real line from the thread named beside it, or (where the comment says so) the
component's own format string with values filled in, as in a signature's examples. The tests after
the tables are rounds 26 to 29's readings, each with the text that stays as it was beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paste_text import analyze_text

# THUDM/ChatGLM-6B#1203: PyTorch on ROCm, whose hipified allocator says "HIP out of memory"
REAL_HIP_OOM = "RuntimeError: HIP out of memory. Tried to allocate 128.00 MiB (GPU 0; 31.98 GiB total capacity; 31.60 GiB already allocated; 0 bytes free; 31.64 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_HIP_ALLOC_CONF"

# Rounds 21 to 24 (blind) misread or refused these: each is what its component prints, read as what
# it says. Rows: the thread, then the text (real lines only), then the category.
_IN_THEIR_OWN_WORDS = [
    # pytorch/pytorch#10577: torch.save's own write() on a full disk (torch 1.0.1): the errno's text
    # is the storage's, even with no training line before it, never the set-up's
    pytest.param(
        "Traceback (most recent call last):\n"
        '  File "train.py", line 250, in <module>\n'
        '    torch.save(best_model.state_dict(), join(OUTD, "best_model.pt"))\n'
        '  File "/home/user290/Venvs/pytorch.1.0.1/lib/python3.7/site-packages/torch/serialization.py", line 297, '
        "in _save\n"
        "    serialized_storages[key]._write_file(f, _should_read_directly(f))\n"
        "RuntimeError: write(): fd 29 failed with Input/output error\n",
        "storage_io",
        id="torch-save-errno",
    ),
    # substratusai/runbooks#92: a pod the kubelet evicted for its own ephemeral-storage limit: a
    # limit the orchestrator enforced
    pytest.param(
        "  Warning  Evicted              109s  kubelet                                Pod ephemeral local storage "
        "usage exceeds the total limit of containers 5Gi.\n"
        "  Normal   Killing              109s  kubelet                                Stopping container model\n",
        "scheduler",
        id="pod-ephemeral-limit",
    ),
    # microsoft/DeepSpeed#697: fp16 scaling at its floor ("from 1 to 1", still overflowing), every
    # step skipped and nothing raised (DeepSpeed 0.3): never silent
    pytest.param(
        "[2021-01-26 22:06:43,568] [INFO] [fused_optimizer.py:314:_update_scale] \n"
        "Grad overflow on iteration 12\n"
        "[2021-01-26 22:06:43,569] [INFO] [fused_optimizer.py:316:_update_scale] Reducing dynamic loss scale "
        "from 1 to 1\n"
        "[2021-01-26 22:06:43,569] [INFO] [timer.py:166:stop] 0/520, SamplesPerSec=28.292804016474427\n",
        "numerical",
        id="scale-at-floor",
    ),
    # the same scaler early in a healthy fp16 run (ymcui/Chinese-LLaMA-Alpaca#534), then DeepSpeed's
    # throughput line from #697: lowering 64 to 32 is fp16 training finding a scale that fits
    pytest.param(
        "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
        "Skipping step. Attempted loss scale: 64, reducing to 32\n"
        "[2021-01-26 22:06:43,569] [INFO] [timer.py:166:stop] 0/520, SamplesPerSec=28.292804016474427\n",
        "none",
        id="scale-lowered",
    ),
    # microsoft/DeepSpeedExamples#444: DeepSpeed-Chat's PPO losses turn inf and training logs on
    pytest.param(
        "epoch: 0|step: 3183|ppo_ep: 1|act_loss: 30.921875|cri_loss: 30.515625|unsuper_loss: 0.0\n"
        "average reward score: -7.80859375\n"
        "epoch: 0|step: 3184|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\n"
        "average reward score: -6.359375\n",
        "numerical",
        id="ppo-losses-inf",
    ),
    # horovod/horovod#288: a healthy 2-node benchmark's NCCL 2.2 start-up (before NCCL's lines said
    # "NCCL INFO"); its version banner shows a process that created a communicator: a job's log
    pytest.param(
        "C4140-V100-1:340762:340937 [0] INFO NET : Using interface ib0:192.168.11.1<0>\n"
        "C4140-V100-1:340762:340937 [0] INFO NET/IB : Using interface ib0 for sideband communication\n"
        "C4140-V100-1:340762:340937 [0] INFO Using internal Network IB\n"
        "NCCL version 2.2.12+cuda9.0\n",
        "none",
        id="nccl-2.2-start-up",
    ),
    # NVIDIA/DeepLearningExamples#1092: Tacotron2 on several nodes, each linking its checkpoint to the
    # same 'last' path; Python's two-path OSError with EEXIST: processes raced on a path (the saving
    # code's bug), never a set-up to fix, even at start-up
    pytest.param(
        "FileExistsError: [Errno 17] File exists: 'checkpoint_Tacotron2_0.pt' -> "
        "'output/checkpoint_Tacotron2_last.pt' \n",
        "software_bug",
        id="rename-race",
    ),
    # THUDM/ChatGLM-6B#1203: a ROCm build's allocator, hipified
    pytest.param(REAL_HIP_OOM + "\n", "gpu_oom", id="hip-oom"),
    # modelscope/ms-swift#1538: accelerate refusing device_map='auto' under a distributed launch
    pytest.param(
        "You can't train a model that has been loaded with `device_map='auto'` in any distributed mode. "
        "Please rerun your script specifying `--num_processes=1` or by launching with `python {{myscript.py}}`\n",
        "configuration",
        id="device-map-auto",
    ),
    # NVIDIA/NeMo#10997: Open MPI started by srun without SLURM's PMI
    pytest.param(
        'The application appears to have been direct launched using "srun",\n'
        "but OMPI was not built with SLURM's PMI support and therefore cannot\n"
        "execute. There are several options for building PMI support under\n",
        "configuration",
        id="ompi-without-pmi",
    ),
    # NVIDIA/NeMo#14829: srun's task launch failing under --mpi=pmix: no task ran
    pytest.param(
        "srun: StepId=<id>.0 aborted before step completely launched.\n"
        "srun: error: task 0 launch failed: Unspecified error\n",
        "configuration",
        id="srun-task-launch",
    ),
]


@pytest.mark.parametrize(("text", "category"), _IN_THEIR_OWN_WORDS)
def test_read_as_what_its_component_says(tmp_path: Path, text: str, category: str) -> None:
    """Each row is a failure (or a healthy run) in the words of the component that printed it; the
    verdict's category is what those words mean, and none of these names a rank."""
    v = analyze_text(tmp_path, text)
    assert str(v.category) == category
    assert v.culprit.ranks == []


@pytest.mark.parametrize(
    ("text", "category"),
    [
        # a node's own fault at launch (a connection to slurmd) stays the scheduler's; the launch
        # line's errmsg, not the line, says whose (src/api/step_launch.c's format string with
        # slurm_strerror's text filled in)
        pytest.param(
            "srun: error: task 3 launch failed: Communication connection failure\n",
            "scheduler",
            id="launch-node-fault",
        ),
    ],
)
def test_what_stays_as_it_was(tmp_path: Path, text: str, category: str) -> None:
    """The launch readings above are narrow: a node's own launch fault keeps the scheduler's
    reading."""
    assert str(analyze_text(tmp_path, text).category) == category


def test_programming_error_in_a_library_source_checkout_is_its_bug(tmp_path: Path) -> None:
    """A library installed editable (``pip install -e``) raises from its ``src/<package>/`` tree,
    not site-packages, named as its project is (lines from transformers PR #38294); the user's own
    code under another ``src/`` keeps the user's reading."""
    tail = (
        '[rank1]:     index = current_device.current_device() if device_type != "cpu" else None\n'
        "[rank1]: UnboundLocalError: local variable 'current_device' referenced before assignment\n"
    )
    library = (
        '[rank1]:   File "/home/marc/transformers/src/transformers/integrations/tensor_parallel.py", line 79, in f\n'
    )
    assert str(analyze_text(tmp_path, library + tail).category) == "software_bug"
    # the user's own code under a src/: beside it, in Docker's /usr/src/app, in a template's src/models
    for i, path in enumerate(("/home/marc/project/src/train.py", "/usr/src/app/train.py", "/w/tmpl/src/models/m.py")):
        script = f'[rank1]:   File "{path}", line 79, in f\n'
        assert str(analyze_text(tmp_path, script + tail, f"script{i}.txt").category) == "application_error", path


def test_a_ray_task_oom_is_the_gpus_unless_rays_memory_monitor_killed_it(tmp_path: Path) -> None:
    """Ray re-raises a task's OutOfMemoryError under a class named for it (NVIDIA-NeMo/RL#3793):
    torch's GPU OOM, unless the traceback goes on with Ray's memory monitor (the node's RAM)."""
    head = (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::DTensorPolicyWorkerV2.get_logprobs() "
        "(pid=2671339, ip=10.65.16.209, actor_id=d5836b60449efbd220b3c2f406000000, repr=DTensorPolicyWorkerV2[rank=0])\n"
    )
    assert str(analyze_text(tmp_path, head).category) == "gpu_oom"
    monitor = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    v = analyze_text(tmp_path, head + '  File "/w/x.py", line 1, in f\n' + monitor, "host.txt")
    assert str(v.category) == "host_oom"
    assert any("memory monitor" in r for r in v.reasons)


def test_deepspeeds_launcher_start_up_is_a_jobs_log(tmp_path: Path) -> None:
    """The deepspeed launcher's own start-up lines (hongbomiao/hongbomiao.com#37505) are a job's,
    so a healthy start-up paste reads as no failure, not as "not a job's log"."""
    log = (
        "[2025-12-28 05:01:35,972] [WARNING] [runner.py:232:fetch_hostfile] Unable to find hostfile, "
        "will proceed with training with local resources only.\n"
        "[2025-12-28 05:01:38,135] [INFO] [launch.py:162:main] WORLD INFO DICT: {'localhost': [0, 1]}\n"
        "[2025-12-28 05:01:38,135] [INFO] [launch.py:168:main] nnodes=1, num_local_procs=2, node_rank=0\n"
        "[2025-12-28 05:01:38,135] [INFO] [launch.py:180:main] dist_world_size=2\n"
    )
    assert str(analyze_text(tmp_path, log).category) == "none"


def test_torchs_oom_class_is_a_gpu_oom_whatever_the_message(tmp_path: Path) -> None:
    """A paste that rewords the allocator's message keeps torch's class (NVIDIA-NeMo/RL#2871); a
    frame's source line naming the class is code, not the error."""
    oom = "torch.OutOfMemoryError: Tried to allocate 12.60 GiB. GPU had 12.44 GiB free of 79.19\n"
    assert str(analyze_text(tmp_path, oom).category) == "gpu_oom"
    frame = (
        'Traceback (most recent call last):\n  File "/w/t.py", line 3, in f\n    except torch.cuda.OutOfMemoryError:\n'
    )
    assert str(analyze_text(tmp_path, frame + "ValueError: bad shape\n", "frame.txt").category) != "gpu_oom"


def test_tensorflows_warning_inside_a_keras_bar_is_no_error(tmp_path: Path) -> None:
    """TensorFlow's C++ log prefix ("<time>.<micros>: W file:line] ") says its severity, wherever
    Keras printed it on the line (tensorflow/tensorflow#33809); its "E" form stays an error."""
    bar = "999/1000 [============================>.] - ETA: 0s - loss: 83.1715 - accuracy: 0.0000e+00"
    prefix = "2019-11-13 21:28:58.423118: {} tensorflow/core/grappler/optimizers/implementation_selector.cc:310] "
    msg = "Skipping optimization due to error while loading function libraries: Invalid argument"
    done = "\n1000/1000 [==============================] - 133s 133ms/step - loss: 83.1631\nEpoch 2/150\n"
    assert str(analyze_text(tmp_path, bar + prefix.format("W") + msg + done).category) == "none"
    assert str(analyze_text(tmp_path, bar + prefix.format("E") + msg + done, "e.txt").category) != "none"
    # a failing op is logged at W as well, and that is an error (TF's OP_REQUIRES)
    op = prefix.format("W").replace("grappler/optimizers/implementation_selector.cc:310", "framework/op_kernel.cc:1753")
    failed = op + "OP_REQUIRES failed at save_restore_v2_ops.cc:109 : Permission denied: /ckpt/model; Permission denied"
    assert str(analyze_text(tmp_path, bar + failed + done, "op.txt").category) != "none"


# ecmwf/anemoi-core#1064: two ranks' watchdogs, one collective call (SeqNum 4832284), two collectives
ANEMOI_WATCHDOGS = (
    "[rank0]:[E420 19:44:35.569754537 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=4832284, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
    "1800051 milliseconds before timing out.\n"
    "[rank5]:[E420 19:44:36.136978018 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=4832284, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
    "1800059 milliseconds before timing out.\n"
)


def test_one_collective_call_named_as_two_collectives_is_a_mismatch(tmp_path: Path) -> None:
    """Rank 0 timed out in ALLREDUCE #4832284 and rank 5 in BROADCAST #4832284: the ranks took
    different paths (anemoi's time-limit callback stopped rank 0 alone). Ranks 1 to 4 printed
    nothing, but the conflict is the evidence, and two sides name no culprit."""
    v = analyze_text(tmp_path, ANEMOI_WATCHDOGS)
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks == []
    assert any("#4832284 as different collectives" in r for r in v.reasons)
    # the same call named alike on both ranks is the usual hang: a rank that printed nothing is named
    same = ANEMOI_WATCHDOGS.replace("OpType=BROADCAST", "OpType=ALLREDUCE")
    assert str(analyze_text(tmp_path, same, "same.txt").category) == "hang"


def test_a_watchdog_line_wrapped_inside_a_word_is_still_the_watchdogs(tmp_path: Path) -> None:
    """A terminal paste broke "milliseconds" in two (InternLM/xtuner#390): still torch's watchdog,
    not a file that "does not look like a job's log"."""
    line = (
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, Timeout(ms)=1800000) "
        "ran for 1808442 millis econds before timing out.\n"
    )
    assert str(analyze_text(tmp_path, line).category) == "hang"


def test_training_under_way_shows_every_rank_registered(tmp_path: Path) -> None:
    """Lightning prints one "Initializing distributed" line per rank; a paste that kept rank 0's
    alone (Lightning-AI/pytorch-lightning#8707's wording) is no stalled start-up when the progress
    bar runs after it (#4225's bar): training needs every rank in the process group."""
    join = "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/2\n"
    bar = (
        "Epoch 0:   3%|▎         | 1/35 [00:08<04:50,  8.54s/it, loss=10.457, v_num=193413]\n"
        "Epoch 0:   6%|▌         | 2/35 [00:11<03:06,  5.66s/it, loss=10.457, v_num=193413]\n"
    )
    assert str(analyze_text(tmp_path, join + bar).category) == "none"
    # without training, one rank of two announced and nothing more is still a start-up that waits
    assert str(analyze_text(tmp_path, join, "alone.txt").category) == "configuration"


# Lightning-AI/pytorch-lightning#4225: a DDP run's progress bar, one step a line
BAR_4225 = [
    "Epoch 0:   3%|▎         | 1/35 [00:08<04:50,  8.54s/it, loss=10.457, v_num=193413]",
    "Epoch 0:   6%|▌         | 2/35 [00:11<03:06,  5.66s/it, loss=10.457, v_num=193413]",
    "Epoch 0:   9%|▊         | 3/35 [00:14<02:29,  4.68s/it, loss=10.122, v_num=193413]",
    "Epoch 0:   9%|▊         | 3/35 [00:14<02:29,  4.68s/it, loss=9.858, v_num=193413]",
]


@pytest.mark.parametrize(
    "line",
    [
        # wandb's FAQ quotes the line its client prints while the network is down (docs.wandb.ai, "How do I deal
        # with network issues?"); the run goes on, and wandb syncs later
        "wandb: Network error (ConnectionError), entering retry loop.",
        # Lightning's batch-size finder after the OOM it caught (src/lightning/pytorch/tuner/batch_size_scaling.py:
        # rank_zero_info(f"Batch size {batch_size} {desc}, trying batch size {new_size}"), desc "failed")
        "Batch size 1024 failed, trying batch size 512",
    ],
)
def test_an_error_line_the_job_went_on_from_is_not_its_failure(tmp_path: Path, line: str) -> None:
    """An error line no signature knows, with training steps after it, did not stop the job: the
    verdict says no failure and names the line in a warning. At the log's end it is still the
    unexplained error "never silent" reports."""
    went_on = analyze_text(tmp_path, "\n".join([BAR_4225[0], line, *BAR_4225[1:]]) + "\n")
    assert str(went_on.category) == "none"
    assert any("went on from them" in w and line[:30] in w for w in went_on.warnings)
    at_end = analyze_text(tmp_path, "\n".join([*BAR_4225[:2], line, BAR_4225[2]]) + "\n", "end.txt")
    assert str(at_end.category) == "unknown"


def test_a_warning_the_job_went_on_from_gives_way_to_the_failure_after_it(tmp_path: Path) -> None:
    """torch's "Can't initialize NVML" (torch/cuda/__init__.py's warnings.warn) with steps after it
    did not stop the job: alone it is no failure, and an OOM later is the failure, not the
    warning. A launcher's warning that it is shutting the workers down keeps its reading."""
    nvml = "/usr/local/lib/python3.11/site-packages/torch/cuda/__init__.py:953: UserWarning: Can't initialize NVML"
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.06 GiB is free."
    )
    went_on = [BAR_4225[0], nvml, *BAR_4225[1:]]
    assert str(analyze_text(tmp_path, "\n".join(went_on) + "\n").category) == "none"
    assert str(analyze_text(tmp_path, "\n".join([*went_on, oom]) + "\n", "oom.txt").category) == "gpu_oom"
    hup = "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers"
    assert (
        str(analyze_text(tmp_path, "\n".join([BAR_4225[0], hup, *BAR_4225[1:]]) + "\n", "hup.txt").category) != "none"
    )


def _titan(rank: int, step: int) -> str:
    """torchtitan's step line (metrics.py MetricsProcessor.log), under torchrun's rank prefix."""
    return (
        f"[rank{rank}]:[titan] 2025-01-01 00:00:{step:02d},000 - root - INFO - step: {step:2}  loss: 11.83506  "
        "grad_norm:  9.6669  memory: 48.87GiB(51.44%)  tps: 4,376  tflops: 253.41  mfu: 25.62%"
    )


def test_a_traceback_the_same_rank_trained_on_from_was_caught(tmp_path: Path) -> None:
    """A traceback a trainer caught and logged (requests' raise_for_status wording: "502 Server
    Error: Bad Gateway for url: ...") with the same rank's steps after it is not the failure. A
    rank's uncaught error followed by its peers' steps still is: a peer prints a step or two
    before the collective that waits for the dead rank blocks."""
    tb = [
        "[rank3]:Traceback (most recent call last):",
        '[rank3]:  File "/usr/lib/python3.10/site-packages/requests/models.py", line 1021, in raise_for_status',
        "[rank3]:    raise HTTPError(http_error_msg, response=self)",
        "[rank3]:requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: https://huggingface.co/api/x",
    ]
    peers = [_titan(r, 21) for r in (0, 1, 2)]
    died = analyze_text(tmp_path, "\n".join([_titan(3, 20), *tb, *peers]) + "\n")
    assert str(died.category) != "none" and died.culprit.ranks == [3]
    own = [_titan(3, s) for s in (21, 22, 23)]
    caught = analyze_text(tmp_path, "\n".join([_titan(3, 20), *tb, *peers, *own]) + "\n", "caught.txt")
    assert str(caught.category) == "none"
    assert any("a trainer caught" in w for w in caught.warnings)


# CPython's PyErr_WriteUnraisable: "Exception ignored in: <obj>" over the traceback of an exception
# raised in __del__ at exit (torch's DataLoader iterator after a Lightning run, the wording of many
# pastes; the assert is multiprocessing/process.py's)
IGNORED_TB = [
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2b1c3d4ee0>",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__',
    "    self._shutdown_workers()",
    '  File "/usr/lib/python3.10/multiprocessing/process.py", line 160, in is_alive',
    "    assert self._parent_pid == os.getpid(), 'can only test a child process'",
    "AssertionError: can only test a child process",
]


def test_an_exception_cpython_ignored_is_no_failure_even_at_the_end(tmp_path: Path) -> None:
    """No training need follow: CPython's header says the process went on. The same traceback
    without the header is still the failure."""
    v = analyze_text(tmp_path, "\n".join([*BAR_4225, *IGNORED_TB]) + "\n")
    assert str(v.category) == "none"
    assert any("CPython printed as ignored" in w for w in v.warnings)
    raised = analyze_text(tmp_path, "\n".join([*BAR_4225, *IGNORED_TB[1:]]) + "\n", "raised.txt")
    assert str(raised.category) != "none"


@pytest.mark.parametrize(
    "line",
    [
        # pytorch/pytorch#121834 (PyTorch 2.3's Conv_v8.cpp: one cuDNN plan skipped, the next one run)
        "/opt/conda/lib/python3.10/site-packages/torch/autograd/graph.py:744: UserWarning: Plan failed with a "
        "cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: "
        "CUDNN_STATUS_NOT_SUPPORTED (Triggered internally at /opt/conda/conda-bld/pytorch_1712608935911/work/aten/"
        "src/ATen/native/cudnn/Conv_v8.cpp:919.)",
        # NVIDIA/Fuser#2497 (ProcessGroupNCCL's watchdog at a normal exit, LOG(INFO))
        "[I628 20:15:42.000370615 ProcessGroupNCCL.cpp:1501] [PG  Rank 1] main process destroyed cuda before "
        "watchdog loop exited, terminating watchdog. (Watchdog caught exception: CUDA error: driver shutting down",
        # deepspeedai/DeepSpeed op_builder/builder.py probe_is_compatible (import goes on without the op)
        " [WARNING]  evoformer_attn compatibility check failed (CUDA_HOME does not exist, unable to compile CUDA "
        "op(s)), treating the op as not compatible",
        # NeMo's logger at W and DeepSpeed's at INFO (nemo/utils/formatters/base.py; deepspeed/utils/logging.py)
        "[NeMo W 2025-01-05 10:00:01 exp_manager:123] Failed to save tokenizer",
        "[2025-01-05 10:00:01,123] [INFO] [engine.py:123:__init__] Could not find the checkpoint, skipping",
    ],
)
def test_benign_lines_of_a_healthy_run_are_not_its_failure(tmp_path: Path, line: str) -> None:
    """Lines a healthy run prints, in the frameworks' own words: between steps and as the last line."""
    assert str(analyze_text(tmp_path, "\n".join([*BAR_4225[:2], line, *BAR_4225[2:]]) + "\n").category) == "none"
    assert str(analyze_text(tmp_path, "\n".join([*BAR_4225, line]) + "\n", "end.txt").category) == "none"


@pytest.mark.parametrize(
    "line",
    [
        "[exiting program after 230.01 minutes] datetime: 2025-01-05 10:00:04 ",  # Megatron --exit-duration-in-mins
        "[exiting program at iteration 2] datetime: 2026-08-17 11:36:02 ",  # Megatron --exit-interval
        "[rank0]:[titan] 2025-11-25 19:45:03,885 - root - INFO - Training completed",  # torchtitan trainer.py
        "Training completed after 10 iterations at 2025-01-05 10:05:01. Total running time: 5min 0s",  # Ray Tune
    ],
)
def test_a_frameworks_planned_end_is_the_jobs_end(tmp_path: Path, line: str) -> None:
    v = analyze_text(tmp_path, "\n".join([*BAR_4225, line]) + "\n")
    assert str(v.category) == "none" and "ended well" in v.summary


def test_terminal_colour_codes_do_not_hide_a_lines_prefix(tmp_path: Path) -> None:
    """Ray's log monitor colours its labels even into a file: the label is still peeled."""
    lines = [
        "\x1b[36m(RayTrainWorker pid=711)\x1b[0m Traceback (most recent call last):",
        '\x1b[36m(RayTrainWorker pid=711)\x1b[0m   File "/work/train.py", line 107, in train_loop',
        "\x1b[36m(RayTrainWorker pid=711)\x1b[0m torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.06 GiB is free.",
    ]
    v = analyze_text(tmp_path, "\n".join(lines) + "\n")
    assert str(v.category) == "gpu_oom"
    assert v.root_event is not None and v.root_event.text.startswith("torch.OutOfMemoryError")


@pytest.mark.parametrize(
    "prefix",
    [
        "[rank: 2] ",  # lightning_utilities rank_prefixed_message: f"[rank: {rank}] {message}"
        "[rank=2] ",  # NVIDIA-NeMo/Speech#14938's per-rank lines ("[rank=2] 2025-10-15 23:16:43,408 - WARNING - ...")
    ],
)
def test_a_rank_prefix_in_lightnings_and_trainers_own_form_names_the_rank(tmp_path: Path, prefix: str) -> None:
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.06 GiB is free."
    )
    v = analyze_text(tmp_path, "\n".join([*BAR_4225, prefix + oom]) + "\n")
    assert str(v.category) == "gpu_oom" and v.culprit.ranks[:1] == [2]
    warned = [
        f"[rank={r}] 2025-10-15 23:16:43,408 - WARNING - Skipping execution of on_train_start because OneLogger "
        "is not enabled."
        for r in (1, 2, 3)
    ]
    assert str(analyze_text(tmp_path, "\n".join(warned) + "\n", "warned.txt").category) == "none"


# A retrieval trainer's progress line (MCC-WH/Token, https://github.com/MCC-WH/Token/issues/7, a healthy
# 4-GPU run its maintainer pasted): "Top1 error" is a metric, and 100.0000 its value at step 0
TOKEN_7 = [
    ">> Train Epoch: [0] [   0/4003] eta: 7:57:37 ArcFace loss: 17.7435 Top1 error: 100.0000 Top5 error: "
    "100.0000 iter time: 7.1591 s max mem: 16887 MB",
    ">> Train Epoch: [0] [  10/4003] eta: 2:35:33 ArcFace loss: 17.6894 Top1 error: 100.0000 Top5 error: "
    "100.0000 iter time: 2.3376 s max mem: 18134 MB",
]


def test_an_error_rate_a_training_loop_logs_is_a_metric_not_an_error(tmp_path: Path) -> None:
    """ "error: 100.0000" is a measurement (a number with a fraction after the word), so a healthy
    run logging it is not flagged; the rest of such a line still counts when it holds an error."""
    assert str(analyze_text(tmp_path, "\n".join(TOKEN_7) + "\n").category) == "none"
    from firstfault.match.unrecognised import is_error_line

    assert not is_error_line(TOKEN_7[0])
    assert is_error_line("ValueError: Top1 error: 100.0000 is not a valid metric value")
    assert is_error_line("NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129")


def test_a_paste_that_states_a_world_size_is_a_jobs_log(tmp_path: Path) -> None:
    """A distributed test's summary ("World Size: 16", ROCm/container-toolkit PR 75's pass log) holds
    no launcher or error line, but a world size is a distributed job's own fact: it is read (no
    failure), not refused. Text without one is still refused."""
    from firstfault.vocab.errors import BundleError

    rocm = "Job ID: 372\nTimestamp: 2026-01-06 06:43:27\nWorld Size: 16\nBackend: nccl/rccl\n"
    assert str(analyze_text(tmp_path, rocm).category) == "none"
    with pytest.raises(BundleError, match="does not look like the output of a training job"):
        analyze_text(tmp_path, "Job ID: 372\nTimestamp: 2026-01-06 06:43:27\nBackend: nccl/rccl\n", "other.txt")


def test_a_generic_cuda_failure_gives_way_to_the_context_nccl_prints_below_it(tmp_path: Path) -> None:
    """NCCL's CUDACHECK prints "Cuda failure 'invalid argument'" where cudaHostRegister fails, then
    the context on its way out (a blog's 4-GPU job, https://blog.gitcode.com/b8ec7f55eca44c1ea375b0102d4246dc.html,
    /dev/shm too small): the second line says what failed, so it reads configuration, not unknown."""
    text = (
        "NCCL WARN Cuda failure 'invalid argument'\n"
        "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-NzwJ7O (size 9637888)\n"
    )
    v = analyze_text(tmp_path, text)
    assert str(v.category) == "configuration"
    assert "shared memory segment" in v.summary
    assert any("says only that a call failed" in r for r in v.reasons)
