"""``firstfault simulate``: torch (a real torchrun job), slurm (real SLURM daemons), cluster (8 to 16,384 ranks).

The simulators live beside the product in ``firstfault_sim``; this module only gives them a command
line, importing them when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from firstfault_sim.cluster.faults import FAULT_KINDS as CLUSTER_FAULT_KINDS
from firstfault_sim.cluster.faults import KINDS as CLUSTER_KINDS
from firstfault_sim.faults import FAULT_KINDS

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
    timeout: Annotated[float, typer.Option("--timeout", help="Process-group (collective) timeout, seconds.")] = 10.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed for data and model init.")] = 0,
    steps: Annotated[int, typer.Option("--steps", help="Training steps per attempt.")] = 12,
    wall_limit: Annotated[float, typer.Option("--wall-limit", help="Hard limit for the whole run, seconds.")] = 120.0,
) -> None:
    """Run the small training workload under the real torchrun with FAULT injected."""
    # Imported lazily: torch is heavy and an optional extra of firstfault.
    from firstfault_sim.torch_sim import simulate_torch

    console = Console()
    try:
        bundle = simulate_torch(
            out,
            fault=fault,
            rank=rank,
            step=step,
            nproc=nproc,
            max_restarts=max_restarts,
            timeout=timeout,
            seed=seed,
            steps=steps,
            wall_limit=wall_limit,
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
    from firstfault_sim.slurm import SCENARIO_NAMES, simulate_slurm
    from firstfault_sim.slurm_cluster import SlurmUnavailable

    if fault not in FAULT_KINDS:
        raise typer.BadParameter(f"--fault: choose from {', '.join(FAULT_KINDS)}")
    if launcher not in ("srun", "torchrun"):
        raise typer.BadParameter("--launcher: srun or torchrun")
    chosen = tuple(scenario) if scenario else SCENARIO_NAMES
    console = Console()
    try:
        bundles = simulate_slurm(
            out, chosen, fault=fault, rank=rank, step=step, keep_state=keep_state, launcher=launcher
        )
    except SlurmUnavailable as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    for b in bundles:
        truth = json.loads((b / "truth.json").read_text(encoding="utf-8"))
        s = truth["slurm"]
        console.print(
            f"[bold]{truth['fault']}[/bold] job {s['job_id']} {s['job_state']} (exit {s['exit_code']}) -> {b}"
        )


_KIND_HELP = "; ".join(f"{k}: {v.summary}" for k, v in CLUSTER_KINDS.items())


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
        typer.Option(
            "--fault",
            help="KIND\\[@TIME]\\[:TARGET], repeatable. TIME: seconds after training starts "
            "(300, 5m) or stepN; TARGET: rank=N (or N), host=NAME, gpu=HOST/K, link=HOST/K. "
            f"Kinds: {', '.join(CLUSTER_FAULT_KINDS)}.",
        ),
    ] = None,
    nccl_timeout: Annotated[float, typer.Option("--nccl-timeout", help="Process-group timeout, seconds.")] = 600.0,
    steps: Annotated[int, typer.Option("--steps", help="Training steps the job plans to run.")] = 60,
    step_time: Annotated[float, typer.Option("--step-time", help="Seconds per training step.")] = 2.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed: same seed, same bytes.")] = 0,
    clock_skew: Annotated[float, typer.Option("--clock-skew", help="Sigma of per-host clock offsets, seconds.")] = 0.05,
    noise: Annotated[
        int,
        typer.Option(
            "--noise",
            help="0: errors only; 1: NCCL INFO, start-up warnings; "
            "2: + sub-communicator INFO, benign link flap, corrected PCIe errors.",
        ),
    ] = 1,
    kill_on_bad_exit: Annotated[
        bool,
        typer.Option(
            "--kill-on-bad-exit/--no-kill-on-bad-exit",
            help="srun --kill-on-bad-exit=1 (the first failed node ends the step).",
        ),
    ] = True,
    remote_errors: Annotated[
        bool,
        typer.Option(
            "--remote-errors/--no-remote-errors", help="Peers sending to a dead process see IB completion errors."
        ),
    ] = True,
    tee: Annotated[int, typer.Option("--tee", help="torchrun --tee: 3 (stdout+stderr) or 2 (stderr); 0: by size.")] = 0,
    fr: Annotated[bool, typer.Option("--fr/--no-fr", help="Write flight-recorder dumps when a watchdog fires.")] = True,
    scheduler_logs: Annotated[
        bool,
        typer.Option("--scheduler-logs/--no-scheduler-logs", help="Include slurmctld.log, sacct.txt and job.sbatch."),
    ] = True,
) -> None:
    """Simulate a cluster job with FAULT(s) injected and write a real-layout bundle with truth.json."""
    from firstfault_sim.cluster import Layout, SimConfig, parse_fault, simulate_cluster

    console = Console()
    try:
        specs = tuple(parse_fault(f) for f in (fault or []))
        layout = Layout(tp=tp or min(8, gpus_per_host), pp=pp, cp=cp, ep=ep)
        if not 8 <= hosts * gpus_per_host <= 16384:
            raise ValueError("the simulator covers 8 to 16,384 ranks (hosts x gpus-per-host)")
        cfg = SimConfig(
            hosts=hosts,
            gpus_per_host=gpus_per_host,
            layout=layout,
            nccl_timeout_s=nccl_timeout,
            seed=seed,
            clock_skew_s=clock_skew,
            noise=noise,
            steps=steps,
            step_time_s=step_time,
            faults=specs,
            kill_on_bad_exit=kill_on_bad_exit,
            remote_errors=remote_errors,
            tee=tee,
            fr_dumps=fr,
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


@app.command("fleet")
def fleet_cmd(
    out: Annotated[Path, typer.Option("--out", help="Folder for verdicts.jsonl and truth.json (or the bundles).")],
    nodes: Annotated[int, typer.Option("--nodes", help="Hosts in the fleet (8 GPUs each).")] = 2000,
    jobs: Annotated[int, typer.Option("--jobs", help="Jobs over the period.")] = 10000,
    days: Annotated[float, typer.Option("--days", help="Length of the period, days.")] = 90.0,
    lemons: Annotated[int, typer.Option("--lemons", help="Lemon nodes among the hosts.")] = 20,
    lemon_factor: Annotated[
        float, typer.Option("--lemon-factor", help="How many times more often a lemon fails (assumption).")
    ] = 150.0,
    rate_scale: Annotated[
        float, typer.Option("--rate-scale", help="Multiply every published failure rate (small demos).")
    ] = 1.0,
    bundles: Annotated[
        bool, typer.Option("--bundles", help="Write real cluster-simulator bundles of the failed jobs (small fleets).")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed: same seed, same fleet.")] = 0,
) -> None:
    """Months of jobs over a fleet with Table 5 failure rates of the Llama 3 paper and a few lemon nodes."""
    from firstfault_sim.fleet import FleetConfig, simulate_fleet, truth, write_bundles, write_verdicts

    try:
        cfg = FleetConfig(
            nodes=nodes,
            jobs=jobs,
            days=days,
            lemons=lemons,
            lemon_factor=lemon_factor,
            rate_scale=rate_scale,
            whole_fleet=bundles,
            seed=seed,
        )
        outcome = simulate_fleet(cfg)
        if bundles:
            written = write_bundles(outcome, out)
            where = f"{len(written)} bundles under {out}"
        else:
            where = str(write_verdicts(outcome, out))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    t = truth(outcome)
    Console(highlight=False).print(
        f"{t['jobs']:,} jobs on {nodes:,} nodes over {days:g} days: {t['failed']:,} failed "
        f"({t['lemon_failures']} on lemons, {t['misattributed']} verdicts naming the wrong host); "
        f"lemons {', '.join(x['host'] for x in t['lemons'][:8])}{' ...' if len(t['lemons']) > 8 else ''} -> {where}"
    )
