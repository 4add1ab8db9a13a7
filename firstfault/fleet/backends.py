"""The incident store on PostgreSQL, and ``open_store`` choosing the backend from the target.

Why a second backend: a service that already keeps its state in PostgreSQL keeps its incident
history there too. The tables and queries are ``store.Store``'s (plain SQL); only the parameter
mark (``%s``), the bulk insert (psycopg's pipelined ``executemany``) and the Parquet export (a
DuckDB feature; ``pg_dump`` or a DuckDB store serve there) differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from firstfault.fleet.store import _TYPES, Store
from firstfault.vocab import InputError

URL_SCHEMES = ("postgresql://", "postgres://")


class PostgresStore(Store):
    """The incident store in a PostgreSQL database (``postgresql://user@host/db``)."""

    def __init__(self, url: str, read_only: bool = False) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the postgres extra is not installed
            raise InputError("a PostgreSQL store needs psycopg: pip install 'firstfault[postgres]'") from exc
        self.path = url
        try:
            self.db = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise InputError(f"{safe_url(url)}: cannot connect ({str(exc).splitlines()[0]})") from None
        self._setup(read_only)

    def _x(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.db.execute(sql.replace("?", "%s"), list(params))
        return cur.fetchall() if cur.description else []

    def _insert(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        marks = ", ".join(["%s"] * len(_TYPES[table]))
        with self.db.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES ({marks})", list(rows))

    def export_parquet(self, folder: Path) -> list[Path]:
        raise InputError("Parquet export is the DuckDB store's; for PostgreSQL use pg_dump")


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    head, at, tail = url.rpartition("@")
    if not at:
        return url
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.split(':', 1)[0]}@{tail}"


def open_store(target: str | Path, read_only: bool = False) -> Store:
    """A PostgreSQL store for a ``postgresql://`` URL, else the DuckDB file at ``target``."""
    if isinstance(target, str) and target.startswith(URL_SCHEMES):
        return PostgresStore(target, read_only=read_only)
    return Store(target, read_only=read_only)
