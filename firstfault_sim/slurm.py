"""The jobs firstfault runs on a real SLURM cluster (``slurm_cluster``), and the bundles they leave.

The torch workload (:mod:`firstfault_sim.workload`) or a scheduler event (a time limit, an
``scancel``, a node that dies) on the private cluster of ``slurm_cluster.SlurmCluster``; each run
is collected into a bundle (the job's output, ``scontrol``/``sacct`` records, the daemons' logs of
the job's window) with the truth of what was done. ``firstfault simulate slurm`` and
``tests/test_slurm_real.py`` call :func:`simulate_slurm`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from firstfault_sim.faults import KINDS, FaultPlan
from firstfault_sim.ports import free_ports
from firstfault_sim.slurm_cluster import (
    JobRecord,
    SlurmCluster,
    SlurmUnavailable,
)

__all__ = ["SCENARIOS", "SCENARIO_NAMES", "run_torch_fault", "simulate_slurm", "task_env"]

TRUTH_SCHEMA = "firstfault.truth/v1"
FR_PREFIX_NAME = "fr_trace_rank_"
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: Scenario name -> (truth category, truth action, one-line summary).
SCENARIOS: dict[str, tuple[str, str, str]] = {
    "time_limit": ("scheduler", "restart", "torch job runs past its --time=1 limit; slurmctld kills it"),
    "scancel": ("scheduler", "none", "torch job cancelled by its owner with scancel while training"),
    "node_failure": (
        "scheduler",
        "exclude_and_restart",
        "every process of one node (slurmd, slurmstepd, ranks) is SIGKILLed mid-training; "
        "slurmctld sets the node DOWN and the job NODE_FAIL",
    ),
}


def task_env(fr_dir: Path | None) -> dict[str, str]:
    """Environment the ranks need (the same settings as ``torch_sim``'s children).

    ``fr_dir`` None leaves the flight recorder off: the workload's dump watchdog connects
    to the rendezvous store before ``init_process_group``, which only works when an agent
    (torchrun) hosts that store; under bare srun it would wait out its 30 s timeout.
    """
    pythonpath = os.environ.get("PYTHONPATH", "")
    env = {
        "PYTHONPATH": str(_PACKAGE_ROOT) + (os.pathsep + pythonpath if pythonpath else ""),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONWARNINGS": "ignore:Failed to initialize NumPy",
    }
    if fr_dir is not None:
        env.update(
            {
                "TORCH_FR_BUFFER_SIZE": "64",
                "TORCH_FR_DUMP_TEMP_FILE": str(fr_dir / FR_PREFIX_NAME),
                "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(fr_dir / FR_PREFIX_NAME),
                "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            }
        )
    return env


def batch_script(
    *,
    name: str,
    output: Path,
    nodes: int,
    tasks_per_node: int,
    fault: str,
    rank: int,
    step: int,
    steps: int,
    pg_timeout: float,
    seed: int,
    master_port: int,
    launcher: str = "srun",
    log_dir: Path | None = None,
    time_limit: str | None = None,
    nodelist: str | None = None,
    kill_on_bad_exit: bool = False,
) -> str:
    """An sbatch script that runs the workload on ``nodes`` x ``tasks_per_node`` ranks.

    ``launcher="srun"``: one srun task per rank, ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` from
    SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS (the "srun without torchrun" recipe); rank 0's
    process hosts the TCPStore. ``launcher="torchrun"``: one srun task per node, each a real
    ``torchrun --rdzv-backend static --node-rank $SLURM_NODEID`` agent (the usual multi-node
    recipe), so ranks 0..k-1 are on the first node and the agents host the store.
    """
    opts = [
        f"--job-name={name}",
        f"--nodes={nodes}",
        f"--output={output}",
        "--no-requeue",
        f"--ntasks-per-node={tasks_per_node if launcher == 'srun' else 1}",
    ]
    if launcher == "torchrun":
        opts.append(f"--cpus-per-task={tasks_per_node}")
    if time_limit:
        opts.append(f"--time={time_limit}")
    if nodelist:
        opts.append(f"--nodelist={nodelist}")
    header = "\n".join(f"#SBATCH {o}" for o in opts)
    workload = (
        f"-m firstfault_sim.workload --fault {fault} --fault-rank {rank} "
        f"--fault-step {step} --steps {steps} --pg-timeout {pg_timeout:g} --seed {seed} --backend gloo"
    )
    srun_opts = "-l" + (" --kill-on-bad-exit=1" if kill_on_bad_exit else "")
    if launcher == "srun":
        body = (
            f"srun {srun_opts} bash -c 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID "
            f"WORLD_SIZE=$SLURM_NTASKS LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE GROUP_RANK=$SLURM_NODEID; \\\n"
            f"  exec {sys.executable} {workload}'"
        )
    elif launcher == "torchrun":
        torchrun = Path(sys.executable).parent / "torchrun"
        argv0 = str(torchrun) if torchrun.exists() else f"{sys.executable} -m torch.distributed.run"
        logs = f"{log_dir}/host-$SLURMD_NODENAME/logs" if log_dir else "logs-$SLURMD_NODENAME"
        body = (
            f"srun {srun_opts} bash -c '{argv0} --nnodes $SLURM_NNODES --nproc-per-node {tasks_per_node} \\\n"
            f"  --node-rank $SLURM_NODEID --rdzv-backend static --master-addr $MASTER_ADDR "
            f"--master-port $MASTER_PORT \\\n"
            f"  --max-restarts 0 --log-dir {logs} --tee 3 {workload}'"
        )
    else:
        raise ValueError(f"unknown launcher {launcher!r} (srun or torchrun)")
    return f"""#!/bin/bash
{header}
echo "SLURM_JOB_ID=$SLURM_JOB_ID SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST \\
SLURM_NTASKS=$SLURM_NTASKS SLURM_TASKS_PER_NODE=$SLURM_TASKS_PER_NODE"
export MASTER_ADDR=127.0.0.1 MASTER_PORT={master_port}
{body}
"""


def _block_layout(nodes: Sequence[str], tasks_per_node: int) -> dict[int, str]:
    """SLURM's default (block) distribution: ranks 0..k-1 on the first node, and so on."""
    return {i * tasks_per_node + j: n for i, n in enumerate(nodes) for j in range(tasks_per_node)}


def submit_torch(
    cluster: SlurmCluster,
    bundle: Path,
    *,
    scenario: str,
    fault: str = "none",
    rank: int = 1,
    step: int = 5,
    nodes: int = 2,
    tasks_per_node: int = 2,
    steps: int = 12,
    pg_timeout: float = 10.0,
    seed: int = 0,
    time_limit: str | None = None,
    nodelist: str | None = None,
    kill_on_bad_exit: bool = False,
    launcher: str = "srun",
) -> JobRecord:
    """Write the batch script into ``bundle`` and submit it; returns the job's record."""
    if fault not in KINDS:
        raise ValueError(f"unknown fault {fault!r}")
    bundle = Path(bundle).resolve()
    if bundle.exists():
        shutil.rmtree(bundle)
    (bundle / "fr").mkdir(parents=True)
    port = free_ports(1)[0]
    name = f"ff-{scenario}"
    text = batch_script(
        name=name,
        output=bundle / "slurm-%j.out",
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        fault=fault,
        rank=rank,
        step=step,
        steps=steps,
        pg_timeout=pg_timeout,
        seed=seed,
        master_port=port,
        time_limit=time_limit,
        nodelist=nodelist,
        kill_on_bad_exit=kill_on_bad_exit,
        launcher=launcher,
        log_dir=bundle,
    )
    script = bundle / "job.sbatch"
    script.write_text(text, encoding="utf-8")
    job_id = cluster.sbatch(script, env=task_env(bundle / "fr" if launcher == "torchrun" else None))
    rec = JobRecord(job_id, name, scenario, bundle, bundle / f"slurm-{job_id}.out", text, tasks_per_node=tasks_per_node)
    rec.extra = {
        "fault": fault,
        "rank": rank,
        "step": step,
        "steps": steps,
        "pg_timeout_s": pg_timeout,
        "seed": seed,
        "nodes": nodes,
        "kill_on_bad_exit": kill_on_bad_exit,
        "launcher": launcher,
    }
    return rec


def write_truth(
    cluster: SlurmCluster,
    job: JobRecord,
    *,
    duration: float,
    culprit_hosts: Sequence[str] = (),
    events: dict[str, Any] | None = None,
) -> Path:
    """truth.json in the torch simulator's schema, plus what SLURM adds (job, nodes, hosts)."""
    info = cluster.job_info(job.job_id)
    from firstfault.parse.slurm import expand_hostlist  # the same expansion the parser uses

    nodes = expand_hostlist(info.get("NodeList", "")) if info.get("NodeList") not in (None, "(null)") else []
    nodes = nodes or job.nodes
    x = job.extra
    fault = str(x.get("fault", "none"))
    if job.scenario in SCENARIOS:
        category, action, summary = SCENARIOS[job.scenario]
        culprits: list[int] = []
    else:
        kind = KINDS[fault]
        category, action, summary = kind.category, kind.action, kind.summary
        plan = FaultPlan(
            fault, int(x["rank"]), int(x["step"]), len(nodes) * job.tasks_per_node, float(x["pg_timeout_s"])
        )
        culprits = plan.culprit_ranks()
    layout = _block_layout(nodes, job.tasks_per_node)
    hosts = list(culprit_hosts) or sorted({layout[r] for r in culprits if r in layout})
    try:
        from importlib.metadata import version

        torch_version: str | None = version("torch")  # (not an import of torch: that warns without NumPy)
    except ImportError:
        torch_version = None
    truth = {
        "schema": TRUTH_SCHEMA,
        "fault": job.scenario if job.scenario in SCENARIOS else fault,
        "culprit_ranks": culprits,
        "culprit_hosts": hosts,
        "step": None if fault == "none" else x.get("step"),
        "expected_category": category,
        "expected_action": action,
        "summary": summary,
        "nproc": len(nodes) * job.tasks_per_node,
        "max_restarts": 0,
        "seed": x.get("seed"),
        "hostname": socket.gethostname(),
        "torch_version": torch_version,
        "backend": "gloo",
        "launcher": x.get("launcher", "srun"),
        "command": job.script.splitlines(),
        "exit_code": info.get("ExitCode"),
        "duration_s": round(duration, 3),
        "timed_out": False,
        "steps": x.get("steps"),
        "pg_timeout_s": x.get("pg_timeout_s"),
        "slurm": {
            "version": _slurm_version(cluster),
            "job_id": job.job_id,
            "job_state": info.get("JobState"),
            "reason": info.get("Reason"),
            "exit_code": info.get("ExitCode"),
            "node_list": info.get("NodeList"),
            "nodes": nodes,
            "tasks_per_node": job.tasks_per_node,
            "rank_host": {str(r): h for r, h in sorted(layout.items())},
            **(events or {}),
        },
    }
    path = job.bundle / "truth.json"
    path.write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return path


def _slurm_version(cluster: SlurmCluster) -> str | None:
    try:
        return cluster.client("sinfo", "-V", check=False, timeout=10).stdout.strip() or None
    except (OSError, SlurmUnavailable, subprocess.SubprocessError):
        return None


def _finish(cluster: SlurmCluster, job: JobRecord, t0: float, timeout: float, **truth: Any) -> Path:
    cluster.wait_done(job.job_id, timeout)
    time.sleep(0.5)  # let slurmd/slurmctld flush the last log lines
    fr = job.bundle / "fr"
    for stale in fr.glob("*.tmp"):
        stale.unlink()
    if fr.is_dir() and not any(fr.iterdir()):
        fr.rmdir()
    cluster.collect(job)
    write_truth(cluster, job, duration=time.time() - t0, **truth)
    return job.bundle


# The scenarios. Each returns the bundle directory once the job has ended.

_STEP_RE = r"step \d+ loss"


def run_torch_fault(
    cluster: SlurmCluster,
    bundle: Path,
    fault: str = "exception",
    rank: int = 1,
    step: int = 5,
    timeout: float = 150,
    launcher: str = "srun",
    **kw: Any,
) -> Path:
    """The torch workload with an injected fault, 2 nodes x 2 ranks, through srun -l."""
    t0 = time.time()
    job = submit_torch(
        cluster, bundle, scenario=f"torch-{fault}", fault=fault, rank=rank, step=step, launcher=launcher, **kw
    )
    return _finish(cluster, job, t0, timeout)


def start_time_limit(cluster: SlurmCluster, bundle: Path, node: str = "node01") -> tuple[JobRecord, float]:
    """A healthy 2-rank torch job with far more steps than fit in ``--time=1``."""
    t0 = time.time()
    job = submit_torch(
        cluster, bundle, scenario="time_limit", nodes=1, tasks_per_node=2, steps=5000, time_limit="1", nodelist=node
    )
    return job, t0


def finish_time_limit(cluster: SlurmCluster, job: JobRecord, t0: float) -> Path:
    return _finish(cluster, job, t0, 150)


def run_time_limit(cluster: SlurmCluster, bundle: Path, node: str = "node01") -> Path:
    job, t0 = start_time_limit(cluster, bundle, node)
    return finish_time_limit(cluster, job, t0)


def run_scancel(cluster: SlurmCluster, bundle: Path, node: str = "node01", after_steps: int = 3) -> Path:
    """A healthy 2-rank torch job cancelled with scancel once it is training."""
    t0 = time.time()
    job = submit_torch(cluster, bundle, scenario="scancel", nodes=1, tasks_per_node=2, steps=5000, nodelist=node)
    cluster.wait_output(job.output, rf"step {after_steps} loss", 90)
    t_cancel = time.time()
    cluster.scancel(job.job_id)
    return _finish(cluster, job, t0, 60, events={"scancel_at": t_cancel})


def run_node_failure(cluster: SlurmCluster, bundle: Path, victim: str = "node02", after_steps: int = 3) -> Path:
    """A healthy 2x2 torch job; ``victim`` loses every process mid-training (a crashed host)."""
    t0 = time.time()
    job = submit_torch(cluster, bundle, scenario="node_failure", steps=5000)
    cluster.wait_output(job.output, rf"step {after_steps} loss", 90)
    t_fail = cluster.fail_node(victim)
    return _finish(
        cluster, job, t0, 90, culprit_hosts=[victim], events={"node_failed": victim, "node_failed_at": t_fail}
    )


@contextlib.contextmanager
def cluster(root: Path | None = None, **kw: Any) -> Iterator[SlurmCluster]:
    """``with cluster() as c:`` — started and always stopped."""
    with SlurmCluster(root, **kw) as c:
        yield c


SCENARIO_NAMES = ("torch", "time_limit", "scancel", "node_failure")


def simulate_slurm(
    out: Path,
    scenarios: Sequence[str] = SCENARIO_NAMES,
    fault: str = "exception",
    rank: int = 1,
    step: int = 5,
    keep_state: bool = False,
    launcher: str = "srun",
) -> list[Path]:
    """Run the chosen scenarios on a fresh cluster; one bundle directory each under ``out``.

    The time-limit job is started first and collected last: its minute runs while the others do.
    """
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    bad = [s for s in scenarios if s not in SCENARIO_NAMES]
    if bad:
        raise ValueError(f"unknown scenario(s) {', '.join(bad)}; choose from {', '.join(SCENARIO_NAMES)}")
    state = out / ".slurm-state" if keep_state else None
    made: list[Path] = []
    with SlurmCluster(state) as c:
        pending = start_time_limit(c, out / "time_limit") if "time_limit" in scenarios else None
        if "torch" in scenarios:
            made.append(
                run_torch_fault(
                    c, out / f"torch_{fault}_{launcher}", fault=fault, rank=rank, step=step, launcher=launcher
                )
            )
        if "scancel" in scenarios:
            made.append(run_scancel(c, out / "scancel"))
        if "node_failure" in scenarios:
            made.append(run_node_failure(c, out / "node_failure"))
        if pending is not None:
            made.append(finish_time_limit(c, *pending))
    return made
