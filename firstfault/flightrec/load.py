"""Find and load PyTorch flight-recorder dumps into typed, schema-neutral records.

Why a normalising layer: the dump format has moved a lot between FR schema
versions 2.3 and 2.13 (``nccl_version`` became ``comm_lib_version``, ``pg_status``,
``is_p2p``, ``thread_*`` and ``frames`` appeared, JSON dumps store numbers as
strings and ``None`` as 0, gloo dumps carry an empty ``pg_config``).  The analysis
works on :class:`FRDump`/:class:`FREntry` only and never sees those differences.

Loading never raises for a bad file: each one becomes an :class:`FRLoadIssue`
plus a warning line, because one truncated dump out of 16,384 must not stop the
analysis of the rest.  Truncated ring buffers and missing ranks are *facts*
about the job and are reported as warnings, not errors.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from firstfault.flightrec.unpickler import (
    DEFAULT_MAX_BYTES,
    DumpLoadError,
    FastLoader,
    UnsafePickleError,
    fast_restricted_loads,
    read_limited,
    restricted_loads,
)
from firstfault.vocab import settings

__all__ = [
    "FRDump",
    "FREntry",
    "FRFrame",
    "FRLoadIssue",
    "FRLoadResult",
    "FRPGConfig",
    "FRPGStatus",
    "NotADumpError",
    "discover_dump_files",
    "dump_prefixes_from_text",
    "gc_paused",
    "load_dump_file",
    "load_dumps",
    "parse_dump_object",
    "parse_profiling_name",
]

# Names PyTorch and NVIDIA's collector give per-rank dump files (prefix + rank).
KNOWN_PREFIXES: tuple[str, ...] = (
    "_dump_",
    "fr_trace_",
    "nccl_trace_rank_",
    "fr_trace_rank_",
    "trace_rank_",
)
_RANK_FILE = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?P<ext>\.json|\.pkl|\.pickle)?$")
_ENV_PREFIX = re.compile(r"(?:TORCH_FR_DUMP_TEMP_FILE|TORCH_NCCL_DEBUG_INFO_TEMP_FILE)\s*[=:]\s*[\"']?([^\s\"',;]+)")
_P2P_NAME = re.compile(r"^(send|recv)\s+(\d+)\s*(->|<-)\s*(\d+)")
_TEXT_SUFFIXES = (".log", ".txt", ".out", ".err", ".env", ".sh")
_MAX_TEXT_SCAN = 8 * 1024 * 1024


class NotADumpError(DumpLoadError):
    """The file decoded, but it is not a flight-recorder dump."""


@dataclass(slots=True, frozen=True)
class FRFrame:
    """One Python stack frame recorded with a collective (innermost first)."""

    name: str
    filename: str
    line: int

    def __str__(self) -> str:
        return f"{self.name} ({self.filename}:{self.line})"


@dataclass(slots=True)
class FREntry:
    """One recorded collective or p2p operation on one rank.

    ``op`` is the bare operation (``all_reduce``, ``send``...), ``peer`` the
    group-local peer of a send/recv (destination of a send, source of a recv).
    Completion fields are ``None`` when the dump does not know them.
    """

    record_id: int
    pg_id: int
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    profiling_name: str
    backend: str
    op: str
    is_p2p: bool
    peer: int | None
    input_sizes: list[list[int]]
    input_dtypes: list[str]
    output_sizes: list[list[int]]
    output_dtypes: list[str]
    state: str
    time_created_ns: int | None
    time_started_ns: int | None
    time_completed_ns: int | None
    retired: bool | None
    timeout_ms: int | None
    duration_ms: float | None
    frames: tuple[FRFrame, ...]
    thread_name: str | None = None

    @property
    def seq(self) -> int:
        """The sequence id that orders this op within its group and kind."""
        return self.p2p_seq_id if self.is_p2p else self.collective_seq_id


@dataclass(slots=True, frozen=True)
class FRPGConfig:
    """A process group as one rank's dump describes it (global ranks)."""

    name: str
    desc: str
    ranks: tuple[int, ...] | None


