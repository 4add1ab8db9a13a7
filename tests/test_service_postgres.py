"""The service's queue on a real PostgreSQL (started by ``test_fleet_postgres``'s fixture): the same
contract as SQLite, plus what sharing adds (two servers claim different jobs; a dead server's job
returns when its lease runs out), and the API end to end over it."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from firstfault.service.queue import JobState, SourceKind
from tests.service_helpers import XID79, service, wait_final
from tests.test_fleet_postgres import pg_url  # noqa: F401  # the fixture: a real PostgreSQL, stopped after

pytest.importorskip("psycopg")
pytest.importorskip("fastapi")


@pytest.fixture
def fresh(pg_url: str) -> str:  # noqa: F811
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS jobs, tokens")
    return pg_url


def test_same_content_one_job_under_concurrency(fresh: str) -> None:
    from firstfault.service.postgres import PostgresJobStore

    stores = [PostgresJobStore(fresh) for _ in range(4)]  # four servers' connections
    try:
        with ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda i: stores[i % 4].submit("k1", "alice", SourceKind.PATH, "/x"), range(32)))
        assert len({job.id for job, _ in got}) == 1
        assert sum(created for _, created in got) == 1
        assert stores[0].counts()["queued"] == 1
    finally:
        for s in stores:
            s.close()


def test_two_servers_claim_different_jobs_and_a_lease_returns(fresh: str) -> None:
    from firstfault.service.postgres import PostgresJobStore

    a, b = PostgresJobStore(fresh), PostgresJobStore(fresh)
    try:
        for k in ("k1", "k2"):
            a.submit(k, "alice", SourceKind.PATH, f"/{k}")
        ja, jb = a.claim("server-a", lease_s=0.05), b.claim("server-b", lease_s=600)
        assert ja is not None and jb is not None and ja.id != jb.id
        assert b.claim("server-b", 600) is None
        time.sleep(0.1)  # server-a "dies": its lease runs out, and only then is its job taken
        again = b.claim("server-b", 600)
        assert again is not None and again.id == ja.id and again.attempts == 2
        assert not a.finish(ja.id, "server-a", JobState.DONE, None, None)  # the dead claim cannot finish
        assert b.finish(ja.id, "server-b", JobState.DONE, {"verdict": {"category": "x"}}, None)
        assert b.get(ja.id) is not None and b.verdict(ja.id) == {"verdict": {"category": "x"}}
    finally:
        a.close()
        b.close()


def test_api_over_postgresql(fresh: str, tmp_path: Path) -> None:
    with service(tmp_path / "data", store_url=fresh) as (client, headers):
        assert client.get("/healthz").json()["store"] == {"backend": "postgresql", "ok": True}
        r = client.post("/v1/jobs/upload", params={"name": "n1.dmesg"}, content=XID79.read_bytes(), headers=headers)
        job = wait_final(client, headers, r.json()["id"])
        assert job["state"] == "done" and job["category"] == "gpu_hardware"
        again = client.post("/v1/jobs/upload", params={"name": "n1.dmesg"}, content=XID79.read_bytes(), headers=headers)
        assert again.status_code == 200 and again.json()["id"] == job["id"]
        found = client.get("/v1/jobs", params={"q": "FALLEN OFF"}, headers=headers).json()["jobs"]
        assert [j["id"] for j in found] == [job["id"]]


@pytest.mark.slow
def test_kill9_with_a_postgresql_queue(fresh: str) -> None:
    """The same kill -9 as ``test_service_restart`` over PostgreSQL: the dead server's jobs come back
    when their lease (here 5 s) runs out, since a shared queue cannot tell a dead server from a live one."""
    pytest.importorskip("psutil")
    from firstfault_bench.serve import run_serve

    r = run_serve(count=30, clients=10, kill_at=8, workers=2, store=fresh, lease_s=5)
    assert r.lost == 0 and r.duplicated == 0 and r.orphans == 0
    assert r.states == {"done": r.distinct}
    assert r.running_at_kill >= 1 and r.analysed_twice == r.running_at_kill
