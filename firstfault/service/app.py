"""The HTTP API: FastAPI over the durable queue; the app factory ``create_app`` is what uvicorn serves.

Routes (all under a bearer token but the probes): submit an upload or an allowed path, get a job;
read a job, its verdict (the stored JSON, nothing else), or follow it as Server-Sent Events; list
and search jobs; ``/healthz`` and ``/metrics`` for probes and Prometheus. No route takes a file
name to read: the only files the server opens are the bundles the path policy admitted and its
own spool.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from firstfault.service import auth
from firstfault.service.bodycap import BodyCap
from firstfault.service.metrics import Metrics
from firstfault.service.paths import PathRefused, check_path, path_key, safe_name, upload_key
from firstfault.service.queue import Job, JobState, JobStore, SourceKind, SqliteJobStore
from firstfault.service.queue import Query as JobQuery
from firstfault.service.worker import WorkerConfig, Workers

SSE_POLL_S = 0.25
UPLOAD_ROUTE = "/v1/jobs/upload"
#: Bytes of a request body on any route but the upload (a path submission is a few hundred bytes).
SMALL_BODY = 64 * 1024
SSE_MAX_S = 600.0


@dataclass(frozen=True)
class ServiceConfig:
    data_dir: Path
    roots: tuple[Path, ...] = ()  # already resolved (paths.allowed_roots)
    max_upload: int = 256 * 1024**2
    rate: float = 20.0
    burst: float = 100.0
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    store_url: str | None = None  # postgresql://...: a queue shared by several servers


def open_store(data_dir: Path, url: str | None = None) -> JobStore:
    """The queue: SQLite in the data folder, or PostgreSQL at ``url``."""
    if url:
        from firstfault.service.postgres import URL_SCHEMES, PostgresJobStore

        if not url.startswith(URL_SCHEMES):
            raise ValueError("--store takes a postgresql:// URL (the default is SQLite in the data folder)")
        return PostgresJobStore(url)
    return SqliteJobStore(data_dir / "jobs.sqlite3")


class PathSubmission(BaseModel):
    path: str


@dataclass
class _State:
    config: ServiceConfig
    store: JobStore
    metrics: Metrics
    limiter: auth.RateLimiter
    workers: Workers
    instance: str
    lock: IO[bytes]


def _hold_data_dir(data_dir: Path, exclusive: bool) -> IO[bytes]:
    """One server per SQLite data folder: an exclusive lock held for the process's life (the kernel
    drops it when the process dies, kill -9 included, which is what makes re-queueing at once safe).
    Servers sharing a PostgreSQL queue share their folder (its spool) and take a shared lock."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fh = open(data_dir / "server.lock", "wb")  # noqa: SIM115  # held open until the server stops
    try:
        fcntl.flock(fh, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise RuntimeError(f"{data_dir}: another firstfault server uses this data folder") from None
    return fh


def preflight(config: ServiceConfig) -> None:
    """What would stop the server starting (its folder held by another server, the store out of
    reach), found before uvicorn starts, so the command says it in one line rather than a traceback.
    The lock is let go again; the server takes it at start (and would still refuse there)."""
    lock = _hold_data_dir(config.data_dir, exclusive=config.store_url is None)
    try:
        open_store(config.data_dir, config.store_url).close()
    finally:
        lock.close()


def create_app(config: ServiceConfig) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lock = _hold_data_dir(config.data_dir, exclusive=config.store_url is None)
        (config.data_dir / "spool").mkdir(exist_ok=True)
        if config.store_url is None:  # uploads a killed server was receiving: never acknowledged, so never queued
            for part in (config.data_dir / "spool").glob(".part-*"):
                part.unlink(missing_ok=True)
        store = open_store(config.data_dir, config.store_url)
        instance = uuid.uuid4().hex
        store.recover(instance)
        metrics = Metrics()
        workers = Workers(store, instance, config.worker, metrics)
        app.state.s = _State(
            config, store, metrics, auth.RateLimiter(config.rate, config.burst), workers, instance, lock
        )
        workers.start()
        try:
            yield
        finally:
            workers.stop()
            store.close()
            lock.close()

    app = FastAPI(
        title="firstfault",
        summary="The first failure of a distributed training job, as a service.",
        version="1",
        lifespan=lifespan,
    )
    app.include_router(router)
    app.add_middleware(BodyCap, exempt=UPLOAD_ROUTE, cap=SMALL_BODY)
    return app


def _st(request: Request) -> _State:
    s: _State = request.app.state.s
    return s


def _user(request: Request) -> str:
    """The caller, authenticated (401) and within its rate (429)."""
    s = _st(request)
    user = auth.user_of(s.store, request.headers.get("authorization"))
    if user is None:
        s.metrics.refusal(401)
        raise HTTPException(401, "a valid bearer token is needed", headers={"WWW-Authenticate": "Bearer"})
    wait = s.limiter.allow(user)
    if wait > 0:
        s.metrics.refusal(429)
        raise HTTPException(429, "rate limit reached", headers={"Retry-After": str(max(1, round(wait)))})
    return user


User = Annotated[str, Depends(_user)]


def _submitted(s: _State, job: Job, created: bool) -> JSONResponse:
    s.metrics.submission(created)
    if created:
        s.workers.wake()
    return JSONResponse(job.public(), status_code=202 if created else 200)


router = APIRouter()


@router.get("/healthz")
def healthz(request: Request) -> dict[str, Any]:
    """The queue's and the store's state (no token needed: a probe)."""
    s = _st(request)
    try:
        queue, ok = s.store.counts(), True
    except Exception:
        queue, ok = {}, False
    return {
        "status": "ok" if ok else "degraded",
        "store": {"backend": s.store.backend, "ok": ok},
        "queue": queue,
        "workers": s.config.worker.workers,
        "instance": s.instance,
    }


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request) -> str:
    """Prometheus text exposition."""
    s = _st(request)
    return s.metrics.exposition(s.store.counts())


