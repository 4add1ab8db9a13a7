"""Shared by the service's tests: an in-process app with a token, and waiting for a job's end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from firstfault.service.app import ServiceConfig, create_app, open_store
from firstfault.service.auth import new_token
from firstfault.service.worker import WorkerConfig

FIXTURES = Path(__file__).parent / "fixtures"
XID79 = FIXTURES / "scenarios" / "xid79_akash209.dmesg"  # 549 bytes, a real Xid 79 line


@contextmanager
def service(data: Path, **kw: Any) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A running app (lifespan, workers and all) over ``data``, and the headers of a fresh token."""
    store = open_store(data, kw.get("store_url"))
    token = new_token(store, "alice")
    store.close()
    worker = WorkerConfig(workers=1, max_unpacked=kw.pop("max_unpacked", 2 * 1024**3))
    with TestClient(create_app(ServiceConfig(data_dir=data, worker=worker, **kw))) as client:
        yield client, {"Authorization": f"Bearer {token}"}


def wait_final(client: TestClient, headers: dict[str, str], job_id: str, bound_s: float = 120) -> dict[str, Any]:
    """Poll until the job is done, refused or failed (the bound only stops a broken run hanging)."""
    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if job["state"] in ("done", "refused", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never finished")
