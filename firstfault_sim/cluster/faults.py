"""Fault kinds of the cluster simulator, the verdict each should lead to, and ``--fault`` parsing.

The kinds cover the interruption categories of Meta's Llama 3 405B training report (GPU,
HBM, network switch/cable, host maintenance, NIC, NVLink, GSP, software bugs, ...) plus the
application faults users hit. Each kind says how it behaves (``mode``):

* ``exit``   the faulty process dies at once (an exception, a CUDA error, SIGKILL);
* ``hang``   the faulty process stops issuing collectives but stays alive;
* ``inside`` the faulty GPU never finishes the kernel it is in (the process is stuck in it);
* ``mismatch`` the faulty rank issues a collective of another size: the group hangs in it;
* ``net``    a port on one host's HCA goes down (for good, or flapping back too late);
* ``node``   the whole host disappears;
* ``slow``   the rank keeps working, slower (the job does not fail);
* ``sched``  SLURM ends the job (time limit, preemption).

``category``/``action`` are the ground truth written to ``truth.json``; ``culprit`` says what
the benchmark judges top-1 on: the ``rank``, the ``host`` or the ``link`` (a cable or port),
or the ``job`` (the scheduler ended it: no rank is to blame).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    mode: str
    category: str
    action: str
    culprit: str
    summary: str
    xid: int | None = None


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "xid79",
            "exit",
            "gpu_hardware",
            "exclude_and_restart",
            "rank",
            "GPU fell off the bus (Xid 79); the rank's CUDA calls fail with 'unknown error'",
            79,
        ),
        Kind(
            "xid48",
            "exit",
            "gpu_hardware",
            "exclude_and_restart",
            "rank",
            "HBM double-bit ECC error (Xid 48); the rank's next CUDA call fails",
            48,
        ),
        Kind(
            "xid94",
            "exit",
            "gpu_hardware",
            "restart",
            "rank",
            "contained uncorrectable ECC error (Xid 94): only the process on that GPU is killed",
            94,
        ),
        Kind(
            "xid95",
            "exit",
            "gpu_hardware",
            "exclude_and_restart",
            "rank",
            "uncontained uncorrectable ECC error (Xid 95): the GPU needs a reset",
            95,
        ),
        Kind(
            "xid119",
            "inside",
            "gpu_hardware",
            "exclude_and_restart",
            "rank",
            "GSP firmware stopped answering RPCs (Xid 119): the GPU hangs, its peers time out",
            119,
        ),
        Kind(
            "xid74",
            "exit",
            "gpu_hardware",
            "exclude_and_restart",
            "rank",
            "fatal NVLink error (Xid 74) on the rank's GPU",
            74,
        ),
        Kind(
            "nic_down",
            "net",
            "network",
            "exclude_and_restart",
            "host",
            "one HCA port of a host goes down and stays down; NCCL's IB retries run out",
        ),
        Kind(
            "link_flap",
            "net",
            "network",
            "restart",
            "link",
            "a cable / switch port flaps: down for longer than NCCL's IB retry window, then up",
        ),
        Kind(
            "host_oom", "exit", "host_oom", "stop", "rank", "the kernel's OOM killer kills one rank's process (SIGKILL)"
        ),
        Kind(
            "node_failure",
            "node",
            "scheduler",
            "exclude_and_restart",
            "host",
            "a host dies (power, kernel, maintenance): its processes vanish, SLURM marks it DOWN",
        ),
        Kind(
            "thermal",
            "slow",
            "straggler",
            "none",
            "rank",
            "one GPU runs hot and throttles: its rank's compute time grows, the job slows",
        ),
        Kind(
            "sdc",
            "exit",
            "numerical",
            "stop",
            "rank",
            "silent data corruption: one rank's loss becomes NaN first and its NaN check raises",
        ),
        Kind("nccl_bug", "exit", "software_bug", "stop", "rank", "NCCL internal error on one rank (ncclInternalError)"),
        Kind(
            "dataloader_hang",
            "hang",
            "hang",
            "restart",
            "rank",
            "one rank's data loader blocks; its peers time out in the next collective",
        ),
        Kind(
            "mismatch",
            "mismatch",
            "collective_mismatch",
            "stop",
            "rank",
            "one rank all-reduces a gradient bucket of another size: the group hangs",
        ),
        Kind("exception", "exit", "application_error", "stop", "rank", "the trainer raises in model code on one rank"),
        Kind(
            "disk_full",
            "exit",
            "storage_io",
            "stop",
            "host",
            "the checkpoint volume of one host fills up: its ranks fail writing the checkpoint",
        ),
        Kind("time_limit", "sched", "scheduler", "restart", "job", "SLURM's time limit ends the job"),
        Kind("preemption", "sched", "scheduler", "restart", "job", "SLURM preempts the job for a higher-priority one"),
    )
}
FAULT_KINDS: tuple[str, ...] = tuple(KINDS)

_SPEC = re.compile(r"^(?P<kind>[a-z0-9_]+)(?:@(?P<at>[^:]+))?(?::(?P<target>.+))?$")
_TARGET = re.compile(r"^(?:(?P<key>rank|host|gpu|link|nic)=)?(?P<val>[\w.\-/]+)$")


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """``KIND[@TIME][:TARGET]``: TIME is seconds after training starts (``300``, ``300s``, ``5m``)
    or a step (``step120``); TARGET is ``rank=N`` (or just ``N``), ``host=NAME``, ``gpu=HOST/K``
    or ``link=HOST/K`` (K the local GPU / HCA index)."""

    kind: str
    at_s: float | None = None
    at_step: int | None = None
    rank: int | None = None
    host: str | None = None
    local: int | None = None

    @property
    def info(self) -> Kind:
        return KINDS[self.kind]


def parse_fault(text: str) -> FaultSpec:
    m = _SPEC.match(text.strip())
    if not m or m["kind"] not in KINDS:
        raise ValueError(f"bad --fault {text!r}: KIND[@TIME][:TARGET] with KIND one of {', '.join(FAULT_KINDS)}")
    spec = FaultSpec(m["kind"])
    if m["at"]:
        at = m["at"].strip().lower()
        if at.startswith("step"):
            spec = replace(spec, at_step=int(at[4:]))
        elif at.endswith("m"):
            spec = replace(spec, at_s=float(at[:-1]) * 60)
        else:
            spec = replace(spec, at_s=float(at.rstrip("s")))
    if m["target"]:
        t = _TARGET.match(m["target"].strip())
        if not t:
            raise ValueError(f"bad fault target {m['target']!r}")
        key, val = t["key"] or "rank", t["val"]
        if key == "rank":
            spec = replace(spec, rank=int(val))
        elif key == "host":
            spec = replace(spec, host=val)
        else:
            host, _, local = val.partition("/")
            local = local.replace("mlx5_", "")
            spec = replace(spec, host=host, local=int(local) if local else None)
    return spec


def random_fault(rng: random.Random, kinds: tuple[str, ...] = FAULT_KINDS) -> FaultSpec:
    return FaultSpec(rng.choice(kinds))
