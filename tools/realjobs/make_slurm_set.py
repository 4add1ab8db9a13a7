"""Build firstfault's development set of real SLURM jobs from ``train.py`` (not the simulator).

    python tools/realjobs/make_slurm_set.py OUT [--set 1|2|3|4|5|6] [--only CASE ...]
    (set 3 runs JAX: JAX_PYTHON=<a python with jax> python tools/realjobs/make_slurm_set.py OUT --set 3)

A real SLURM (Debian's slurmctld/slurmd/munge, two nodes on this host, started by
``firstfault_sim.slurm.SlurmCluster``) runs ``train.py`` through ``srun -l`` (or torchrun
under srun) with a fault; the bundle is what the job left: ``slurm-<id>.out``, ``scontrol show
job``, ``sacct``, the job's slurmctld/slurmd lines, and ``truth.json`` labelled from the
injection. Memory limits are enforced (``jobacct_gather/linux`` with ``OverMemoryKill``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

from firstfault_sim.ports import free_ports
from firstfault_sim.slurm import task_env
from firstfault_sim.slurm_cluster import JobRecord, SlurmCluster

HERE = Path(__file__).resolve().parent
# name, fault, rank, step, category, culprit ranks, culprit hosts, action, options
CASES: list[tuple[str, str, int, int, str, list[int], list[str], str, dict[str, object]]] = [
    ("s_healthy", "none", 0, 0, "none", [], [], "none", {}),
    ("s_exception_r2", "exception", 2, 5, "application_error", [2], [], "stop", {}),
    ("s_exception_r1_kill", "exception", 1, 4, "application_error", [1], [], "stop", {"kill": True}),
    ("s_hang_timelimit_r1", "hang", 1, 4, "hang", [1], [], "restart", {"time": "1", "timeout": 3600, "steps": 100000}),
    ("s_timelimit_progress", "none", 0, 0, "scheduler", [], [], "restart", {"time": "1", "steps": 1000000}),
    ("s_sigkill_r3", "sigkill", 3, 6, "host_oom", [3], [], "stop", {}),  # no kernel log: a suspected OOM kill
    ("s_sigkill_peer_exc_r2", "sigkill_then_peer_exc", 2, 4, "host_oom", [2], [], "stop", {"style": "rankfmt"}),
    ("s_missing_file_all", "missing_file_all", 0, 0, "configuration", [], [], "stop", {}),
    ("s_memlimit_start", "alloc_start", 0, 0, "configuration", [], [], "stop", {"mem": "300M"}),
    ("s_segfault_r0", "segfault", 0, 5, "process_crash", [0], [], "restart", {"style": "print"}),
    ("s_size_mismatch_r2", "size_mismatch", 2, 4, "collective_mismatch", [2], [], "stop", {}),
    ("s_import", "import", 0, 0, "configuration", [], [], "stop", {"style": "print"}),
    ("s_nan_r3", "nan_one", 3, 5, "numerical", [3], [], "stop", {"kill": True}),
    ("s_torchrun_exception_r2", "exception", 2, 5, "application_error", [2], [], "stop", {"launcher": "torchrun"}),
    ("s_scancel", "none", 0, 0, "scheduler", [], [], "none", {"steps": 1000000, "scancel_after": 4}),
    ("s_abort_r1_kill", "abort", 1, 3, "process_crash", [1], [], "restart", {"kill": True, "style": "print"}),
]
# Set 2: faults set 1 lacks under SLURM (a rank whose memory grows until the step's limit kills it,
# torchrun under srun, TORCH_DISTRIBUTED_DEBUG=DETAIL, a job script with a step before training),
# labelled here from the injection before firstfault saw a bundle.
CASES_2: list[tuple[str, str, int, int, str, list[int], list[str], str, dict[str, object]]] = [
    ("s2_healthy_torchrun", "none", 0, 0, "none", [], [], "none", {"launcher": "torchrun", "steps": 30}),
    ("s2_healthy_print", "none", 0, 0, "none", [], [], "none", {"style": "print", "steps": 40}),
    ("s2_leak_r1", "leak", 1, 3, "host_oom", [1], [], "stop", {"mem": "1500M", "steps": 400}),
    ("s2_hang_r3_torchrun", "hang", 3, 4, "hang", [3], [], "restart", {"launcher": "torchrun"}),
    ("s2_missing_file_r1", "missing_file_one", 1, 0, "configuration", [1], [], "stop", {}),
    ("s2_dl_worker_kill_r2", "dl_worker_kill", 2, 4, "host_oom", [2], [], "stop", {}),
    ("s2_exit0_r2", "exit0", 2, 5, "application_error", [2], [], "stop", {"style": "rankfmt"}),
    (
        "s2_detail_mismatch_r3",
        "detail_mismatch",
        3,
        4,
        "collective_mismatch",
        [3],
        [],
        "stop",
        {"env": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}},
    ),
    ("s2_shape_r1_torchrun", "shape", 1, 5, "application_error", [1], [], "stop", {"launcher": "torchrun"}),
    ("s2_pre_step_exc_r0", "exception", 0, 5, "application_error", [0], [], "stop", {"pre_step": True}),
    (
        "s2_hang_timelimit_torchrun_r2",
        "hang",
        2,
        4,
        "hang",
        [2],
        [],
        "restart",
        {"launcher": "torchrun", "time": "1", "timeout": 3600, "steps": 100000},
    ),
    ("s2_divisible", "divisible", 0, 0, "configuration", [], [], "stop", {"style": "print"}),
]
# Set 3: multi-controller JAX (``jax_train.py``, one process per srun task, CPU collectives through
# gloo) in a Python that has JAX (``JAX_PYTHON``): the coordination service's own reports of a peer
# that died, hung or never joined. A SIGKILL with no kernel log is read as set 1 reads it. A process
# that raises stays in JAX's shutdown barrier while its peers wait in the collective (its heartbeats
# go on), so that job ends only at its time limit. Node names must resolve for JAX's gloo (add them
# to /etc/hosts for the run).
CASES_3: list[tuple[str, str, int, int, str, list[int], list[str], str, dict[str, object]]] = [
    ("j3_healthy", "none", 0, 0, "none", [], [], "none", {"launcher": "jax"}),
    ("j3_sigkill_r2", "sigkill", 2, 5, "host_oom", [2], [], "stop", {"launcher": "jax"}),
    ("j3_exception_r1", "exception", 1, 4, "application_error", [1], [], "stop", {"launcher": "jax", "time": "1"}),
    ("j3_sigkill_r0", "sigkill", 0, 6, "host_oom", [0], [], "stop", {"launcher": "jax"}),
    ("j3_absent_r3", "absent", 3, 0, "configuration", [], [], "stop", {"launcher": "jax"}),
    ("j3_hang_r3", "hang", 3, 4, "hang", [3], [], "restart", {"launcher": "jax", "time": "1", "steps": 100000}),
]
# A fourth set, written 2026-12-07 with torchrun sets 13 and 14 and scored once before any rule of
# its own: their new families in a slurm-N.out, under srun and under torchrun inside the allocation.
CASES_4: list[tuple[str, str, int, int, str, list[int], list[str], str, dict[str, object]]] = [
    ("s4_thread_exc_healthy", "thread_exc", 1, 4, "none", [], [], "none", {}),
    ("s4_stack_dump_healthy_torchrun", "stack_dump", 2, 5, "none", [], [], "none", {"launcher": "torchrun"}),
    ("s4_logged_exit_r2", "logged_exit", 2, 5, "application_error", [2], [], "stop", {}),
    ("s4_unicode_r3_torchrun", "unicode", 3, 4, "application_error", [3], [], "stop", {"launcher": "torchrun"}),
    ("s4_backward_hang_r1", "backward_hang", 1, 5, "hang", [1], [], "restart", {"time": "1"}),
]
# A fifth set, written 2026-12-07 with torchrun set 15, scored once before any rule of its own: its
# families under srun and under torchrun in a batch script.
CASES_5: list[tuple[str, str, int, int, str, list[int], list[str], str, dict[str, object]]] = [
    ("s5_clip_nonfinite_r2", "clip_nonfinite", 2, 4, "numerical", [], [], "stop", {}),
    ("s5_ckpt_stall_r0", "ckpt_stall", 0, 5, "hang", [0], [], "restart", {}),
    (
        "s5_exit_message_r3_torchrun",
        "exit_message",
        3,
        4,
        "application_error",
        [3],
        [],
        "stop",
        {"launcher": "torchrun"},
    ),
    ("s5_lr_order_healthy_torchrun", "lr_order", 0, 0, "none", [], [], "none", {"launcher": "torchrun"}),
]
# A sixth set, written 2026-12-07 with torchrun set 16, scored once before any rule of its own: the
# other launcher of each family (torchrun in the batch script where set 5 used srun, and back),
# and torch.compile under srun.
CASES_6: list[tuple[str, str, int, int, str, list[int], list[str], str, dict[str, object]]] = [
    ("s6_exit_message_r2", "exit_message", 2, 4, "application_error", [2], [], "stop", {}),
    ("s6_ckpt_stall_r0_torchrun", "ckpt_stall", 0, 4, "hang", [0], [], "restart", {"launcher": "torchrun"}),
    ("s6_clip_nonfinite_r1_torchrun", "clip_nonfinite", 1, 5, "numerical", [], [], "stop", {"launcher": "torchrun"}),
    ("s6_compile_fullgraph_all", "compile_fullgraph", 0, 0, "configuration", [], [], "stop", {"timeout": 120.0}),
    ("s6_compile_recompile_healthy", "compile_recompile", 0, 0, "none", [], [], "none", {"timeout": 120.0}),
]
SETS = {1: CASES, 2: CASES_2, 3: CASES_3, 4: CASES_4, 5: CASES_5, 6: CASES_6}


class MemCluster(SlurmCluster):
    """The harness's cluster with memory accounting on, so ``--mem`` is enforced."""

    def write_config(self) -> None:
        super().write_config()
        text = self.conf.read_text().replace(
            "JobAcctGatherType=jobacct_gather/none",
            "JobAcctGatherType=jobacct_gather/linux\nJobAcctGatherFrequency=1\nJobAcctGatherParams=OverMemoryKill",
        )
        self.conf.write_text(text.replace("SelectTypeParameters=CR_Core", "SelectTypeParameters=CR_Core_Memory"))


