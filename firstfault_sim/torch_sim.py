"""Orchestrator for ``firstfault simulate torch``.

Runs :mod:`firstfault_sim.workload` under the real ``torchrun`` with a fault
injected, bounded in wall time, and lays the outputs out as a firstfault *bundle*::

    <out>/truth.json     ground truth (schema firstfault.truth/v1)
    <out>/launcher.log   torchrun's console (stdout+stderr interleaved, --tee 3)
    <out>/logs/          torchrun's --log-dir tree, untouched
    <out>/fr/            flight-recorder dumps, one file per rank that dumped

Why a separate process group: torchrun, its workers and anything they fork must be
killable as one unit when the wall limit is hit, so nothing outlives a simulation.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

with warnings.catch_warnings():
    # torch's CPU wheel warns on import when NumPy is absent; nothing here uses NumPy with torch,
    # and a user's `firstfault simulate` / `bench generate` should print no warning of a library's
    warnings.filterwarnings("ignore", "Failed to initialize NumPy", UserWarning)
    import torch

from firstfault_sim.faults import FAULT_KINDS, KINDS, FaultPlan
from firstfault_sim.ports import free_ports
from firstfault_sim.workload import CKPT_ENV

__all__ = ["FAULT_KINDS", "TRUTH_SCHEMA", "build_command", "simulate_torch"]

TRUTH_SCHEMA = "firstfault.truth/v1"
#: Entries kept by torch's flight-recorder ring buffer. Small enough that a 4-rank,
#: 12-step bundle stays well under 200 KB, large enough to hold the whole run.
FR_BUFFER_SIZE = 64
#: Dump file prefix inside the bundle; torch's convention is ``<prefix><rank>``.
FR_PREFIX_NAME = "fr_trace_rank_"
#: Env var telling the workload where the agent-hosted store for FR dump requests is.
FR_STORE_ENV = "FIRSTFAULT_FR_STORE"
#: How many times a run spoiled by something not injected is run again (a run planned to succeed
#: that failed, or a rank aborted in torch's own teardown); the exit codes of those runs go in the truth.
SPOILED_RERUNS = 2
#: libstdc++'s words when a process exits with a thread still joinable: torch 2.13's gloo teardown,
#: on a loaded machine, after the rank's own end (CI, stops 43 and 44).
TEARDOWN_ABORT = "terminate called without an active exception"
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def _torchrun_argv0() -> list[str]:
    """The real ``torchrun`` console script next to this interpreter, else ``-m torch.distributed.run``."""
    exe = Path(sys.executable).parent / "torchrun"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "torch.distributed.run"]


def _backend(nproc: int) -> str:
    """NCCL when every local rank can have its own GPU, else gloo on CPU."""
    if torch.cuda.is_available() and torch.distributed.is_nccl_available() and torch.cuda.device_count() >= nproc:
        return "nccl"
    return "gloo"


def build_command(
    plan: FaultPlan,
    logs_dir: Path,
    port: int,
    nproc: int,
    max_restarts: int,
    seed: int,
    steps: int,
    backend: str = "gloo",
    monitor_interval: float | None = None,
) -> list[str]:
    """The exact torchrun command line (recorded verbatim in truth.json)."""
    cmd = [
        *_torchrun_argv0(),
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        f"ff-{plan.kind}-{seed}",
        "--max-restarts",
        str(max_restarts),
        "--log-dir",
        str(logs_dir),
        "--tee",
        "3",
    ]
    if monitor_interval is not None:
        cmd += ["--monitor-interval", f"{monitor_interval:g}"]
    cmd += [
        "-m",
        "firstfault_sim.workload",
        "--fault",
        plan.kind,
        "--fault-rank",
        str(plan.rank),
        "--fault-step",
        str(plan.step),
        "--steps",
        str(steps),
        "--pg-timeout",
        f"{plan.pg_timeout_s:g}",
        "--seed",
        str(seed),
        "--backend",
        backend,
    ]
    return cmd


def _child_env(fr_prefix: Path, rdzv_port: int, max_restarts: int) -> dict[str, str]:
    """Environment for torchrun and its workers."""
    env = dict(os.environ)
    pythonpath = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(_PACKAGE_ROOT) + (os.pathsep + pythonpath if pythonpath else "")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = "1"  # four ranks on a couple of cores must not oversubscribe
    env["PYTHONUNBUFFERED"] = "1"
    # A numpy-less venv makes every `import torch` warn; that is an artefact of this
    # environment, not of the simulated job, so keep it out of the bundle.
    env["PYTHONWARNINGS"] = "ignore:Failed to initialize NumPy"
    env["TORCH_FR_BUFFER_SIZE"] = str(FR_BUFFER_SIZE)
    env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)  # deprecated in 2.13: warns on every rank
    env["TORCH_FR_DUMP_TEMP_FILE"] = str(fr_prefix)
    env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = str(fr_prefix)
    env["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1"
    # The workload's FR watchdog exchanges "please dump" through the agent-hosted
    # rendezvous store, which outlives any single worker.
    env[FR_STORE_ENV] = f"127.0.0.1:{rdzv_port}"
    if max_restarts > 0:
        # torch 2.13: with the rendezvous TCPStore shared with the workers (the default),
        # attempt_1 reads attempt_0's stale gloo addresses and dies in connectFullMesh
        # ("Connection refused"); see pytorch/pytorch#135712. This is the documented knob.
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    else:
        env.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
    return env


def _child_setup() -> None:
    """Runs in the forked child before exec: no core files from the segfault kind."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(ppid, starttime) of ``pid`` from /proc, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19]


