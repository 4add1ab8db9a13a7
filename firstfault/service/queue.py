"""The durable job queue and its results: one SQLite file in WAL mode, behind a small interface.

Why a database and not an in-memory queue: a submission acknowledged to a client must survive a
``kill -9`` of the server, and the same content must map to one job, also under 100 concurrent
submitters. Both are a database's job: the row is committed (``synchronous=FULL``) before the
client gets its id, and a UNIQUE key on the content hash makes a second insert of the same content
a no-op that returns the first job.

Recovery: a job is claimed with a lease (``claimed_by`` = the server instance, ``lease_until``).
The SQLite store is one server's (the server holds an exclusive lock on its data folder), so on
start every job still marked running belongs to a dead server and goes back to the queue at once;
a shared backend (PostgreSQL) would rely on the lease expiring instead. :class:`JobStore` is the
interface such a backend implements.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"  # a verdict
    REFUSED = "refused"  # unusable input (the pipeline's one-line reason)
    FAILED = "failed"  # the analysis process died or raised a bug

    @property
    def final(self) -> bool:
        return self in (JobState.DONE, JobState.REFUSED, JobState.FAILED)


class SourceKind(StrEnum):
    UPLOAD = "upload"  # bytes sent to the server, spooled under its data folder
    PATH = "path"  # a bundle already on the server's disk, under an allowed root


@dataclass(frozen=True)
class Job:
    id: str
    key: str  # the content hash: one job per content
    user: str
    source: SourceKind
    target: str  # the path the worker analyses (a spooled upload or an allowed path)
    state: JobState
    submitted_at: float
    finished_at: float | None
    attempts: int  # claims so far: 2 means a server died while analysing it once
    error: str | None
    category: str | None
    summary: str | None

    def public(self) -> dict[str, Any]:
        """The job as the API shows it (no server paths of uploads: only the name the client gave)."""
        target = Path(self.target).name if self.source is SourceKind.UPLOAD else self.target
        return {
            "id": self.id,
            "key": self.key,
            "user": self.user,
            "source": self.source.value,
            "target": target,
            "state": self.state.value,
            "submitted_at": self.submitted_at,
            "finished_at": self.finished_at,
            "attempts": self.attempts,
            "error": self.error,
            "category": self.category,
            "summary": self.summary,
        }


@dataclass(frozen=True)
class Query:
    """A listing: newest first, filtered by state, category and a substring of summary or target."""

    state: JobState | None = None
    category: str | None = None
    text: str | None = None
    limit: int = 100


class JobStore(Protocol):
    """What the server needs of a queue; SQLite here, PostgreSQL would implement the same."""

    backend: str

    def submit(self, key: str, user: str, source: SourceKind, target: str) -> tuple[Job, bool]: ...
    def claim(self, owner: str, lease_s: float) -> Job | None: ...
    def renew(self, job_id: str, owner: str, lease_s: float) -> None: ...
    def finish(
        self, job_id: str, owner: str, state: JobState, result: dict[str, Any] | None, error: str | None
    ) -> bool: ...
    def recover(self, owner: str) -> int: ...
    def get(self, job_id: str) -> Job | None: ...
    def verdict(self, job_id: str) -> dict[str, Any] | None: ...
    def search(self, q: Query) -> list[Job]: ...
    def counts(self) -> dict[str, int]: ...
    def add_token(self, user: str, digest: str) -> None: ...
    def user_for(self, digest: str) -> str | None: ...
    def close(self) -> None: ...


SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  username TEXT NOT NULL,
  source TEXT NOT NULL,
  target TEXT NOT NULL,
  state TEXT NOT NULL,
  submitted_at REAL NOT NULL,
  claimed_by TEXT,
  lease_until REAL,
  finished_at REAL,
  attempts INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  category TEXT,
  summary TEXT,
  verdict TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, submitted_at);
CREATE TABLE IF NOT EXISTS tokens (
  digest TEXT PRIMARY KEY,
  username TEXT NOT NULL,
  created_at REAL NOT NULL
);
"""

_COLS = "id, key, username, source, target, state, submitted_at, finished_at, attempts, error, category, summary"


def _job(row: tuple[Any, ...]) -> Job:
    return Job(
        id=row[0],
        key=row[1],
        user=row[2],
        source=SourceKind(row[3]),
        target=row[4],
        state=JobState(row[5]),
        submitted_at=row[6],
        finished_at=row[7],
        attempts=row[8],
        error=row[9],
        category=row[10],
        summary=row[11],
    )


