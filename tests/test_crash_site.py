"""Whose code a native crash was in (reason.crash_site), on real lines.

The Open MPI report is NVIDIA/nccl#1363's (a segfault in NCCL's topology search); the kernel
line is the leptonai/gpud example of kernel.segfault, and the libcuda one is from trixie#55 (a node's syslog; the paste had wrapped it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.pipeline import analyze

MPI_REPORT = """[mbay-csp2:627483] *** Process received signal ***
[mbay-csp2:627483] Signal: Segmentation fault (11)
[mbay-csp2:627483] Signal code:  (-6)
[mbay-csp2:627483] Failing at address: 0x3e80009931b
[mbay-csp2:627483] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x42520)[0x7f81fb0d1520]
[mbay-csp2:627483] [ 1] /home/administrator/nccl/build/lib/libnccl.so.2(+0x7e0d9)[0x7f81fb6490d9]
[mbay-csp2:627483] [ 2] /home/administrator/nccl/build/lib/libnccl.so.2(+0x7c2e4)[0x7f81fb6472e4]
"""


def test_segfault_inside_a_library_is_its_bug(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(MPI_REPORT)
    v = analyze(log)
    assert str(v.category) == "software_bug"
    assert any("libnccl.so's code" in r for r in v.reasons)


def test_frames_of_another_process_are_not_this_crash(tmp_path: Path) -> None:
    """Only the crashed process's own frames count: another pid's backtrace says nothing of it."""
    log = tmp_path / "log.txt"
    mine = MPI_REPORT.splitlines()[:5]
    other = [line.replace("627483", "627484") for line in MPI_REPORT.splitlines()[5:]]
    log.write_text("\n".join(mine + other) + "\n")
    v = analyze(log)
    assert str(v.category) == "process_crash"


@pytest.mark.parametrize(
    ("line", "category", "reason"),
    [
        (
            "kern  :warn  : 2025-01-21T04:41:44,285060+00:00 pt_main_thread[2536443]: segfault at 7f797fe00000 "
            "ip 00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]",
            "software_bug",
            "libnccl.so's code",
        ),
        # libcuda crashes on a failing GPU as well as on its own bug: no claim either way
        (
            "Mar 24 11:31:44 cn110 kernel: python[18851]: segfault at 1378 ip 00007fff859dbeff sp 00007fff3b60ce60 "
            "error 4 in libcuda.so.418.67[7fff858c5000+dec000]",
            "process_crash",
            "NVIDIA driver's library libcuda.so",
        ),
    ],
)
def test_kernel_segfault_names_the_library(tmp_path: Path, line: str, category: str, reason: str) -> None:
    log = tmp_path / "messages"
    log.write_text(line + "\n")
    v = analyze(log)
    assert str(v.category) == category
    assert any(reason in r for r in v.reasons)


def test_a_crash_in_the_program_itself_names_no_library(tmp_path: Path) -> None:
    """The innermost frame is the program's own executable: its own code, no library's bug."""
    log = tmp_path / "log.txt"
    log.write_text(
        "\n".join(MPI_REPORT.splitlines()[:5])
        + "\n[mbay-csp2:627483] [ 1] ./build/all_reduce_perf(+0x1a2b)[0x55d0c0a1a2b]\n"
        + "[mbay-csp2:627483] [ 2] /home/administrator/nccl/build/lib/libnccl.so.2(+0x7c2e4)[0x7f81fb6472e4]\n"
    )
    assert str(analyze(log).category) == "process_crash"