@router.post("/v1/jobs", status_code=202)
def submit_path(body: PathSubmission, request: Request, user: User) -> JSONResponse:
    """Analyse a bundle already on the server, under one of its allowed roots."""
    s = _st(request)
    if not s.config.roots:
        s.metrics.refusal(403)
        raise HTTPException(403, "this server takes no paths (no --allow-root); upload the bundle")
    try:
        real = check_path(body.path, s.config.roots)
        key = path_key(real)
    except PathRefused as exc:
        s.metrics.refusal(403)
        raise HTTPException(403, f"path refused: {exc}") from None
    job, created = s.store.submit(key, user, SourceKind.PATH, str(real))
    return _submitted(s, job, created)


@router.post("/v1/jobs/upload", status_code=202)
async def submit_upload(request: Request, user: User, name: str = "upload.log") -> JSONResponse:
    """Upload one log or an archive (.tar.gz, .tgz, .tar, .tar.xz, .tar.bz2) as the raw body;
    ``name`` says which. Archives unpack under discovery's member, ratio and size limits."""
    s = _st(request)
    spooled = await _spool(request, s)
    clean = safe_name(name)
    key = upload_key(clean, spooled[1])
    final = s.config.data_dir / "spool" / key / clean
    await run_in_threadpool(_place, spooled[0], final)
    job, created = await run_in_threadpool(s.store.submit, key, user, SourceKind.UPLOAD, str(final))
    return _submitted(s, job, created)


@router.get("/v1/jobs")
def list_jobs(
    request: Request,
    user: User,
    state: JobState | None = None,
    category: str | None = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """Past jobs, newest first; ``q`` searches the verdict's summary and the bundle's name."""
    jobs = _st(request).store.search(JobQuery(state, category, q, limit))
    return {"jobs": [j.public() for j in jobs]}


@router.get("/v1/jobs/{job_id}")
def get_job(job_id: str, request: Request, user: User) -> dict[str, Any]:
    """A job's state; with the verdict once done."""
    s = _st(request)
    job = _job_or_404(s, job_id)
    out = job.public()
    if job.state is JobState.DONE:
        out["verdict"] = s.store.verdict(job_id)
    return out


@router.get("/v1/jobs/{job_id}/verdict")
def get_verdict(job_id: str, request: Request, user: User) -> Response:
    """The stored verdict JSON (``Verdict.to_dict()``), byte for byte what the worker stored."""
    s = _st(request)
    _job_or_404(s, job_id)
    verdict = s.store.verdict(job_id)
    if verdict is None:
        raise HTTPException(404, "no verdict (yet) for this job")
    return JSONResponse(verdict)


@router.get("/v1/jobs/{job_id}/events")
async def job_events(job_id: str, request: Request, user: User) -> StreamingResponse:
    """Server-Sent Events: ``state`` on each change, then ``verdict`` (or ``end``) and close."""
    s = _st(request)
    await run_in_threadpool(_job_or_404, s, job_id)
    return StreamingResponse(_events(s, job_id), media_type="text/event-stream")


def _job_or_404(s: _State, job_id: str) -> Job:
    job = s.store.get(job_id) if len(job_id) <= 64 else None
    if job is None:
        raise HTTPException(404, "no such job")
    return job


async def _events(s: _State, job_id: str) -> AsyncIterator[str]:
    last: JobState | None = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SSE_MAX_S
    while loop.time() < deadline:
        job = await run_in_threadpool(s.store.get, job_id)
        if job is None:
            return
        if job.state is not last:
            last = job.state
            yield f"event: state\ndata: {json.dumps(job.public())}\n\n"
        if job.state.final:
            verdict = await run_in_threadpool(s.store.verdict, job_id)
            kind = "verdict" if verdict is not None else "end"
            yield f"event: {kind}\ndata: {json.dumps(verdict if verdict is not None else job.public())}\n\n"
            return
        await asyncio.sleep(SSE_POLL_S)
    yield "event: timeout\ndata: {}\n\n"


async def _spool(request: Request, s: _State) -> tuple[Path, str]:
    """The body written to a temporary file under the spool, with its SHA-256; 413 past the cap."""
    cap = s.config.max_upload
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        s.metrics.refusal(413)
        raise HTTPException(413, f"upload over the {cap} byte limit")
    tmp = s.config.data_dir / "spool" / f".part-{uuid.uuid4().hex}"
    h = hashlib.sha256()
    size = 0
    try:
        with open(tmp, "wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > cap:
                    s.metrics.refusal(413)
                    raise HTTPException(413, f"upload over the {cap} byte limit")
                h.update(chunk)
                out.write(chunk)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if size == 0:
        tmp.unlink(missing_ok=True)
        raise HTTPException(422, "empty upload")
    return tmp, h.hexdigest()


def _place(tmp: Path, final: Path) -> None:
    """Move a spooled upload to its content-addressed place (the same bytes land in the same file)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, final)
