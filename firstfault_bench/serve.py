"""``bench serve``: the service under load, on loopback, with and without a ``kill -9`` mid-run.

A real ``firstfault serve`` is started as a subprocess; ``clients`` asyncio tasks (httpx) make
``count`` upload submissions between them. Each submission is a real log (the Xid 79 dmesg of the
scenario fixtures) under its own node name with ``i`` trailing newlines, so every content hash
differs without inventing a line; every 20th submission re-sends one sent ten before it, to check
that the same content gets the same job. With ``kill_at``, the server is killed with SIGKILL once
that many submissions are acknowledged and a job is running, then restarted on the same data
folder and port; clients retry on connection errors, as a real client would.

At the end the server is stopped and its SQLite file read directly: **lost** = acknowledged jobs
without a final verdict, or distinct contents with no job; **duplicated** = contents that got
more than one job id, plus jobs beyond one per distinct content. Figures: submissions/s over the
submit phase, p50/p99 submit latency (first attempt to acknowledgement, retries included), p50/p99
time to verdict (the server's submitted_at to finished_at), jobs analysed twice (those running
at the kill: re-queued, which is the point), and submissions re-sent after a lost answer that the
server already had (committed before the kill, answered never: the content hash makes the retry
the same job).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

LOG = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "scenarios" / "xid79_akash209.dmesg"
DUP_EVERY = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """``firstfault serve`` as a child process on a loopback port."""

    data: Path
    port: int
    workers: int
    store: str | None = None  # postgresql://...; None: SQLite in ``data``
    lease_s: float = 60.0
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.log = open(self.data.parent / f"server-{self.restarts}.log", "wb")  # noqa: SIM115  # closed in stop
        cmd = [sys.executable, "-m", "firstfault.cli", "serve", "--data", str(self.data), "--port", str(self.port)]
        cmd += ["--workers", str(self.workers), "--rate", "0", "--lease-s", str(self.lease_s)]
        if self.store:
            cmd += ["--store", self.store]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}); see {self.log.name}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the server did not answer /healthz within 120 s")

    def kill9(self) -> tuple[int, int]:
        """SIGKILL the server: the jobs it was analysing (as its database says once it is dead) and
        the number of its analysis processes still alive 10 s later (they should die with it)."""
        import psutil

        assert self.proc is not None
        children = psutil.Process(self.proc.pid).children(recursive=True)
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        _, alive = psutil.wait_procs(children, timeout=10)
        running = sum(1 for r in _rows(self.data, self.store) if r[1] == "running")
        self.restarts += 1
        return running, len(alive)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()


@dataclass
class Tally:
    acked: dict[int, set[str]] = field(default_factory=dict)  # content index -> job ids answered
    latencies: list[float] = field(default_factory=list)
    retries: int = 0
    done: int = 0
    resent_known: int = 0  # re-sent after a lost answer, and found already queued (the retry is idempotent)


@dataclass(frozen=True)
class ServeResult:
    submissions: int
    distinct: int
    clients: int
    killed: bool
    submit_s: float
    submit_rate: float
    submit_p50_ms: float
    submit_p99_ms: float
    verdict_p50_s: float
    verdict_p99_s: float
    drain_s: float
    lost: int
    duplicated: int
    backend: str
    running_at_kill: int
    analysed_twice: int
    retries: int
    resent_known: int
    orphans: int
    states: dict[str, int]


def _plan(count: int) -> list[int]:
    """The content index of each submission: mostly new, every DUP_EVERY-th one ten back."""
    plan: list[int] = []
    fresh = 0
    for i in range(count):
        if i % DUP_EVERY == DUP_EVERY - 1 and fresh > 10:
            plan.append(fresh - 10)
        else:
            plan.append(fresh)
            fresh += 1
    return plan


async def _submit(client: httpx.AsyncClient, idx: int, body: bytes, tally: Tally) -> None:
    t0 = time.perf_counter()
    failed = False
    while True:
        try:
            r = await client.post("/v1/jobs/upload", params={"name": f"node{idx:05d}.dmesg"}, content=body)
            if r.status_code in (200, 202):
                if failed and r.status_code == 200 and idx not in tally.acked:
                    tally.resent_known += 1
                tally.acked.setdefault(idx, set()).add(r.json()["id"])
                tally.latencies.append(time.perf_counter() - t0)
                tally.done += 1
                return
            if r.status_code < 500:
                raise RuntimeError(f"submission refused: {r.status_code} {r.text[:200]}")
        except httpx.TransportError:
            pass
        failed = True
        tally.retries += 1
        await asyncio.sleep(0.2)


async def _load(
    server: Server, token: str, count: int, clients: int, kill_at: int | None
) -> tuple[Tally, float, tuple[int, int]]:
    base = LOG.read_bytes()
    plan = _plan(count)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for idx in plan:
        queue.put_nowait(idx)
    tally = Tally()
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    at_kill = (0, 0)  # jobs running when killed, analysis processes left alive

    async def worker(client: httpx.AsyncClient) -> None:
        while True:
            try:
                idx = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await _submit(client, idx, base + b"\n" * idx, tally)

    async def killer() -> None:
        nonlocal at_kill
        assert kill_at is not None
        while tally.done < kill_at:
            await asyncio.sleep(0.05)
        for _ in range(100):  # kill while an analysis is running (the case that matters)
            health = (await asyncio.to_thread(httpx.get, server.url + "/healthz", timeout=5)).json()
            if health["queue"]["running"]:
                break
            await asyncio.sleep(0.05)
        at_kill = await asyncio.to_thread(server.kill9)
        await asyncio.to_thread(server.start)

    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=server.url, headers=headers, limits=limits, timeout=60) as client:
        tasks = [asyncio.create_task(worker(client)) for _ in range(clients)]
        if kill_at is not None:
            tasks.append(asyncio.create_task(killer()))
        await asyncio.gather(*tasks)
    return tally, time.perf_counter() - t0, at_kill


def _drain(server: Server, bound_s: float = 3600) -> float:
    t0 = time.perf_counter()
    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        q = httpx.get(server.url + "/healthz", timeout=10).json()["queue"]
        if q["queued"] == 0 and q["running"] == 0:
            return time.perf_counter() - t0
        time.sleep(0.5)
    raise RuntimeError("the queue did not drain")


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _rows(data: Path, store: str | None) -> list[tuple[Any, ...]]:
    """Every job's (id, state, attempts, submitted_at, finished_at), read from the database itself."""
    sql = "SELECT id, state, attempts, submitted_at, finished_at FROM jobs"
    if store:
        import psycopg

        with psycopg.connect(store) as pg:
            return list(pg.execute(sql).fetchall())
    con = sqlite3.connect(data / "jobs.sqlite3")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _score(
    data: Path, store: str | None, tally: Tally, count: int
) -> tuple[int, int, int, list[float], dict[str, int]]:
    rows: dict[str, tuple[str, int, float, float | None]] = {r[0]: (r[1], r[2], r[3], r[4]) for r in _rows(data, store)}
    distinct = len(set(_plan(count)))
    acked_ids = set().union(*tally.acked.values()) if tally.acked else set()
    lost = sum(1 for j in acked_ids if j not in rows or rows[j][0] not in ("done", "refused", "failed"))
    lost += distinct - len(tally.acked)
    duplicated = sum(len(ids) - 1 for ids in tally.acked.values()) + max(0, len(rows) - distinct)
    twice = sum(1 for r in rows.values() if r[1] > 1)
    to_verdict = [r[3] - r[2] for r in rows.values() if r[3] is not None]
    states: dict[str, int] = {}
    for r in rows.values():
        states[r[0]] = states.get(r[0], 0) + 1
    return lost, duplicated, twice, to_verdict, states


