"""``bench scale-speed``: firstfault against ``grep -E`` over the same simulated bundles.

Bundles of 1,024 / 4,096 / 16,384 ranks (and longer runs up to several GB); for each, ``grep -E``
with the registry's literal set and ``firstfault analyze --json`` run as subprocesses over the
same files: wall time, MB/s, peak memory (PSS summed over the process tree), and the ratio to
grep. Speed is a ratio against a baseline measured in the same run, never an absolute time, so
the figure means the same on a loaded laptop and a quiet server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from firstfault_bench.png import Canvas, png_chart
from firstfault_bench.scale import score
from firstfault_sim.cluster.faults import FaultSpec


@dataclass
class SpeedRow:
    ranks: int
    steps: int
    kind: str
    files: int
    mb: float
    gen_s: float
    grep_s: float
    grep_rss_mb: float
    ff_s: float
    ff_rss_mb: float
    ff_total_s: float  # the pipeline's own time to verdict (without interpreter start-up)
    ratio: float
    correct: bool
    rc: int = 0
    bundle_mb: float = 0.0  # everything written, flight-recorder pickles included


def _wait(cmd: list[str], stdout: Any = subprocess.DEVNULL, limit_s: float = 0.0) -> tuple[float, float, int]:
    """Run ``cmd``; (wall s, peak memory MB, exit code). Killed (rc -9) after ``limit_s`` when set.

    Peak memory is the sampled sum of PSS over the whole process tree (forked parse workers and
    the FR process run at once; PSS counts a page they share once, not once per process). The
    kernel's ``ru_maxrss`` is no measure here: a child forked from this (big) benchmark process
    counts the parent's image until it execs. Without psutil it is all there is, and is used."""
    import threading

    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL)
    timer = threading.Timer(limit_s, p.kill) if limit_s > 0 else None
    if timer:
        timer.start()
    tree_peak = [0.0]
    done = threading.Event()
    sampler = threading.Thread(target=_sample_tree_rss, args=(p.pid, done, tree_peak), daemon=True)
    sampler.start()
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        done.set()
        if timer:
            timer.cancel()
    sampler.join(timeout=1.0)
    peak = tree_peak[0] if _HAVE_PSUTIL else usage.ru_maxrss / 1024
    return time.perf_counter() - t0, peak, os.waitstatus_to_exitcode(status)


try:
    import psutil as _psutil  # noqa: F401  (the dev extra)

    _HAVE_PSUTIL = True
except ImportError:  # pragma: no cover
    _HAVE_PSUTIL = False


def _sample_tree_rss(pid: int, done: Any, peak: list[float], every_s: float = 0.1) -> None:
    """Sum of PSS over ``pid`` and its descendants, sampled until ``done``; max kept in ``peak``.
    (RSS where PSS cannot be read.)"""
    try:
        import psutil
    except ImportError:  # the dev extra brings it; without it only the kernel's figure is reported
        return
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    while not done.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
            total = 0
            for q in procs:
                try:
                    total += getattr(q.memory_full_info(), "pss", 0) or q.memory_info().rss
                except psutil.Error:
                    continue
            peak[0] = max(peak[0], total / 2**20)
        except psutil.Error:
            return
        done.wait(every_s)


def grep_bundle(files: list[str], pattern: str) -> tuple[float, float]:
    """``grep -E -c PATTERN`` over ``files`` in chunks (argv limits); total wall s, max RSS MB."""
    total, rss = 0.0, 0.0
    for i in range(0, len(files), 4000):
        dt, r, _ = _wait(["grep", "-E", "-c", pattern, *files[i : i + 4000]])
        total += dt
        rss = max(rss, r)
    return total, rss


def measure(bundle: Path, truth: dict[str, Any], limit_s: float = 0.0) -> dict[str, Any]:
    from firstfault.discover import discover
    from firstfault.vocab import TEXT_KINDS
    from firstfault_bench.speed import _grep_pattern

    b = discover(bundle)
    try:
        text = [f for f in b.files if f.kind in TEXT_KINDS]
        files, mb = [str(f.path) for f in text], sum(f.size for f in text) / 1e6
    finally:
        b.close()
    grep_s, grep_rss = grep_bundle(files, _grep_pattern())
    with tempfile.TemporaryFile() as fh:
        ff_s, ff_rss, rc = _wait(
            [sys.executable, "-m", "firstfault.cli", "analyze", str(bundle), "--json"], fh, limit_s
        )
        fh.seek(0)
        try:
            verdict = json.loads(fh.read().decode("utf-8", "replace") or "{}")
        except ValueError:
            verdict = {}
    ok = bool(verdict) and score(truth, verdict)["culprit_ok"]
    return {
        "files": len(files),
        "mb": mb,
        "grep_s": grep_s,
        "grep_rss_mb": grep_rss,
        "ff_s": ff_s,
        "ff_rss_mb": ff_rss,
        "ff_total_s": float(verdict.get("stats", {}).get("total_s", 0.0) or 0.0),
        "ratio": grep_s / ff_s if ff_s else 0.0,
        "correct": ok,
        "rc": rc,
    }