def _descendants(root: int) -> dict[int, str]:
    """All live descendants of ``root`` as {pid: starttime} (starttime guards against pid reuse)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _proc_stat(int(entry))
        if stat is not None:
            children.setdefault(stat[0], []).append(int(entry))
            starts[int(entry)] = stat[1]
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found[child] = starts[child]
                stack.append(child)
    return found


def _kill_known(known: dict[int, str]) -> None:
    """SIGKILL every remembered process (and its process group) that is still the same process.

    Needed because torchrun starts each worker in a *new session*, so killing torchrun's
    process group does not reach the workers.
    """
    for pid, start in known.items():
        stat = _proc_stat(pid)
        if stat is None or stat[1] != start:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)


def _run_bounded(cmd: list[str], env: dict[str, str], log_path: Path, cwd: Path, wall_limit: float) -> tuple[int, bool]:
    """Run ``cmd`` in its own session; on wall-limit or interrupt kill everything it started.

    Returns (exit code, timed_out). While it runs we keep a list of its descendants so
    that, whatever happens, no worker outlives the simulation.
    """
    timed_out = False
    known: dict[int, str] = {}
    with open(log_path, "wb") as log_fh:
        proc = subprocess.Popen(
            cmd,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_child_setup,
        )
        deadline = time.monotonic() + wall_limit
        try:
            while True:
                try:
                    rc = proc.wait(timeout=0.25)
                    break
                except subprocess.TimeoutExpired:
                    known.update(_descendants(proc.pid))
                if time.monotonic() > deadline:
                    timed_out = True
                    # Like a scheduler's time limit: SIGTERM first (torchrun forwards it to
                    # its workers), then SIGKILL whatever is left.
                    _kill_group(proc.pid, signal.SIGTERM)
                    try:
                        rc = proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        _kill_group(proc.pid, signal.SIGKILL)
                        rc = proc.wait()
                    break
        except BaseException:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            _kill_group(proc.pid, signal.SIGKILL)
            _kill_known(known)
    return rc, timed_out


def _prepare_out(out: Path) -> None:
    """Create ``out`` and remove only what a previous simulation wrote there."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("logs", "fr"):
        shutil.rmtree(out / name, ignore_errors=True)
    for name in ("truth.json", "launcher.log"):
        (out / name).unlink(missing_ok=True)
    (out / "fr").mkdir()


def _restore(path: Path, content: bytes | None) -> None:
    """Put ``path`` back to ``content`` (None: the file did not exist)."""
    if content is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(content)


