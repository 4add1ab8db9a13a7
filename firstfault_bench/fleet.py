"""``bench fleet``: how surely and how fast lemon nodes are found, and batch analysis throughput.

Lemons: a fleet is simulated at the verdict level (``firstfault_sim.fleet``; writing 10,000
bundles would take hours), its verdicts go through the real store and reputation code, and the
hosts the lemon test flags are scored against the simulator's truth (precision, recall), also
week by week to say how many days of history a lemon needs before it is found. Noise learning
is scored against the simulator's benign signatures.

Batch: bundles from ``simulate cluster`` (and any ``bench generate`` set given) are analysed
serially, in a local process pool and on a local Ray cluster with 1 and 2 workers; the rate is
bundles per second, and every executor's verdicts must equal the serial ones (run statistics
aside).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from firstfault.fleet.batch import BatchResult, comparable, find_bundles, run_pool, run_ray, run_serial
from firstfault.fleet.incident import incident_from_verdict
from firstfault.fleet.reputation import Policy, fleet
from firstfault.fleet.store import Store
from firstfault_sim.fleet import START, FleetConfig, simulate_fleet, truth, verdicts

WEEK = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class LemonScore:
    lemon_factor: float
    seed: int
    lemons: int
    found: int
    true_found: int
    precision: float
    recall: float
    gpu_precision: float
    gpu_recall: float
    noise_precision: float
    noise_recall: float
    median_days: float | None  # days of history before a found lemon was first flagged
    failed_jobs: int
    ingest_s: float
    detect_s: float


def score_lemons(cfg: FleetConfig, policy: Policy | None = None, weekly: bool = True) -> LemonScore:
    """Simulate ``cfg``, store its verdicts, run the lemon test, score it against the truth."""
    policy = policy or Policy(hosts=cfg.nodes, gpus_per_host=cfg.gpus_per_node)
    out = simulate_fleet(cfg)
    tr = truth(out)
    with Store(":memory:") as store:
        t0 = time.perf_counter()
        store.add(incident_from_verdict(v, job="?", source="fleet", added_at=0.0) for v in verdicts(out))
        t1 = time.perf_counter()
        rep = fleet(store, policy)
        t2 = time.perf_counter()
        true_hosts = {lemon["host"] for lemon in tr["lemons"]}
        found = set(rep.lemon_hosts())
        true_gpus = {f"{lemon['host']}/{_pci(lemon['gpu'])}" for lemon in tr["lemons"] if lemon["component"] == "gpu"}
        found_gpus = {p.place for p in rep.lemons("gpu")}
        noise_true = set(tr["noise_signatures"])
        noise_found = {s.signature for s in rep.signatures if s.noise}
        days = _days_to_flag(store, policy, true_hosts & found, cfg.days) if weekly else []
    return LemonScore(
        lemon_factor=cfg.lemon_factor,
        seed=cfg.seed,
        lemons=len(true_hosts),
        found=len(found),
        true_found=len(found & true_hosts),
        precision=_ratio(len(found & true_hosts), len(found)),
        recall=_ratio(len(found & true_hosts), len(true_hosts)),
        gpu_precision=_ratio(len(found_gpus & true_gpus), len(found_gpus)),
        gpu_recall=_ratio(len(found_gpus & true_gpus), len(true_gpus)),
        noise_precision=_ratio(len(noise_found & noise_true), len(noise_found)),
        noise_recall=_ratio(len(noise_found & noise_true), len(noise_true)),
        median_days=statistics.median(days) if days else None,
        failed_jobs=int(tr["failed"]),
        ingest_s=round(t1 - t0, 3),
        detect_s=round(t2 - t1, 3),
    )


def _pci(gpu: int) -> str:
    from firstfault_sim.cluster.topology import Cluster, ClusterShape

    return Cluster(ClusterShape(1)).gpu_pci(gpu)


def _ratio(a: int, b: int) -> float:
    return round(a / b, 4) if b else 1.0


def _days_to_flag(store: Store, policy: Policy, hosts: set[str], days: float) -> list[float]:
    """Per found lemon, the days of history (weekly checkpoints) before the test first flags it."""
    first: dict[str, float] = {}
    weeks = int(days // 7) + 1
    for w in range(1, weeks + 1):
        until = START + w * WEEK
        for h in set(fleet(store, policy, until=until).lemon_hosts()) & hosts:
            first.setdefault(h, min(w * 7.0, days))
    return sorted(first.values())


def sweep(base: FleetConfig, factors: list[float], seeds: list[int]) -> list[LemonScore]:
    return [score_lemons(replace(base, lemon_factor=f, seed=s)) for f in factors for s in seeds]


def render_lemons(rows: list[LemonScore], cfg: FleetConfig) -> str:
    head = (
        f"Fleet: {cfg.nodes:,} nodes x {cfg.gpus_per_node} GPUs, {cfg.jobs:,} jobs over {cfg.days:g} days, "
        f"{cfg.lemons} lemons; Table 5 rates of the Llama 3 paper\n\n"
        "| lemon factor | seed | failed jobs | lemons found / true | precision | recall | GPU P / R | "
        "noise P / R | median days to flag | ingest s | detect s |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r.lemon_factor:g} | {r.seed} | {r.failed_jobs:,} | {r.true_found}/{r.lemons} ({r.found} flagged) | "
        f"{r.precision:.3f} | {r.recall:.3f} | {r.gpu_precision:.2f} / {r.gpu_recall:.2f} | "
        f"{r.noise_precision:.2f} / {r.noise_recall:.2f} | "
        f"{'-' if r.median_days is None else f'{r.median_days:g}'} | {r.ingest_s} | {r.detect_s} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- batch


@dataclass(frozen=True, slots=True)
class BatchRow:
    executor: str
    workers: int
    bundles: int
    seconds: float
    rate: float
    startup_s: float
    identical: bool
    cpu_s: float  # CPU seconds the workers spent in the analyses (registry loads included)


def make_corpus(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """``count`` cluster-simulator bundles of random kinds on 2 to 8 hosts (8 GPUs each)."""
    from firstfault_sim.cluster import SimConfig, simulate_cluster
    from firstfault_sim.cluster.faults import FAULT_KINDS, parse_fault

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        kind = rng.choice(FAULT_KINDS)
        hosts = rng.choice((2, 4, 8))
        target = "" if kind in ("time_limit", "preemption") else f":host=gpu{rng.randrange(hosts) + 1:04d}"
        path = folder / f"cluster-{i:04d}-{kind}"
        if not path.exists():
            simulate_cluster(SimConfig(hosts=hosts, faults=(parse_fault(kind + target),), seed=seed + i), path)
        out.append(path)
    return out


def bench_batch(folder: Path, workers: list[int], ray: bool = True) -> list[BatchRow]:
    """Rates of the serial run, the process pool and Ray (local cluster) at each worker count."""
    paths = find_bundles(folder)
    t0 = time.perf_counter()
    serial = run_serial(paths)
    rows = [_row("serial", 1, serial, time.perf_counter() - t0, 0.0, serial)]
    for w in workers:
        t0 = time.perf_counter()
        res = run_pool(paths, w)
        rows.append(_row("pool", w, res, time.perf_counter() - t0, 0.0, serial))
    if ray:
        for w in workers:
            startup: list[float] = []
            t0 = time.perf_counter()
            res = run_ray(paths, w, started=startup.append)
            total = time.perf_counter() - t0
            rows.append(_row("ray", w, res, total - startup[0], startup[0], serial))
    return rows


def _row(name: str, w: int, res: list[BatchResult], seconds: float, startup: float, ref: list[BatchResult]) -> BatchRow:
    same = len(res) == len(ref) and all(
        a.path == b.path and a.key == b.key and a.error == b.error and comparable(a.verdict) == comparable(b.verdict)
        for a, b in zip(res, ref, strict=True)
    )
    cpu = sum(r.cpu_s for r in res)
    return BatchRow(
        name, w, len(res), round(seconds, 3), round(len(res) / seconds, 2), round(startup, 2), same, round(cpu, 2)
    )


def render_batch(rows: list[BatchRow]) -> str:
    one = {r.executor: r.rate for r in rows if r.workers == 1}
    out = [
        f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end\n",
        "| executor | workers | bundles | seconds | bundles/s | speed-up vs 1 worker | startup s | verdicts = serial "
        "| worker CPU s | cores the workers got |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        speed = r.rate / one[r.executor] if one.get(r.executor) else 1.0
        out.append(
            f"| {r.executor} | {r.workers} | {r.bundles} | {r.seconds} | {r.rate} | {speed:.2f}x | {r.startup_s} | "
            f"{'yes' if r.identical else 'NO'} | {r.cpu_s} | {r.cpu_s / r.seconds:.2f} |"
        )
    return "\n".join(out) + "\n"


def as_dicts(rows: list[Any]) -> list[dict[str, Any]]:
    from dataclasses import asdict

    return [asdict(r) for r in rows]
