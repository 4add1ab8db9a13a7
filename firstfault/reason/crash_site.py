"""Whose code a native crash was in: the innermost backtrace frame outside the C runtime.

A segmentation fault reads as ``process_crash``, "a crash with no deeper cause". But the signal
handler Open MPI installs in every MPI process prints the backtrace below its report
(``openmpi.stack_frame``), and the kernel's segfault line names the shared object the faulting
instruction is in (``kernel.segfault``, field library). When that object is a library's (NCCL,
Horovod's ``mpi_lib.so``, torch, an extension), the crash is that library's bug, as a Python
``AttributeError`` raised in site-packages is (``refine.apply_raise_site``).

Frames in the C runtime are skipped: frame 0 is the signal trampoline in libc or libpthread, and
a thread's start (``clone``, ``start_thread``) or ``abort`` sits there too. A crash in the NVIDIA
driver's user-space library (libcuda, libnvidia-*) keeps its reading: the driver crashes on a
failing GPU as well as on its own bug, and the log cannot tell which. Nor is a crash in the
program's own executable or in the Python interpreter a library's: no library is named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from firstfault.reason.refine import recategorize
from firstfault.vocab import Category, Event, Hypothesis

STACK_FRAME = "openmpi.stack_frame"
# the C runtime and the loader: where a signal lands and a thread starts, not whose code crashed
_RUNTIME = re.compile(r"(?:^|/)(?:libc|libpthread|libstdc\+\+|libgcc_s|libm|libdl|ld-linux[\w.-]*|linux-vdso)[.-]")
_DRIVER = re.compile(r"(?:^|/)(?:libcuda|libnvidia-[\w-]+)\.so")
# the interpreter: a crash there was set off by whatever called into it, not its own code
_INTERPRETER = re.compile(r"(?:^|/)libpython[\d.]*\.so")
_SONAME = re.compile(r"(?P<name>[^/]+?\.so)(?:\.[\d.]+)?$")


def crashed_in(root: Event, events: Sequence[Event]) -> str | None:
    """The shared object whose code crashed at ``root`` (a signal report or the kernel's segfault
    line), or None when no frame outside the C runtime is known."""
    objects: list[str] = []
    if root.fields.get("library"):
        objects = [root.fields["library"]]
    elif root.fields.get("mpi_host") and root.fields.get("pid"):
        frames = [
            e
            for e in events
            if e.signature == STACK_FRAME
            and e.source == root.source
            and e.fields.get("mpi_host") == root.fields["mpi_host"]
            and e.fields.get("pid") == root.fields["pid"]
        ]
        frames.sort(key=lambda e: int(e.fields.get("frame", "0")))
        objects = [e.fields.get("object", "") for e in frames]
    return next((o for o in objects if o and not _RUNTIME.search(o)), None)


def apply_crash_site(hyp: Hypothesis, events: Sequence[Event]) -> None:
    """A native crash inside a library's code is that library's bug (``software_bug``)."""
    root = hyp.root_event
    if root is None or hyp.category != Category.PROCESS_CRASH:
        return
    obj = crashed_in(root, events)
    if obj is None:
        return
    m = _SONAME.search(obj)
    if m is None or _INTERPRETER.search(obj):
        return  # the program's own executable, or the interpreter: no library to name
    name = m["name"]
    if _DRIVER.search(obj):
        hyp.reasons.append(f"the crash is in the NVIDIA driver's library {name}: a failing GPU or the driver's bug")
        return
    recategorize(hyp, Category.SOFTWARE_BUG)
    hyp.reasons.append(f"the crash is in {name}'s code (innermost frame outside the C runtime): that library's bug")
