"""Stress campaign: faults injected into a real workload under the real torchrun, with restarts.

For each fault (``KIND@STEP[:RANK]``) one job runs under ``torchrun --max-restarts 1``: the
fault fires in attempt 0 only (``FIRSTFAULT_FAULT_ATTEMPT``), rank 0 checkpoints every N steps
(``FIRSTFAULT_CKPT``), torchrun restarts the workers and attempt 1 resumes after the last
checkpoint and finishes. From the bundle it left (torchrun's per-attempt logs) the campaign
measures, per fault:

* **fault time**: the culprit rank's last progress line in attempt 0 (the fault fires at the
  start of the next step);
* **detection**: the first timestamped sign of failure in attempt 0: a rank's flight-recorder
  dump written on an error, or torchrun's ``failed (exitcode ...)`` line;
* **restart**: from the fault to attempt 1's first progress line (training running again);
* **steps lost**: steps completed in attempt 0 after the last checkpoint (done twice);
* **verdict right**: ``firstfault.analyze`` on the bundle names the fault's category and rank.

This is the simulate-and-watch loop an operator runs before trusting a configuration. SLURM
requeue is not exercised here (torchrun restarts only).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import firstfault

STRESS_KINDS = ("exception", "sigkill", "segfault", "hang", "desync", "host_oom", "nan", "exit_code")
_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_STEP = re.compile(r"\] step (\d+) loss ")
_RESUMED = re.compile(r"resumed from checkpoint step=(\d+)")
_SAVED = re.compile(r"checkpoint saved step=(\d+)")
_GLOG_FAILED = re.compile(r"^E(\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+) .*failed \(exitcode")
_SPEC = re.compile(r"^([a-z_]+)@(\d+)(?::(\d+))?$")


@dataclass(frozen=True, slots=True)
class StressFault:
    kind: str
    step: int
    rank: int

    @classmethod
    def parse(cls, text: str) -> StressFault:
        m = _SPEC.match(text.strip())
        if not m or m[1] not in STRESS_KINDS:
            raise ValueError(f"bad fault {text!r}: KIND@STEP[:RANK], KIND one of {', '.join(STRESS_KINDS)}")
        return cls(m[1], int(m[2]), int(m[3] or 1))


@dataclass(frozen=True, slots=True)
class StressRow:
    fault: str
    restarted: bool
    completed: bool
    detect_s: float | None
    restart_s: float | None
    steps_lost: int | None
    resumed_after: int | None
    verdict: str
    expected: str
    verdict_right: bool
    wall_s: float


def _ts(line: str) -> float | None:
    m = _TS.match(line)
    return datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def _lines(run: Path, attempt: int, rank: int | None = None) -> list[str]:
    out: list[str] = []
    for p in sorted(run.glob(f"logs/*/attempt_{attempt}/*/stdout.log")):
        if rank is None or p.parent.name == str(rank):
            out += p.read_text(encoding="utf-8", errors="replace").splitlines()
    return out


def _agent_failed(run: Path, year: int) -> float | None:
    for line in (run / "launcher.log").read_text(encoding="utf-8", errors="replace").splitlines():
        m = _GLOG_FAILED.match(line)
        if m:
            return datetime.strptime(f"{year}-{m[1]}-{m[2]} {m[3]}", "%Y-%m-%d %H:%M:%S.%f").timestamp()
    return None


def measure(run: Path, fault: StressFault) -> tuple[float | None, float | None, int | None, int | None, bool]:
    """(detect_s, restart_s, steps_lost, resumed_after, restarted) from one run's bundle."""
    own = _lines(run, 0, fault.rank)
    steps0 = [(_ts(x), int(m[1])) for x in own if (m := _STEP.search(x))]
    t_fault = steps0[-1][0] if steps0 else next((_ts(x) for x in own if _ts(x)), None)
    last_done = steps0[-1][1] if steps0 else -1
    signs = [t for x in _lines(run, 0) if "flight recorder: wrote" in x and (t := _ts(x)) is not None]
    year = datetime.fromtimestamp(t_fault).year if t_fault else datetime.now().year
    agent = _agent_failed(run, year)
    if agent is not None:
        signs.append(agent)
    after = [t for t in signs if t_fault is None or t >= t_fault]
    detect = min(after) - t_fault if after and t_fault is not None else None
    a1 = _lines(run, 1)
    restarted = bool(a1)
    first1 = next((t for x in a1 if _STEP.search(x) and (t := _ts(x)) is not None), None)
    restart = first1 - t_fault if first1 is not None and t_fault is not None else None
    resumed = next((int(m[1]) for x in a1 if (m := _RESUMED.search(x))), None)
    saved = [int(m[1]) for x in _lines(run, 0, 0) if (m := _SAVED.search(x))]
    base = resumed if resumed is not None else (max(saved) if saved else -1)
    return detect, restart, max(0, last_done - base), resumed, restarted


def run_fault(
    out: Path, fault: StressFault, *, nproc: int, steps: int, ckpt_every: int, timeout: float, wall_limit: float
) -> StressRow:
    from firstfault_sim.torch_sim import simulate_torch  # torch: imported when a campaign runs

    run = out / f"{fault.kind}-step{fault.step}-rank{fault.rank}"
    t0 = time.monotonic()
    simulate_torch(
        run,
        fault=fault.kind,
        rank=fault.rank,
        step=fault.step,
        nproc=nproc,
        max_restarts=1,
        timeout=timeout,
        steps=steps,
        wall_limit=wall_limit,
        extra_env={
            "FIRSTFAULT_FAULT_ATTEMPT": "0",
            "FIRSTFAULT_CKPT": str(run / "ckpt.pt"),
            "FIRSTFAULT_CKPT_EVERY": str(ckpt_every),
        },
    )
    wall = time.monotonic() - t0
    (run / "ckpt.pt").unlink(missing_ok=True)  # not evidence: keep the bundle what a job leaves
    truth = json.loads((run / "truth.json").read_text(encoding="utf-8"))
    detect, restart, lost, resumed, restarted = measure(run, fault)
    v = firstfault.analyze(run)
    expected = f"{truth['expected_category']} rank {fault.rank}"
    right = str(v.category) == truth["expected_category"] and fault.rank in v.culprit.ranks[:1]
    return StressRow(
        fault=f"{fault.kind}@{fault.step}:{fault.rank}",
        restarted=restarted,
        completed=any("training complete" in x for x in _lines(run, 1)),
        detect_s=None if detect is None else round(detect, 2),
        restart_s=None if restart is None else round(restart, 2),
        steps_lost=lost,
        resumed_after=resumed,
        verdict=f"{v.category} rank {','.join(str(r) for r in v.culprit.ranks[:2]) or '-'}",
        expected=expected,
        verdict_right=right,
        wall_s=round(wall, 1),
    )


HEADER = (
    "| fault | restarted | completed | detection s | fault to training again s | steps lost | resumed after step "
    "| analyze says | expected | right | wall s |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def row_markdown(r: StressRow) -> str:
    yn = {True: "yes", False: "NO"}
    return (
        f"| {r.fault} | {yn[r.restarted]} | {yn[r.completed]} | {r.detect_s} | {r.restart_s} | {r.steps_lost} "
        f"| {r.resumed_after} | {r.verdict} | {r.expected} | {yn[r.verdict_right]} | {r.wall_s} |"
    )
