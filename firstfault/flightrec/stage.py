"""The flight-recorder stage: load a bundle's dumps and analyse them, beside the log parse.

Dumps are independent of the logs until reasoning, so at scale (thousands of dumps) they load in a
forked worker while one parse worker takes the other core, and only the (small) typed analysis
comes back. Pure over its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from firstfault.discover import Bundle
from firstfault.flightrec.analyze import analyze_fr
from firstfault.flightrec.load import load_dumps
from firstfault.vocab import FileKind, FRAnalysis

# Below this many dumps the FR stage runs inline: a fork costs more than it saves.
FR_BESIDE_MIN_DUMPS = 256


def flight_recorder_stage(paths: Sequence[str], world: int | None) -> tuple[FRAnalysis | None, list[str]]:
    """Load and analyse FR dumps: (the analysis, warnings)."""
    if not paths:
        return None, []
    loaded = load_dumps(list(paths))
    warnings = [f"flight recorder: {w}" for w in loaded.warnings]
    if not loaded.dumps:
        return None, warnings
    result = analyze_fr(loaded.dumps, expected_world_size=world)
    warnings.extend(f"flight recorder: {w}" for w in result.warnings)
    return result, warnings


def _rank_dirs(bundle: Bundle) -> int | None:
    """How many per-rank torchrun directories the bundle has: the world size before parsing."""
    dirs = {f.rel.rsplit("/", 1)[0] for f in bundle.files if f.kind == FileKind.ELASTIC_RANK_LOG}
    return len(dirs) or None


def _quiet_worker() -> None:
    """The FR worker ends silently when the pool ends it (SIGTERM's default, not the CLI's handler
    that raises KeyboardInterrupt and would print its traceback); Ctrl-C is the parent's."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class FlightRecorderBeside:
    """The FR stage in a forked process while one parse worker runs beside it (every core busy).

    The log parse forks its other workers only once this one is done (``busy``): the decoded
    dumps and those workers' heaps are never held at the same time.
    """

    def __init__(self, bundle: Bundle) -> None:
        import multiprocessing as mp

        self.bundle = bundle
        self.paths = [str(f.path) for f in bundle.of_kind(FileKind.FR_DUMP)]
        self.pool: Any = None
        self.job: Any = None
        forkable = "fork" in mp.get_all_start_methods() and not mp.current_process().daemon
        if len(self.paths) >= FR_BESIDE_MIN_DUMPS and forkable:
            # one task, then the worker exits: its heap (every dump it decoded) is given back as soon
            # as the small analysis is sent, not held while the logs finish parsing
            self.pool = mp.get_context("fork").Pool(1, initializer=_quiet_worker, maxtasksperchild=1)
            self.job = self.pool.apply_async(flight_recorder_stage, (self.paths, _rank_dirs(bundle)))
            self.pool.close()

    def busy(self) -> bool:
        """Is the worker still loading and analysing (a core the log parse should not take)?"""
        return self.job is not None and not self.job.ready()

    def result(self, ranks: Sequence[int], warnings: list[str]) -> FRAnalysis | None:
        """The analysis (inline, with the ranks the logs know, when it did not run beside)."""
        if self.pool is None:
            fr, warns = flight_recorder_stage(self.paths, max(ranks) + 1 if ranks else None)
        else:
            try:
                fr, warns = self.job.get()
            finally:
                self.close()
        warnings.extend(warns)
        return fr

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
