"""The job epilog: a job that ended badly gets a verdict, and the job and slurmd never suffer for it.

Run by slurmd as ``Epilog=`` (once per node of the job: only the job's batch host acts, the
others log and leave), by slurmctld as ``EpilogSlurmctld=``, or by an ``strigger --fini``
program with the job id as its argument. It reads the job from ``scontrol show job`` (falling
back to ``sacct``/``sacct -c`` while the job is still COMPLETING), and when the job failed
(:func:`firstfault.slurm.jobs.ended_badly`) takes the folder of its output file as the bundle
and either submits it by path to a running ``firstfault serve`` (``POST /v1/jobs`` with an API
token; the server's ``--allow-root`` must cover it) or, with no server configured (or when the
server cannot be reached or refuses), runs ``firstfault analyze --json`` in a child process and
writes the verdict next to the output file.

Why it must not fail: slurmd drains a node whose epilog exits non-zero, and waits for it. So
every step is bounded in time (the client calls, the HTTP request, the analysis, whose child is
killed past its bound), every error becomes a line in the log, and the exit code is always 0.

Why it drops rights: slurmd runs the epilog as root, on a folder the job's owner controls. The
analysis runs with the owner's uid and gid (so a bundle can make it read nothing its owner could
not), the verdict is written through ``mkstemp`` and renamed (a name planted in the folder cannot
redirect root's write) and handed to the owner, and the log is opened with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from firstfault.slurm.jobs import ExitCode, JobState, SlurmJob, ended_badly, final_state, show_job

#: seconds the whole hook may take by default: slurmd waits for an epilog without limit unless
#: PrologEpilogTimeout is set, and the node takes no new job meanwhile, so the hook bounds itself
DEFAULT_BUDGET_S = 120.0
VERDICT_NAME = "firstfault-verdict-{job}.json"


class Outcome(StrEnum):
    SKIPPED = "skipped"  # nothing to do: healthy job, another node's turn, no job id
    SUBMITTED = "submitted"  # the bundle went to the server
    ANALYZED = "analyzed"  # verdict written next to the bundle
    FAILED = "failed"  # something went wrong; the log says what


@dataclass(frozen=True, slots=True)
class EpilogConfig:
    server: str | None = None  # http://host:port of `firstfault serve`
    token: str | None = None
    budget_s: float = DEFAULT_BUDGET_S
    log: Path | None = None
    include_cancelled: bool = False


@dataclass(frozen=True, slots=True)
class EpilogResult:
    outcome: Outcome
    job_id: str | None
    detail: str
    verdict: Path | None = None
    server_job: str | None = None


def _log(config: EpilogConfig, line: str) -> None:
    """One line to the log; a log that cannot be written is silently given up (never fail)."""
    path = config.log
    if path is None:
        return
    text = f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} firstfault slurm epilog: {line}\n"
    try:
        # O_NOFOLLOW: the hook runs as root, and a log path planted as a link must not redirect it
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o640)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass


def _resolve_state(job: SlurmJob, env: Mapping[str, str], budget: float) -> tuple[JobState, ExitCode | None]:
    """The final state: scontrol's, or accounting's while scontrol still says COMPLETING; the
    exit code from the epilog's own environment when SLURM gave one (``SLURM_JOB_EXIT_CODE2``)."""
    state, code = job.state, job.exit_code
    if state not in (JobState.FAILED, JobState.TIMEOUT, JobState.NODE_FAIL, JobState.COMPLETED, JobState.CANCELLED):
        got = final_state(job.job_id, timeout=max(1.0, min(10.0, budget)))
        if got is not None and got[0] is not JobState.OTHER:
            state, code = got[0], got[1] or code
    env_code = ExitCode.parse(env.get("SLURM_JOB_EXIT_CODE2"))
    return state, env_code if env_code is not None and (code is None or code.ok) else code


