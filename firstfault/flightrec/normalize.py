"""One decoded dump object (a pickle's or a JSON file's) made into an :class:`FRDump`.

Why a normalising layer: the dump format has moved a lot between FR schema versions 2.3 and
2.13 (``nccl_version`` became ``comm_lib_version``, ``pg_status``, ``is_p2p``, ``thread_*`` and
``frames`` appeared, JSON dumps store numbers as strings and ``None`` as 0, gloo dumps carry an
empty ``pg_config``). Everything after this module sees one shape. Strings and size lists repeat
across 16,384 ranks' entries, so they are shared (``_shared``) rather than copied.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

from firstfault.flightrec.pickle_errors import DumpLoadError
from firstfault.flightrec.records import FRDump, FREntry, FRFrame, FRPGConfig, FRPGStatus
from firstfault.vocab import settings

__all__ = ["NotADumpError", "parse_dump_object", "parse_profiling_name"]

_P2P_NAME = re.compile(r"^(send|recv)\s+(\d+)\s*(->|<-)\s*(\d+)")


class NotADumpError(DumpLoadError):
    """The file decoded, but it is not a flight-recorder dump."""


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