def script(case: tuple, bundle: Path, port: int) -> str:
    name, fault, rank, step, *_rest, opts = case
    opts = dict(opts)
    train = (
        f"{sys.executable} {HERE / 'train.py'} --fault {fault} --rank {rank} --step {step} "
        f"--steps {opts.get('steps', 20)} --timeout {opts.get('timeout', 15)} --style {opts.get('style', 'logging')} "
        f"--data {bundle / 'no-such-data'} --ckpt {bundle / 'ckpt'}"
    )
    sb = [f"--job-name={name}", "--nodes=2", f"--output={bundle}/slurm-%j.out", "--no-requeue"]
    if opts.get("launcher") == "torchrun":
        sb += ["--ntasks-per-node=1", "--cpus-per-task=2"]
    else:
        sb += ["--ntasks-per-node=2"]
    if opts.get("time"):
        sb.append(f"--time={opts['time']}")
    if opts.get("mem"):
        sb.append(f"--mem={opts['mem']}")
    srun = "srun -l" + (" --kill-on-bad-exit=1" if opts.get("kill") else "")
    if opts.get("launcher") == "jax":
        py = os.environ.get("JAX_PYTHON", sys.executable)
        body = (
            f"{srun} bash -c 'export JAX_PLATFORMS=cpu; exec {py} {HERE / 'jax_train.py'} --fault {fault} "
            f"--rank {rank} --step {step} --steps {opts.get('steps', 20)}'"
        )
    elif opts.get("launcher") == "torchrun":
        body = (
            f"{srun} bash -c '{sys.executable} -m torch.distributed.run --nnodes $SLURM_NNODES --nproc-per-node 2 "
            f"--node-rank $SLURM_NODEID --rdzv-backend static --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
            f"--max-restarts 0 {train.split(' ', 1)[1]}'"
        )
    else:
        body = (
            f"{srun} bash -c 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS; "
            f"exec {train}'"
        )
    head = "\n".join(f"#SBATCH {o}" for o in sb)
    env = "".join(f"export {k}={v}\n" for k, v in dict(opts.get("env", {})).items())  # type: ignore[call-overload]
    if opts.get("pre_step"):  # a job step before training, as job scripts check their nodes
        env += f"srun -l {sys.executable} -c 'import socket, torch; print(socket.gethostname(), torch.__version__)'\n"
    return f"#!/bin/bash\n{head}\nexport MASTER_ADDR=127.0.0.1 MASTER_PORT={port}\n{env}{body}\n"


