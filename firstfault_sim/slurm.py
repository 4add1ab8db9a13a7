"""A real SLURM cluster on this one host, and the bundles its jobs leave behind.

``firstfault simulate slurm`` (and ``tests/test_slurm_real.py``) start Debian's real
``munged``, ``slurmctld`` and one ``slurmd`` per simulated node, all as children of this
process, with every file in a private state directory: no ``/etc/slurm``, no systemd, no
fixed ports. Each ``slurmd`` runs in its own UTS namespace (``unshare -u``) with the
node's name as its hostname, so the tasks of ``node02`` really see ``gethostname() ==
"node02"`` and killing a node is killing every process in that namespace. The torch
workload (:mod:`firstfault_sim.workload`) is launched through ``srun -l`` with the
environment torch's ``env://`` rendezvous needs, so every line in the bundle was printed
by real SLURM, real torch or the real workload.

Choices that make it work inside this container, and why:

* ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``: no cgroup plugin is
  loaded, so no cgroup hierarchy has to be writable.
* ``JobCompType=jobcomp/filetxt``: there is no slurmdbd (it needs MySQL), so accounting
  storage is ``none`` and ``sacct`` refuses with "Slurm accounting storage is disabled";
  ``sacct -c`` reads the job-completion file instead and prints the same
  ``--parsable2`` table.
* ``OverTimeLimit=0``, ``KillWait=2``: a ``--time=1`` job is signalled at the first
  time-limit sweep after 60 s (slurmctld checks every 30 s, so 60-90 s) and killed 2 s
  later. A minute is the smallest limit SLURM accepts (seconds are rounded up).
* ``SlurmdTimeout=10``: a node whose slurmd stops answering is set DOWN 10-25 s later.
* ``OverSubscribe=FORCE:4``: several small jobs share the two cores of a CI machine.

Everything is stopped by PID in :meth:`SlurmCluster.stop`, which ``__exit__`` always
calls, also when a job or the start-up fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firstfault_sim.faults import KINDS, FaultPlan

TRUTH_SCHEMA = "firstfault.truth/v1"
#: Debian packages that provide everything below (bookworm: slurm-wlm 22.05, munge 0.5.15).
APT_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")
CLIENTS = ("sbatch", "srun", "scontrol", "sacct", "scancel", "sinfo")
#: ``sacct --format`` for the bundle; every field works from job-completion data.
SACCT_FORMAT = "JobID,JobName,Partition,State,ExitCode,NNodes,NodeList,Start,End,Elapsed,UID"
FR_PREFIX_NAME = "fr_trace_rank_"
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_JOBID = re.compile(r"^(\d+)")
_KV = re.compile(r"(\w[\w/:]*)=(\S*)")
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


class SlurmUnavailable(RuntimeError):
    """SLURM or munge binaries are missing (tests skip on this)."""


def missing_binaries() -> list[str]:
    """Names of the SLURM/munge programs (and ``unshare``) not found on this host."""
    need = (*DAEMONS, *CLIENTS, "unshare")
    return [b for b in need if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def _which(name: str) -> str:
    found = shutil.which(name) or (str(Path("/usr/sbin", name)) if Path("/usr/sbin", name).exists() else None)
    if not found:
        raise SlurmUnavailable(f"{name} not found; install Debian packages: {' '.join(APT_PACKAGES)}")
    return found


def _free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports the kernel says are free right now."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(int(s.getsockname()[1]))
    finally:
        for s in socks:
            s.close()
    return ports


def _uts_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return None


def _pids_in_uts(ns: str) -> list[int]:
    """Every process whose UTS namespace is ``ns`` (one simulated node)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _uts_ns(int(entry)) == ns:
            out.append(int(entry))
    return out


@dataclass
class Node:
    name: str
    port: int
    proc: subprocess.Popen[bytes] | None = None
    uts: str | None = None
    failed: bool = False


@dataclass
class JobRecord:
    """What the harness knows about one submitted job (for truth.json)."""

    job_id: int
    name: str
    scenario: str
    bundle: Path
    output: Path
    script: str
    nodes: list[str] = field(default_factory=list)
    tasks_per_node: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    submitted: float = field(default_factory=time.time)


