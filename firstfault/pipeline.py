"""The pipeline, end to end: discover -> parse (and match) -> align -> correlate -> attribute.

Orchestration only: each stage is a function of the one before it, named here in order, so a
reader sees the whole flow on one screen. ``analyze_bundle`` is a pure function of the bundle's
files and the registry, so the same call serves the CLI, a service, or a task in a batch.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from firstfault.align import Offset, align, bound_inherited, console_attempt_starts, correct_clocks, split_attempts
from firstfault.discover import Bundle, discover
from firstfault.flightrec.load import gc_paused
from firstfault.flightrec.stage import FlightRecorderBeside
from firstfault.match.registry import Registry, load_registry
from firstfault.parse.result import ParseResult
from firstfault.parse.run import parse_bundle
from firstfault.reason.attribute import attribute
from firstfault.reason.configuration import TrainingSeen
from firstfault.reason.correlate import correlate
from firstfault.reason.flightrec import fr_events
from firstfault.reason.inputs import ReasoningInput
from firstfault.reason.network import peer_hosts
from firstfault.reason.placing import place_on_lost, place_quoted, place_rankless
from firstfault.reason.went_on import TrainingFacts, demote_went_on
from firstfault.reason.window import context_of, job_window
from firstfault.vocab import BundleError, FileKind, Verdict


def analyze(path: Path | str, signature_dirs: Sequence[Path] = ()) -> Verdict:
    """Analyse a directory, archive or single log file. Raises BundleError if unusable."""
    registry = load_registry(signature_dirs)
    bundle = discover(path)
    try:
        return analyze_bundle(bundle, registry)
    finally:
        bundle.close()


def analyze_bundle(bundle: Bundle, registry: Registry) -> Verdict:
    fr_beside = FlightRecorderBeside(bundle)  # flight-recorder dumps load beside the log parse
    try:
        with gc_paused():  # hundreds of thousands of acyclic events: no cycles for the GC to find
            return _analyze_bundle(bundle, registry, fr_beside)
    finally:
        fr_beside.close()


def _analyze_bundle(bundle: Bundle, registry: Registry, fr_beside: FlightRecorderBeside) -> Verdict:
    t0 = time.perf_counter()
    pr = parse_bundle(bundle, registry, while_busy=fr_beside.busy)  # parse + match; topology learnt, events placed
    return _after_parse(bundle, registry, fr_beside, pr, t0)


def analyze_parsed(bundle: Bundle, pr: ParseResult, registry: Registry) -> Verdict:
    """The stages after parse + match (align -> correlate -> attribute) over a parse already made.

    The seam for a reader that parses incrementally (``firstfault.live``): it keeps its own
    ``ParseResult`` as files grow and runs only these cheap later stages again. ``pr`` is consumed
    (later stages fill in its events), so pass a copy to keep the original.
    """
    fr_beside = FlightRecorderBeside(bundle)
    try:
        with gc_paused():
            return _after_parse(bundle, registry, fr_beside, pr, time.perf_counter())
    finally:
        fr_beside.close()


def _after_parse(
    bundle: Bundle, registry: Registry, fr_beside: FlightRecorderBeside, pr: ParseResult, t0: float
) -> Verdict:
    _refuse_unusable(pr, bundle)
    t_parse = time.perf_counter()
    warnings = list(pr.ctx.warnings)
    tl = align(pr.events)  # copies folded, one timeline
    topo = pr.ctx.topology
    rank0_host = topo.rank_host.get(0) or next((e.host for e in tl.events if e.rank == 0 and e.host), None)
    offsets, warns = correct_clocks(tl.events, rank0_host)
    warnings += warns
    window = job_window(pr.ctx.spans.values(), pr.ctx.sched)
    bound_inherited(tl.events, window.end)
    context, warns = context_of(tl.events, window, pr.ctx.job_files, peer_hosts(tl.events, topo))
    warnings += warns
    now, later, first = split_attempts(tl.events, pr.ctx.attempt_start or console_attempt_starts(tl.events))
    if later:
        warnings.append(f"torchrun restarted the job; attempt {first} failed first and is the one analysed")
    placed = place_rankless(now)
    if placed is not None:
        warnings.append(
            f"the console's rank-less traceback is taken to be rank {placed}'s: the only rank that failed on its own"
        )
    lost = place_on_lost(now, topo.world_size)
    if lost is not None:
        warnings.append(
            f"the console's rank-less error lines are taken to be rank {lost}'s: the only rank its peers lost "
            "that printed no error"
        )
    quoted = place_quoted(now)
    if quoted is not None:
        warnings.append(f"a rank-less error is taken to be rank {quoted}'s: that rank's watchdog quotes it")
    # one process's output each: torchrun's per-rank logs (named by local rank), files of one rank
    own = {f.rel for f in bundle.files if f.rank is not None or f.kind == FileKind.ELASTIC_RANK_LOG}
    ended = pr.ctx.training_end is not None or any(e.fields.get("completed") for e in now)
    ranks = pr.known_ranks()
    progress = pr.rank_progress(first)
    facts = TrainingFacts(
        training_after=pr.ctx.training_after,
        tagged=pr.ctx.training_tagged,
        own=own,
        ended=ended,
        world=len(ranks),
        training_end=pr.ctx.training_end,
        training_ends=pr.ctx.training_ends,
        last_step_ts={p.rank: p.last_step_ts for p in progress if p.last_step_ts is not None},
    )
    warnings += demote_went_on(now, facts)
    corr = correlate(now, ranks)
    warnings.extend(r.describe() for r in corr.recoveries[:5])
    if len(corr.recoveries) > 5:
        warnings.append(f"... and {len(corr.recoveries) - 5} more transient(s) that recovered")
    fr = fr_beside.result(ranks, warnings)
    missing = pr.missing_rank_logs(ranks)
    if missing:
        warnings.append(f"no per-rank logs for rank(s) {missing}")
    dumps = {f.rank: f.rel for f in bundle.of_kind(FileKind.FR_DUMP) if f.rank is not None}
    inp = ReasoningInput(
        topology=topo,
        progress=progress,
        job_progress=pr.job_progress(first),
        fr=fr,
        action_of={s.id: s.action for s in registry.signatures if s.action is not None},
        fr_events=fr_events(fr, dumps, len(pr.events)),
        window=window,
        launch_start=window.start if pr.launched() else None,
        series=pr.own_series(first),
        training=TrainingSeen(pr.ctx.training_seen, pr.ctx.training_ts),
        events=tl.events,
        ib=pr.ib,
        inputs=_inputs(bundle, pr, offsets, window.describe()),
        context=context,
        kernel_logs=bool(bundle.of_kind(FileKind.KERNEL_LOG)),
        training_end=pr.ctx.training_end,
        cut_traceback=min(pr.ctx.cut_traceback.values(), default=None),
        file_ends=pr.ctx.file_ends,
        file_spans=_console_spans(bundle, pr),
        last_words=pr.ctx.last_words,
        losses=pr.ctx.losses,
    )
    verdict = attribute(corr, inp, warnings, later=later)
    stats = {
        "bytes_read": pr.bytes_read,
        "files_read": pr.files_read,
        "lines_flagged": pr.lines_flagged,
        "events": len(pr.events),
        "events_after_folding": len(tl.events),
        "parse_s": round(t_parse - t0, 4),
        "total_s": round(time.perf_counter() - t0, 4),
    }
    return dataclasses.replace(verdict, stats=stats)


def _console_spans(bundle: Bundle, pr: ParseResult) -> dict[str, tuple[float, float] | None]:
    """Each console's and log's first and last time (None: no timed line); not a rank's own
    stdout/stderr split (its errors are in its other file, so a quiet stdout says nothing of its end),
    and not the scheduler's own records (a node's slurmd log, sacct, scontrol): no process of the
    job writes them, so where they stop says nothing of the job's processes."""
    kinds = (FileKind.LAUNCHER_CONSOLE, FileKind.APP_LOG, FileKind.SLURM_OUTPUT)
    return {f.rel: pr.ctx.spans.get(f.rel) for f in bundle.of_kind(*kinds) if f.rel in pr.ctx.job_files}