@dataclass(slots=True, frozen=True)
class FRPGStatus:
    """Per-group progress counters keyed by the rank-local group uid (``pg_id``)."""

    uid: str
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(slots=True)
class FRDump:
    """One rank's dump, normalised across schema versions and formats."""

    rank: int
    path: str
    fmt: str
    version: str
    backend: str
    comm_lib_version: str | None
    pg_config: dict[str, FRPGConfig]
    pg_status: dict[str, FRPGStatus]
    entries: list[FREntry]
    only_active: bool
    ring_wrapped: bool
    notes: list[str] = field(default_factory=list)

    @property
    def first_record_id(self) -> int | None:
        return self.entries[0].record_id if self.entries else None


@dataclass(slots=True, frozen=True)
class FRLoadIssue:
    """A file that could not be used, and why."""

    path: str
    kind: str
    message: str


@dataclass(slots=True)
class FRLoadResult:
    """What :func:`load_dumps` found: usable dumps, warnings, unusable files."""

    dumps: list[FRDump]
    warnings: list[str]
    issues: list[FRLoadIssue] = field(default_factory=list)
    files_considered: int = 0
    unusable_ranks: list[int] = field(default_factory=list)

    @property
    def world_size_hint(self) -> int | None:
        """Smallest world size consistent with every rank-named file seen (usable or not)."""
        ranks = [d.rank for d in self.dumps] + self.unusable_ranks
        return max(ranks) + 1 if ranks else None

    @property
    def refused(self) -> list[FRLoadIssue]:
        return [i for i in self.issues if i.kind == "unsafe"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": sorted(d.rank for d in self.dumps),
            "warnings": list(self.warnings),
            "issues": [asdict(i) for i in self.issues],
            "files_considered": self.files_considered,
            "unusable_ranks": list(self.unusable_ranks),
        }


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic objects.

    Why: loading 16k dumps allocates millions of dicts/lists/dataclasses, none in
    reference cycles, and each allocation burst triggers full-heap GC passes that
    cost ~40% of the load time (fr_trace does the same with ``gc.disable()``).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# --------------------------------------------------------------------------- parsing


def parse_profiling_name(name: str) -> tuple[str, str, int | None]:
    """Split ``nccl:send 3->0`` into (backend, op, group-local peer).

    Why: the op kind and a p2p peer are only recorded inside this string.
    """
    backend, sep, rest = name.partition(":")
    if not sep:
        backend, rest = "", name
    rest = rest.strip()
    m = _P2P_NAME.match(rest)
    if m:
        kind, a, arrow, b = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
        if kind == "send":
            return backend, "send", b if arrow == "->" else a
        return backend, "recv", b if arrow == "<-" else a
    return backend, rest.split(" ", 1)[0] if rest else rest, None


_RANKS_CACHE: dict[str, tuple[int, ...] | None] = {}


