"""The incident store on a real PostgreSQL, started here with initdb/pg_ctl and stopped after."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstfault.fleet.backends import PostgresStore, open_store, safe_url
from firstfault.fleet.incident import incident_from_verdict
from firstfault.fleet.reputation import Policy, fleet, seen_before
from firstfault.fleet.store import Filter

pytest.importorskip("psycopg")
BINS = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    if not BINS:
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    bindir = Path(BINS[-1]).parent
    # a folder of its own under /tmp: the server's user must reach its socket there
    root = Path(tempfile.mkdtemp(prefix="firstfault-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as the postgres user
        if shutil.which("runuser") is None:
            shutil.rmtree(root)
            pytest.skip("running as root without runuser")
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    data, port = root / "data", _free_port()
    try:
        subprocess.run(
            [*as_user, bindir / "initdb", "-D", data, "-A", "trust", "-U", "ff", "--no-sync"],
            check=True,
            capture_output=True,
        )
        opts = f"-k {root} -p {port} -c listen_addresses='' -c fsync=off"
        subprocess.run(
            [*as_user, bindir / "pg_ctl", "-D", data, "-o", opts, "-l", root / "log", "-w", "start"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql://ff@/postgres?host={root}&port={port}"
    finally:
        subprocess.run(
            [*as_user, bindir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop"], check=False, capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)


def _v(job: str, host: str, ts: float) -> dict[str, object]:
    return {
        "tool": "firstfault",
        "verdict": {
            "category": "gpu_hardware",
            "culprit": {"ranks": [1], "hosts": [host, "gpu0099"], "gpus": [], "links": []},
            "action": "exclude_and_restart",
            "confidence": 0.9,
            "summary": "",
        },
        "root_event": {"signature": "kernel.xid.exclude", "timestamp": ts, "host": host},
        "inputs": {"job": job},
    }


def test_postgres_store_behaves_as_the_duckdb_one(pg_url: str, tmp_path: Path) -> None:
    rows = [_v(f"j{i}", "gpu0007" if i < 5 else f"gpu1{i:03d}", 1000.0 + i * 86400) for i in range(9)]
    results = {}
    for name, target in (("pg", pg_url), ("duck", str(tmp_path / "s.duckdb"))):
        with open_store(target) as store:
            incs = [incident_from_verdict(v, job="?", source="t", added_at=0.0) for v in rows]
            assert store.add(incs) == [True] * 9
            assert store.add(incs[:2]) == [False, False]
            rep = fleet(store, Policy(hosts=50))
            results[name] = (
                store.count(),
                [(i.job, i.hosts) for i in store.recent(Filter(host="gpu0007", limit=3))],
                seen_before(store, incs[4]),
                rep.lemon_hosts(),
                [(p.place, p.jobs) for p in rep.places],
            )
        if name == "pg":
            assert isinstance(store, PostgresStore)
    assert results["pg"] == results["duck"]
    assert results["pg"][3] == ["gpu0007", "gpu0099"]  # gpu0099 is named by all nine
    assert results["pg"][1][0] == ("j4", ("gpu0007", "gpu0099"))  # culprit hosts in the verdict's order


def test_url_password_is_not_shown() -> None:
    assert safe_url("postgresql://me:secret@db:5432/x") == "postgresql://me@db:5432/x"