def run(c: SlurmCluster, case: tuple, out: Path) -> tuple[JobRecord, float]:
    bundle = (out / case[0]).resolve()
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    text = script(case, bundle, free_ports(1)[0])
    (bundle / "job.sbatch").write_text(text)
    env = task_env(None)
    env.pop("PYTHONWARNINGS", None)
    job_id = c.sbatch(bundle / "job.sbatch", env=env)
    rec = JobRecord(job_id, case[0], case[0], bundle, bundle / f"slurm-{job_id}.out", text, tasks_per_node=2)
    return rec, time.time()


def finish(c: SlurmCluster, case: tuple, rec: JobRecord, t0: float) -> None:
    name, fault, rank, step, cat, ranks, hosts, action, opts = case
    if opts.get("scancel_after"):
        c.wait_output(rec.output, rf"step {opts['scancel_after']}/", 120)
        c.scancel(rec.job_id)
    state = c.wait_done(rec.job_id, 240)
    time.sleep(1.0)
    c.collect(rec)
    truth = {
        "schema": "firstfault.truth/v1",
        "fault": fault,
        "culprit_ranks": ranks,
        "culprit_hosts": hosts,
        "expected_category": cat,
        "expected_action": action,
        "step": step,
        "slurm_state": state,
        "duration_s": round(time.time() - t0, 1),
        "options": opts,
        "generator": "tools/realjobs/make_slurm_set.py (independent of firstfault_sim's workload)",
    }
    (rec.bundle / "truth.json").write_text(json.dumps(truth, indent=1))
    print("wrote", rec.bundle, state, flush=True)


