"""Fleet simulator: months of jobs over a cluster, per-component failure rates from a published
study, a few lemon nodes, written as verdicts (or, for small fleets, as real bundles).

Rates. Meta, "The Llama 3 Herd of Models" (arXiv:2407.21783, 2024), Table 5: the root causes of
the 419 unexpected interruptions in a 54-day snapshot of Llama 3 405B pre-training on 16,384
H100 GPUs (2,048 hosts of 8). Each cause's count over 2,048 hosts x 54 days x 24 hours is its
hazard per host-hour; ``CAUSES`` lists them (they sum to 419) with the component that fails and
the cluster simulator's fault kind that plays it.

Assumptions (not from the study; each is a parameter of ``FleetConfig``, stated in docs/fleet.md):

* jobs: sizes 1 to 256 nodes (small jobs most common), durations log-uniform 1 to 48 hours,
  start uniform over the period, nodes drawn uniformly (no packing, no queue);
* jobs also fail by their own code (exception, host OOM, collective mismatch, data-loader hang)
  with probability ``app_failure`` at a uniform time: Table 5 covers one production run only;
* a lemon node fails ``lemon_factor`` times as often as a typical node, all of the excess
  through one bad component (a GPU, its NIC, or the host board);
* a verdict names the wrong host with probability ``misattribution`` (a peer of the job): the
  cluster-scale accuracy gate (tests/test_scale_attribution.py) holds top-1 at >= 95%;
* benign signatures (corrected PCIe / MCE / EDAC errors, an IB port state line) appear in the
  context of any job, failed or healthy, with probability ``noise_rate``: the fleet must learn
  them as noise.

What each fault kind leads to (category, action, root signature) is what firstfault itself
answered on a cluster-simulator bundle of that kind (``KIND_VERDICT``; the test re-checks a few).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from firstfault.vocab import Action, Category, Culprit, Event, Layer, Role, Verdict
from firstfault_sim.cluster.faults import KINDS

# Meta, Llama 3 paper, Table 5 (54 days, 16,384 H100 GPUs on 2,048 hosts)
META_HOSTS = 2048
META_DAYS = 54.0
META_INTERRUPTIONS = 419


@dataclass(frozen=True, slots=True)
class Cause:
    """One row of Table 5: name, count, the component that fails, the simulator kinds that play it."""

    name: str
    count: int
    component: str  # gpu, host, nic, link, software
    kinds: tuple[str, ...]


CAUSES: tuple[Cause, ...] = (
    Cause("Faulty GPU", 148, "gpu", ("xid79", "xid74")),
    Cause("GPU HBM3 Memory", 72, "gpu", ("xid48", "xid95")),
    Cause("Software Bug", 54, "software", ("nccl_bug",)),
    Cause("Network Switch/Cable", 35, "link", ("link_flap",)),
    Cause("Host Maintenance", 32, "host", ("node_failure",)),
    Cause("GPU SRAM Memory", 19, "gpu", ("xid94",)),
    Cause("GPU System Processor", 17, "gpu", ("xid119",)),
    Cause("NIC", 7, "nic", ("nic_down",)),
    Cause("NCCL Watchdog Timeouts", 7, "software", ("dataloader_hang",)),
    Cause("Silent Data Corruption", 6, "gpu", ("sdc",)),
    Cause("GPU Thermal Interface + Sensor", 6, "gpu", ("thermal",)),
    Cause("SSD", 3, "host", ("disk_full",)),
    Cause("Power Supply", 3, "host", ("node_failure",)),
    Cause("Server Chassis", 2, "host", ("node_failure",)),
    Cause("IO Expansion Board", 2, "host", ("node_failure",)),
    Cause("Dependency", 2, "software", ("nccl_bug",)),
    Cause("CPU", 2, "host", ("node_failure",)),
    Cause("System Memory", 2, "host", ("node_failure",)),
)
assert sum(c.count for c in CAUSES) == META_INTERRUPTIONS

#: the application's own failures (not in Table 5): kinds drawn uniformly
APP_KINDS = ("exception", "host_oom", "mismatch", "dataloader_hang")
#: benign signatures of the registry (role noise) that healthy and failed jobs alike print
NOISE_SIGNATURES = ("kernel.pcie_bus_error_corrected", "kernel.mce_corrected", "kernel.edac_corrected")
#: firstfault's answer on a 2-host cluster-simulator bundle of each kind (root signature; None: no root
#: event, the verdict is read from progress). Measured with ``firstfault analyze`` on ``simulate cluster``.
KIND_VERDICT: dict[str, str | None] = {
    "xid79": "kernel.xid.exclude",
    "xid48": "kernel.xid.exclude",
    "xid94": "kernel.xid.restart",
    "xid95": "kernel.xid.exclude",
    "xid119": "kernel.xid.exclude",
    "xid74": "kernel.xid.exclude",
    "nic_down": "nccl.ib_async_port_error",
    "link_flap": "nccl.ib_async_port_error",
    "host_oom": "kernel.oom_kill",
    "node_failure": "slurmctld.kill_on_failed_node",
    "thermal": None,
    "sdc": "python.floating_point",
    "nccl_bug": "nccl.warn.topo_attribute_missing",
    "dataloader_hang": "flightrec.missing",
    "mismatch": "flightrec.mismatched",
    "exception": "python.exception",
    "disk_full": "torch.save_write_failed",
}
#: kinds whose verdict names no host (the checkpoint volume is shared: firstfault blames none)
NO_HOST_KINDS = frozenset({"disk_full"})
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SIZE_WEIGHTS = (30, 20, 15, 12, 9, 6, 4, 3, 1)
START = 1767225600.0  # 2026-01-01T00:00:00Z
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class FleetConfig:
    nodes: int = 2000
    gpus_per_node: int = 8
    jobs: int = 10000
    days: float = 90.0
    lemons: int = 20
    lemon_factor: float = 150.0
    app_failure: float = 0.10
    misattribution: float = 0.05
    noise_rate: float = 0.3
    rate_scale: float = 1.0  # multiplies every Table 5 rate (small demos only; 1.0 is the study)
    max_nodes_per_job: int = 256
    hours: tuple[float, float] = (1.0, 48.0)
    whole_fleet: bool = False  # every job on every node (a small cluster: for ``write_bundles``)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.nodes < 2 or self.jobs < 1 or self.days <= 0 or not 0 <= self.lemons <= self.nodes:
            raise ValueError("a fleet needs >= 2 nodes, >= 1 job, a period > 0 and at most one lemon per node")


@dataclass(frozen=True, slots=True)
class Lemon:
    host: str
    component: str  # gpu, nic, host
    gpu: int | None


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job's truth: where it ran and what ended it (kind None: it finished)."""

    job: str
    start: float
    hours: float
    hosts: tuple[int, ...]
    kind: str | None = None
    cause: str | None = None
    host: int | None = None  # the true culprit host (index)
    gpu: int | None = None
    blamed: int | None = None  # the host the verdict names (misattribution)
    failed_at: float | None = None
    lemon: bool = False
    noise: tuple[str, ...] = ()


