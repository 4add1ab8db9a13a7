"""What one simulated job is and what it left: its configuration, its faults resolved to times
and places, and the outcome (every line per destination, and the facts truth.json is made of).

Apart from the engine (``scenario``) because the writers (``emit``, ``frdump``) and the audit
read an outcome without playing one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from firstfault_sim.cluster.clock import Clock
from firstfault_sim.cluster.faults import FaultSpec
from firstfault_sim.cluster.layout import Layout, ProcessGroups
from firstfault_sim.cluster.schedule import Blocked, Schedule
from firstfault_sim.cluster.topology import Cluster


@dataclass(frozen=True)
class SimConfig:
    """Everything that decides a bundle; the same config and seed give the same bytes."""

    hosts: int = 2
    gpus_per_host: int = 8
    layout: Layout = field(default_factory=lambda: Layout(tp=8))
    nccl_timeout_s: float = 600.0
    seed: int = 0
    clock_skew_s: float = 0.05
    noise: int = 1
    steps: int = 60
    step_time_s: float = 2.0
    faults: tuple[FaultSpec, ...] = ()
    kill_on_bad_exit: bool = True
    remote_errors: bool = True
    tee: int = 0  # torchrun --tee: 3 = stdout+stderr on the console, 2 = stderr only; 0 = by size
    fr_dumps: bool = True
    fr_entries: int = 20
    scheduler_logs: bool = True
    slurmd_timeout_s: float = 300.0
    hosts_per_leaf: int = 32
    nvlink_domain: int = 0
    job_id: int = 0

    @property
    def world(self) -> int:
        return self.hosts * self.gpus_per_host


@dataclass
class Fault:
    """A fault resolved to a time (true clock) and a place."""

    spec: FaultSpec
    t: float
    rank: int | None
    host: int
    local: int
    step: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.spec.kind


Line = tuple[float, int, str]


@dataclass
class Outcome:
    """What happened, as lines per destination, and the facts truth.json is made of."""

    cfg: SimConfig
    cluster: Cluster
    groups: ProcessGroups
    sched: Schedule
    clocks: list[Clock]
    t0: float
    t_train: float
    step_s: float
    job: int
    run_id: str
    faults: list[Fault]
    pid: list[int]
    agent_pid: list[int]
    stderr: dict[int, list[Line]] = field(default_factory=lambda: defaultdict(list))
    stdout: dict[int, list[Line]] = field(default_factory=lambda: defaultdict(list))
    agent: dict[int, list[Line]] = field(default_factory=lambda: defaultdict(list))
    srun: list[tuple[float, int, str, int | None]] = field(default_factory=list)
    kernel: dict[int, list[Line]] = field(default_factory=lambda: defaultdict(list))
    ctld: list[Line] = field(default_factory=list)
    exits: dict[int, tuple[float, int, str]] = field(default_factory=dict)
    blocked: dict[int, Blocked] = field(default_factory=dict)
    enter_t: dict[int, float] = field(default_factory=dict)
    dumps: dict[int, float] = field(default_factory=dict)
    error_json: dict[int, tuple[float, str, str]] = field(default_factory=dict)
    vanished: dict[int, float] = field(default_factory=dict)  # host -> time it died
    slow: dict[int, tuple[float, float]] = field(default_factory=dict)
    slow_step: int | None = None  # first step the slow GPU slows everyone down (synchronous training)
    slow_step_s: float = 0.0
    timeouts: dict[int, float] = field(default_factory=dict)
    end_t: float = 0.0
    job_state: str = "COMPLETED"
    exit_code: str = "0:0"
    completed: bool = False
    seq: int = 0

    def nseq(self) -> int:
        self.seq += 1
        return self.seq
