"""Cluster-scale failure simulator: 8 to 16,384 ranks, Megatron-style layouts, real wording.

``simulate_cluster(cfg, out)`` plays one job (``scenario``) and writes it as a bundle
(``emit``) laid out like a real SLURM + torchrun job. Modules: ``topology`` (hosts, GPUs,
NICs, rails, switches), ``layout`` (TP/CP/DP/PP/EP process groups), ``schedule`` (per-step
collectives, who blocks where), ``faults`` (kinds and ``--fault`` specs), ``scenario`` (the
event engine), ``templates`` (every line, with its source), ``clock`` (per-host skew and time
formats), ``frdump`` (flight-recorder pickles), ``emit`` (the files). See
docs/cluster-simulator.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firstfault_sim.cluster.faults import FAULT_KINDS, KINDS, FaultSpec, parse_fault

if TYPE_CHECKING:  # the engine and the writer load when a job is simulated: the CLI's help stays fast
    from firstfault_sim.cluster.outcome import SimConfig

__all__ = ["FAULT_KINDS", "KINDS", "FaultSpec", "Layout", "SimConfig", "parse_fault", "simulate_cluster"]


def __getattr__(name: str) -> Any:
    if name == "Layout":
        from firstfault_sim.cluster.layout import Layout

        return Layout
    if name == "SimConfig":
        from firstfault_sim.cluster.outcome import SimConfig

        return SimConfig
    raise AttributeError(name)


def simulate_cluster(cfg: SimConfig, out: Path | str) -> dict[str, Any]:
    """Simulate ``cfg`` and write the bundle under ``out``; returns truth.json's content."""
    from firstfault_sim.cluster.emit import write_bundle
    from firstfault_sim.cluster.scenario import simulate

    t0 = time.perf_counter()
    outcome = simulate(cfg)
    t1 = time.perf_counter()
    truth = write_bundle(outcome, Path(out))
    truth["generation_s"] = {"simulate": round(t1 - t0, 3), "write": round(time.perf_counter() - t1, 3)}
    return truth
