"""A failure read from what a paste kept of it (corpus rounds 43 and 44).

Pasted terminals wrap torch's watchdog line, people paste only the C++ backtrace below it, or only
NCCL's INFO lines (whose "file:line -> code" back trace says a call failed), and a terminal cuts
Ray's memory monitor mid-line; each is still the failure, never "no failure" and never a set-up
failure read from a tear-down. Each text is real: the description of pytorch/pytorch#122850 (a
test's rank-0-only all-reduce timing out, hard-wrapped by the paste), the backtrace frames of public
watchdog timeouts (``nccl.checktimeout_frame``'s source), NVIDIA/nccl#1405's back trace and
hiyouga/LlamaFactory#9258's cut line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paste_text import analyze_text

# pytorch/pytorch#122850's description, as pasted (lines wrapped at ~70 columns)
WRAPPED = (
    "NCCL version 2.19.3+cuda12.0\n"
    "[rank0]:[E327 17:04:16.986381360 ProcessGroupNCCL.cpp:565] [Rank 0]\n"
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2,\n"
    "OpType=ALLREDUCE, NumelIn=12, NumelOut=12, Timeout(ms)=1000) ran for\n"
    "1099 milliseconds before timing out.\n"
)

# a torch 2.4 job's watchdog timeout, the paste starting below the message (libtorch_cuda.so frames)
BACKTRACE = (
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7fbeb989ef86 in "
    "/data2/mqyu/anaconda3/envs/rnafm/lib/python3.12/site-packages/torch/lib/libc10.so)\n"
    "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
    "std::ratio<1l, 1000l> > >) + 0x1d2 (0x7fbebab8bf22 in "
    "/data2/mqyu/anaconda3/envs/rnafm/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so)\n"
    "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7fbebab92963 in "
    "/data2/mqyu/anaconda3/envs/rnafm/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so)\n"
)


# NVIDIA/nccl#1405: a Kubeflow PyTorchJob's NCCL INFO back trace, its WARN line not in the paste
NCCL_TRACE = (
    "kp-ddp-worker-0:3468:3905 [4] NCCL INFO transport/net.cc:1302 -> 6\n"
    "kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:698 -> 6\n"
    "kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]\n"
)

# hiyouga/LlamaFactory#9258: Ray's memory monitor killed the head worker; the paste stops mid-line
RAY_CUT = (
    "{'train_runtime': 23328.5006, 'train_samples_per_second': 0.391, 'train_steps_per_second': 0.006, "
    "'train_loss': 0.6281500965148419, 'epoch': 1.0}\n"
    "Memory on the node (IP: 10.1.180.84, ID: ba65c80c8aec6b1c406693f640c53f85422d4d73b069747d69875d42) where "
    "the task (task ID: d221d26232c9bae05def6a6d00dbd292d4fc77cc01000000, name=head, rank=0,, pid=4503, memory used\n"
)


def test_nccls_own_back_trace_is_a_failed_call(tmp_path: Path) -> None:
    # no error line of its own (the WARN line that names the call is not in the paste), so not a
    # root; but no healthy job either: before any training line, the set-up's, as an unexplained
    # error is read
    v = analyze_text(tmp_path, NCCL_TRACE)
    assert str(v.category) == "configuration"
    assert v.summary.startswith("a call failed, and no line in the log says why")
    assert "transport/net.cc:1302 -> 6" in v.summary


@pytest.mark.parametrize(
    ("text", "category", "signature"),
    [
        pytest.param(WRAPPED, "hang", "nccl.watchdog_timeout", id="watchdog-line-wrapped-inside-worknccl"),
        pytest.param(BACKTRACE, "hang", "nccl.checktimeout_frame", id="checktimeout-frame-not-a-teardown"),
        pytest.param(RAY_CUT, "host_oom", "ray.oom_memory_on_node_cut", id="ray-oom-kill-cut-mid-line"),
    ],
)
def test_what_a_paste_kept_is_still_the_failure(tmp_path: Path, text: str, category: str, signature: str) -> None:
    v = analyze_text(tmp_path, text)
    assert str(v.category) == category
    assert v.root_event is not None and v.root_event.signature == signature
