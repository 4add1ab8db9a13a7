"""The incident store: an embedded DuckDB file with a fixed SQL schema, exported to Parquet.

Why DuckDB: one file, no server, columnar (the reputation queries are group-bys over every
incident), and Parquet export is one ``COPY``. Why a fixed schema in plain SQL: the same tables
serve a PostgreSQL store when a service keeps its history there; nothing here depends on
DuckDB-only types (times are epoch seconds in DOUBLE, lists are rows of ``places`` and
``signatures``).

Tables: ``incidents`` (one row per verdict, keyed by content hash, with the verdict's JSON),
``places`` (the culprit hosts, GPUs and links of each incident, and as kind ``ran_on`` every host
the job ran on), ``signatures`` (every signature a
verdict shows, for learning what healthy runs also print), ``meta`` (the schema version).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from firstfault.fleet.incident import CODE_CATEGORIES, Incident
from firstfault.vocab import Action, Category, InputError

SCHEMA_VERSION = "1"
#: the ``places`` kind of a host a job ran on (not blamed): the lemon test's exposure
RAN_ON = "ran_on"

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS incidents (
        key VARCHAR PRIMARY KEY,
        job VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        category VARCHAR NOT NULL,
        action VARCHAR NOT NULL,
        confidence DOUBLE PRECISION NOT NULL,
        signature VARCHAR,
        failed_at DOUBLE PRECISION,
        added_at DOUBLE PRECISION NOT NULL,
        summary VARCHAR NOT NULL,
        verdict VARCHAR NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS places (key VARCHAR NOT NULL, kind VARCHAR NOT NULL, place VARCHAR NOT NULL, "
    "ord INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS signatures (key VARCHAR NOT NULL, signature VARCHAR NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (name VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
)

_COLUMNS = "key, job, source, category, action, confidence, signature, failed_at, added_at, summary"
_MACHINE = ", ".join(f"'{c}'" for c in sorted(CODE_CATEGORIES))
#: keys per ``IN (...)`` list
_CHUNK = 500
_TYPES = {
    "incidents": [
        ("key", "VARCHAR"),
        ("job", "VARCHAR"),
        ("source", "VARCHAR"),
        ("category", "VARCHAR"),
        ("action", "VARCHAR"),
        ("confidence", "DOUBLE"),
        ("signature", "VARCHAR"),
        ("failed_at", "DOUBLE"),
        ("added_at", "DOUBLE"),
        ("summary", "VARCHAR"),
        ("verdict", "VARCHAR"),
    ],
    "places": [("key", "VARCHAR"), ("kind", "VARCHAR"), ("place", "VARCHAR"), ("ord", "INTEGER")],
    "signatures": [("key", "VARCHAR"), ("signature", "VARCHAR")],
}


@dataclass(frozen=True, slots=True)
class Filter:
    """What ``firstfault history`` narrows to; None is "any"."""

    host: str | None = None
    gpu: str | None = None
    category: Category | None = None
    job: str | None = None
    since: float | None = None
    limit: int = 20


@dataclass(frozen=True, slots=True)
class PlaceHit:
    """One culprit place of one machine-blamed incident: the rows reputation is computed from."""

    kind: str
    place: str
    job: str
    key: str
    failed_at: float | None
    category: Category


@dataclass(frozen=True, slots=True)
class SignatureCount:
    """How many failed and healthy runs showed a signature."""

    signature: str
    failed: int
    healthy: int


class Store:
    """The DuckDB incident store. Use as a context manager; ``path`` ":memory:" for a throwaway."""

    def __init__(self, path: Path | str, read_only: bool = False) -> None:
        try:
            import duckdb
        except ImportError as exc:  # pragma: no cover - the fleet extra is not installed
            raise InputError("the incident store needs DuckDB: pip install 'firstfault[fleet]'") from exc
        self.path = str(path)
        try:
            self.db: Any = duckdb.connect(self.path, read_only=read_only)
        except duckdb.Error as exc:
            raise InputError(f"{path}: cannot open the incident store ({str(exc).splitlines()[0]})") from None
        self._setup(read_only)

    def _setup(self, read_only: bool) -> None:
        """The tables (made if missing), then the schema version checked."""
        if not read_only:
            for stmt in SCHEMA:
                self._x(stmt)
            self._x("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING", [SCHEMA_VERSION])
        self._check_version()

    def _check_version(self) -> None:
        try:
            row = self._one("SELECT value FROM meta WHERE name = 'schema_version'")
        except Exception:
            raise InputError(f"{self.path}: not a firstfault incident store") from None
        if row is None or row[0] != SCHEMA_VERSION:
            raise InputError(
                f"{self.path}: incident store schema {row and row[0]}, this firstfault reads {SCHEMA_VERSION}"
            )

    def _x(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (none for a statement that returns none)."""
        cur = self.db.execute(sql, list(params))
        return cur.fetchall() if cur.description else []

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self._x(sql, params)
        return rows[0] if rows else None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ writing
    def add(self, incidents: Iterable[Incident]) -> list[bool]:
        """Store the incidents; per incident, True when it was new (a known key is skipped)."""
        items = list(incidents)
        known = self._known({i.key for i in items})
        fresh: dict[str, Incident] = {}
        out = []
        for inc in items:
            new = inc.key not in known and inc.key not in fresh
            if new:
                fresh[inc.key] = inc
            out.append(new)
        rows = list(fresh.values())
        self._x("BEGIN TRANSACTION")
        try:
            self._insert("incidents", [_row(i) for i in rows])
            self._insert("places", [(i.key, k, p, n) for i in rows for n, (k, p) in enumerate(_place_rows(i))])
            self._insert("signatures", [(i.key, s) for i in rows for s in i.signatures])
            self._x("COMMIT")
        except Exception:
            self._x("ROLLBACK")
            raise
        return out

    def _known(self, keys: set[str]) -> set[str]:
        found: set[str] = set()
        ks = sorted(keys)
        for i in range(0, len(ks), _CHUNK):
            part = ks[i : i + _CHUNK]
            marks = ", ".join("?" * len(part))
            found.update(r[0] for r in self._x(f"SELECT key FROM incidents WHERE key IN ({marks})", part))
        return found

    def _insert(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rows staged as JSON lines in a temporary file and read by one ``INSERT ... SELECT``:
        DuckDB takes 10,000 verdicts so in a fraction of a second, against seconds for as many
        parameterised rows."""
        if not rows:
            return
        columns = _TYPES[table]
        names = [c for c, _ in columns]
        with tempfile.TemporaryDirectory(prefix="firstfault-store-") as tmp:
            path = Path(tmp) / f"{table}.jsonl"
            with path.open("w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps(dict(zip(names, r, strict=True)), ensure_ascii=True) + "\n")
            spec = ", ".join(f"{c}: '{t}'" for c, t in columns)
            target = str(path).replace("'", "''")
            self.db.execute(
                f"INSERT INTO {table} SELECT {', '.join(names)} FROM "
                f"read_json('{target}', format = 'newline_delimited', columns = {{{spec}}})"
            )

    # ------------------------------------------------------------------ reading
    def count(self, healthy: bool | None = None) -> int:
        where = "" if healthy is None else ("WHERE category = 'none'" if healthy else "WHERE category <> 'none'")
        row = self._one(f"SELECT count(*) FROM incidents {where}")
        return int(row[0]) if row else 0

    def recent(self, flt: Filter) -> list[Incident]:
        """The newest incidents first (by failure time, then by when they were added)."""
        where: list[str] = ["1 = 1"]
        params: list[Any] = []
        for column, value in (("job", flt.job), ("category", flt.category and str(flt.category))):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if flt.since is not None:
            where.append("failed_at >= ?")
            params.append(flt.since)
        for kind, value in (("host", flt.host), ("gpu", flt.gpu)):
            if value is not None:
                where.append(f"key IN (SELECT key FROM places WHERE kind = '{kind}' AND place = ?)")
                params.append(value)
        sql = (
            f"SELECT {_COLUMNS}, verdict FROM incidents WHERE {' AND '.join(where)} "
            "ORDER BY failed_at DESC NULLS LAST, added_at DESC, key LIMIT ?"
        )
        rows = self._x(sql, [*params, max(0, flt.limit)])
        return self._incidents(rows)

    def get(self, key: str) -> Incident | None:
        rows = self._x(f"SELECT {_COLUMNS}, verdict FROM incidents WHERE key = ?", [key])
        found = self._incidents(rows)
        return found[0] if found else None

    def _incidents(self, rows: list[tuple[Any, ...]]) -> list[Incident]:
        keys = [r[0] for r in rows]
        places: dict[str, list[tuple[str, str]]] = {k: [] for k in keys}
        sigs: dict[str, list[str]] = {k: [] for k in keys}
        for i in range(0, len(keys), _CHUNK):
            part = keys[i : i + _CHUNK]
            marks = ", ".join("?" * len(part))
            for k, kind, place in self._x(
                f"SELECT key, kind, place FROM places WHERE key IN ({marks}) ORDER BY key, ord", part
            ):
                places[k].append((kind, place))
            for k, s in self._x(f"SELECT key, signature FROM signatures WHERE key IN ({marks})", part):
                sigs[k].append(s)
        return [_incident(r, places[r[0]], sorted(sigs[r[0]])) for r in rows]

    def machine_hits(self, until: float | None = None) -> list[PlaceHit]:
        """Every culprit place of every incident that blames the machine (optionally up to a time)."""
        sql = (
            "SELECT p.kind, p.place, i.job, i.key, i.failed_at, i.category FROM places p JOIN incidents i "
            f"ON p.key = i.key WHERE i.category NOT IN ({_MACHINE}) AND p.kind <> '{RAN_ON}'"
        )
        params: list[Any] = []
        if until is not None:
            sql += " AND i.failed_at <= ?"
            params.append(until)
        rows = self._x(sql + " ORDER BY p.kind, p.place, i.failed_at NULLS LAST, i.key", params)
        return [PlaceHit(k, p, j, key, t, Category(c)) for k, p, j, key, t, c in rows]

    def place_history(self, kind: str, place: str) -> list[tuple[str, str, float | None]]:
        """(key, job, failure time) of every machine-blamed incident naming this place."""
        rows = self._x(
            "SELECT i.key, i.job, i.failed_at FROM places p JOIN incidents i ON p.key = i.key "
            f"WHERE p.kind = ? AND p.place = ? AND i.category NOT IN ({_MACHINE}) ORDER BY i.failed_at, i.key",
            [kind, place],
        )
        return [(k, j, t) for k, j, t in rows]

    def signature_history(self, signature: str) -> list[tuple[str, str, float | None]]:
        """(key, job, failure time) of every failed incident whose root is this signature."""
        rows = self._x(
            "SELECT key, job, failed_at FROM incidents WHERE signature = ? AND category <> 'none' "
            "ORDER BY failed_at, key",
            [signature],
        )
        return [(k, j, t) for k, j, t in rows]

    def signature_counts(self) -> tuple[list[SignatureCount], int, int]:
        """Per signature, how many failed and healthy runs showed it; and the two run totals."""
        rows = self._x(
            "SELECT s.signature, sum(CASE WHEN i.category = 'none' THEN 0 ELSE 1 END), "
            "sum(CASE WHEN i.category = 'none' THEN 1 ELSE 0 END) FROM signatures s JOIN incidents i "
            "ON s.key = i.key GROUP BY s.signature ORDER BY s.signature"
        )
        return [SignatureCount(s, int(f), int(h)) for s, f, h in rows], self.count(False), self.count(True)

    def known_hosts(self) -> int:
        """Distinct hosts the store names, as culprits or as hosts a job ran on (a lower bound on the
        fleet's size)."""
        row = self._one(f"SELECT count(DISTINCT place) FROM places WHERE kind IN ('host', '{RAN_ON}')")
        return int(row[0]) if row else 0

    def exposure(self) -> dict[str, int] | None:
        """Per host, how many distinct jobs (failed or healthy) ran on it; None unless every stored
        verdict said where its job ran (a partial count would make busy hosts look like lemons)."""
        row = self._one(
            f"SELECT count(*) FROM incidents WHERE key NOT IN (SELECT key FROM places WHERE kind = '{RAN_ON}')"
        )
        if row is None or int(row[0]) > 0 or self.count() == 0:
            return None
        rows = self._x(
            f"SELECT p.place, count(DISTINCT i.job) FROM places p JOIN incidents i ON p.key = i.key "
            f"WHERE p.kind = '{RAN_ON}' GROUP BY p.place"
        )
        return {str(h): int(n) for h, n in rows}

    def timeline(self) -> list[tuple[float, Category]]:
        """(failure time, category) of every failed incident with a time, oldest first."""
        rows = self._x(
            "SELECT failed_at, category FROM incidents WHERE category <> 'none' AND failed_at IS NOT NULL "
            "ORDER BY failed_at, key"
        )
        return [(float(t), Category(c)) for t, c in rows]

    def export_parquet(self, folder: Path) -> list[Path]:
        """Each table to ``folder/<table>.parquet`` (DuckDB's COPY)."""
        folder.mkdir(parents=True, exist_ok=True)
        out = []
        for table in ("incidents", "places", "signatures"):
            path = folder / f"{table}.parquet"
            target = str(path).replace("'", "''")
            self.db.execute(f"COPY {table} TO '{target}' (FORMAT parquet)")
            out.append(path)
        return out


def _row(i: Incident) -> tuple[Any, ...]:
    ts = i.failed_at if i.failed_at is not None and math.isfinite(i.failed_at) else None
    return (
        i.key,
        i.job,
        i.source,
        str(i.category),
        str(i.action),
        i.confidence,
        i.signature,
        ts,
        i.added_at,
        i.summary,
        i.verdict_json,
    )


def _incident(r: tuple[Any, ...], places: list[tuple[str, str]], sigs: list[str]) -> Incident:
    key, job, source, category, action, confidence, signature, failed_at, added_at, summary, verdict = r
    return Incident(
        key=key,
        job=job,
        source=source,
        category=Category(category),
        action=Action(action),
        confidence=float(confidence),
        signature=signature,
        hosts=tuple(p for k, p in places if k == "host"),
        gpus=tuple(p for k, p in places if k == "gpu"),
        links=tuple(p for k, p in places if k == "link"),
        ranks=tuple(int(x) for x in json.loads(verdict).get("verdict", {}).get("culprit", {}).get("ranks", [])),
        failed_at=failed_at,
        added_at=float(added_at),
        summary=summary,
        signatures=tuple(sigs),
        verdict_json=verdict,
        ran_on=tuple(p for k, p in places if k == RAN_ON),
    )


def _place_rows(i: Incident) -> list[tuple[str, str]]:
    """The culprit places, then every host the job ran on (kind ``ran_on``: its exposure)."""
    return [*i.places(), *((RAN_ON, h) for h in i.ran_on)]
