"""Each door the service must keep shut, tried: every test fails if what it tries gets through.

Tokens (401), paths outside the roots, ``..`` and symbolic links (403), uploads over the cap
(413, declared or streamed), an archive bomb (refused with discovery's one-line reason), the rate
limit (429), upload names that try to leave the spool, and the absence of any route that reads a
file the client names.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from firstfault.service.paths import allowed_roots
from tests.service_helpers import XID79, service, wait_final

pytest.importorskip("fastapi")
CAP = 64 * 1024


@pytest.fixture(scope="module")
def sec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], Path, Path]]:
    tmp = tmp_path_factory.mktemp("sec")
    root = tmp / "root"
    root.mkdir()
    (root / "ok.dmesg").write_bytes(XID79.read_bytes())
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text("not for clients\n")
    os.symlink(outside, root / "link_out")  # a link in the root, pointing out
    os.symlink(root / "ok.dmesg", root / "link_in")  # even pointing in: submitted paths follow no link
    os.mkfifo(root / "fifo")  # would block a worker for ever
    data = tmp / "data"
    with service(data, roots=allowed_roots([root]), max_upload=CAP, max_unpacked=8 * 1024**2) as (client, headers):
        yield client, headers, root, data


def test_no_token_and_bad_token_are_401(sec: tuple[TestClient, dict[str, str], Path, Path]) -> None:
    client, _, root, _ = sec
    for headers in ({}, {"Authorization": "Bearer ff_not-a-token"}, {"Authorization": "Basic YWxpY2U6eA=="}):
        assert client.get("/v1/jobs", headers=headers).status_code == 401
        assert client.post("/v1/jobs/upload", content=b"x", headers=headers).status_code == 401
        assert client.post("/v1/jobs", json={"path": str(root / "ok.dmesg")}, headers=headers).status_code == 401


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd", "not under an allowed root"),
        ("{root}/../outside/secret.log", "'..'"),
        ("{root}/link_out/secret.log", "symbolic link"),
        ("{root}/link_out", "symbolic link"),
        ("{root}/link_in", "symbolic link"),
        ("ok.dmesg", "absolute"),
        ("{root}/missing.log", "no such file"),
        ("{root}/ok.dmesg\u0000x", "not a usable path"),
        ("{root}/fifo", "not a regular file"),
        ("/dev/zero", "not under an allowed root"),
    ],
)
def test_paths_outside_the_policy_are_403(
    sec: tuple[TestClient, dict[str, str], Path, Path], path: str, why: str
) -> None:
    client, headers, root, _ = sec
    r = client.post("/v1/jobs", json={"path": path.format(root=root)}, headers=headers)
    assert r.status_code == 403 and why in r.json()["detail"], r.text


def test_a_path_inside_the_root_is_admitted(sec: tuple[TestClient, dict[str, str], Path, Path]) -> None:
    client, headers, root, _ = sec
    assert client.post("/v1/jobs", json={"path": str(root / "ok.dmesg")}, headers=headers).status_code in (200, 202)


def test_uploads_over_the_cap_are_413(sec: tuple[TestClient, dict[str, str], Path, Path]) -> None:
    client, headers, _, data = sec
    big = b"x" * (CAP + 1)
    assert client.post("/v1/jobs/upload", content=big, headers=headers).status_code == 413  # Content-Length says so

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it streams
        for _ in range(CAP // 4096 + 2):
            yield b"y" * 4096

    assert client.post("/v1/jobs/upload", content=chunks(), headers=headers).status_code == 413
    assert not list((data / "spool").glob(".part-*"))  # the partial upload is gone


def test_other_request_bodies_are_capped(sec: tuple[TestClient, dict[str, str], Path, Path]) -> None:
    """A JSON body is read whole before the route runs: it is capped (64 KiB) before that, token or not."""
    client, headers, root, _ = sec
    huge = b'{"path": "' + b"a" * (128 * 1024) + b'"}'
    for h in (headers, {}):
        r = client.post("/v1/jobs", content=huge, headers={**h, "content-type": "application/json"})
        assert r.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"path": "'
        for _ in range(40):
            yield b"a" * 4096
        yield b'"}'

    r = client.post("/v1/jobs", content=chunks(), headers={**headers, "content-type": "application/json"})
    assert r.status_code == 413
    ok = client.post("/v1/jobs", json={"path": str(root / "ok.dmesg")}, headers=headers)  # small bodies pass
    assert ok.status_code in (200, 202)


def test_archive_bomb_is_refused_with_the_reason(sec: tuple[TestClient, dict[str, str], Path, Path]) -> None:
    client, headers, _, _ = sec
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:  # 16 MiB of zeros: ~16 KB packed, over the 8 MiB unpack cap
        info = tarfile.TarInfo("rank0.log")
        info.size = 16 * 1024**2
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    assert len(buf.getvalue()) < CAP
    r = client.post("/v1/jobs/upload", params={"name": "bomb.tar.gz"}, content=buf.getvalue(), headers=headers)
    job = wait_final(client, headers, r.json()["id"])
    assert job["state"] == "refused" and "archive bomb" in job["error"] and "\n" not in job["error"]


def test_upload_name_cannot_leave_the_spool(sec: tuple[TestClient, dict[str, str], Path, Path]) -> None:
    client, headers, _, data = sec
    r = client.post("/v1/jobs/upload", params={"name": "../../../tmp/evil.log"}, content=b"hello\n", headers=headers)
    assert r.status_code == 202
    placed = [p for p in (data / "spool").rglob("*") if p.is_file()]
    assert placed and all(p.resolve().is_relative_to((data / "spool").resolve()) for p in placed)
    assert not Path("/tmp/evil.log").exists()
    assert "/" not in r.json()["target"]


def test_no_route_reads_a_file_the_client_names(sec: tuple[TestClient, dict[str, str], Path, Path]) -> None:
    client, headers, _, _ = sec
    spec = client.get("/openapi.json").json()
    assert set(spec["paths"]) == {
        "/healthz",
        "/metrics",
        "/v1/jobs",
        "/v1/jobs/upload",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/verdict",
        "/v1/jobs/{job_id}/events",
    }
    for route, ops in spec["paths"].items():  # reads take ids and filters, never a path or a file name
        for method, op in ops.items():
            names = {p["name"] for p in op.get("parameters", [])}
            if method == "get":
                assert not names & {"path", "file", "name", "filename"}, route
    for probe in ("..%2F..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "../../etc/passwd"):
        for suffix in ("", "/verdict"):
            r = client.get(f"/v1/jobs/{probe}{suffix}", headers=headers)
            assert r.status_code == 404 and "root:" not in r.text
    for static in ("/static/../../etc/passwd", "/etc/passwd", "/spool"):
        assert client.get(static, headers=headers).status_code == 404


def test_rate_limit_is_429(tmp_path: Path) -> None:
    with service(tmp_path / "data", rate=0.01, burst=3) as (client, headers):
        codes = [client.get("/v1/jobs", headers=headers).status_code for _ in range(5)]
    assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