def _parse_ranks(value: Any) -> tuple[int, ...] | None:
    """Parse pg_config ``ranks`` (a string like ``"[0, 1]"`` or a list).

    Cached by string because every rank of a 16k-rank job repeats the same
    100 KB default-group string; ``json.loads`` instead of ``ast.literal_eval``
    because it is two orders of magnitude faster and equally safe.
    """
    if isinstance(value, (list, tuple)):
        try:
            return tuple(int(v) for v in value)
        except (TypeError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    cached = _RANKS_CACHE.get(value, False)
    if cached is not False:
        return cached  # type: ignore[return-value]
    result: tuple[int, ...] | None
    try:
        parsed = json.loads(value)
        result = tuple(int(v) for v in parsed) if isinstance(parsed, list) else None
    except (ValueError, TypeError):
        nums = re.findall(r"-?\d+", value)
        result = tuple(int(v) for v in nums) if nums or value.strip() in ("[]", "") else None
    if len(_RANKS_CACHE) > 100_000:
        _RANKS_CACHE.clear()
    _RANKS_CACHE[value] = result
    return result


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None if value is None else int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


# Every rank of a job records the same shapes, dtypes, frames and group names: one shared object
# for each (16,384 dumps x their entries would otherwise hold 16,384 equal copies). Read-only
# downstream; bounded like the other caches.
_SHARED: dict[Any, Any] = {}
_SHARED_MAX = 100_000


def _shared(key: Any, value: Any) -> Any:
    got = _SHARED.get(key)
    if got is not None:
        return got
    if len(_SHARED) < _SHARED_MAX:
        _SHARED[key] = value
    return value


def _shared_str(value: str) -> str:
    return _shared(value, value) if len(value) < 512 else value


def _shared_sizes(value: Any) -> list[list[int]]:
    sizes = _sizes(value)
    if not sizes or len(sizes) > 64:
        return sizes
    return _shared(("sizes", *(tuple(d) for d in sizes)), sizes)  # type: ignore[no-any-return]


def _shared_strs(value: Any) -> list[str]:
    strs = _strs(value)
    if not strs or len(strs) > 64:
        return strs
    return _shared(("strs", *strs), [_shared_str(x) for x in strs])  # type: ignore[no-any-return]


def _sizes(value: Any) -> list[list[int]]:
    """Sizes as ``list[list[int]]``; the raw list is reused when it is well typed."""
    if type(value) is not list:
        return []
    ok = True
    for dims in value:
        if type(dims) is not list:
            ok = False
            break
        for d in dims:
            if type(d) is not int:
                ok = False
                break
        if not ok:
            break
    if ok:
        return value
    return [[d for d in dims if type(d) is int] for dims in value if isinstance(dims, list)]


def _strs(value: Any) -> list[str]:
    if type(value) is not list:
        return []
    for v in value:
        if type(v) is not str:
            return [x for x in value if isinstance(x, str)]
    return value


def _frames(value: Any, cache: dict[int, FRFrame]) -> tuple[FRFrame, ...]:
    if type(value) is not list or not value:
        return ()
    out: list[FRFrame] = []
    for f in value:
        if type(f) is not dict:
            continue
        key = id(f)
        fr = cache.get(key)
        if fr is None:
            line = f.get("line")
            fr = FRFrame(
                name=str(f.get("name", "?")),
                filename=str(f.get("filename", "?")),
                line=line if type(line) is int else (_as_int(line) or 0),
            )
            fr = _shared(fr, fr)  # the same frame on every rank: one object (frozen, hashable)
            cache[key] = fr
        out.append(fr)
    if len(out) > 64:
        return tuple(out)
    # the same stack on every rank: one tuple for it (keyed by its shared frames' identities, which
    # hash fast, not by their text); 16,384 ranks x 20 entries held 26 MB of equal tuples
    return _shared(("frames", *map(id, out)), tuple(out))  # type: ignore[no-any-return]


_NAME_CACHE: dict[str, tuple[str, str, int | None]] = {}


def _int_field(raw: dict[str, Any], key: str) -> int | None:
    v = raw.get(key)
    return v if type(v) is int else _as_int(v)


def _entry(raw: dict[str, Any], is_json: bool, frame_cache: dict[int, FRFrame]) -> FREntry | None:
    """Normalise one raw entry; ``None`` if it lacks what any analysis needs.

    Written for speed (16k dumps x thousands of entries): well-typed values from
    torch are taken as they are, anything else goes through the slow converters.
    """
    get = raw.get
    pname = get("profiling_name")
    if type(pname) is not str:
        return None
    pname = _shared_str(pname)
    parsed = _NAME_CACHE.get(pname)
    if parsed is None:
        parsed = parse_profiling_name(pname)
        if len(_NAME_CACHE) < 100_000:
            _NAME_CACHE[pname] = parsed
    backend, op, peer = parsed
    pg = get("process_group")
    v = get("pg_id")
    pg_id = v if type(v) is int else _as_int(v)
    if isinstance(pg, (tuple, list)) and len(pg) >= 1:
        pg_name = _shared_str(pg[0] if type(pg[0]) is str else str(pg[0]))
        pg_desc = _shared_str(pg[1] if type(pg[1]) is str else str(pg[1])) if len(pg) > 1 else "undefined"
    else:
        pg_name = str(pg_id if pg_id is not None else "?")
        pg_desc = "undefined"
    v = get("collective_seq_id")
    cseq = v if type(v) is int else _as_int(v)
    if cseq is None:
        cseq = _int_field(raw, "seq_id") or 0  # schema 1.x
    v = get("p2p_seq_id")
    pseq = (v if type(v) is int else _as_int(v)) or 0
    is_p2p_raw = get("is_p2p")
    is_p2p = is_p2p_raw if type(is_p2p_raw) is bool else op in ("send", "recv")
    v = get("record_id")
    record_id = v if type(v) is int else _as_int(v)
    v = get("time_discovered_started_ns")
    started = v if type(v) is int else _as_int(v)
    v = get("time_discovered_completed_ns")
    completed = v if type(v) is int else _as_int(v)
    if is_json:
        # JSON dumps write 0 where the pickle writes None.
        started = started or None
        completed = completed or None
    state = get("state")
    if type(state) is not str:
        state = "completed" if completed else ("started" if started else "scheduled")
    retired = get("retired")
    duration = get("duration_ms")
    thread_name = get("thread_name")
    frames = get("frames")
    return FREntry(
        record_id if record_id is not None else -1,
        pg_id if pg_id is not None else -1,
        pg_name,
        pg_desc,
        cseq,
        pseq,
        op_id if type(op_id := get("op_id")) is int else (_as_int(op_id) or 0),
        pname,
        backend,
        op,
        is_p2p,
        peer,
        _shared_sizes(get("input_sizes")),
        _shared_strs(get("input_dtypes")),
        _shared_sizes(get("output_sizes")),
        _shared_strs(get("output_dtypes")),
        _shared_str(state),
        tc if type(tc := get("time_created_ns")) is int else _as_int(tc),
        started,
        completed,
        retired if type(retired) is bool else None,
        tm if type(tm := get("timeout_ms")) is int else _as_int(tm),
        float(duration) if isinstance(duration, (int, float)) else None,
        _frames(frames, frame_cache) if frames else (),
        _shared_str(thread_name) if type(thread_name) is str else None,
    )


def parse_dump_object(obj: Any, *, path: str, rank: int | None, fmt: str) -> FRDump:
    """Turn a decoded dump (dict from pickle or JSON) into an :class:`FRDump`.

    ``rank`` comes from the file name; a ``rank`` key in the dump wins when present.
    Raises :class:`NotADumpError` when ``obj`` is not shaped like a dump.
    """
    if not isinstance(obj, dict) or not (
        "entries" in obj or "pg_config" in obj or "version" in obj or "pg_status" in obj
    ):
        raise NotADumpError(path, "decoded fine but is not a flight-recorder dump (no version/entries/pg_config)")
    is_json = fmt == "json"
    notes: list[str] = []
    raw_rank = _as_int(obj.get("rank"))
    if raw_rank is not None:
        rank = raw_rank
    if rank is None:
        raise NotADumpError(path, "cannot tell which rank wrote this dump (no rank in its name or content)")
    version = obj.get("version")
    version_s = str(version) if version is not None else "?"
    clv = obj.get("comm_lib_version", obj.get("nccl_version"))
    comm_lib_version = str(clv) if isinstance(clv, (str, int, float)) and str(clv) else None

    pg_config = _pg_config(obj.get("pg_config"))
    if not pg_config:
        notes.append("pg_config is empty (gloo dumps carry no group membership)")
    pg_status = _pg_status(obj.get("pg_status"))
    entries, skipped, dropped = _entries(obj.get("entries"), is_json)
    if skipped:
        notes.append(f"{skipped} malformed entries skipped")
    if dropped:
        notes.append(f"{dropped} older entries beyond the {len(entries) + skipped}-entry limit not analysed")

    backend = ""
    if entries:
        backend = Counter(e.backend for e in entries).most_common(1)[0][0]
    elif comm_lib_version or "nccl_version" in obj or "nccl_comm_state" in obj:
        backend = "nccl"
    any_done = any(e.state == "completed" or e.retired is True for e in entries)
    only_active = bool(entries) and not any_done and backend not in ("gloo", "")
    if not entries and pg_status and backend not in ("gloo", ""):
        # An empty NCCL dump with progress counters: an only-active dump of a rank
        # all of whose collectives completed.
        only_active = True
    ring_wrapped = bool(entries) and entries[0].record_id > 0 and not only_active
    return FRDump(
        rank=rank,
        path=path,
        fmt=fmt,
        version=version_s,
        backend=backend,
        comm_lib_version=comm_lib_version,
        pg_config=pg_config,
        pg_status=pg_status,
        entries=entries,
        only_active=only_active,
        ring_wrapped=ring_wrapped,
        notes=notes,
    )


def _pg_config(raw_cfg: Any) -> dict[str, FRPGConfig]:
    pg_config: dict[str, FRPGConfig] = {}
    if isinstance(raw_cfg, dict):
        for key, cfg in raw_cfg.items():
            if not isinstance(cfg, dict):
                continue
            name = str(cfg.get("name", key))
            ranks = _parse_ranks(cfg.get("ranks"))
            if name == "" and not ranks:
                continue  # gloo writes a single empty placeholder
            pg_config[name] = FRPGConfig(name=name, desc=str(cfg.get("desc", "undefined")), ranks=ranks or None)
    return pg_config


def _pg_status(raw_st: Any) -> dict[str, FRPGStatus]:
    pg_status: dict[str, FRPGStatus] = {}
    if isinstance(raw_st, dict):
        for uid, st in raw_st.items():
            if isinstance(st, dict):
                pg_status[str(uid)] = FRPGStatus(
                    uid=str(uid),
                    last_enqueued=_as_int(st.get("last_enqueued_collective")),
                    last_started=_as_int(st.get("last_started_collective")),
                    last_completed=_as_int(st.get("last_completed_collective")),
                )
    return pg_status


def _entries(raw_entries: Any, is_json: bool) -> tuple[list[FREntry], int, int]:
    """The dump's entries in record order, how many were malformed (skipped), and how many older
    ones were left out by the ``Limits.fr_entries`` cap."""
    entries: list[FREntry] = []
    skipped = dropped = 0
    frame_cache: dict[int, FRFrame] = {}
    if isinstance(raw_entries, list):
        cap = settings.current().limits.fr_entries
        if len(raw_entries) > cap:  # the most recent ones: the ring buffer's own order
            dropped = len(raw_entries) - cap
            raw_entries = raw_entries[-cap:]
        for raw in raw_entries:
            e = _entry(raw, is_json, frame_cache) if isinstance(raw, dict) else None
            if e is None:
                skipped += 1
            else:
                entries.append(e)
    entries.sort(key=lambda e: e.record_id)
    return entries, skipped, dropped


def _rank_from_name(path: str) -> int | None:
    base = os.path.basename(path)
    m = _RANK_FILE.match(base)
    return int(m.group("rank")) if m else None


def load_dump_file(
    path: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    rank: int | None = None,
    fast: bool = True,
    loader: FastLoader | None = None,
) -> FRDump:
    """Load one dump file (pickle or JSON).  Raises :class:`DumpLoadError` subclasses.

    ``fast`` uses :func:`fast_restricted_loads` (C unpickler, every global refused,
    address space capped); ``False`` forces the pure-Python opcode interpreter.
    """
    data = read_limited(path, max_bytes)
    if rank is None:
        rank = _rank_from_name(path)
    head = data[:64].lstrip()
    if head[:1] in (b"{", b"["):
        try:
            obj = json.loads(data)
        except RecursionError:
            raise NotADumpError(path, "JSON nested deeper than a dump ever is") from None
        except ValueError as exc:
            if getattr(exc, "pos", 0) < 8:  # "[rank0]: ..." or "{'loss': ..." : a text log, not JSON
                raise NotADumpError(
                    path, "not a flight-recorder dump (a text file, neither a pickle nor JSON)"
                ) from None
            raise NotADumpError(path, f"JSON that does not parse: {exc}") from None
        return parse_dump_object(obj, path=path, rank=rank, fmt="json")
    if not fast:
        obj = restricted_loads(data, source=path)
    elif loader is not None:
        obj = loader.loads(data, path)
    else:
        obj = fast_restricted_loads(data, path)
    return parse_dump_object(obj, path=path, rank=rank, fmt="pickle")


# --------------------------------------------------------------------------- discovery


def dump_prefixes_from_text(text: str) -> list[str]:
    """Dump-file prefixes named by ``TORCH_FR_DUMP_TEMP_FILE=`` / ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE=``.

    Why: jobs often set a custom prefix; the launcher log or env dump is where it
    is written down, and the rank files are ``<prefix><rank>``.
    """
    seen: list[str] = []
    for m in _ENV_PREFIX.finditer(text):
        v = m.group(1)
        if v not in seen:
            seen.append(v)
    return seen


def _scan_text_prefixes(directory: str) -> list[str]:
    prefixes: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return prefixes
    for name in names:
        if not name.endswith(_TEXT_SUFFIXES):
            continue
        p = os.path.join(directory, name)
        try:
            if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > _MAX_TEXT_SCAN:
                continue  # links are not followed: nothing outside the directory is read
            with open(p, "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        for pre in dump_prefixes_from_text(text):
            if pre not in prefixes:
                prefixes.append(pre)
    return prefixes


def discover_dump_files(
    directory: str, *, prefixes: Sequence[str] = (), warnings: list[str] | None = None
) -> list[tuple[str, int]]:
    """Pick the per-rank dump files in ``directory`` as ``(path, rank)`` pairs.

    Files are grouped by their common name prefix (``_dump_``, ``fr_trace_``...,
    or a prefix named in ``prefixes``/found in text files via the FR env vars);
    the best-populated group wins, so stray numbered files (``log.1``) are ignored.
    When both ``X`` and ``X.json`` exist for a rank the pickle is used.
    """
    warn = warnings if warnings is not None else []
    if os.path.isdir(os.path.join(directory, "fr")):
        directory = os.path.join(directory, "fr")
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        warn.append(f"cannot list {directory}: {exc.strerror or exc}")
        return []
    all_prefixes = [os.path.basename(p) for p in list(prefixes) + _scan_text_prefixes(directory)]
    groups: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    root = os.path.realpath(directory)
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(_TEXT_SUFFIXES) or not os.path.isfile(path):
            continue
        if os.path.islink(path) and os.path.commonpath([root, os.path.realpath(path)]) != root:
            # the same path policy as a bundle's: a link out of the directory is not followed
            warn.append(f"{path}: symbolic link leads outside {directory}; not followed")
            continue
        m = _RANK_FILE.match(name)
        if not m:
            continue
        groups[m.group("prefix")][int(m.group("rank"))].append(name)
    if not groups:
        return []

    def quality(prefix: str) -> tuple[int, int, int]:
        named = int(any(prefix == p or prefix.endswith(p) for p in all_prefixes if p))
        known = int(any(prefix.endswith(k) for k in KNOWN_PREFIXES))
        return (named, len(groups[prefix]), known)

    best = max(groups, key=quality)
    others = [p for p in groups if p != best and len(groups[p]) > 1]
    if others:
        warn.append(
            f"{directory}: several numbered file families; using prefix {best!r} "
            f"({len(groups[best])} ranks), ignoring {', '.join(repr(o) for o in others)}"
        )
    out: list[tuple[str, int]] = []
    for rank, files in sorted(groups[best].items()):
        files.sort(key=lambda f: (f.endswith(".json"), f))
        out.append((os.path.join(directory, files[0]), rank))
    return out


_BATCH_LOADER: FastLoader | None = None


def _load_one(args: tuple[str, int | None, int]) -> tuple[FRDump | None, FRLoadIssue | None]:
    path, rank, max_bytes = args
    try:
        return load_dump_file(path, max_bytes=max_bytes, rank=rank, loader=_BATCH_LOADER), None
    except UnsafePickleError as exc:
        return None, FRLoadIssue(path, "unsafe", str(exc))
    except NotADumpError as exc:
        return None, FRLoadIssue(path, "not_a_dump", str(exc))
    except DumpLoadError as exc:
        return None, FRLoadIssue(path, type(exc).__name__, str(exc))


def _expand(paths_or_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    if isinstance(paths_or_dir, (str, os.PathLike)):
        return [os.fspath(paths_or_dir)]
    return [os.fspath(p) for p in paths_or_dir]


def load_dumps(
    paths_or_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    prefixes: Sequence[str] = (),
    workers: int | None = None,
) -> FRLoadResult:
    """Load every dump under a directory (or the given files).

    A directory holding ``fr/`` (a firstfault bundle) is searched there.  Bad
    files become ``issues`` plus a warning; the rest load.  ``workers`` > 1 (or
    ``None`` = automatic for big sets) spreads decoding over processes, since a
    16k-rank job has 16k files and decoding is CPU bound.
    """
    warnings: list[str] = []
    jobs: list[tuple[str, int | None, int]] = []
    ranks_of: dict[str, int] = {}
    for p in _expand(paths_or_dir):
        if os.path.isdir(p):
            found = discover_dump_files(p, prefixes=prefixes, warnings=warnings)
            if not found:
                warnings.append(f"{p}: no flight-recorder dump files found")
            jobs.extend((path, rank, max_bytes) for path, rank in found)
            ranks_of.update(found)
        elif os.path.exists(p):
            jobs.append((p, None, max_bytes))
        else:
            warnings.append(f"{p}: no such file or directory")
    results: list[tuple[FRDump | None, FRLoadIssue | None]]
    # Worker processes pay for shipping every parsed dump back (a 16k-rank job's
    # world-group member list alone is 16k ints per dump), which costs more than
    # the C-speed decoding they would parallelise; so they are opt-in.
    n_workers = workers if workers is not None else 1
    if n_workers > 1 and len(jobs) > 1:
        import multiprocessing as mp

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
        with ctx.Pool(n_workers) as pool:
            results = pool.map(_load_one, jobs, chunksize=max(1, len(jobs) // (n_workers * 8)))
    else:
        global _BATCH_LOADER
        with gc_paused(), FastLoader() as fl:
            _BATCH_LOADER = fl
            try:
                results = [_load_one(j) for j in jobs]
            finally:
                _BATCH_LOADER = None

    dumps: list[FRDump] = []
    issues: list[FRLoadIssue] = []
    by_rank: dict[int, FRDump] = {}
    unusable: set[int] = set()
    for dump, issue in results:
        if issue is not None:
            issues.append(issue)
            r_bad = ranks_of.get(issue.path)
            if r_bad is not None:
                unusable.add(r_bad)
            what = {"unsafe": "REFUSED", "not_a_dump": "skipped (not a dump)"}.get(issue.kind, "skipped")
            warnings.append(f"{what}: {issue.message}")
            continue
        assert dump is not None
        if dump.rank in by_rank:
            warnings.append(f"rank {dump.rank}: two dumps ({by_rank[dump.rank].path}, {dump.path}); using the first")
            continue
        by_rank[dump.rank] = dump
        dumps.append(dump)
    dumps.sort(key=lambda d: d.rank)
    unusable -= set(by_rank)
    if unusable:
        warnings.append(f"no usable dump for rank(s) {', '.join(str(r) for r in sorted(unusable))}")
    _fact_warnings(dumps, warnings)
    return FRLoadResult(
        dumps=dumps,
        warnings=warnings,
        issues=issues,
        files_considered=len(jobs),
        unusable_ranks=sorted(unusable),
    )


def _fact_warnings(dumps: list[FRDump], warnings: list[str]) -> None:
    """Warn about facts that limit what the dumps can show (not errors)."""
    wrapped = [d for d in dumps if d.ring_wrapped]
    if wrapped:
        sample = ", ".join(f"rank {d.rank} (first record_id {d.first_record_id})" for d in wrapped[:5])
        more = f" and {len(wrapped) - 5} more" if len(wrapped) > 5 else ""
        warnings.append(
            f"ring buffer wrapped on {len(wrapped)} rank(s): {sample}{more}; older collectives were "
            "overwritten (raise TORCH_FR_BUFFER_SIZE to keep more)"
        )
    if dumps:
        ranks = {d.rank for d in dumps}
        hi = max(ranks)
        n_gaps = hi + 1 - len({r for r in ranks if 0 <= r <= hi})  # counted, not enumerated: a rank may claim 1e12
        if n_gaps > 0:
            first = list(itertools.islice((r for r in range(hi + 1) if r not in ranks), 20))
            shown = ", ".join(str(r) for r in first) + (" ..." if n_gaps > 20 else "")
            warnings.append(f"no dump for {n_gaps} rank(s) below {hi}: {shown}")
        versions = Counter(d.version for d in dumps)
        if len(versions) > 1:
            warnings.append(f"mixed FR schema versions: {dict(versions)}")
        for d in dumps:
            if not d.pg_config and d.backend == "gloo":
                warnings.append(
                    "gloo dumps carry no pg_config: group membership is inferred from entries "
                    "(and from group_hints when given)"
                )
                break
