"""The audit's records: component classes, detection windows, evidence, blast radius.

Frozen records and closed enums, so the report (JSON, HTML, terminal) and the simulator
cross-check read the same facts the computation produced.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ComponentClass(StrEnum):
    GPU = "gpu"  # the GPU errors (Xid 79/48/95): the rank's CUDA calls fail
    GPU_HANG = "gpu_hang"  # the GPU stops answering (Xid 119, GSP): the rank's kernel never ends
    NVLINK = "nvlink"  # a fatal NVLink error (Xid 74) on one GPU
    NIC = "nic"  # one HCA port goes down
    HOST = "host"  # the whole host is lost (power, kernel, maintenance)
    LEAF = "leaf_switch"  # a leaf switch: one rail of every host under it
    RACK = "rack"  # a rack's power / PSU: every host in it


class Mechanism(StrEnum):
    OWN_ERROR = "own_error"  # the faulty rank's CUDA error
    IB_RETRY = "ib_retry"  # NCCL's IB retries run out on the path through the fault
    WATCHDOG = "watchdog"  # the collective timeout
    SCHEDULER = "scheduler"  # no surviving peer: slurmctld's SlurmdTimeout
    NONE = "none"  # nothing uses the component


@dataclass(frozen=True, slots=True)
class Detection:
    lo_s: float
    hi_s: float
    mechanism: Mechanism
    timeouts_fire: bool  # watchdog timeout lines (and, with dump on timeout, FR dumps) appear


@dataclass(frozen=True, slots=True)
class Evidence:
    where: str
    what: str
    collected: bool


@dataclass(frozen=True, slots=True)
class Blast:
    cls: ComponentClass
    component: str
    hosts: tuple[str, ...]
    direct_ranks: tuple[int, ...]
    first_hop_ranks: int  # peers in a group with a direct rank (they block first)
    groups_hit: dict[str, int]
    replicas_hit: int
    dp: int
    shards_without_replica: int  # DP groups the fault takes whole: no copy of those shards survives
    job_ranks_stopped: int
    detection: Detection
    evidence: tuple[Evidence, ...]
    attributable: bool
    attribution: str
    isolation: str
    culprit_key: str  # what a verdict should name: rank, host, link, switch, rack