@dataclass
class FleetOutcome:
    config: FleetConfig
    lemons: list[Lemon]
    jobs: list[SimJob] = field(default_factory=list)

    def host(self, i: int) -> str:
        return host_name(i, self.config.nodes)


def host_name(i: int, nodes: int) -> str:
    """Hosts named as the cluster simulator names them (``gpu0001``...)."""
    return f"gpu%0{max(4, len(str(nodes)))}d" % (i + 1)


def simulate_fleet(cfg: FleetConfig) -> FleetOutcome:
    """Play ``cfg.jobs`` jobs; the same config and seed give the same fleet."""
    rng = random.Random(cfg.seed)
    lemon_idx = rng.sample(range(cfg.nodes), cfg.lemons)
    lemons = {i: _lemon(rng, i, cfg) for i in lemon_idx}
    out = FleetOutcome(cfg, [lemons[i] for i in sorted(lemons)])
    sizes = [s for s in SIZES if s <= min(cfg.nodes, cfg.max_nodes_per_job)]
    weights = SIZE_WEIGHTS[: len(sizes)]
    period = cfg.days * 86400.0
    starts = sorted(START + rng.random() * period for _ in range(cfg.jobs))
    for n, start in enumerate(starts):
        size = cfg.nodes if cfg.whole_fleet else rng.choices(sizes, weights)[0]
        hours = math.exp(rng.uniform(math.log(cfg.hours[0]), math.log(cfg.hours[1])))
        hosts = tuple(range(cfg.nodes)) if cfg.whole_fleet else tuple(rng.sample(range(cfg.nodes), size))
        job = SimJob(f"job-{n + 1:06d}", start, hours, hosts)
        out.jobs.append(_play(rng, cfg, job, lemons))
    return out


