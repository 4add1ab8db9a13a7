"""The analysis workers: threads in the server that claim jobs and run the pipeline in child processes.

Each worker thread claims the oldest queued job (with a lease it renews while the analysis runs),
hands the bundle to a process pool that calls ``firstfault.pipeline.analyze``, and stores
``Verdict.to_dict()``. The pool is a separate process so that an input that kills its process (a
segfault in a decompressor, the kernel's OOM killer) fails one job, not the server; the pool is
then rebuilt. Children are started with ``spawn`` (the server has threads; forking them is unsafe)
and ask the kernel to kill them when the server dies, so a ``kill -9`` of the server leaves no
orphan analysing a job the next server will analyse again.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Any

from firstfault.service.metrics import Metrics
from firstfault.service.queue import Job, JobState, JobStore

PR_SET_PDEATHSIG = 1
log = logging.getLogger(__name__)


def _die_with_parent(parent: int) -> None:
    """Pool initializer: SIGKILL this child when the server's process goes (Linux prctl)."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the pool's broken-pipe check still ends it
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the server died before prctl took effect
        os._exit(1)


def analyze_job(target: str, max_unpacked: int) -> tuple[str, dict[str, Any] | None, str | None]:
    """Run in a child: (state, verdict dict, error). Unusable input is 'refused' with its one line."""
    from firstfault.pipeline import analyze
    from firstfault.vocab import FirstfaultError, settings

    now = settings.current()
    limits = replace(now.limits, archive_bytes=min(now.limits.archive_bytes, max_unpacked))
    try:
        with settings.use(replace(now, limits=limits)):
            verdict = analyze(target)
    except FirstfaultError as exc:
        return JobState.REFUSED.value, None, str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
    except (MemoryError, RecursionError) as exc:
        return (
            JobState.REFUSED.value,
            None,
            f"the input needs more resources than firstfault will use ({type(exc).__name__})",
        )
    except Exception as exc:  # a bug in firstfault: said as such, the server goes on
        return JobState.FAILED.value, None, f"internal error ({type(exc).__name__}: {exc})"[:500]
    return JobState.DONE.value, verdict.to_dict(), None


@dataclass(frozen=True)
class WorkerConfig:
    workers: int = 2
    lease_s: float = 60.0
    idle_poll_s: float = 0.2
    max_unpacked: int = 2 * 1024**3


class Workers:
    """``workers`` claiming threads over one process pool of the same size."""

    def __init__(self, store: JobStore, instance: str, config: WorkerConfig, metrics: Metrics) -> None:
        self.store, self.instance, self.config, self.metrics = store, instance, config, metrics
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._pool_lock = threading.Lock()
        self._pool = self._new_pool()
        self._threads = [
            threading.Thread(target=self._loop, name=f"firstfault-worker-{i}", daemon=True)
            for i in range(config.workers)
        ]

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.config.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_die_with_parent,
            initargs=(os.getpid(),),
        )

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def wake(self) -> None:
        """A job was queued: stop idling."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                job = self.store.claim(self.instance, self.config.lease_s)
                if job is None:
                    self._wake.wait(self.config.idle_poll_s)
                    self._wake.clear()
                    continue
                self._run(job)
            except Exception as exc:  # the store unreachable for a moment: the lease keeps the job, retry
                log.warning("worker: %s: %s; retrying in 1 s", type(exc).__name__, exc)
                self._stop.wait(1.0)

    def _run(self, job: Job) -> None:
        t0 = time.perf_counter()
        try:
            with self._pool_lock:
                fut: Future[tuple[str, dict[str, Any] | None, str | None]] = self._pool.submit(
                    analyze_job, job.target, self.config.max_unpacked
                )
            while True:
                try:
                    state, result, error = fut.result(timeout=self.config.lease_s / 3)
                    break
                except TimeoutError:
                    self.store.renew(job.id, self.instance, self.config.lease_s)
        except BrokenProcessPool:
            state, result, error = JobState.FAILED.value, None, "the analysis process died (crash or out of memory)"
            with self._pool_lock:
                if self._pool._broken:  # rebuilt once, by whichever thread saw it
                    self._pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = self._new_pool()
        except RuntimeError:  # the pool was shut down: the server is stopping, the lease returns the job
            return
        if self.store.finish(job.id, self.instance, JobState(state), result, error):
            self.metrics.finished(state, time.perf_counter() - t0)
