"""Speed against a baseline measured in the same run: ``grep -E`` over the same bytes.

The figure that matters is the ratio: firstfault's throughput over grep's, on the same files,
with grep given the same literal set the prefilter uses (so grep does the least work that
could find the same lines). Each tool runs in a subprocess so its wall time and peak RSS are
its own.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from firstfault.discover import discover
from firstfault.match.registry import load_registry
from firstfault.vocab import TEXT_KINDS


@dataclass
class Run:
    tool: str
    seconds: float
    peak_rss_mb: float
    rc: int


def _run(cmd: list[str]) -> Run:
    # Output goes to a real file: GNU grep stops at the first match when stdout is /dev/null.
    with tempfile.TemporaryFile() as sink:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
    return Run(cmd[0], dt, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status))


def _grep_pattern() -> str:
    reg = load_registry()
    lits = {lit for s in reg.signatures for lit in s.literals}
    return "|".join(re.escape(x).replace("\\ ", " ") for x in sorted(lits))


def run_speed(path: Path, repeat: int = 3) -> dict[str, float]:
    console = Console()
    bundle = discover(path)
    try:
        files = [str(f.path) for f in bundle.files if f.kind in TEXT_KINDS]
        total = sum(f.size for f in bundle.files if f.kind in TEXT_KINDS)
        grep = shutil.which("grep")
        if grep is None:
            raise SystemExit("grep not found")
        pat_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"ff_grep_{os.getpid()}.txt"
        pattern = _grep_pattern()
        pat_file.write_text(pattern.replace("|", "\n") + "\n")
        grep_cmd = [grep, "-F", "-c", "-f", str(pat_file), *files]
        grep_e_cmd = [grep, "-E", "-c", pattern, *files]
        ff_cmd = [sys.executable, "-m", "firstfault.cli", "analyze", str(path), "--json"]
        runs: dict[str, list[Run]] = {"grep -E": [], "grep -F": [], "firstfault analyze": []}
        for _ in range(repeat):
            runs["grep -E"].append(_run(grep_e_cmd))
            runs["grep -F"].append(_run(grep_cmd))
            runs["firstfault analyze"].append(_run(ff_cmd))
        pat_file.unlink(missing_ok=True)
    finally:
        bundle.close()
    mb = total / 1e6
    t = Table(title=f"speed over {len(files)} files, {mb:.1f} MB (best of {repeat})")
    for c in ("tool", "seconds", "MB/s", "peak RSS MB", "ratio to grep -E"):
        t.add_column(c)
    best = {k: min(v, key=lambda r: r.seconds) for k, v in runs.items()}
    ge = best["grep -E"].seconds
    out = {}
    for name, r in best.items():
        ratio = ge / r.seconds if r.seconds else 0.0
        t.add_row(name, f"{r.seconds:.3f}", f"{mb / r.seconds:.1f}", f"{r.peak_rss_mb:.0f}", f"{ratio:.2f}")
        out[name] = r.seconds
    console.print(t)
    console.print(
        "firstfault's time includes Python start-up and imports "
        f"(about {_startup():.2f} s here); the ratio is throughput against grep -E on the same bytes."
    )
    return out


def _startup() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import firstfault.pipeline"], check=False)
    return time.perf_counter() - t0


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def inflate(src: Path, dst: Path, copies: int) -> int:
    """A bigger bundle for timing: ``copies`` hosts (``node<k>/``) each holding ``src``'s logs."""
    total = 0
    for k in range(copies):
        for f in src.rglob("*"):
            if f.is_file() and f.name != "truth.json":
                out = dst / f"node{k:04d}" / f.relative_to(src)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, out)
                total += f.stat().st_size
    return total
