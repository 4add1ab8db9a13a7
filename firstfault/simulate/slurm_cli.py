"""``firstfault simulate slurm``: real SLURM daemons on this host, real jobs, one bundle per job.

Mounted by :mod:`firstfault.simulate.cli_group` next to ``simulate torch``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from firstfault.simulate.faults import FAULT_KINDS

app = typer.Typer(help="Simulate failures under a real SLURM.", no_args_is_help=True)

SCENARIO_HELP = (
    "torch (the workload with --fault, 2 nodes x 2 ranks), time_limit (--time=1, ~90 s), "
    "scancel, node_failure (every process of node02 SIGKILLed)"
)


@app.command("slurm")
def slurm_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for the bundles (one subdirectory per job).")],
    scenario: Annotated[
        list[str] | None, typer.Option("--scenario", "-s", help=f"Repeatable; default all: {SCENARIO_HELP}.")
    ] = None,
    fault: Annotated[
        str, typer.Option("--fault", help=f"Fault of the torch job: {', '.join(FAULT_KINDS)}.")
    ] = "exception",
    rank: Annotated[int, typer.Option("--rank", help="Global rank that hits the fault.")] = 1,
    step: Annotated[int, typer.Option("--step", help="Training step at which it fires.")] = 5,
    launcher: Annotated[
        str, typer.Option("--launcher", help="srun (one task per rank) or torchrun (one agent per node).")
    ] = "srun",
    keep_state: Annotated[
        bool, typer.Option("--keep-state", help="Keep config, logs and state in OUT/.slurm-state.")
    ] = False,
) -> None:
    """Start munged, slurmctld and two slurmds here, run the jobs, collect bundles, stop everything."""
    from firstfault.simulate.slurm import SCENARIO_NAMES, SlurmUnavailable, simulate_slurm

    if fault not in FAULT_KINDS:
        raise typer.BadParameter(f"--fault: choose from {', '.join(FAULT_KINDS)}")
    if launcher not in ("srun", "torchrun"):
        raise typer.BadParameter("--launcher: srun or torchrun")
    chosen = tuple(scenario) if scenario else SCENARIO_NAMES
    console = Console()
    try:
        bundles = simulate_slurm(out, chosen, fault=fault, rank=rank, step=step, keep_state=keep_state,
                                 launcher=launcher)
    except SlurmUnavailable as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    for b in bundles:
        truth = json.loads((b / "truth.json").read_text(encoding="utf-8"))
        s = truth["slurm"]
        console.print(f"[bold]{truth['fault']}[/bold] job {s['job_id']} {s['job_state']} "
                      f"(exit {s['exit_code']}) -> {b}")