def run_speed(
    out: Path,
    sizes: Sequence[int] = (1024, 4096, 16384),
    long_steps: Sequence[int] = (300, 1000),
    steps: int = 60,
    kind: str = "dataloader_hang",
    seed: int = 0,
    workdir: Path | None = None,
    keep: bool = False,
    limit_s: float = 0.0,
) -> list[SpeedRow]:
    """One bundle per size (``steps`` steps), then the largest size with ``long_steps``."""
    from firstfault_sim.cluster import Layout, SimConfig, simulate_cluster

    out.mkdir(parents=True, exist_ok=True)
    work = workdir or Path(tempfile.mkdtemp(prefix="ff-speed-", dir=os.environ.get("TMPDIR", "/tmp")))
    rows: list[SpeedRow] = []
    runs = [(n, steps) for n in sizes] + [(max(sizes), s) for s in long_steps]
    for n, st in runs:
        bundle = work / f"{kind}_{n}_{st}"
        cfg = SimConfig(
            hosts=n // 8,
            gpus_per_host=8,
            layout=Layout(tp=8, pp=4 if n >= 64 else 1),
            faults=(FaultSpec(kind, at_s=st * 2.0 * 0.5),),
            steps=st,
            seed=seed,
            kill_on_bad_exit=False,
            remote_errors=False,
            tee=2,
        )
        t0 = time.perf_counter()
        truth = simulate_cluster(cfg, bundle)
        gen = time.perf_counter() - t0
        m = measure(bundle, truth, limit_s)
        rows.append(
            SpeedRow(
                n,
                st,
                kind,
                m["files"],
                m["mb"],
                gen,
                m["grep_s"],
                m["grep_rss_mb"],
                m["ff_s"],
                m["ff_rss_mb"],
                m["ff_total_s"],
                m["ratio"],
                m["correct"],
                m["rc"],
                int(truth["bundle_bytes"]) / 1e6,
            )
        )
        sys.stderr.write(
            f"{n} ranks x {st} steps: {m['mb']:.0f} MB text, gen {gen:.0f}s, grep {m['grep_s']:.1f}s, "
            f"firstfault {m['ff_s']:.1f}s ({m['ff_rss_mb']:.0f} MB), ratio {m['ratio']:.2f}\n"
        )
        (out / "scale_speed.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
        if not keep:
            shutil.rmtree(bundle, ignore_errors=True)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    (out / "scale_speed.md").write_text(render_speed(rows))
    _speed_png(rows, out / "scale_speed.png")
    return rows


def render_speed(rows: list[SpeedRow]) -> str:
    md = [
        "# Cluster-scale speed: firstfault against grep -E over the same files",
        "",
        "| ranks | steps | bundle MB | text MB | files | generate s | grep -E s | grep MB/s | firstfault s | "
        "firstfault MB/s | ratio to grep | peak memory MB (PSS, process tree) | "
        "time to verdict s (pipeline) | verdict right |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ff = f"{r.ff_s:.1f}" if r.rc == 0 else f">{r.ff_s:.0f} (killed)" if r.rc < 0 else f"{r.ff_s:.1f} (rc {r.rc})"
        md.append(
            f"| {r.ranks} | {r.steps} | {r.bundle_mb:.0f} | {r.mb:.0f} | {r.files} | {r.gen_s:.0f} | "
            f"{r.grep_s:.1f} | {r.mb / r.grep_s if r.grep_s else 0:.0f} | {ff} | "
            f"{r.mb / r.ff_s if r.ff_s else 0:.0f} | "
            f"{r.ratio:.3f} | {r.ff_rss_mb:.0f} | {r.ff_total_s:.1f} | {'yes' if r.correct else 'no'} |"
        )
    md.append("")
    md.append(
        "ratio = grep's wall time / firstfault's (1.0: as fast as grep -E); both read the same text files "
        "(flight-recorder pickles are read by firstfault only). grep runs in chunks of 4,000 files (argv limit)."
    )
    return "\n".join(md) + "\n"


def _speed_png(rows: list[SpeedRow], path: Path) -> None:
    if not rows:
        return
    cv = Canvas(1280, 800)
    gb = [(r.mb / 1000, r) for r in rows]
    png_chart(
        path,
        "THROUGHPUT MB/S",
        {
            "FIRSTFAULT": [(g, r.mb / r.ff_s) for g, r in gb if r.ff_s],
            "GREP -E": [(g, r.mb / r.grep_s) for g, r in gb if r.grep_s],
        },
        "BUNDLE GB",
        "MB/S (LOG)",
        640,
        400,
        cv,
        0,
        0,
        logy=True,
    )
    png_chart(
        path,
        "RATIO TO GREP -E",
        {"GREP S / FIRSTFAULT S": [(g, r.ratio) for g, r in gb]},
        "BUNDLE GB",
        "RATIO",
        640,
        400,
        cv,
        640,
        0,
    )
    png_chart(
        path,
        "TIME TO VERDICT S",
        {"FIRSTFAULT": [(g, r.ff_s) for g, r in gb], "GREP -E": [(g, r.grep_s) for g, r in gb]},
        "BUNDLE GB",
        "S (LOG)",
        640,
        400,
        cv,
        0,
        400,
        logy=True,
    )
    png_chart(
        path,
        "PEAK MEMORY MB (PSS)",
        {"FIRSTFAULT": [(g, r.ff_rss_mb) for g, r in gb], "GREP -E": [(g, r.grep_rss_mb) for g, r in gb]},
        "BUNDLE GB",
        "MB",
        640,
        400,
        cv,
        640,
        400,
    )
    path.write_bytes(cv.png())