def simulate_torch(
    out: Path,
    fault: str = "none",
    rank: int = 1,
    step: int = 5,
    nproc: int = 4,
    max_restarts: int = 0,
    timeout: float = 10.0,
    seed: int = 0,
    steps: int = 12,
    wall_limit: float = 120.0,
    monitor_interval: float | None = None,
    extra_env: dict[str, str] | None = None,
) -> Path:
    """Run one simulated torchrun job with ``fault`` injected and write a bundle to ``out``.

    ``timeout`` is the process-group (collective) timeout in seconds; ``wall_limit``
    bounds the whole torchrun invocation. ``monitor_interval`` is torchrun's own flag (its
    default, 0.1 s, when None): how long after a worker dies the agent tears the others down. A
    longer one stands for a multi-host job, where the peers on other hosts keep running (and
    print their own errors) until their agents hear of the failure. ``extra_env`` is added to the
    workers' environment (a stress run's fault attempt and checkpoint file, see ``workload``).
    Returns the bundle directory.
    """
    out = Path(out).resolve()
    if fault not in KINDS:
        raise ValueError(f"unknown fault {fault!r}; choose from {', '.join(FAULT_KINDS)}")
    if nproc < 1:
        raise ValueError("nproc must be >= 1")
    if fault == "two_faults" and nproc < 2:
        raise ValueError("two_faults needs nproc >= 2")
    if fault != "none" and not 0 <= rank < nproc:
        raise ValueError(f"rank {rank} is outside 0..{nproc - 1}")
    if fault != "none" and not 0 <= step < steps:
        raise ValueError(f"step {step} is outside 0..{steps - 1}")
    if timeout <= 0 or wall_limit <= 0:
        raise ValueError("timeout and wall_limit must be positive")

    plan = FaultPlan(fault, rank, step, nproc, timeout)
    kind = KINDS[fault]
    backend = _backend(nproc)
    spoiled: list[int] = []
    # A run again starts where the first one started. A stress run's workload keeps a checkpoint
    # (``CKPT_ENV``) across torchrun's attempts; left as the spoiled run wrote it, the run again
    # resumed after the fault's step, never met the fault, and its bundle was no fault at all (CI,
    # stop 45). So it is put back as it was before the first run.
    ckpt = Path(extra_env[CKPT_ENV]) if extra_env and CKPT_ENV in extra_env else None
    ckpt_before = ckpt.read_bytes() if ckpt is not None and ckpt.is_file() else None
    while True:
        if spoiled and ckpt is not None:
            _restore(ckpt, ckpt_before)
        _prepare_out(out)
        fr_prefix = out / "fr" / FR_PREFIX_NAME
        port = free_ports(1)[0]
        cmd = build_command(plan, out / "logs", port, nproc, max_restarts, seed, steps, backend, monitor_interval)
        env = _child_env(fr_prefix, port, max_restarts) | (extra_env or {})
        t0 = time.monotonic()
        rc, timed_out = _run_bounded(cmd, env, out / "launcher.log", out, wall_limit)
        duration = time.monotonic() - t0
        for stale in (out / "fr").glob("*.tmp"):
            stale.unlink()
        # A run spoiled by something not injected is not the bundle its truth names, so it is run
        # again and the truth says so: torch 2.13's gloo teardown can abort a rank with "terminate
        # called without an active exception" on a loaded machine, after its last step (a straggler
        # job, planned to succeed, then fails: CI, stop 43) or after its own error (the NaN rank's
        # exit status becomes SIGABRT: CI, stop 44).
        planned_ok_failed = kind.action == "none" and rc != 0
        aborted = TEARDOWN_ABORT in (out / "launcher.log").read_text(encoding="utf-8", errors="replace")
        if not (planned_ok_failed or aborted) or timed_out or len(spoiled) >= SPOILED_RERUNS:
            break
        spoiled.append(rc)

    truth = {
        "schema": TRUTH_SCHEMA,
        "fault": fault,
        "culprit_ranks": plan.culprit_ranks(),
        "step": None if fault == "none" else step,
        "expected_category": kind.category,
        "expected_action": kind.action,
        "nproc": nproc,
        "max_restarts": max_restarts,
        "seed": seed,
        "hostname": socket.gethostname(),
        "torch_version": torch.__version__,
        "backend": backend,
        "command": cmd,
        "exit_code": rc,
        "duration_s": round(duration, 3),
        "timed_out": timed_out,
        "steps": steps,
        "pg_timeout_s": timeout,
        "spoiled_exit_codes": spoiled,
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return out
