"""Find and load PyTorch flight-recorder dumps into typed, schema-neutral records.

Where the dumps are (rank-named files, a prefix named in a log's environment echo), reading
them with the restricted unpickler, in parallel for thousands of ranks; each decoded object is
normalised by ``normalize`` into the records of ``records``, which is all the analysis sees.

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
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence

from firstfault.flightrec.fast_loader import FastLoader, fast_restricted_loads
from firstfault.flightrec.normalize import NotADumpError, parse_dump_object
from firstfault.flightrec.pickle_budget import DEFAULT_MAX_BYTES, read_limited
from firstfault.flightrec.pickle_errors import DumpLoadError, UnsafePickleError
from firstfault.flightrec.records import FRDump, FRLoadIssue, FRLoadResult
from firstfault.flightrec.unpickler import restricted_loads

__all__ = [
    "discover_dump_files",
    "dump_prefixes_from_text",
    "gc_paused",
    "load_dump_file",
    "load_dumps",
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
_TEXT_SUFFIXES = (".log", ".txt", ".out", ".err", ".env", ".sh")
_MAX_TEXT_SCAN = 8 * 1024 * 1024


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
