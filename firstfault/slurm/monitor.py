"""Follow every running SLURM job: start a follower on its output folder, stop it when the job ends.

Each sweep asks ``squeue`` which jobs run (optionally one user's, one partition's); a job seen for
the first time is read with ``scontrol show job`` and gets a follower, a command made from a
template (default ``firstfault watch {workdir} --jsonl {out}``). The template is split like a
shell line once, then each word is filled in, so a path with spaces or quotes stays one argument
and nothing is interpreted by a shell. A word ``firstfault`` in first place runs this very
installation (``python -m firstfault.cli``), so the monitor and its followers agree on a version.

When a job leaves ``squeue`` its follower gets ``settle_s`` to finish on its own (a follower may
still be reading the job's last lines), then SIGTERM to its process group, then SIGKILL; its
verdict is the last one in ``{out}`` (JSON lines) or, when that file is empty, in its standard
output. The job's final state comes from ``scontrol``/``sacct``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from firstfault.slurm.jobs import ExitCode, JobState, final_state, running_jobs, show_job
from firstfault.slurm.operator import parse_verdict_text

DEFAULT_TEMPLATE = "firstfault watch {workdir} --jsonl {out}"
PLACEHOLDERS = ("job", "workdir", "stdout", "out", "nodes")


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    out_dir: Path
    template: str = DEFAULT_TEMPLATE
    user: str | None = None
    partition: str | None = None
    poll_s: float = 5.0
    settle_s: float = 5.0
    stop_s: float = 10.0


@dataclass(slots=True)
class Follower:
    job_id: str
    argv: list[str]
    proc: subprocess.Popen[bytes]
    out: Path
    stdout: Path
    started: float
    handles: list[IO[bytes]] = field(default_factory=list)
    ended_at: float | None = None  # when the job was first seen gone


@dataclass(frozen=True, slots=True)
class JobReport:
    """One followed job, once it has ended."""

    job_id: str
    state: JobState
    exit_code: ExitCode | None
    follower_rc: int | None
    argv: tuple[str, ...]
    verdict: dict[str, Any] | None
    out: Path


def follower_argv(template: str, values: dict[str, str]) -> list[str]:
    """The template's words, each filled in; ``firstfault`` first runs this installation."""
    words = shlex.split(template)
    if not words:
        raise ValueError("the follower template is empty")
    argv = [w.format(**values) for w in words]
    if argv[0] == "firstfault":
        argv = [sys.executable, "-m", "firstfault.cli", *argv[1:]]
    return argv


def check_template(template: str) -> None:
    """Refuse, before starting, a template that names an unknown placeholder or does not split."""
    try:
        follower_argv(template, {k: k for k in PLACEHOLDERS})
    except (KeyError, IndexError, ValueError) as exc:
        names = ", ".join(PLACEHOLDERS)
        raise ValueError(f"bad follower template {template!r}: {exc} (placeholders: {names})") from None


class Monitor:
    """The followers of the running jobs; :meth:`sweep` once per poll, :meth:`close` at the end."""

    def __init__(self, config: MonitorConfig, say: Callable[[str], None] = lambda _m: None) -> None:
        check_template(config.template)
        self.config = config
        self.say = say
        self.followers: dict[str, Follower] = {}
        self.seen: set[str] = set()
        config.out_dir.mkdir(parents=True, exist_ok=True)

    def sweep(self) -> list[JobReport]:
        """Start followers for new running jobs; finish those whose job ended. Reports of ended jobs."""
        running, why = running_jobs(self.config.user, self.config.partition)
        if running is None:
            self.say(f"squeue: {why}")
            return []
        for job_id in running:
            if job_id not in self.seen and job_id not in self.followers:
                self._start(job_id)
        self.seen &= set(running)  # only what still runs: a monitor that runs for months stays small
        reports = []
        now = time.monotonic()
        for job_id, f in list(self.followers.items()):
            if job_id in running:
                continue
            if f.ended_at is None:
                f.ended_at = now
            if f.proc.poll() is None and now - f.ended_at < self.config.settle_s:
                continue
            reports.append(self._finish(f))
        return reports

    def _start(self, job_id: str) -> None:
        self.seen.add(job_id)
        job, why = show_job(job_id)
        if job is None or job.bundle is None:
            self.say(f"job {job_id}: not followed ({why or 'no output folder'})")
            return
        out = self.config.out_dir / f"job-{job_id}.jsonl"
        values = {
            "job": job_id,
            "workdir": str(job.bundle),
            "stdout": str(job.stdout or ""),
            "out": str(out),
            "nodes": job.nodes,
        }
        argv = follower_argv(self.config.template, values)
        stdout = self.config.out_dir / f"job-{job_id}.stdout"
        log = open(stdout, "wb")  # noqa: SIM115 - kept open for the follower's life, closed in _finish
        err = open(self.config.out_dir / f"job-{job_id}.stderr", "wb")  # noqa: SIM115
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            log.close()
            err.close()
            self.say(f"job {job_id}: cannot start {argv[0]}: {exc}")
            return
        self.followers[job_id] = Follower(job_id, argv, proc, out, stdout, time.monotonic(), [log, err])
        self.say(f"job {job_id}: following {job.bundle} (pid {proc.pid})")

    def _stop(self, f: Follower) -> int | None:
        if f.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(f.proc.pid, signal.SIGTERM)
            try:
                f.proc.wait(timeout=self.config.stop_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(f.proc.pid, signal.SIGKILL)
                f.proc.wait()
        for h in f.handles:
            h.close()
        return f.proc.returncode

    def _finish(self, f: Follower) -> JobReport:
        rc = self._stop(f)
        del self.followers[f.job_id]
        verdict = None
        for src in (f.out, f.stdout):
            with contextlib.suppress(OSError):
                verdict = parse_verdict_text(src.read_text(encoding="utf-8", errors="replace"))
            if verdict is not None:
                break
        state: JobState = JobState.OTHER
        code: ExitCode | None = None
        job, _why = show_job(f.job_id)
        if job is not None:
            state, code = job.state, job.exit_code
        if state in (JobState.COMPLETING, JobState.OTHER, JobState.RUNNING):
            got = final_state(f.job_id)
            if got is not None:
                state, code = got[0], got[1] or code
        return JobReport(f.job_id, state, code, rc, tuple(f.argv), verdict, f.out)

    def close(self) -> list[JobReport]:
        """Stop every follower (the monitor is ending); their reports."""
        return [self._finish(f) for f in list(self.followers.values())]

    def run(self, duration_s: float | None, on_report: Callable[[JobReport], None]) -> None:
        """Sweep every ``poll_s`` until ``duration_s`` passed (None: until interrupted); stop all."""
        end = None if duration_s is None else time.monotonic() + duration_s
        try:
            while end is None or time.monotonic() < end:
                for r in self.sweep():
                    on_report(r)
                time.sleep(self.config.poll_s)
        finally:
            for r in self.close():
                on_report(r)