def _lemon(rng: random.Random, i: int, cfg: FleetConfig) -> Lemon:
    component = rng.choices(("gpu", "nic", "host"), (6, 2, 2))[0]
    return Lemon(host_name(i, cfg.nodes), component, rng.randrange(cfg.gpus_per_node) if component == "gpu" else None)


def _hazard() -> dict[str, float]:
    """Per host-hour hazard of each cause (Table 5 count over 2,048 hosts x 54 days x 24 h)."""
    return {c.name: c.count / (META_HOSTS * META_DAYS * 24.0) for c in CAUSES}


def _play(rng: random.Random, cfg: FleetConfig, job: SimJob, lemons: dict[int, Lemon]) -> SimJob:
    hz = {k: v * cfg.rate_scale for k, v in _hazard().items()}
    base = sum(hz.values()) * len(job.hosts)
    machine = sum(v for c, v in zip(CAUSES, hz.values(), strict=True) if c.component != "software")
    extra = {h: (cfg.lemon_factor - 1.0) * machine for h in job.hosts if h in lemons}
    total = base + sum(extra.values())
    t_hw = rng.expovariate(total) if total > 0 else math.inf
    t_app = rng.uniform(0, job.hours) if rng.random() < cfg.app_failure else math.inf
    noise = tuple(s for s in NOISE_SIGNATURES if rng.random() < cfg.noise_rate)
    if min(t_hw, t_app) >= job.hours:
        return _replace(job, noise=noise)
    if t_app < t_hw:
        kind, cause, host, gpu, is_lemon = rng.choice(APP_KINDS), "application", rng.choice(job.hosts), None, False
        t = t_app
    else:
        t = t_hw
        kind, cause, host, gpu, is_lemon = _which(rng, cfg, job, base, extra, lemons)
    if gpu is None:
        gpu = rng.randrange(cfg.gpus_per_node)
    blamed = host
    if len(job.hosts) > 1 and rng.random() < cfg.misattribution:
        blamed = rng.choice([h for h in job.hosts if h != host])
    return _replace(
        job,
        kind=kind,
        cause=cause,
        host=host,
        gpu=gpu,
        blamed=blamed,
        failed_at=job.start + t * HOUR,
        lemon=is_lemon,
        noise=noise,
    )


def _which(
    rng: random.Random, cfg: FleetConfig, job: SimJob, base: float, extra: dict[int, float], lemons: dict[int, Lemon]
) -> tuple[str, str, int, int | None, bool]:
    """Which cause fired, where: the fleet's base rates on any host, or a lemon's bad component."""
    x = rng.random() * (base + sum(extra.values()))
    if x < base:
        cause = rng.choices(CAUSES, [c.count for c in CAUSES])[0]
        return rng.choice(cause.kinds), cause.name, rng.choice(job.hosts), None, False
    x -= base
    for h, e in extra.items():
        if x < e or h == list(extra)[-1]:
            lemon = lemons[h]
            mine = [c for c in CAUSES if c.component == lemon.component]
            cause = rng.choices(mine, [c.count for c in mine])[0]
            return rng.choice(cause.kinds), cause.name, h, lemon.gpu, True
        x -= e
    raise AssertionError("unreachable")  # pragma: no cover


def _replace(job: SimJob, **kw: Any) -> SimJob:
    return SimJob(**{**asdict(job), **kw})


def verdicts(out: FleetOutcome) -> Iterator[dict[str, Any]]:
    """Each job's verdict as firstfault's JSON contract (``Verdict.to_dict()``), in job order."""
    from firstfault_sim.cluster.topology import Cluster, ClusterShape

    cluster = Cluster(ClusterShape(1, out.config.gpus_per_node))
    for job in out.jobs:
        hosts = [out.host(h) for h in job.hosts]
        yield _verdict(out, job, cluster).to_dict() | {
            "inputs": {"job": job.job, "path": f"fleet/{job.job}", "hosts": hosts}
        }


