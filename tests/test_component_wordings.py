"""Failures (and healthy runs) in the words of the component that printed them, read as what
those words mean: torch's serialization, the kubelet, DeepSpeed's loss scaler and DeepSpeed-Chat,
NCCL, Python's OSError, PyTorch on ROCm, accelerate, Open MPI and srun.

Each row was misread or refused by a blind round (21 to 24) before its signature was mined. Each
text is a real line from the thread named beside it, or (where the comment says so) the
component's own format string with values filled in, as in a signature's examples.
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
