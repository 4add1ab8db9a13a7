"""``firstfault simulate``: the real-torchrun simulator and the real-SLURM harness together."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(help="Simulate failures on real workloads.", no_args_is_help=True)

for _module in ("firstfault.simulate.cli", "firstfault.simulate.slurm_cli", "firstfault.simulate.cluster_cli"):
    try:
        _mod = importlib.import_module(_module)
    except ImportError:
        continue
    # each module's commands (torch, slurm, cluster) become subcommands of `simulate`
    app.registered_commands.extend(_mod.app.registered_commands)