def _verdict(out: FleetOutcome, job: SimJob, cluster: Any) -> Verdict:
    end = job.failed_at or job.start + job.hours * HOUR
    context = [_event(i, sig, end, out.host(job.hosts[0]), None, Role.NOISE) for i, sig in enumerate(job.noise)]
    if job.kind is None or job.blamed is None:
        return Verdict(
            Category.NONE, Culprit(), Action.NONE, 0.9, "no failure found", None, [], 1.0, [], [], context=context
        )
    info = KINDS[job.kind]
    host = out.host(job.blamed)
    gpu = cluster.gpu_pci(job.gpu or 0)
    hosts = [] if job.kind in NO_HOST_KINDS else [host]
    links = (
        [f"{host}<->{out.host(next(h for h in job.hosts if h != job.blamed))}"]
        if info.category == "network" and len(job.hosts) > 1
        else []
    )
    culprit = Culprit(ranks=[], hosts=hosts, gpus=[gpu] if hosts else [], links=links)
    sig = KIND_VERDICT[job.kind]
    root = _event(len(context), sig, end, host if hosts else None, gpu if hosts else None, Role.ROOT) if sig else None
    if root is not None:
        root.category = Category(info.category)
    summary = f"{info.category.replace('_', ' ')} on {host}: {info.summary} (simulated at the verdict level)"
    return Verdict(
        Category(info.category), culprit, Action(info.action), 0.9, summary, root, [], 1.0, [], [], context=context
    )


def _event(i: int, sig: str, ts: float, host: str | None, gpu: str | None, role: Role) -> Event:
    return Event(
        id=i,
        source="fleet-simulator",
        line=1,
        text=f"(simulated verdict: {sig})",
        signature=sig,
        category=Category.UNKNOWN,
        layer=Layer.HARDWARE,
        role=role,
        ts=ts,
        host=host,
        gpu=gpu,
    )


def truth(out: FleetOutcome) -> dict[str, Any]:
    """What the fleet really was: the lemons, the noise signatures, counts by cause."""
    failed = [j for j in out.jobs if j.kind is not None]
    return {
        "schema": "firstfault.fleet-truth/v1",
        "config": asdict(out.config),
        "lemons": [asdict(lemon) for lemon in out.lemons],
        "noise_signatures": list(NOISE_SIGNATURES),
        "jobs": len(out.jobs),
        "failed": len(failed),
        "lemon_failures": sum(j.lemon for j in failed),
        "misattributed": sum(j.blamed != j.host for j in failed),
        "by_cause": dict(Counter(j.cause or "none" for j in out.jobs).most_common()),
        "source": "Meta, The Llama 3 Herd of Models (arXiv:2407.21783), Table 5: 419 interruptions, 54 days, "
        "16,384 H100 GPUs",
    }


def write_verdicts(out: FleetOutcome, folder: Path) -> Path:
    """``folder/verdicts.jsonl`` (one verdict per line) and ``folder/truth.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "verdicts.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for v in verdicts(out):
            f.write(json.dumps(v, separators=(",", ":")) + "\n")
    (folder / "truth.json").write_text(json.dumps(truth(out), indent=1), encoding="utf-8")
    return path


def write_bundles(out: FleetOutcome, folder: Path) -> list[Path]:
    """Every job as a real cluster-simulator bundle (``folder/job-NNNNNN``) with its truth.json.

    Needs ``whole_fleet`` and at most 16 nodes: the cluster simulator names a job's hosts
    ``gpu0001``... in order, so a fleet host keeps its name only when every job spans the fleet.
    The bundles' clocks are the cluster simulator's (one day), not the fleet's calendar."""
    from firstfault_sim.cluster import SimConfig, parse_fault, simulate_cluster

    cfg = out.config
    if not cfg.whole_fleet or cfg.nodes > 16:
        raise ValueError("bundles need a small fleet (at most 16 nodes) whose jobs span every node")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for n, job in enumerate(out.jobs):
        faults = () if job.kind is None else (parse_fault(_fault_spec(job, out)),)
        path = folder / job.job
        simulate_cluster(
            SimConfig(hosts=cfg.nodes, gpus_per_host=cfg.gpus_per_node, faults=faults, seed=cfg.seed + n), path
        )
        written.append(path)
    (folder / "truth.json").write_text(json.dumps(truth(out), indent=1), encoding="utf-8")
    return written


def _fault_spec(job: SimJob, out: FleetOutcome) -> str:
    """The cluster simulator's ``--fault`` for the job's true culprit (the verdict is firstfault's)."""
    assert job.kind is not None and job.host is not None
    host = out.host(job.host)
    mode = KINDS[job.kind].mode
    if job.kind in ("nic_down", "link_flap"):
        return f"{job.kind}:link={host}/{job.gpu or 0}"
    if mode in ("exit", "inside", "hang", "mismatch", "slow") and job.kind not in ("disk_full",):
        return f"{job.kind}:gpu={host}/{job.gpu or 0}"
    return f"{job.kind}:host={host}"
