"""A labelled case set made by the real simulator: every fault kind, several ranks and steps.

Ground truth comes from the injector (``truth.json``), never from firstfault. The plan is
deterministic for a seed, so a table in a note can be regenerated.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

KINDS = (
    "exception",
    "sigkill",
    "segfault",
    "hang",
    "desync",
    "host_oom",
    "nan",
    "straggler",
    "exit_code",
    "two_faults",
    "none",
)


@dataclass(frozen=True)
class CaseSpec:
    name: str
    fault: str
    rank: int
    step: int
    nproc: int
    max_restarts: int
    seed: int


def plan(count: int, seed: int = 0, nproc: int = 4) -> list[CaseSpec]:
    """``count`` cases cycling through every kind, with varied rank/step and a few restarts."""
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        rank = rng.randrange(nproc)
        step = rng.randrange(2, 8)
        restarts = 1 if i in (3, 14) else 0
        specs.append(CaseSpec(f"{i:03d}_{kind}_r{rank}_s{step}", kind, rank, step, nproc, restarts, seed + i))
    return specs


def generate(out: Path, count: int = 25, seed: int = 0, jobs: int = 2, timeout: float = 8.0) -> list[Path]:
    from firstfault_sim.torch_sim import simulate_torch

    out.mkdir(parents=True, exist_ok=True)

    def one(spec: CaseSpec) -> Path:
        return simulate_torch(
            out / spec.name,
            fault=spec.fault,
            rank=spec.rank,
            step=spec.step,
            nproc=spec.nproc,
            max_restarts=spec.max_restarts,
            timeout=timeout,
            seed=spec.seed,
        )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, plan(count, seed)))
