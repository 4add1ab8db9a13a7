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
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firstfault_sim.ports import free_ports

#: Debian packages that provide everything below (bookworm: slurm-wlm 22.05, munge 0.5.15).
APT_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")
CLIENTS = ("sbatch", "srun", "scontrol", "sacct", "scancel", "sinfo")
#: ``sacct --format`` for the bundle; every field works from job-completion data.
SACCT_FORMAT = "JobID,JobName,Partition,State,ExitCode,NNodes,NodeList,Start,End,Elapsed,UID"
_JOBID = re.compile(r"^(\d+)")
_KV = re.compile(r"(\w[\w/:]*)=(\S*)")


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
        ports = free_ports(nodes + 1)
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
