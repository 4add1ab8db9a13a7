"""The job queue in PostgreSQL, for several servers sharing one queue and one set of verdicts.

The SQL is the SQLite store's (``queue.SqlJobStore``); only the dialect differs: ``%s`` marks,
``strpos`` for a substring, ``DOUBLE PRECISION`` times, and ``FOR UPDATE SKIP LOCKED`` so two
servers claiming at once take different jobs. A shared store cannot tell a dead server's running
jobs from a live one's, so a killed server's jobs go back to the queue when their lease (renewed
every third of it while the analysis runs) expires, not at once as with SQLite.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from firstfault.service.queue import SCHEMA, SqlJobStore, _Cursor
from firstfault.vocab import InputError

URL_SCHEMES = ("postgresql://", "postgres://")


class PostgresJobStore(SqlJobStore):
    backend = "postgresql"
    exclusive = False
    contains = "strpos"
    lock_claim = "FOR UPDATE SKIP LOCKED"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the postgres extra is not installed
            raise InputError("a PostgreSQL queue needs psycopg: pip install 'firstfault[postgres]'") from exc
        try:
            self._db: Any = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise InputError(f"cannot connect to the queue's PostgreSQL ({str(exc).splitlines()[0]})") from None
        self._lock = threading.Lock()  # one connection, used by one thread at a time
        with self._lock:
            self._db.execute(SCHEMA.replace(" REAL", " DOUBLE PRECISION"))

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    @contextmanager
    def _tx(self) -> Iterator[_Cursor]:
        with self._lock, self._db.transaction(), self._db.cursor() as cur:
            yield cur

    def close(self) -> None:
        with self._lock:
            self._db.close()