class SlurmCluster:
    """One slurmctld and ``nodes`` slurmds on localhost, in a private state dir.

    Use as a context manager; :meth:`stop` ends every daemon it started (by PID) and
    every process left in the nodes' namespaces.
    """

    def __init__(
        self,
        root: Path | None = None,
        nodes: int = 2,
        cpus_per_node: int = 2,
        kill_wait: int = 2,
        slurmd_timeout: int = 10,
        start_timeout: float = 60.0,
        epilog: Path | None = None,
    ) -> None:
        self._own_root = root is None
        # slurmd runs it (as root, SLURM_JOB_ID etc. in its environment) on each node of a job as
        # the job ends; `firstfault slurm epilog`'s tests point it at a wrapper script
        self.epilog = Path(epilog).resolve() if epilog else None
        # Short path: munge's socket path must fit a sockaddr_un (108 bytes).
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="ffslurm-", dir="/tmp"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.ncpus = cpus_per_node
        self.kill_wait = kill_wait
        self.slurmd_timeout = slurmd_timeout
        self.start_timeout = start_timeout
        ports = _free_ports(nodes + 1)
        self.ctld_port = ports[0]
        self.nodes = [Node(f"node{i + 1:02d}", ports[i + 1]) for i in range(nodes)]
        self.control_host = socket.gethostname().split(".")[0]
        self.munged: subprocess.Popen[bytes] | None = None
        self.ctld: subprocess.Popen[bytes] | None = None
        self.conf = self.root / "etc" / "slurm.conf"
        self.log_dir = self.root / "log"
        self.jobcomp = self.log_dir / "jobcomp.txt"
        self.munge_socket = self.root / "run" / "munge.sock"
        self.env = dict(os.environ)
        self.env["SLURM_CONF"] = str(self.conf)
        for var in [k for k in self.env if k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))]:
            if var != "SLURM_CONF":
                del self.env[var]  # a harness run from inside a SLURM job must not inherit it

    # -- set-up ---------------------------------------------------------------

    def write_config(self) -> None:
        """slurm.conf, cgroup.conf, plugstack.conf and a fresh munge key."""
        for sub in ("etc", "state", "spool", "log", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for n in self.nodes:
            (self.root / "spool" / n.name).mkdir(exist_ok=True)
        r = self.root
        node_lines = "\n".join(
            f"NodeName={n.name} NodeHostname={self.control_host} NodeAddr=127.0.0.1 Port={n.port} "
            f"CPUs={self.ncpus} RealMemory=2000 State=UNKNOWN"
            for n in self.nodes
        )
        names = ",".join(n.name for n in self.nodes)
        self.conf.write_text(
            f"""# written by firstfault_sim.slurm; private single-host cluster
ClusterName=ffsim
SlurmctldHost={self.control_host}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.nodes[0].port}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmctldLogFile={self.log_dir}/slurmctld.log
SlurmdLogFile={self.log_dir}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={self.jobcomp}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
KillWait={self.kill_wait}
OverTimeLimit=0
MinJobAge=600
InactiveLimit=0
SlurmdTimeout={self.slurmd_timeout}
MessageTimeout=5
PlugStackConfig={r}/etc/plugstack.conf
{f"Epilog={self.epilog}" if self.epilog else "# no Epilog"}
{node_lines}
PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""",
            encoding="utf-8",
        )
        # No cgroup plugin is configured; this file only keeps slurmd from looking elsewhere.
        (r / "etc" / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n", encoding="utf-8")
        (r / "etc" / "plugstack.conf").write_text("", encoding="utf-8")
        key = r / "etc" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)

    def _spawn(self, argv: Sequence[str], log_name: str) -> subprocess.Popen[bytes]:
        with open(self.log_dir / log_name, "ab") as fh:
            return subprocess.Popen(
                list(argv),
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )

    def start(self) -> None:
        """Write the config, start munged, slurmctld and the slurmds; wait until all idle."""
        miss = missing_binaries()
        if miss:
            raise SlurmUnavailable(f"missing {', '.join(miss)}; install Debian packages: {' '.join(APT_PACKAGES)}")
        self.write_config()
        r = self.root
        self.munged = self._spawn(
            [
                _which("munged"),
                "-F",
                "-f",
                f"--key-file={r}/etc/munge.key",
                f"--socket={self.munge_socket}",
                f"--pid-file={r}/run/munged.pid",
                f"--seed-file={r}/run/munged.seed",
                f"--log-file={self.log_dir}/munged.log",
            ],
            "munged.out",
        )
        self._wait(lambda: self.munge_socket.exists(), 15, "munged socket", [self.munged])
        # -i: ignore (absent) state files, a fresh cluster every time.
        self.ctld = self._spawn([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
        self._wait(
            lambda: (
                self.client("scontrol", "ping", check=False).returncode == 0
                and "UP" in self.client("scontrol", "ping", check=False).stdout
            ),
            20,
            "slurmctld to answer",
            [self.ctld],
        )
        for n in self.nodes:
            # Own UTS namespace: the node's processes see its name as their hostname.
            n.proc = self._spawn(
                [
                    _which("unshare"),
                    "-u",
                    "sh",
                    "-c",
                    'hostname "$1" && exec "$2" -D -N "$1" -f "$3"',
                    "sh",
                    n.name,
                    _which("slurmd"),
                    str(self.conf),
                ],
                f"slurmd-{n.name}.out",
            )
        self._wait(
            self._all_idle,
            self.start_timeout,
            "nodes to become idle",
            [p for p in [self.ctld, *(n.proc for n in self.nodes)] if p],
        )
        for n in self.nodes:
            if n.proc:
                n.uts = self._slurmd_uts(n)

    def _slurmd_uts(self, n: Node) -> str | None:
        """The UTS namespace of node ``n``: the one its slurmd (a child of unshare) runs in."""
        assert n.proc is not None
        return _uts_ns(n.proc.pid)

    def _all_idle(self) -> bool:
        res = self.client("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states = dict(line.split(None, 1) for line in res.stdout.splitlines() if " " in line)
        return len(states) == len(self.nodes) and all(s.strip() == "idle" for s in states.values())

    def _wait(self, cond: Any, timeout: float, what: str, procs: Sequence[subprocess.Popen[bytes]]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in procs:
                if p.poll() is not None:
                    name = Path(str(p.args[0] if isinstance(p.args, list) else p.args)).name
                    raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}; see {self.log_dir}")
            if cond():
                return
            time.sleep(0.3)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; see {self.log_dir}")

    # -- tear-down --------------------------------------------------------------

    def stop(self) -> None:
        """Cancel jobs, stop every daemon by PID, kill what is left in the nodes."""
        if self.ctld is not None and self.ctld.poll() is None:
            with contextlib.suppress(Exception):
                self.client("scancel", "--user", "root", check=False, timeout=10)
        procs = [n.proc for n in self.nodes if n.proc] + [self.ctld, self.munged]
        for p in procs:
            if p is not None and p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        for p in procs:
            if p is None:
                continue
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                p.wait()
        # slurmstepd daemonises out of slurmd's tree; it and its tasks stay in the node's UTS ns.
        for n in self.nodes:
            if n.uts and n.uts != _uts_ns(os.getpid()):
                for pid in _pids_in_uts(n.uts):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
        self.ctld = self.munged = None
        for n in self.nodes:
            n.proc = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients ----------------------------------------------------------------

    def client(
        self, name: str, *args: str, check: bool = True, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        """Run a SLURM client command against this cluster."""
        res = subprocess.run(
            [_which(name), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and res.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
        return res

    def sbatch(self, script: Path, env: dict[str, str] | None = None) -> int:
        res = subprocess.run(
            [_which("sbatch"), "--parsable", str(script)],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        m = _JOBID.match(res.stdout.strip())
        if res.returncode != 0 or not m:
            raise RuntimeError(f"sbatch {script} failed ({res.returncode}): {res.stderr.strip()}")
        return int(m[1])

    def job_info(self, job_id: int) -> dict[str, str]:
        res = self.client("scontrol", "show", "job", str(job_id), check=False)
        return parse_kv(res.stdout)

    def wait_state(self, job_id: int, states: Sequence[str], timeout: float) -> str:
        """Poll until the job's JobState is one of ``states``; return it."""
        deadline = time.monotonic() + timeout
        state = "?"
        while time.monotonic() < deadline:
            state = self.job_info(job_id).get("JobState", "?")
            if state in states:
                return state
            time.sleep(0.5)
        raise TimeoutError(f"job {job_id} still {state} after {timeout:.0f}s (wanted {'/'.join(states)})")

    def wait_done(self, job_id: int, timeout: float) -> str:
        return self.wait_state(
            job_id,
            (
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
                "NODE_FAIL",
                "OUT_OF_MEMORY",
                "PREEMPTED",
                "BOOT_FAIL",
                "DEADLINE",
            ),
            timeout,
        )

    def wait_output(self, path: Path, pattern: str, timeout: float) -> None:
        """Wait until the job's output file contains ``pattern`` (e.g. a training step)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if rx.search(path.read_text(encoding="utf-8", errors="replace")):
                    return
            time.sleep(0.3)
        raise TimeoutError(f"{path} never showed {pattern!r} within {timeout:.0f}s")

    def scancel(self, job_id: int) -> None:
        self.client("scancel", str(job_id))

    def fail_node(self, name: str) -> float:
        """Power a node off: SIGKILL every process in its namespace (slurmd, stepds, ranks).

        Returns the time it happened. slurmctld notices only through missed pings, as with a
        real crashed host.
        """
        node = next(n for n in self.nodes if n.name == name)
        if not node.uts or node.uts == _uts_ns(os.getpid()):
            raise RuntimeError(f"{name} has no namespace of its own; cannot fail it alone")
        t = time.time()
        for pid in _pids_in_uts(node.uts):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        node.failed = True
        if node.proc is not None:
            node.proc.wait()
        return t

    # -- bundles ----------------------------------------------------------------

    def collect(self, job: JobRecord) -> Path:
        """Copy everything SLURM knows about ``job`` into its bundle directory."""
        b = job.bundle
        show = self.client("scontrol", "show", "job", str(job.job_id), check=False)
        (b / f"scontrol_show_job_{job.job_id}.txt").write_text(show.stdout + show.stderr, encoding="utf-8")
        acct = self.client("sacct", "-c", "--parsable2", f"--format={SACCT_FORMAT}", "-j", str(job.job_id), check=False)
        (b / "sacct.txt").write_text(acct.stdout, encoding="utf-8")
        t1 = time.time()
        from firstfault.parse.slurm import expand_hostlist

        nodes = set(expand_hostlist(parse_kv(show.stdout).get("NodeList")))
        _copy_job_lines(self.log_dir / "slurmctld.log", b / "slurmctld.log", job.job_id, job.submitted, t1, nodes)
        for n in self.nodes:
            src = self.log_dir / f"slurmd-{n.name}.log"
            if src.exists():
                d = b / f"host-{n.name}"
                d.mkdir(exist_ok=True)
                _copy_job_lines(src, d / "slurmd.log", job.job_id, job.submitted, t1, nodes)
        return b


_NODE_REF = re.compile(r"\b(?:Nodes? (?=\S+ not responding)|failure of node |failed node )([^\s,]+)")
_LOG_TS = re.compile(r"^\[(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.\d+)?\] ")
_JOB_REF = re.compile(r"(?:JobId=|job_id |StepId=|batch job |\bJOB |\bSTEP )(\d+)\b|\[(\d+)\.(?:\d+|batch|extern)\]")


def parse_kv(text: str) -> dict[str, str]:
    return dict(_KV.findall(text))


def _copy_job_lines(src: Path, dst: Path, job_id: int, t0: float, t1: float, nodes: set[str]) -> None:
    """What an admin attaches for one job: the daemon's lines from the job's lifetime that are
    about this job, or about its nodes, or about no job at all; not the other jobs' lines."""
    from datetime import datetime

    from firstfault.parse.slurm import expand_hostlist

    try:
        lines = src.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    keep = []
    for line in lines:
        m = _LOG_TS.match(line)
        if not m:
            continue
        ts = datetime.fromisoformat(m[1]).astimezone().timestamp()
        if not t0 - 1 <= ts <= t1 + 1:
            continue
        refs = {int(a or b) for a, b in _JOB_REF.findall(line[m.end() :])}
        if refs and job_id not in refs:
            continue
        named = _NODE_REF.search(line)
        if named and nodes and not nodes & set(expand_hostlist(named[1])):
            continue
        keep.append(line)
    dst.write_text("\n".join(keep) + ("\n" if keep else ""), encoding="utf-8")


# ---------------------------------------------------------------------------
# jobs: the torch workload through srun, and the scheduler scenarios
# ---------------------------------------------------------------------------


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
    port = _free_ports(1)[0]
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