def _nodes_resolve(names: tuple[str, ...]) -> None:
    """Refuse to make set 3 where the node names do not resolve: JAX's gloo looks up its own host
    name (each node's tasks see theirs), and every job, healthy or not, would fail at start-up the
    same way ("[enforce fail at .../tcp/device.cc:99] rv == 0. -2 vs 0", getaddrinfo's EAI_NONAME),
    labelled by a plan that never ran."""
    for name in names:
        try:
            socket.getaddrinfo(name, None)
        except OSError:
            sys.exit(f"{name} does not resolve: add '127.0.0.1 {' '.join(names)}' to /etc/hosts for the run")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--set", type=int, choices=sorted(SETS), default=1)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    cases = [c for c in SETS[a.set] if not a.only or c[0] in a.only]
    if a.set == 3:
        _nodes_resolve(("node01", "node02"))
    slow = [c for c in cases if c[8].get("time")]
    fast = [c for c in cases if not c[8].get("time")]
    with MemCluster() as c:
        pending = [(case, *run(c, case, a.out)) for case in slow]  # the minute-long ones run beside the rest
        for case in fast:
            rec, t0 = run(c, case, a.out)
            finish(c, case, rec, t0)
        for case, rec, t0 in pending:
            finish(c, case, rec, t0)


if __name__ == "__main__":
    main()