def run_serve(
    count: int = 1000,
    clients: int = 100,
    kill_at: int | None = None,
    workers: int = 2,
    store: str | None = None,
    lease_s: float = 60.0,
) -> ServeResult:
    """One load run against a fresh server (``store``: an empty PostgreSQL database instead of
    SQLite); see the module's docstring for what is measured."""
    from firstfault.service.app import open_store
    from firstfault.service.auth import new_token

    with tempfile.TemporaryDirectory(prefix="ff-bench-serve-") as tmp:
        data = Path(tmp) / "data"
        jobs = open_store(data, store)
        token = new_token(jobs, "bench")
        jobs.close()
        server = Server(data, _free_port(), workers, store, lease_s)
        server.start()
        try:
            tally, submit_s, (running_at_kill, orphans) = asyncio.run(_load(server, token, count, clients, kill_at))
            drain_s = _drain(server)
        finally:
            server.stop()
        lost, duplicated, twice, to_verdict, states = _score(data, store, tally, count)
    return ServeResult(
        submissions=count,
        distinct=len(set(_plan(count))),
        clients=clients,
        killed=kill_at is not None,
        submit_s=submit_s,
        submit_rate=count / submit_s,
        submit_p50_ms=_pct(tally.latencies, 0.5) * 1000,
        submit_p99_ms=_pct(tally.latencies, 0.99) * 1000,
        verdict_p50_s=_pct(to_verdict, 0.5),
        verdict_p99_s=_pct(to_verdict, 0.99),
        drain_s=drain_s,
        lost=lost,
        duplicated=duplicated,
        backend="postgresql" if store else "sqlite",
        running_at_kill=running_at_kill,
        analysed_twice=twice,
        retries=tally.retries,
        resent_known=tally.resent_known,
        orphans=orphans,
        states=states,
    )


def table(results: list[ServeResult]) -> str:
    """The Markdown table of one or more runs."""
    head = (
        "| run | submissions (distinct) | clients | submit s | submissions/s | submit p50 / p99 ms "
        "| verdict p50 / p99 s | drained after s | lost | duplicated | running at kill | analysed twice | retries "
        "| re-sent, already queued | orphans |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = [
        f"| {r.backend}, {'kill -9 + restart' if r.killed else 'no kill'} "
        f"| {r.submissions} ({r.distinct}) | {r.clients} "
        f"| {r.submit_s:.1f} | {r.submit_rate:.1f} | {r.submit_p50_ms:.0f} / {r.submit_p99_ms:.0f} "
        f"| {r.verdict_p50_s:.1f} / {r.verdict_p99_s:.1f} | {r.drain_s:.1f} | {r.lost} | {r.duplicated} "
        f"| {r.running_at_kill} | {r.analysed_twice} | {r.retries} | {r.resent_known} | {r.orphans} |"
        for r in results
    ]
    return head + "\n".join(rows) + "\n"


def summary(r: ServeResult) -> dict[str, Any]:
    return {k: getattr(r, k) for k in r.__dataclass_fields__}
