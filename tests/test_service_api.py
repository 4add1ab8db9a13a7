"""The service's API end to end, in process: submit, poll, stream, list, search, probes, idempotency."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from firstfault.service.paths import allowed_roots
from tests.service_helpers import FIXTURES, XID79, service, wait_final

pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    tmp = tmp_path_factory.mktemp("svc")
    root = tmp / "bundles"
    shutil.copytree(FIXTURES / "realjobs" / "import_error", root / "import_error")
    with service(tmp / "data", roots=allowed_roots([root])) as (client, headers):
        yield client, headers, root


def test_upload_then_poll_gives_the_verdict(api: tuple[TestClient, dict[str, str], Path]) -> None:
    client, headers, _ = api
    r = client.post("/v1/jobs/upload", params={"name": "host1.dmesg"}, content=XID79.read_bytes(), headers=headers)
    assert r.status_code == 202, r.text
    job = wait_final(client, headers, r.json()["id"])
    assert job["state"] == "done" and job["category"] == "gpu_hardware"
    assert job["verdict"]["verdict"]["category"] == "gpu_hardware"
    stored = client.get(f"/v1/jobs/{job['id']}/verdict", headers=headers).json()
    assert stored == job["verdict"] and stored["schema_version"]


def test_path_under_a_root_is_analysed(api: tuple[TestClient, dict[str, str], Path]) -> None:
    client, headers, root = api
    r = client.post("/v1/jobs", json={"path": str(root / "import_error")}, headers=headers)
    assert r.status_code == 202, r.text
    job = wait_final(client, headers, r.json()["id"])
    assert job["state"] == "done" and job["category"] == "configuration"


def test_same_content_same_job(api: tuple[TestClient, dict[str, str], Path]) -> None:
    client, headers, root = api
    body = XID79.read_bytes() + b"\n"
    first = client.post("/v1/jobs/upload", params={"name": "dup.dmesg"}, content=body, headers=headers)
    again = client.post("/v1/jobs/upload", params={"name": "dup.dmesg"}, content=body, headers=headers)
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json()["id"] == again.json()["id"]
    p1 = client.post("/v1/jobs", json={"path": str(root / "import_error")}, headers=headers)
    p2 = client.post("/v1/jobs", json={"path": str(root / "import_error")}, headers=headers)
    assert p1.json()["id"] == p2.json()["id"]
    other = client.post("/v1/jobs/upload", params={"name": "dup.dmesg"}, content=body + b"\n", headers=headers)
    assert other.status_code == 202 and other.json()["id"] != first.json()["id"]


def test_events_stream_ends_with_the_verdict(api: tuple[TestClient, dict[str, str], Path]) -> None:
    client, headers, _ = api
    r = client.post(
        "/v1/jobs/upload", params={"name": "sse.dmesg"}, content=XID79.read_bytes() + b"\n\n", headers=headers
    )
    events: list[tuple[str, str]] = []
    with client.stream("GET", f"/v1/jobs/{r.json()['id']}/events", headers=headers) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in s.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                events.append((kind, line[6:]))
    assert events[0][0] == "state" and events[-1][0] == "verdict"
    assert json.loads(events[-1][1])["verdict"]["category"] == "gpu_hardware"


def test_list_and_search(api: tuple[TestClient, dict[str, str], Path]) -> None:
    client, headers, _ = api
    r = client.post(
        "/v1/jobs/upload", params={"name": "search.dmesg"}, content=XID79.read_bytes() + b" ", headers=headers
    )
    wait_final(client, headers, r.json()["id"])
    done = client.get("/v1/jobs", params={"state": "done"}, headers=headers).json()["jobs"]
    assert r.json()["id"] in {j["id"] for j in done}
    found = client.get("/v1/jobs", params={"q": "fallen off the bus"}, headers=headers).json()["jobs"]
    assert found and all("fallen off the bus" in j["summary"] for j in found)
    by_cat = client.get("/v1/jobs", params={"category": "configuration"}, headers=headers).json()["jobs"]
    assert all(j["category"] == "configuration" for j in by_cat)
    assert client.get("/v1/jobs", params={"state": "nonsense"}, headers=headers).status_code == 422


def test_probes(api: tuple[TestClient, dict[str, str], Path]) -> None:
    client, _, _ = api
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["store"] == {"backend": "sqlite", "ok": True}
    assert set(health["queue"]) == {"queued", "running", "done", "refused", "failed"}
    text = client.get("/metrics").text
    assert "# TYPE firstfault_jobs_submitted_total counter" in text
    assert 'firstfault_queue_jobs{state="done"}' in text
    assert "firstfault_jobs_deduplicated_total" in text


def test_openapi_documents_the_routes(api: tuple[TestClient, dict[str, str], Path]) -> None:
    client, _, _ = api
    spec = client.get("/openapi.json").json()
    assert "/v1/jobs/upload" in spec["paths"] and "/v1/jobs/{job_id}/events" in spec["paths"]
    assert client.get("/docs").status_code == 200


def test_partial_uploads_of_a_killed_server_are_removed(tmp_path: Path) -> None:
    (tmp_path / "data" / "spool").mkdir(parents=True)
    part = tmp_path / "data" / "spool" / ".part-left-by-a-kill"
    part.write_bytes(b"half an upload")
    with service(tmp_path / "data") as (client, _):
        assert client.get("/healthz").status_code == 200
        assert not part.exists()


def test_a_second_server_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    with service(tmp_path / "data"), pytest.raises(RuntimeError, match="another firstfault server"):  # noqa: SIM117
        with service(tmp_path / "data"):
            pass


def test_cli_refusals_are_one_line(tmp_path: Path) -> None:
    """Bad options and a held folder: exit 2 with one line, never uvicorn's startup traceback."""
    import fcntl

    from typer.testing import CliRunner

    from firstfault.cli import app

    runner = CliRunner()
    data = str(tmp_path / "data")
    token = runner.invoke(app, ["serve", "token", "add", "alice", "--data", data])
    assert token.exit_code == 0 and token.output.startswith("ff_") and len(token.output.split()) == 1
    cases = [
        ["serve", "token", "add", "bad user!", "--data", data],
        ["serve", "--data", data, "--store", "mysql://x"],
        ["serve", "--data", data, "--allow-root", str(tmp_path / "missing")],
    ]
    with open(tmp_path / "data" / "server.lock", "wb") as held:  # a server already on the folder
        fcntl.flock(held, fcntl.LOCK_EX)
        cases.append(["serve", "--data", data, "--port", "1"])
        for args in cases:
            r = runner.invoke(app, args)
            assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)
        assert "another firstfault server" in r.output.replace("\n", " ")
