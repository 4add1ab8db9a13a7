"""``firstfault simulate torch``: run a real torchrun job with a fault injected and write a bundle.

The main CLI mounts this with ``app.add_typer(simulate_cli.app, name="simulate")``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from firstfault.simulate.faults import FAULT_KINDS

app = typer.Typer(help="Simulate failures on real workloads.", no_args_is_help=True)


def _check_fault(value: str) -> str:
    if value not in FAULT_KINDS:
        raise typer.BadParameter(f"choose from: {', '.join(FAULT_KINDS)}")
    return value


@app.command("torch")
def torch_cmd(
    out: Annotated[Path, typer.Option("--out", help="Bundle directory to write (created if missing).")],
    fault: Annotated[
        str, typer.Option("--fault", callback=_check_fault, help=f"Fault kind: {', '.join(FAULT_KINDS)}.")
    ] = "none",
    rank: Annotated[int, typer.Option("--rank", help="Global rank that hits the fault.")] = 1,
    step: Annotated[int, typer.Option("--step", help="Training step (0-based) at which it fires.")] = 5,
    nproc: Annotated[int, typer.Option("--nproc", help="Workers (torchrun --nproc-per-node).")] = 4,
    max_restarts: Annotated[int, typer.Option("--max-restarts", help="torchrun --max-restarts.")] = 0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Process-group (collective) timeout, seconds.")
    ] = 10.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed for data and model init.")] = 0,
    steps: Annotated[int, typer.Option("--steps", help="Training steps per attempt.")] = 12,
    wall_limit: Annotated[
        float, typer.Option("--wall-limit", help="Hard limit for the whole run, seconds.")
    ] = 120.0,
) -> None:
    """Run the small training workload under the real torchrun with FAULT injected."""
    # Imported lazily: torch is heavy and an optional extra of firstfault.
    from firstfault.simulate.torch_sim import simulate_torch

    console = Console()
    try:
        bundle = simulate_torch(
            out, fault=fault, rank=rank, step=step, nproc=nproc, max_restarts=max_restarts,
            timeout=timeout, seed=seed, steps=steps, wall_limit=wall_limit,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    truth = json.loads((bundle / "truth.json").read_text(encoding="utf-8"))
    dumps = len([p for p in (bundle / "fr").iterdir() if p.is_file()])
    console.print(
        f"[bold]{fault}[/bold] bundle written to {bundle} "
        f"(culprits {truth['culprit_ranks']}, torchrun exit {truth['exit_code']}, "
        f"{dumps} FR dump(s), {truth['duration_s']:.1f}s"
        f"{', WALL LIMIT HIT' if truth.get('timed_out') else ''})",
        highlight=False,
    )
