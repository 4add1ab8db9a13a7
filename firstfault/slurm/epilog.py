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
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from firstfault.slurm.jobs import ExitCode, JobState, SlurmJob, ended_badly, final_state, show_job

#: seconds the whole hook may take by default: under slurmd's default PrologEpilogTimeout
#: (none) and well under the minutes an operator would notice on a node's turnaround
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
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} firstfault slurm epilog: {line}\n")
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
        here_too = _analyze_here(job_id, bundle, said, deadline - time.monotonic())
        return EpilogResult(here_too.outcome, job_id, f"{sent.detail}; then {here_too.detail}", here_too.verdict)
    return _analyze_here(job_id, bundle, said, deadline - time.monotonic())


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


def _analyze_here(job_id: str, bundle: Path, said: str, left: float) -> EpilogResult:
    """``firstfault analyze BUNDLE --json`` in a child (killed past the budget); the verdict
    is written atomically next to the job's output file."""
    argv = [sys.executable, "-m", "firstfault.cli", "analyze", str(bundle), "--json"]
    try:
        res = subprocess.run(
            argv, capture_output=True, timeout=max(1.0, left), stdin=subprocess.DEVNULL, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; the analysis ran past {left:.0f} s and was killed")
    if res.returncode != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; analyze exited {res.returncode}: {why[0]}")
    out = bundle / VERDICT_NAME.format(job=job_id)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")  # an Epilog and an strigger may both write it
    try:
        tmp.write_bytes(res.stdout)
        tmp.replace(out)
    except OSError as exc:
        return EpilogResult(Outcome.FAILED, job_id, f"ended {said}; cannot write {out}: {exc}")
    return EpilogResult(Outcome.ANALYZED, job_id, f"ended {said}; verdict in {out}", verdict=out)
