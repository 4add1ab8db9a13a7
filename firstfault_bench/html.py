"""Size and opening time of the HTML report at scale, in a real headless browser.

``firstfault bench html`` calls :func:`bench_html`. The verdict it renders comes from
:func:`synthetic_verdict`: a GPU falling off the bus on one host of a 2,048-host x 8-GPU job
(16,384 ranks), followed by what PyTorch and torchrun really print when that happens: every
other rank's NCCL watchdog times out and aborts, and each host's elastic agent tears its workers
down. ~49k chain events, built with the real ``records`` types so the report is exercised on the
same shape the attribution stage produces. The wording of every line is that of the real
software (sources in the comments); only the hosts, ranks, pids and times are made up.

Opening time is measured in Debian's chromium, driven by Playwright's Python package
(``pip install playwright``; the browser is the system one, never ``playwright install``).
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from firstfault.vocab import (
    Action,
    Category,
    ChainLink,
    Culprit,
    Event,
    Hypothesis,
    Layer,
    RankProgress,
    Role,
    Severity,
    TsQuality,
    Verdict,
)

CHROMIUM = "/usr/bin/chromium"
#: Flags for a sandbox-less container: no GPU, no network chatter, nothing phoning home.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# 2025-03-04 11:20:07.412 UTC: when the synthetic GPU falls off the bus.
T0 = 1741087207.412

# NVIDIA driver, Xid 79 (wording as in the kernel logs quoted in NVIDIA/NVSentinel#155 and
# leptonai/gpud's kernel-log fixtures: "NVRM: Xid (PCI:...): 79, pid=..., name=..., <text>").
XID79 = "NVRM: Xid (PCI:0000:{bus}:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, watchdog timeout (as printed by torch 2.4+,
# e.g. pytorch/pytorch#118369, hiyouga/LlamaFactory#7396).
WATCHDOG = (
    "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
    "NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for {ran} milliseconds before timing out."
)
WATCHDOG_EXC = (
    "[PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by "
    "watchdog at work: {seq}, last enqueued NCCL work: {enq}, last completed NCCL work: {done}."
)
# torch/distributed/elastic/multiprocessing/api.py (torchrun's agent).
AGENT_FAILED = "failed (exitcode: {code}) local_rank: {lr} (pid: {pid}) of binary: /usr/bin/python3"
AGENT_SIGTERM = "Sending process {pid} closing signal SIGTERM"


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n - 1


def _xid_root(chost: str, bus: str, nid: _Ids) -> Event:
    return Event(
        id=nid(),
        source=f"{chost}/kern.log",
        line=88412,
        text=XID79.format(bus=bus),
        signature="nvidia.xid.79",
        category=Category.GPU_HARDWARE,
        layer=Layer.DRIVER,
        role=Role.ROOT,
        severity=Severity.CRITICAL,
        ts=T0,
        ts_quality=TsQuality.EXACT,
        host=chost,
        gpu=f"0000:{bus}:00",
        fields={"xid": "79", "pci": f"0000:{bus}:00"},
    )


def _timeouts(r: int, lr: int, host: str, pid: int, t: float, seq: int, ran: int, nid: _Ids) -> tuple[Event, Event]:
    """One rank's watchdog timeout and the exception the watchdog raises right after it."""
    log = f"{host}/attempt_0/{lr}/stderr.log"
    place: dict[str, Any] = {"host": host, "rank": r, "local_rank": lr, "pid": pid, "attempt": 0}
    common: dict[str, Any] = {"category": Category.NETWORK, "layer": Layer.FRAMEWORK, "role": Role.CASCADE}
    ev = Event(
        id=nid(),
        source=log,
        line=41233,
        text=WATCHDOG.format(rank=r, seq=seq, ran=ran),
        signature="torch.nccl.watchdog_timeout",
        ts=t,
        ts_quality=TsQuality.EXACT,
        fields={"seq": str(seq), "op": "ALLREDUCE", "timeout_ms": "600000"},
        **common,
        **place,
    )
    ev2 = Event(
        id=nid(),
        source=log,
        line=41234,
        text=WATCHDOG_EXC.format(rank=r, seq=seq, enq=seq + 1, done=seq - 1),
        signature="torch.nccl.watchdog_exception",
        ts=t + 0.0004,
        ts_quality=TsQuality.EXACT,
        fields={"seq": str(seq)},
        **common,
        **place,
    )
    return ev, ev2


