"""What SLURM says about a job, read through its own clients, each call bounded in time.

``scontrol show job -o`` gives the job's state, exit code, output path, working directory and
nodes while slurmctld remembers it (``MinJobAge``, 300 s by default); ``sacct -c`` (the
job-completion log) or plain ``sacct`` give the final state after that, or while the job is
still COMPLETING (its epilog running). A client that is missing, slow or refuses gives ``None``
and a reason, never an exception: the callers are an epilog and a long-running monitor.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

#: seconds one SLURM client call may take (slurmctld answers in milliseconds when healthy)
CLIENT_TIMEOUT_S = 15.0
_KEY = re.compile(r"\s+(?=[A-Za-z][\w/:]*=)")


class JobState(StrEnum):
    """SLURM's job states that matter here (``squeue``/``scontrol``/``sacct`` spell them so)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    PREEMPTED = "PREEMPTED"
    OTHER = "OTHER"  # a state this version does not name (SUSPENDED, REQUEUED, ...)


#: states that are a failure of the job or its machines, whatever the exit code says
BAD_STATES = frozenset(
    {
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
    }
)
#: states after which the job runs no more
ENDED = BAD_STATES | {JobState.COMPLETED, JobState.CANCELLED, JobState.PREEMPTED}


def job_state(text: str) -> JobState:
    """``CANCELLED by 0`` / ``FAILED`` / ``NODE_FAIL+`` -> the state."""
    word = text.strip().split(" ")[0].rstrip("+")
    try:
        return JobState(word)
    except ValueError:
        return JobState.OTHER


@dataclass(frozen=True, slots=True)
class ExitCode:
    """SLURM's ``exit:signal`` (``ExitCode=1:0``; ``0:15`` killed by SIGTERM)."""

    code: int
    signal: int

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.signal == 0

    @classmethod
    def parse(cls, text: str | None) -> ExitCode | None:
        if not text:
            return None
        code, _, sig = text.strip().partition(":")
        if not code.isdigit() or (sig and not sig.isdigit()):
            return None
        return cls(int(code), int(sig or 0))


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as ``scontrol show job`` (or ``sacct``) tells it."""

    job_id: str
    state: JobState
    exit_code: ExitCode | None
    user: str
    partition: str
    nodes: str  # a hostlist expression, as SLURM prints it
    batch_host: str
    stdout: Path | None
    workdir: Path | None
    reason: str
    uid: int | None = None  # the owner's numeric ids (``UserId=alice(1000)``)
    gid: int | None = None

    @property
    def bundle(self) -> Path | None:
        """Where the job's bundle lies: the folder of its output file, else its working folder."""
        if self.stdout is not None and self.stdout.is_absolute():
            return self.stdout.parent
        return self.workdir


def ended_badly(state: JobState, exit_code: ExitCode | None) -> bool:
    """A failure worth a verdict: a bad state, or an exit code that is not 0:0.

    A job cancelled by its owner or an operator (CANCELLED) is an intent, not a fault.
    """
    if state in BAD_STATES:
        return True
    if state in (JobState.CANCELLED, JobState.PREEMPTED, JobState.COMPLETED):
        return False
    return exit_code is not None and not exit_code.ok


def client_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a SLURM client: ours, with the PATH an epilog (a bare one) lacks."""
    env = dict(os.environ)
    env["PATH"] = env.get("PATH") or "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    env.update(extra or {})
    return env


def run_client(argv: Sequence[str], timeout: float = CLIENT_TIMEOUT_S) -> tuple[str | None, str]:
    """Run one SLURM client: ``(stdout, "")``, or ``(None, why)`` when it failed or timed out."""
    exe = shutil.which(argv[0], path=client_env()["PATH"] + os.pathsep + "/usr/sbin")
    if exe is None:
        return None, f"{argv[0]} not found (is SLURM's client installed?)"
    try:
        res = subprocess.run(
            [exe, *argv[1:]],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=client_env(),
        )
    except subprocess.TimeoutExpired:
        return None, f"{argv[0]} did not answer within {timeout:g} s"
    except OSError as exc:
        return None, f"{argv[0]}: {exc}"
    if res.returncode != 0:
        return None, f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()[:300]}"
    return res.stdout, ""


def parse_show_job(line: str) -> dict[str, str]:
    """One ``scontrol -o show job`` line -> its ``Key=value`` pairs (values may hold spaces)."""
    out: dict[str, str] = {}
    for part in _KEY.split(line.strip()):
        key, eq, value = part.partition("=")
        if eq:
            out[key] = value.strip()
    return out


def _path(value: str | None) -> Path | None:
    return Path(value) if value and value not in ("(null)", "None") else None


def job_from_fields(f: Mapping[str, str]) -> SlurmJob:
    return SlurmJob(
        job_id=f.get("JobId", ""),
        state=job_state(f.get("JobState", "")),
        exit_code=ExitCode.parse(f.get("ExitCode")),
        user=f.get("UserId", "").split("(")[0],
        partition=f.get("Partition", ""),
        nodes=f.get("NodeList", "") if f.get("NodeList") not in (None, "(null)") else "",
        batch_host=f.get("BatchHost", "") if f.get("BatchHost") not in (None, "(null)") else "",
        stdout=_path(f.get("StdOut")),
        workdir=_path(f.get("WorkDir")),
        reason=f.get("Reason", ""),
        uid=_numeric_id(f.get("UserId")),
        gid=_numeric_id(f.get("GroupId")),
    )


def _numeric_id(text: str | None) -> int | None:
    """``alice(1000)`` -> 1000."""
    inside = (text or "").rpartition("(")[2].rstrip(")")
    return int(inside) if inside.isdigit() else None


def show_job(job_id: str, timeout: float = CLIENT_TIMEOUT_S) -> tuple[SlurmJob | None, str]:
    """``scontrol show job`` of one job, or ``(None, why)``."""
    out, why = run_client(["scontrol", "-o", "show", "job", job_id], timeout)
    if out is None:
        return None, why
    for line in out.splitlines():
        f = parse_show_job(line)
        if f.get("JobId") == job_id:
            return job_from_fields(f), ""
    return None, f"scontrol does not know job {job_id}"


def final_state(job_id: str, timeout: float = CLIENT_TIMEOUT_S) -> tuple[JobState, ExitCode | None] | None:
    """The job's final state from accounting: ``sacct`` (slurmdbd), else ``sacct -c`` (the
    job-completion log, where there is no database). None when neither knows it yet."""
    fmt = ["-n", "-X", "-P", "-o", "JobID,State,ExitCode", "-j", job_id]
    for argv in (["sacct", *fmt], ["sacct", "-c", *fmt]):
        out, _why = run_client(argv, timeout)
        for line in (out or "").splitlines():
            cols = line.split("|")
            if len(cols) >= 3 and cols[0] == job_id:
                return job_state(cols[1]), ExitCode.parse(cols[2])
    return None


def running_jobs(
    user: str | None = None, partition: str | None = None, timeout: float = CLIENT_TIMEOUT_S
) -> tuple[list[str] | None, str]:
    """The ids of the jobs ``squeue`` shows RUNNING (optionally one user's, one partition's)."""
    argv = ["squeue", "-h", "-t", "RUNNING", "-o", "%i"]
    if user:
        argv += ["-u", user]
    if partition:
        argv += ["-p", partition]
    out, why = run_client(argv, timeout)
    if out is None:
        return None, why
    return [line.strip() for line in out.splitlines() if line.strip()], ""
