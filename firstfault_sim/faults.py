"""Fault kinds for the torch failure simulator and the small hooks that inject them.

The hooks are deliberately tiny: they only decide *whether* a fault fires at a
given point (rank, step, place in the step) or perform the one low-level action
that has to be real (send SIGKILL, shrink RLIMIT_AS; the NULL read lives in the
workload so its stack looks like user code). Every error *message* a parser will
later see is produced either by real software (torch, gloo, torchrun, CPython) or
by the workload's own application code, so nothing in here imitates PyTorch text.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class FaultKind:
    """Static description of one fault kind and the verdict firstfault should reach.

    ``category``/``action`` are the ground truth written into ``truth.json``; they
    live next to the injection logic so the two cannot drift apart.
    """

    name: str
    category: str
    action: str
    summary: str


#: Every supported fault kind, in the order the docs and CLI list them.
KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind("none", "none", "none", "healthy run; the job completes"),
        FaultKind(
            "exception",
            "application_error",
            "stop",
            "RuntimeError raised a few frames deep in the model code on --rank at --step",
        ),
        FaultKind(
            "sigkill",
            "host_oom",
            "stop",
            "rank sends itself SIGKILL, as the kernel OOM killer does; with no kernel log in the bundle the "
            "expected reading is a suspected OOM kill",
        ),
        FaultKind(
            "segfault",
            "process_crash",
            "restart",
            "real SIGSEGV (NULL read through ctypes) in a 'native extension' call",
        ),
        FaultKind(
            "hang",
            "hang",
            "restart",
            "rank blocks in Dataset.__getitem__ far longer than the process-group timeout",
        ),
        FaultKind(
            "desync",
            "collective_mismatch",
            "stop",
            "rank all-reduces a gradient buffer of a different size at --step",
        ),
        FaultKind(
            "host_oom",
            "host_oom",
            "stop",
            "rank asks for a huge activation workspace under RLIMIT_AS; allocation fails",
        ),
        FaultKind(
            "nan",
            "numerical",
            "stop",
            "rank's input batch is poisoned with NaN; the trainer's loss check raises",
        ),
        FaultKind(
            "straggler",
            "straggler",
            "none",
            "rank is ~300 ms slower every step from --step on; the job succeeds",
        ),
        FaultKind("exit_code", "application_error", "stop", "rank calls sys.exit(3) at --step"),
        FaultKind(
            "two_faults",
            "application_error",
            "stop",
            "--rank raises at --step; rank+1 hits a host OOM ~1.5 s later (root listed first)",
        ),
    )
}

FAULT_KINDS: tuple[str, ...] = tuple(KINDS)

#: Extra per-step delay of the straggler rank (seconds).
STRAGGLER_DELAY_S = 0.3
#: How long the second rank of ``two_faults`` is stuck in data loading before its own fault.
SECOND_FAULT_DELAY_S = 1.5
#: ``two_faults`` only: every rank's trainer flushes metrics for this long at exit (atexit),
#: as W&B/MLflow-style loggers do. It keeps the root rank's process alive after its
#: error.json is written, so torchrun (polling every 0.1 s) does not tear the group down
#: before rank+1's own fault ~1.5 s later.
EXIT_FLUSH_S = SECOND_FAULT_DELAY_S + 1.5
#: Size of the activation workspace requested by ``host_oom`` (bytes). Far larger
#: than RLIMIT_AS allows, so the allocation fails without touching real memory.
HOST_OOM_REQUEST_BYTES = 64 * 1024**3
#: Address-space head-room granted above the current VM size before allocating.
HOST_OOM_HEADROOM_BYTES = 512 * 1024**2


@dataclass(frozen=True)
class FaultPlan:
    """What to inject, where and when: shared by the orchestrator and the workload."""

    kind: str = "none"
    rank: int = 1
    step: int = 5
    world_size: int = 4
    pg_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; choose from {', '.join(FAULT_KINDS)}")

    @property
    def second_rank(self) -> int | None:
        """Rank of the later, non-root fault of ``two_faults`` (None for other kinds)."""
        if self.kind != "two_faults":
            return None
        return (self.rank + 1) % self.world_size

    def culprit_ranks(self) -> list[int]:
        """Ranks at fault, root first (what ``truth.json`` records)."""
        if self.kind == "none":
            return []
        second = self.second_rank
        return [self.rank] if second is None else [self.rank, second]

    def fires(self, kind: str, rank: int, step: int) -> bool:
        """True when ``kind`` is injected on ``rank`` at exactly ``step``."""
        return self.kind == kind and rank == self.rank and step == self.step

    @property
    def exit_flush_seconds(self) -> float:
        """Seconds the trainer's atexit metrics flush takes (non-zero only for ``two_faults``)."""
        return EXIT_FLUSH_S if self.kind == "two_faults" else 0.0

    @property
    def hang_seconds(self) -> float:
        """Hang long enough that the peers' collective timeout fires first by a wide margin."""
        return max(120.0, 20.0 * self.pg_timeout_s)


# ---------------------------------------------------------------------------
# hooks called from the workload
# ---------------------------------------------------------------------------


def data_item_delay(plan: FaultPlan, rank: int, step: int) -> float:
    """Seconds the data loader should stall for this batch (hang / two_faults' second rank)."""
    if plan.fires("hang", rank, step):
        return plan.hang_seconds
    if plan.kind == "two_faults" and rank == plan.second_rank and step == plan.step:
        return SECOND_FAULT_DELAY_S
    return 0.0


def poison_batch(plan: FaultPlan, rank: int, step: int) -> bool:
    """True when this rank's batch must carry a NaN (``nan`` kind)."""
    return plan.fires("nan", rank, step)


def compute_delay(plan: FaultPlan, rank: int, step: int) -> float:
    """Extra compute time of the straggler rank, from the onset step onwards."""
    if plan.kind == "straggler" and rank == plan.rank and step >= plan.step:
        return STRAGGLER_DELAY_S
    return 0.0


def raises_in_model(plan: FaultPlan, rank: int, step: int) -> bool:
    """True when the model code should hit its own RuntimeError (exception, two_faults root)."""
    return plan.fires("exception", rank, step) or plan.fires("two_faults", rank, step)


def wants_host_oom(plan: FaultPlan, rank: int, step: int) -> bool:
    """True when this rank should request an impossible host allocation."""
    if plan.fires("host_oom", rank, step):
        return True
    return plan.kind == "two_faults" and rank == plan.second_rank and step == plan.step


def desync_grad_elems(plan: FaultPlan, rank: int, step: int, numel: int) -> int:
    """Number of gradient elements this rank all-reduces (fewer on the desynced rank)."""
    if plan.fires("desync", rank, step):
        # Like a rank that also buckets a parameter the others treat as unused.
        return numel + numel // 2
    return numel


def kill_self_sigkill() -> None:
    """Deliver SIGKILL to this process: no Python cleanup, no error.json, no FR dump."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)  # pragma: no cover - SIGKILL cannot be caught


def limit_address_space(headroom: int = HOST_OOM_HEADROOM_BYTES) -> int:
    """Cap RLIMIT_AS just above the current VM size so a huge allocation fails for real.

    Returns the new soft limit. Only this process is affected, so the host is never at
    risk, and the failure comes from the real allocator rather than from us.
    """
    vm_kb = 0
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                vm_kb = int(line.split()[1])
                break
    limit = vm_kb * 1024 + headroom
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit
