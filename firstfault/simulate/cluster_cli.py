"""``firstfault simulate cluster``: a simulated 8 to 16,384-rank job with faults, as a bundle.

Mounted by ``firstfault.simulate.cli_group`` (``app.registered_commands``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from firstfault.simulate.cluster.faults import FAULT_KINDS, KINDS

app = typer.Typer(help="Simulate failures on a cluster-scale training job.", no_args_is_help=True)

_KIND_HELP = "; ".join(f"{k}: {v.summary}" for k, v in KINDS.items())


@app.command("cluster")
def cluster_cmd(
    out: Annotated[Path, typer.Option("--out", help="Bundle directory to write (created if missing).")],
    hosts: Annotated[int, typer.Option("--hosts", help="Hosts (nodes) in the job.")] = 2,
    gpus_per_host: Annotated[int, typer.Option("--gpus-per-host", help="GPUs (ranks) per host.")] = 8,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size (0: min(8, gpus per host)).")] = 0,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel size.")] = 1,
    cp: Annotated[int, typer.Option("--cp", help="Context-parallel size.")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="Expert-parallel size (divides the data-parallel size).")] = 1,
    fault: Annotated[
        list[str] | None,
        typer.Option("--fault", help="KIND[@TIME][:TARGET], repeatable. TIME: seconds after training starts "
                     "(300, 5m) or stepN; TARGET: rank=N (or N), host=NAME, gpu=HOST/K, link=HOST/K. "
                     f"Kinds: {', '.join(FAULT_KINDS)}."),
    ] = None,
    nccl_timeout: Annotated[float, typer.Option("--nccl-timeout", help="Process-group timeout, seconds.")] = 600.0,
    steps: Annotated[int, typer.Option("--steps", help="Training steps the job plans to run.")] = 60,
    step_time: Annotated[float, typer.Option("--step-time", help="Seconds per training step.")] = 2.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed: same seed, same bytes.")] = 0,
    clock_skew: Annotated[float, typer.Option("--clock-skew", help="Sigma of per-host clock offsets, seconds.")] = 0.05,
    noise: Annotated[int, typer.Option("--noise", help="0: errors only; 1: NCCL INFO, start-up warnings; "
                                       "2: + sub-communicator INFO, benign link flap, corrected PCIe errors.")] = 1,
    kill_on_bad_exit: Annotated[bool, typer.Option(
        "--kill-on-bad-exit/--no-kill-on-bad-exit",
        help="srun --kill-on-bad-exit=1 (the first failed node ends the step).")] = True,
    remote_errors: Annotated[bool, typer.Option(
        "--remote-errors/--no-remote-errors", help="Peers sending to a dead process see IB completion errors.")] = True,
    tee: Annotated[int, typer.Option("--tee", help="torchrun --tee: 3 (stdout+stderr) or 2 (stderr); 0: by size.")] = 0,
    fr: Annotated[bool, typer.Option("--fr/--no-fr", help="Write flight-recorder dumps when a watchdog fires.")] = True,
    scheduler_logs: Annotated[bool, typer.Option("--scheduler-logs/--no-scheduler-logs",
                                                 help="Include slurmctld.log, sacct.txt and job.sbatch.")] = True,
) -> None:
    """Simulate a cluster job with FAULT(s) injected and write a real-layout bundle with truth.json."""
    from firstfault.simulate.cluster import Layout, SimConfig, parse_fault, simulate_cluster

    console = Console()
    try:
        specs = tuple(parse_fault(f) for f in (fault or []))
        layout = Layout(tp=tp or min(8, gpus_per_host), pp=pp, cp=cp, ep=ep)
        if not 8 <= hosts * gpus_per_host <= 16384:
            raise ValueError("the simulator covers 8 to 16,384 ranks (hosts x gpus-per-host)")
        cfg = SimConfig(
            hosts=hosts, gpus_per_host=gpus_per_host, layout=layout, nccl_timeout_s=nccl_timeout, seed=seed,
            clock_skew_s=clock_skew, noise=noise, steps=steps, step_time_s=step_time, faults=specs,
            kill_on_bad_exit=kill_on_bad_exit, remote_errors=remote_errors, tee=tee, fr_dumps=fr,
            scheduler_logs=scheduler_logs,
        )
        truth = simulate_cluster(cfg, out)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    gen = truth["generation_s"]
    console.print(
        f"[bold]{truth['fault']}[/bold] on {hosts} x {gpus_per_host} = {hosts * gpus_per_host} ranks -> {out} "
        f"(culprit {truth['culprit_key']}: ranks {json.dumps(truth['culprit_ranks'][:8])}, hosts "
        f"{json.dumps(truth['culprit_hosts'][:4])}; job {truth['job_state']}; {truth['files']} files, "
        f"{int(truth['bundle_bytes']) / 1e6:.1f} MB, {truth['fr_dumps']} FR dumps; "
        f"{gen['simulate'] + gen['write']:.1f} s)",
        highlight=False,
    )
