"""``firstfault bench live``: how soon after the first fault ``firstfault watch`` says what broke.

For every fault kind of ``firstfault simulate torch`` a real ``torchrun`` job (gloo on CPU) is
started, and ``firstfault watch`` on its output directory at the same moment, as separate
processes, the way an operator would run them. Measured per kind:

* detect s: from the root event's own timestamp (the finished run's verdict's root event, as a
  batch analysis of the bundle names it; for a hang, the culprit's last progress line; for a
  straggler, its progress line of the step it turned slow at) to the
  ``observed_at`` of the first verdict the watcher emitted that is right (category and first
  culprit rank equal ``truth.json``'s);
* before first timeout: whether that verdict came before the first timeout or watchdog line in
  the job's logs (its own timestamp), i.e. before the cascade such a line starts.

The root's timestamp is the log's own clock and ``observed_at`` the watcher's; both are this
host's clock. A root whose timestamp is coarse (torchrun's error.json: whole seconds) shifts the
figure by under a second. The healthy ``none`` run is right when no fault was ever emitted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import firstfault

_ROOT = Path(__file__).resolve().parents[1]
#: A timeout or watchdog line: what starts the cascade a live verdict is meant to beat.
TIMEOUT_WORDS = ("timeout", "watchdog")


@dataclass(frozen=True)
class LiveRow:
    kind: str
    expected: str  # "category rank N" from truth.json
    first_right_s: float | None  # seconds from the root's timestamp to the first right verdict
    right: bool  # a right verdict was emitted at all
    before_timeout: bool | None  # None: the job printed no timeout line
    first_emitted: str  # the first verdict the watcher emitted, as "category rank N (trigger)"
    updates: int
    final: str

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _said(d: dict[str, Any]) -> str:
    v = d["verdict"]
    ranks = ",".join(str(r) for r in v["culprit"]["ranks"]) or "?"
    return f"{v['category']} rank {ranks} ({d['live']['trigger']})"


def _is_right(d: dict[str, Any], truth: dict[str, Any]) -> bool:
    v = d["verdict"]
    want = [int(r) for r in truth.get("culprit_ranks", [])]
    if truth["expected_category"] == "none":
        return bool(v["category"] == "none")
    return bool(v["category"] == truth["expected_category"] and want[:1] == v["culprit"]["ranks"][:1])


def _step_ts(out: Path, rank: int, step: int) -> float | None:
    """When ``rank`` logged ``step`` (the workload's own progress line in its torchrun log)."""
    from firstfault.parse.timestamps import parse_timestamp

    needle = f"[rank{rank}] step {step} "
    for log in sorted([*out.glob("logs/*/attempt_0/*/stdout.log"), *out.glob("slurm-*.out")]):
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if needle in line:
                return parse_timestamp(line)
    return None


def _root_ts(final: dict[str, Any], out: Path, truth: dict[str, Any]) -> float | None:
    """The root event's own time. A hang's root is when its culprit stopped (its last progress
    line); a straggler has no event, its root is the step from which it is slow."""
    if truth["expected_category"] == "straggler" and truth.get("culprit_ranks"):
        return _step_ts(out, int(truth["culprit_ranks"][0]), int(truth["step"]))
    root = final.get("root_event") or {}
    ranks = final["verdict"]["culprit"]["ranks"]
    if final["verdict"]["category"] == "hang" and ranks:
        for p in final.get("progress", []):
            if p["rank"] == ranks[0] and p.get("last_step_ts"):
                return float(p["last_step_ts"])
    ts = root.get("timestamp")
    return float(ts) if ts is not None else None


def _first_timeout(final: dict[str, Any]) -> float | None:
    """The earliest timeout or watchdog line's own time among the finished run's events."""
    events = [final.get("root_event") or {}, *final.get("causal_chain", []), *final.get("context", [])]
    times = [
        float(e["timestamp"])
        for e in events
        if e.get("timestamp") is not None and any(w in str(e.get("signature") or "") for w in TIMEOUT_WORDS)
    ]
    return min(times) if times else None


def run_kind(kind: str, work: Path, wall_limit: float = 120.0, pg_timeout: float = 10.0) -> LiveRow:
    """One real torchrun job with ``kind`` injected, watched live from its first byte."""
    out, jsonl = work / kind, work / f"{kind}.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    jsonl.unlink(missing_ok=True)
    py = sys.executable
    sim = subprocess.Popen(
        [py, "-m", "firstfault.cli", "simulate", "torch", "--out", str(out), "--fault", kind,
         "--timeout", str(pg_timeout), "--wall-limit", str(wall_limit)],
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    watcher = _start_watcher(out, jsonl, wall_limit + 60, pid=sim.pid)
    try:
        sim.wait(timeout=wall_limit + 60)
        watcher.wait(timeout=120)
    finally:
        for p in (sim, watcher):
            if p.poll() is None:
                p.kill()
                p.wait()
    return _row(kind, out, jsonl)


def _start_watcher(out: Path, jsonl: Path, limit: float, pid: int | None = None) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "firstfault.cli", "watch", str(out), "--jsonl", str(jsonl), "--timeout", str(limit)]
    if pid is not None:
        argv += ["--pid", str(pid)]
    return subprocess.Popen(argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_slurm_kinds(kinds: list[str], work: Path, wall_limit: float = 150.0) -> list[LiveRow]:
    """The same measure on a real SLURM cluster on this host (``firstfault_sim.slurm``): the torch
    workload on 2 nodes x 2 ranks through ``srun -l``, watched from before its submission. The watcher
    is stopped (SIGTERM, which ends a watch as Ctrl-C does) once the job has ended and SLURM's
    records are collected into the bundle."""
    from firstfault_sim.slurm import run_torch_fault
    from firstfault_sim.slurm_cluster import SlurmCluster

    rows = []
    with SlurmCluster() as cluster:
        for kind in kinds:
            t0 = time.time()
            out, jsonl = work / f"slurm-{kind}", work / f"slurm-{kind}.jsonl"
            jsonl.unlink(missing_ok=True)
            shutil.rmtree(out, ignore_errors=True)
            watcher = _start_watcher(out, jsonl, wall_limit + 60)  # waits for the folder sbatch's job makes
            try:
                run_torch_fault(cluster, out, fault=kind, timeout=wall_limit)
                time.sleep(1.0)  # the collected SLURM records: one more read
                watcher.terminate()
                watcher.wait(timeout=60)
            finally:
                if watcher.poll() is None:
                    watcher.kill()
                    watcher.wait()
            rows.append(dataclasses.replace(_row(kind, out, jsonl), kind=f"{kind} (slurm)"))
            print(f"  slurm {kind}: {time.time() - t0:.0f} s", file=sys.stderr)
    return rows


def _row(kind: str, out: Path, jsonl: Path) -> LiveRow:
    truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    ups = [json.loads(x) for x in jsonl.read_text(encoding="utf-8").splitlines()] if jsonl.exists() else []
    final = firstfault.analyze(out).to_dict()
    root = _root_ts(final, out, truth)
    rights = [u for u in ups if _is_right(u, truth)]
    if truth["expected_category"] == "none":
        right = all(_is_right(u, truth) for u in ups)
        first_s = None
    else:
        right = bool(rights)
        first_s = round(rights[0]["observed_at"] - root, 2) if rights and root is not None else None
    first_timeout = _first_timeout(final)
    before = None
    if first_timeout is not None and truth["expected_category"] != "none":
        before = bool(rights) and rights[0]["observed_at"] < first_timeout
    want = ",".join(str(r) for r in truth.get("culprit_ranks", [])[:1]) or "-"
    return LiveRow(
        kind=kind,
        expected=f"{truth['expected_category']} rank {want}",
        first_right_s=first_s,
        right=right,
        before_timeout=before,
        first_emitted=_said(ups[0]) if ups else "(none)",
        updates=len(ups),
        final=_said(ups[-1]) if ups else "(none)",
    )


def run_live(kinds: list[str], work: Path | None = None, wall_limit: float = 120.0) -> list[LiveRow]:
    """Every kind in turn (one job at a time: a loaded host would blur the figure)."""
    if work is None:
        work = Path(tempfile.mkdtemp(prefix="firstfault-bench-live-"))
    rows = []
    for kind in kinds:
        t0 = time.monotonic()
        rows.append(run_kind(kind, work, wall_limit))
        print(f"  {kind}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return rows


def median_detect(rows: list[LiveRow]) -> float | None:
    got = [r.first_right_s for r in rows if r.first_right_s is not None]
    return round(statistics.median(got), 2) if got else None


def table(rows: list[LiveRow]) -> str:
    """A Markdown table, one line per kind, and the median."""

    def yn(b: bool | None) -> str:
        return "n/a" if b is None else ("yes" if b else "no")

    out = [
        "| kind | expected | detect s | right? | before first timeout? | first emitted | updates |",
        "|---|---|---:|---|---|---|---:|",
    ]
    for r in rows:
        s = "n/a" if r.first_right_s is None else f"{r.first_right_s:.2f}"
        cells = [r.kind, r.expected, s, yn(r.right), yn(r.before_timeout), r.first_emitted, str(r.updates)]
        out.append("| " + " | ".join(cells) + " |")
    med = median_detect(rows)
    out.append("")
    n = sum(r.first_right_s is not None for r in rows)
    out.append(f"median detect: {'n/a' if med is None else f'{med:.2f} s'} over {n} kind(s)")
    return "\n".join(out)