def run_epilog(job_id: str | None, env: Mapping[str, str], config: EpilogConfig) -> EpilogResult:
    """The whole hook; never raises."""
    try:
        result = _run(job_id or env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"), env, config)
    except Exception as exc:  # the hook must not fail the job: every error is logged
        result = EpilogResult(Outcome.FAILED, job_id, f"internal error: {type(exc).__name__}: {exc}")
    _log(config, f"job {result.job_id or '?'}: {result.outcome}: {result.detail}")
    return result


def _run(job_id: str | None, env: Mapping[str, str], config: EpilogConfig) -> EpilogResult:
    deadline = time.monotonic() + config.budget_s
    if not job_id:
        return EpilogResult(Outcome.SKIPPED, None, "no job id (SLURM_JOB_ID unset and none given)")
    job, why = show_job(job_id, timeout=max(1.0, min(15.0, config.budget_s / 4)))
    if job is None:
        return EpilogResult(Outcome.FAILED, job_id, why)
    here = env.get("SLURMD_NODENAME")
    if here and job.batch_host and here != job.batch_host:
        return EpilogResult(Outcome.SKIPPED, job_id, f"on {here}; the batch host {job.batch_host} acts for the job")
    state, code = _resolve_state(job, env, deadline - time.monotonic())
    bad = ended_badly(state, code) or (config.include_cancelled and state is JobState.CANCELLED)
    said = f"{state}{f' exit {code.code}:{code.signal}' if code else ''}"
    if not bad:
        return EpilogResult(Outcome.SKIPPED, job_id, f"ended {said}: nothing to analyse")
    bundle = job.bundle
    if bundle is None or not bundle.is_dir():
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}, but its output folder {bundle} is not there")
    if config.server:
        sent = _submit(job_id, bundle, said, config, deadline - time.monotonic())
        if sent.outcome is Outcome.SUBMITTED or deadline - time.monotonic() < 1:
            return sent
        # the server is down or refused the path: the verdict is not lost, it is made here
        here_too = analyze_here(job_id, bundle, said, deadline - time.monotonic(), _owner(job))
        return EpilogResult(here_too.outcome, job_id, f"{sent.detail}; then {here_too.detail}", here_too.verdict)
    return analyze_here(job_id, bundle, said, deadline - time.monotonic(), _owner(job))


def _owner(job: SlurmJob) -> tuple[int, int] | None:
    """The job's owner, when the hook runs as root and the owner is someone else: the analysis
    then runs with the owner's rights, and the verdict file is theirs."""
    if os.geteuid() != 0 or job.uid is None or job.gid is None or job.uid == 0:
        return None
    return job.uid, job.gid


def _submit(job_id: str, bundle: Path, said: str, config: EpilogConfig, left: float) -> EpilogResult:
    """``POST /v1/jobs {"path": bundle}`` to the server; the answer's job id is logged."""
    url = (config.server or "").rstrip("/") + "/v1/jobs"
    req = urllib.request.Request(
        url,
        data=json.dumps({"path": str(bundle)}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {config.token or ''}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=max(1.0, min(30.0, left))) as resp:
            body = json.loads(resp.read(65536) or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace").strip()
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; {url} answered {exc.code}: {detail}")
    except (OSError, ValueError) as exc:
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; {url} unreachable: {exc}")
    server_job = str(body.get("id", "")) or None
    return EpilogResult(
        Outcome.SUBMITTED, job_id, f"ended {said}; {bundle} submitted as job {server_job}", server_job=server_job
    )


def analyze_here(
    job_id: str, bundle: Path, said: str, left: float, owner: tuple[int, int] | None = None
) -> EpilogResult:
    """``firstfault analyze BUNDLE --json`` in a child (killed past the budget; with the job
    owner's uid and gid when given, so root's epilog reads nothing the owner could not); the
    verdict is written next to the job's output through a fresh temporary file (``mkstemp``: a
    name planted in the owner's folder cannot redirect root's write) renamed into place."""
    argv = [sys.executable, "-m", "firstfault.cli", "analyze", str(bundle), "--json"]
    drop: dict[str, Any] = {"user": owner[0], "group": owner[1], "extra_groups": []} if owner else {}
    try:
        res = subprocess.run(
            argv, capture_output=True, timeout=max(1.0, left), stdin=subprocess.DEVNULL, env=dict(os.environ), **drop
        )
    except subprocess.TimeoutExpired:
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; the analysis ran past {left:.0f} s and was killed")
    except OSError as exc:
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; cannot start the analysis: {exc}")
    if res.returncode != 0:
        why = _why_refused(res.stdout, res.stderr)
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; analyze exited {res.returncode}: {why}")
    out = bundle / VERDICT_NAME.format(job=job_id)
    try:
        _write_new(out, res.stdout, owner)
    except OSError as exc:
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; cannot write {out}: {exc}")
    return EpilogResult(Outcome.ANALYZED, job_id, f"ended {said}; verdict in {out}", verdict=out)


def _why_refused(stdout: bytes, stderr: bytes) -> str:
    """The analysis's one-line reason: ``--json``'s ``error``, else the words of its last message
    (a usage error comes boxed in frame characters)."""
    try:
        err = json.loads(stdout or b"{}").get("error")
    except (ValueError, AttributeError):
        err = None
    if isinstance(err, str) and err:
        return err[:300]
    frame = str.maketrans("", "", "─│╭╮╰╯")
    words = [ln.translate(frame).strip() for ln in stderr.decode("utf-8", "replace").splitlines()]
    kept = [w for w in words if w and not w.startswith(("Usage:", "Try ", "Error"))]
    return " ".join(kept)[-300:] or "no message"


def _write_new(out: Path, data: bytes, owner: tuple[int, int] | None) -> None:
    """``data`` at ``out`` through a fresh temporary file in the same folder, renamed into place
    (``os.replace`` replaces a link planted at ``out`` itself, never what it points to)."""
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), 0o644)  # as readable as the job's own output file
            if owner:
                os.fchown(fh.fileno(), owner[0], owner[1])
        os.replace(tmp, out)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
