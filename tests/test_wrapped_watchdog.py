"""A collective's timeout read from what a paste kept of it (corpus round 43).

Pasted terminals wrap torch's watchdog line and people paste only the C++ backtrace below it; both
are still the timeout, never "no failure" and never a set-up failure read from a tear-down. Each
text is real: the description of pytorch/pytorch#122850 (a test's rank-0-only all-reduce timing
out, hard-wrapped by the paste) and the backtrace frames of public watchdog timeouts
(``nccl.checktimeout_frame``'s source).
"""

from __future__ import annotations

from pathlib import Path

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


def test_a_watchdog_line_wrapped_inside_its_worknccl_is_still_the_timeout(tmp_path: Path) -> None:
    v = analyze_text(tmp_path, WRAPPED)
    assert str(v.category) == "hang"
    assert v.root_event is not None and v.root_event.signature == "nccl.watchdog_timeout"


def test_a_backtrace_through_checktimeout_is_a_timeout_not_a_teardown(tmp_path: Path) -> None:
    v = analyze_text(tmp_path, BACKTRACE)
    assert str(v.category) == "hang"
    assert v.root_event is not None and v.root_event.signature == "nccl.checktimeout_frame"
