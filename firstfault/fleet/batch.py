"""Thousands of bundles through the pipeline: serially, in a local process pool, or as Ray tasks.

Every executor runs the same function on each bundle, ``analyze_one`` (discover, then
``firstfault.pipeline.analyze_bundle`` with a registry loaded once per worker process), and
returns the same records in the order of the input, so the three give the same verdicts; only
the run statistics (timings) differ. Ray is optional (the ``ray`` extra) and imported only when
asked for; without it a ``concurrent.futures`` process pool uses the local cores.

Why chunks: one bundle of a small job is analysed in tens of milliseconds, about what a Ray task
or a pool round trip costs; bundles travel in chunks (about four per worker, for balance) so the
overhead is paid per chunk.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firstfault.fleet.incident import bundle_key
from firstfault.vocab import FirstfaultError, InputError

ARCHIVES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip", ".log", ".txt", ".out")
#: the verdict fields that describe the run, not the answer: left out when executors are compared
RUN_FIELDS = ("stats",)

_REGISTRY: dict[tuple[str, ...], Any] = {}


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One bundle's outcome: its verdict (``Verdict.to_dict()``) or a one-line error."""

    path: str
    key: str | None
    verdict: dict[str, Any] | None
    error: str | None
    seconds: float
    cpu_s: float = 0.0  # CPU time the worker spent on it: with ``seconds``, the share of a core it got

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "key": self.key,
            "error": self.error,
            "seconds": self.seconds,
            "cpu_s": self.cpu_s,
            "verdict": self.verdict,
        }


def find_bundles(folder: Path) -> list[Path]:
    """The bundles in ``folder``: each sub-folder and each archive or log file, sorted by name."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a directory of bundles")
    found = [
        p
        for p in sorted(folder.iterdir())
        if not p.name.startswith(".")
        and not p.is_symlink()
        and (p.is_dir() or (p.is_file() and p.name.lower().endswith(ARCHIVES)))
    ]
    if not found:
        raise InputError(f"{folder}: no bundles (sub-folders, archives or log files) in it")
    return found


def analyze_one(path: str, signature_dirs: tuple[str, ...] = ()) -> BatchResult:
    """Analyse one bundle; never raises (an unusable bundle is a result with an error)."""
    from firstfault.discover import discover
    from firstfault.match.registry import load_registry
    from firstfault.pipeline import analyze_bundle

    t0, c0 = time.perf_counter(), time.process_time()
    try:
        registry = _REGISTRY.get(signature_dirs)
        if registry is None:
            registry = _REGISTRY[signature_dirs] = load_registry([Path(d) for d in signature_dirs])
        bundle = discover(path)
        try:
            verdict = analyze_bundle(bundle, registry).to_dict()
        finally:
            bundle.close()
        key = bundle_key(Path(path))
        return BatchResult(
            path, key, verdict, None, round(time.perf_counter() - t0, 4), round(time.process_time() - c0, 4)
        )
    except FirstfaultError as exc:
        return BatchResult(path, None, None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 0.0)
    except (OSError, ValueError, MemoryError, RecursionError) as exc:
        return BatchResult(path, None, None, f"{type(exc).__name__}: {exc}", 0.0)
    except Exception as exc:  # a bug on one bundle must not end a batch of thousands
        return BatchResult(path, None, None, f"internal error ({type(exc).__name__}: {exc}); please report it", 0.0)


def _analyze_chunk(paths: Sequence[str], signature_dirs: tuple[str, ...]) -> list[BatchResult]:
    return [analyze_one(p, signature_dirs) for p in paths]


def chunks(paths: Sequence[str], workers: int) -> list[list[str]]:
    """About four chunks per worker, contiguous, in input order."""
    n = max(1, min(len(paths), workers * 4))
    size = -(-len(paths) // n)
    return [list(paths[i : i + size]) for i in range(0, len(paths), size)]


def run_serial(paths: Sequence[Path], signature_dirs: Sequence[Path] = ()) -> list[BatchResult]:
    dirs = tuple(str(d) for d in signature_dirs)
    return [analyze_one(str(p), dirs) for p in paths]


def run_pool(paths: Sequence[Path], workers: int, signature_dirs: Sequence[Path] = ()) -> list[BatchResult]:
    """A local process pool of ``workers`` processes (one worker: in this process)."""
    if workers <= 1:
        return run_serial(paths, signature_dirs)
    dirs = tuple(str(d) for d in signature_dirs)
    parts = chunks([str(p) for p in paths], workers)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = pool.map(_analyze_chunk, parts, [dirs] * len(parts))
        return [r for part in done for r in part]


def run_ray(
    paths: Sequence[Path],
    workers: int,
    address: str | None = None,
    signature_dirs: Sequence[Path] = (),
    started: Callable[[float], None] | None = None,
) -> list[BatchResult]:
    """Ray tasks over chunks of bundles. ``address`` None starts a local Ray cluster of ``workers``
    CPUs (shut down after); else the tasks go to that cluster, ``workers`` chunks' worth at a time
    being scheduled by Ray as its CPUs free up. ``started`` is told how long Ray took to start."""
    try:
        import ray
    except ImportError as exc:
        raise InputError("--ray needs Ray: pip install 'firstfault[ray]'") from exc
    t0 = time.perf_counter()
    own = not ray.is_initialized()
    if own:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address is None:
            kwargs["num_cpus"] = max(1, workers)
        ray.init(address=address, **kwargs)
    try:
        if started is not None:
            started(time.perf_counter() - t0)
        task = ray.remote(num_cpus=1)(_analyze_chunk)
        dirs = tuple(str(d) for d in signature_dirs)
        refs = [task.remote(part, dirs) for part in chunks([str(p) for p in paths], workers)]
        return [r for part in ray.get(refs) for r in part]
    finally:
        if own:
            ray.shutdown()


def comparable(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """A verdict without its run statistics: what two executors must agree on."""
    if verdict is None:
        return None
    return {k: v for k, v in verdict.items() if k not in RUN_FIELDS}