def _refuse_unusable(pr: ParseResult, bundle: Bundle) -> None:
    """Exit 2 with one line when nothing in the bundle is a job's log."""
    kinds = ", ".join(sorted({f.kind for f in bundle.files}))
    where = bundle.files[0].path if len(bundle.files) == 1 else bundle.root
    if pr.files_read == 0 and not bundle.of_kind(FileKind.FR_DUMP):
        raise BundleError(f"{where}: no log files firstfault can read (found only: {kinds})")
    if not pr.looks_like_a_job():
        raise BundleError(
            f"{where}: does not look like the output of a training job (no launcher, rank, scheduler, kernel, "
            f"NCCL or training line; files: {kinds})"
        )


def _inputs(bundle: Bundle, pr: ParseResult, offsets: Sequence[Offset], window: dict[str, object]) -> dict[str, object]:
    kind_counts = Counter(f.kind for f in bundle.files)
    return {
        "path": str(bundle.root),
        "files": len(bundle.files),
        "kinds": dict(sorted(kind_counts.items())),
        "clock_offsets_s": {o.host: round(o.seconds, 3) for o in offsets},
        "topology": {"ranks": len(pr.ctx.topology.rank_host), "gpus": len(pr.ctx.topology.rank_gpu)},
        "hosts": pr.hosts(),
        "job_window": window,
    }