class _Cursor(Protocol):
    """What a DB-API cursor gives the shared SQL (sqlite3's and psycopg's both do)."""

    @property
    def rowcount(self) -> int: ...
    def execute(self, sql: Any, *args: Any) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class SqlJobStore:
    """The queue's SQL, shared by the backends; a backend gives transactions and its dialect's words.

    ``exclusive``: the store is one server's (SQLite: the server holds its data folder's lock), so
    every job marked running on start was a dead server's. A shared store (PostgreSQL) cannot know
    that and lets the lease run out instead.
    """

    backend = "sql"
    exclusive = True
    contains = "instr"  # substring position: instr (SQLite), strpos (PostgreSQL)
    lock_claim = ""  # FOR UPDATE SKIP LOCKED where several servers claim at once

    def _tx(self) -> AbstractContextManager[_Cursor]:
        """A transaction, committed when the block ends (rolled back when it raises)."""
        raise NotImplementedError

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        with self._tx() as cur:
            cur.execute(self._sql(sql), args)
            return cur.fetchall()

    def _sql(self, sql: str) -> str:
        return sql

    def _x(self, cur: _Cursor, sql: str, args: Sequence[object] = ()) -> None:
        cur.execute(self._sql(sql), args)

    def submit(self, key: str, user: str, source: SourceKind, target: str) -> tuple[Job, bool]:
        """The job for ``key``: a new one (True), or the one that content already has (False)."""
        with self._tx() as cur:
            self._x(
                cur,
                "INSERT INTO jobs (id, key, username, source, target, state, submitted_at) VALUES (?,?,?,?,?,?,?) "
                "ON CONFLICT(key) DO NOTHING",
                (uuid.uuid4().hex, key, user, source.value, target, JobState.QUEUED.value, time.time()),
            )
            created = cur.rowcount == 1
            self._x(cur, f"SELECT {_COLS} FROM jobs WHERE key = ?", (key,))
            row = cur.fetchone()
        return _job(row), created

    def claim(self, owner: str, lease_s: float) -> Job | None:
        """The oldest queued job (or one whose lease ran out), now running under ``owner``."""
        now = time.time()
        with self._tx() as cur:
            self._x(
                cur,
                "SELECT id FROM jobs WHERE state = 'queued' OR (state = 'running' AND lease_until < ?) "
                f"ORDER BY submitted_at LIMIT 1 {self.lock_claim}",
                (now,),
            )
            row = cur.fetchone()
            if row is None:
                return None
            self._x(
                cur,
                "UPDATE jobs SET state = 'running', claimed_by = ?, lease_until = ?, attempts = attempts + 1 "
                "WHERE id = ?",
                (owner, now + lease_s, row[0]),
            )
            self._x(cur, f"SELECT {_COLS} FROM jobs WHERE id = ?", (row[0],))
            got = cur.fetchone()
        return _job(got)

    def renew(self, job_id: str, owner: str, lease_s: float) -> None:
        with self._tx() as cur:
            self._x(
                cur,
                "UPDATE jobs SET lease_until = ? WHERE id = ? AND claimed_by = ? AND state = 'running'",
                (time.time() + lease_s, job_id, owner),
            )

    def finish(
        self, job_id: str, owner: str, state: JobState, result: dict[str, Any] | None, error: str | None
    ) -> bool:
        """Store the outcome, once: only the holder of the claim may finish a running job."""
        verdict = result.get("verdict", {}) if result else {}
        with self._tx() as cur:
            self._x(
                cur,
                "UPDATE jobs SET state = ?, finished_at = ?, error = ?, category = ?, summary = ?, verdict = ?, "
                "lease_until = NULL WHERE id = ? AND claimed_by = ? AND state = 'running'",
                (
                    state.value,
                    time.time(),
                    error,
                    verdict.get("category"),
                    verdict.get("summary"),
                    json.dumps(result) if result is not None else None,
                    job_id,
                    owner,
                ),
            )
            return cur.rowcount == 1

    def recover(self, owner: str) -> int:
        """Put back the jobs a dead server was analysing: all running ones others hold when the store
        is this server's alone, else those whose lease ran out."""
        with self._tx() as cur:
            if self.exclusive:
                self._x(
                    cur,
                    "UPDATE jobs SET state = 'queued', claimed_by = NULL, lease_until = NULL "
                    "WHERE state = 'running' AND (claimed_by IS NULL OR claimed_by != ?)",
                    (owner,),
                )
            else:
                self._x(
                    cur,
                    "UPDATE jobs SET state = 'queued', claimed_by = NULL, lease_until = NULL "
                    "WHERE state = 'running' AND lease_until < ?",
                    (time.time(),),
                )
            return cur.rowcount

    def get(self, job_id: str) -> Job | None:
        rows = self._read(f"SELECT {_COLS} FROM jobs WHERE id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    def verdict(self, job_id: str) -> dict[str, Any] | None:
        rows = self._read("SELECT verdict FROM jobs WHERE id = ?", (job_id,))
        if not rows or rows[0][0] is None:
            return None
        out: dict[str, Any] = json.loads(rows[0][0])
        return out

    def search(self, q: Query) -> list[Job]:
        where: list[str] = []
        args: list[object] = []
        if q.state is not None:
            where.append("state = ?")
            args.append(q.state.value)
        if q.category:
            where.append("category = ?")
            args.append(q.category)
        if q.text:
            f = self.contains
            where.append(f"({f}(lower(coalesce(summary, '')), ?) > 0 OR {f}(lower(target), ?) > 0)")
            args += [q.text.lower(), q.text.lower()]
        sql = f"SELECT {_COLS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY submitted_at DESC LIMIT ?"
        args.append(max(1, min(q.limit, 1000)))
        return [_job(r) for r in self._read(sql, args)]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in JobState}
        out.update({s: int(n) for s, n in self._read("SELECT state, count(*) FROM jobs GROUP BY state")})
        return out

    def add_token(self, user: str, digest: str) -> None:
        with self._tx() as cur:
            self._x(
                cur, "INSERT INTO tokens (digest, username, created_at) VALUES (?,?,?)", (digest, user, time.time())
            )

    def user_for(self, digest: str) -> str | None:
        rows = self._read("SELECT username FROM tokens WHERE digest = ?", (digest,))
        return str(rows[0][0]) if rows else None


class SqliteJobStore(SqlJobStore):
    """One SQLite file (WAL): readers never wait for the writer, each commit is on disk before it returns."""

    backend = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # one connection, one lock: the writes are tiny, and SQLite has one writer anyway
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # acknowledged means on disk
        self._db.executescript(SCHEMA)

    @contextmanager
    def _tx(self) -> Iterator[_Cursor]:
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        with self._lock:  # a plain read: no write transaction needed
            return self._db.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()