def _agent_event(r: int, lr: int, host: str, pid: int, t: float, line: int, nid: _Ids) -> Event:
    """The agent reports the first worker it sees die, then SIGTERMs the others."""
    text = AGENT_FAILED.format(code=-6, lr=lr, pid=pid) if lr == 0 else AGENT_SIGTERM.format(pid=pid)
    return Event(
        id=nid(),
        source=f"{host}/torchrun.log",
        line=line,
        text=text,
        signature="torchelastic.worker_failed" if lr == 0 else "torchelastic.sigterm",
        category=Category.PROCESS_CRASH,
        layer=Layer.LAUNCHER,
        role=Role.TEARDOWN,
        ts=t,
        ts_quality=TsQuality.EXACT,
        host=host,
        rank=r,
        local_rank=lr,
        pid=pid,
        fields={"exitcode": "-6"} if lr == 0 else {"signal": "SIGTERM"},
    )


def _chain(
    root: Event, ranks: int, gpus_per_host: int, culprit_rank: int, seq: int, rnd: random.Random, nid: _Ids
) -> list[ChainLink]:
    """Every host's timeouts and tear-down, explained by the Xid (or by the host's first timeout)."""
    chain = [ChainLink(root, Role.ROOT, None, "hardware-fault-precedes-timeouts")]
    first_exc: dict[str, int] = {}
    for h in range(max(1, ranks // gpus_per_host)):
        host = f"node{h:04d}"
        base = T0 + 600.0 + rnd.uniform(0.0, 1.2)
        agent_line = 900 + rnd.randint(0, 40)
        stop_at = base + 1.0 + rnd.uniform(0.0, 0.4)
        for lr in range(gpus_per_host):
            r = h * gpus_per_host + lr
            if r >= ranks:
                break
            pid = 20000 + lr * 7 + h % 97
            if r != culprit_rank:
                t = base + rnd.uniform(0.0, 0.25)
                ran = 600000 + int((t - T0 - 600.0) * 1000) + rnd.randint(10, 90)
                ev, ev2 = _timeouts(r, lr, host, pid, t, seq, ran, nid)
                chain.append(ChainLink(ev, Role.CASCADE, root.id, "collective-timeout-after-root"))
                chain.append(ChainLink(ev2, Role.CASCADE, ev.id, "watchdog-exception-follows-timeout"))
                first_exc.setdefault(host, ev.id)
            ev3 = _agent_event(r, lr, host, pid, stop_at + lr * 0.002, agent_line + lr, nid)
            chain.append(ChainLink(ev3, Role.TEARDOWN, first_exc.get(host, root.id), "launcher-teardown"))
    return chain


def _progress(ranks: int, gpus_per_host: int, culprit_rank: int, rnd: random.Random) -> list[RankProgress]:
    progress = []
    for r in range(ranks):
        late = 0.0 if r != culprit_rank else -0.35
        progress.append(
            RankProgress(
                rank=r,
                last_step=1204,
                last_step_ts=T0 - 0.9 + late + rnd.uniform(0.0, 0.3),
                steps_seen=1205,
                median_step_ms=round(1480 + rnd.gauss(0, 6), 2),
                host=f"node{r // gpus_per_host:04d}",
            )
        )
    return progress


def _alternatives(culprit_rank: int) -> list[Hypothesis]:
    alt_net = Hypothesis(
        Category.NETWORK,
        Culprit(),
        Action.RESTART,
        0.18,
        "every rank timed out in the same ALLREDUCE: could be a fabric fault",
        reasons=["no NIC or link error was logged", "timeouts start 600 s after the Xid, the PG timeout"],
    )
    alt_hang = Hypothesis(
        Category.HANG,
        Culprit(ranks=[culprit_rank]),
        Action.RESTART,
        0.07,
        f"rank {culprit_rank} stopped reporting progress first",
        reasons=["its last step line is 0.35 s older than the others"],
    )
    return [alt_net, alt_hang]


def synthetic_verdict(ranks: int = 16384, gpus_per_host: int = 8, *, seed: int = 7) -> Verdict:
    """A large GPU-hardware verdict: Xid 79 on one GPU, timeouts everywhere, torchrun tear-down."""
    rnd = random.Random(seed)
    hosts = max(1, ranks // gpus_per_host)
    culprit_rank = min(ranks - 1, 153 * gpus_per_host + 3) if ranks > 8 else ranks - 1
    chost = f"node{culprit_rank // gpus_per_host:04d}"
    cgpu = culprit_rank % gpus_per_host
    bus = f"{0x18 + 0x11 * cgpu:02x}"
    seq = 48213
    nid = _Ids()
    root = _xid_root(chost, bus, nid)
    chain = _chain(root, ranks, gpus_per_host, culprit_rank, seq, rnd, nid)
    progress = _progress(ranks, gpus_per_host, culprit_rank, rnd)
    n_cascade = sum(1 for c in chain if c.role is Role.CASCADE)
    return Verdict(
        category=Category.GPU_HARDWARE,
        culprit=Culprit(ranks=[culprit_rank], hosts=[chost], gpus=[f"0000:{bus}:00"], links=[]),
        action=Action.EXCLUDE_AND_RESTART,
        confidence=0.94,
        summary=(
            f"GPU {cgpu} on {chost} (rank {culprit_rank}) fell off the bus (Xid 79); the other "
            f"{ranks - 1:,} ranks then timed out in ALLREDUCE #{seq} and torchrun tore the job down."
        ),
        root_event=root,
        causal_chain=chain,
        explained_fraction=0.997,
        alternatives=_alternatives(culprit_rank),
        warnings=[
            f"node{(hosts * 3) // 7:04d}/attempt_0/5/stderr.log: last line truncated (no newline)",
            "clock of 3 hosts corrected by more than 2 s against the rendezvous store",
        ],
        reasons=[
            "Xid 79 is fatal and the GPU is gone: the kernel says so before any collective fails",
            f"{n_cascade:,} watchdog lines start exactly one PG timeout (600 s) after it",
            f"rank {culprit_rank} on that GPU is the only rank with no watchdog timeout",
        ],
        progress=progress,
        inputs={"path": "/scratch/jobs/8812731", "files": hosts * (gpus_per_host + 2), "world_size": ranks},
        stats={"events": len(chain), "ranks": ranks, "hosts": hosts},
    )


def measure_open(path: Path, *, runs: int = 1) -> dict[str, Any]:
    """Open ``path`` in headless chromium; time until every view has rendered.

    ``ready_ms`` is the page's own ``performance.now()`` when the last chart reports
    'finished' (navigation start is 0), so it includes reading and parsing the file, compiling
    the chart library, building the page model and drawing every view. ``wall_ms`` is the
    same seen from outside (goto + wait), a slight overestimate.
    """
    from playwright.sync_api import sync_playwright

    out: dict[str, Any] = {"runs": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(runs):
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                errors: list[str] = []

                def on_console(m: Any, errors: list[str] = errors) -> None:
                    if m.type == "error":
                        errors.append(m.text)

                def on_error(e: Any, errors: list[str] = errors) -> None:
                    errors.append(str(e))

                page.on("console", on_console)
                page.on("pageerror", on_error)
                t = time.perf_counter()
                page.goto(path.resolve().as_uri())
                # Polled from outside: the report's CSP forbids the eval wait_for_function uses.
                end = time.monotonic() + 30
                while not page.evaluate("() => !!(window.__ff && window.__ff.ready)"):
                    if time.monotonic() > end:
                        raise TimeoutError(f"{path}: report never became ready")
                    page.wait_for_timeout(20)
                wall = (time.perf_counter() - t) * 1000
                timings = page.evaluate("window.__ff.timings")
                out["runs"].append({"wall_ms": round(wall), **timings, "console_errors": errors})
                page.close()
        finally:
            browser.close()
    out["ready_ms"] = min(r["ready_ms"] for r in out["runs"])
    out["wall_ms"] = min(r["wall_ms"] for r in out["runs"])
    return out


def browser_available() -> bool:
    """True when the system chromium and Playwright's Python package are both installed."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return shutil.which(CHROMIUM) is not None or Path(CHROMIUM).exists()


def bench_html(
    ranks: int = 16384,
    gpus_per_host: int = 8,
    *,
    out: Path | None = None,
    browser: bool = True,
    runs: int = 3,
) -> dict[str, Any]:
    """Build, render and (when a browser is there) open a report of ``ranks`` ranks.

    Returns the numbers ``firstfault bench html`` prints: chain size, build/render seconds,
    file size in bytes, and the browser's opening time (best of ``runs``).
    """
    from firstfault.report.html import render_html

    t = time.perf_counter()
    verdict = synthetic_verdict(ranks, gpus_per_host)
    vd = verdict.to_dict()
    built = time.perf_counter() - t
    t = time.perf_counter()
    html = render_html(vd)
    rendered = time.perf_counter() - t
    tmpdir = None
    if out is None:
        tmpdir = Path(tempfile.mkdtemp(prefix="firstfault-bench-html-"))
        out = tmpdir / f"report-{ranks}.html"
    out.write_text(html, encoding="utf-8")
    res: dict[str, Any] = {
        "ranks": ranks,
        "hosts": max(1, ranks // gpus_per_host),
        "chain_events": len(vd["causal_chain"]),
        "verdict_build_s": round(built, 3),
        "render_s": round(rendered, 3),
        "bytes": out.stat().st_size,
        "path": str(out),
    }
    if browser and browser_available():
        m = measure_open(out, runs=runs)
        res.update({"open_ready_ms": m["ready_ms"], "open_wall_ms": m["wall_ms"], "open_runs": m["runs"]})
    else:
        res["open_ready_ms"] = None
    return res


#: The issue's budget for a 16,384-rank report.
BUDGET_BYTES = 10 * 1024 * 1024
BUDGET_OPEN_MS = 3000


if __name__ == "__main__":  # python -m firstfault_bench.html [RANKS]
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
    print(json.dumps(bench_html(n), indent=2, default=str))
