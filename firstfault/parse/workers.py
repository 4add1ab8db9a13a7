"""The parse on several cores: forked workers, each parsing a share of the files.

Why apart from the line stream (``parse.run``): how a big bundle is split, shipped back and
merged is about memory and cores (see ``parse_forked``), not about what a line means. The
per-file parse is handed in (``run_files``), so the workers run exactly the serial path's code.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from operator import attrgetter
from typing import Any

from firstfault.discover import Bundle, SourceFile
from firstfault.heap import trim
from firstfault.parse.base import ParseContext
from firstfault.parse.classify import LineClassifier
from firstfault.parse.result import ParseResult
from firstfault.vocab import Event

# What the serial path runs over a list of files: (events, files read, bytes read, lines flagged).
RunFiles = Callable[[list[SourceFile], LineClassifier, ParseContext], tuple[list[Event], int, int, int]]
TASK_FILES = 400
# at least this many tasks a worker: a few big files still split finely enough that the one worker
# beside the FR stage hands the rest over soon after the dumps are loaded
TASKS_PER_JOB = 4
_FORKED: tuple[Bundle, LineClassifier, ParseContext, RunFiles] | None = None


def _worker(indexes: list[int]) -> tuple[list[Event], ParseContext, int, int, int]:
    assert _FORKED is not None
    bundle, classifier, template, run_files = _FORKED
    ctx = ParseContext(
        year_hint=template.year_hint,
        topology=template.topology,
        has_rank_files=template.has_rank_files,
        rank_files=template.rank_files,
        skip_tee_copies=template.skip_tee_copies,
    )
    events, read, nbytes, flagged = run_files([bundle.files[i] for i in indexes], classifier, ctx)
    _share_equal_fields(events)
    return events, ctx, read, nbytes, flagged


def _share_equal_fields(events: list[Event]) -> None:
    """Events whose fields are equal (in the same order) share one dict; pickling keeps that.

    At 16,384 ranks a quarter of the events have no fields and many others the same few (an exit
    code and its signal): one dict per batch instead of one per event. Later writes go through
    ``Event.set_field``, which copies first.
    """
    seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for e in events:
        e.fields = seen.setdefault(tuple(e.fields.items()), e.fields)


def _quiet_worker() -> None:
    """A forked worker ends silently when its pool ends it: SIGTERM's default, not the CLI's
    handler (which raises KeyboardInterrupt, and would print a worker's traceback), and Ctrl-C is
    the parent's to handle."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _merge(into: ParseContext, part: ParseContext) -> None:
    for att, prog in part.progress_by_attempt.items():
        into.progress_by_attempt.setdefault(att, {}).update(prog)
    for att, up in part.unranked_progress.items():
        cur = into.unranked_progress.get(att)
        if cur is None or (up.last_ts or 0.0) > (cur.last_ts or 0.0):
            into.unranked_progress[att] = up
    for att, t in part.attempt_start.items():
        into.attempt_start[att] = min(t, into.attempt_start.get(att, t))
    into.dir_rank.update(part.dir_rank)
    into.spans.update(part.spans)
    into.job_files |= part.job_files
    into.training_seen = into.training_seen or part.training_seen
    into.job_evidence = into.job_evidence or part.job_evidence
    for where, no in part.training_after.items():
        into.training_after[where] = max(no, into.training_after.get(where, 0))
    into.training_tagged |= part.training_tagged
    into.cut_traceback.update(part.cut_traceback)
    into.file_ends.update(part.file_ends)
    into.losses.update(part.losses)
    into.last_words.update(part.last_words)
    for rel, no in part.training_ends.items():
        into.training_ends[rel] = max(no, into.training_ends.get(rel, 0))
    if part.training_end is not None and (into.training_end is None or part.training_end < into.training_end):
        into.training_end = part.training_end
    if part.training_ts is not None and (into.training_ts is None or part.training_ts < into.training_ts):
        into.training_ts = part.training_ts
    for key, t in part.sched.items():
        into.sched[key] = min(t, into.sched.get(key, t)) if key == "start" else max(t, into.sched.get(key, t))
    topo, other = into.topology, part.topology
    pairs: list[tuple[dict[Any, Any], dict[Any, Any]]] = [
        (topo.rank_host, other.rank_host),
        (topo.rank_local, other.rank_local),
        (topo.rank_gpu, other.rank_gpu),
        (topo.ip_host, other.ip_host),
        (topo.groups, other.groups),
    ]
    for mine, theirs in pairs:
        for k, v in theirs.items():
            mine.setdefault(k, v)
    topo.world_size = topo.world_size or other.world_size
    for w in part.warnings:
        into.warn(w)


def _split(files: list[SourceFile], jobs: int) -> list[list[int]]:
    """Balance by bytes; keep each group in file order so results merge deterministically."""
    import heapq

    groups: list[list[int]] = [[] for _ in range(jobs)]
    load = [(0, k) for k in range(jobs)]  # (bytes so far, group): the lightest group takes the next file
    for i in sorted(range(len(files)), key=lambda i: -files[i].size):
        size, k = heapq.heappop(load)
        groups[k].append(i)
        heapq.heappush(load, (size + files[i].size + 4096, k))
    return [sorted(g) for g in groups if g]


def parse_forked(
    bundle: Bundle,
    classifier: LineClassifier,
    result: ParseResult,
    jobs: int,
    busy: Callable[[], bool],
    run_files: RunFiles,
) -> list[Event]:
    """The parse on forked workers: one while ``busy()``, then ``jobs``; replies read after.

    Memory is the reason for each step (at 16,384 ranks, FR-heavy: 2.3 GB, 414,000 events):

    * the flight-recorder worker holds every decoded dump (~250 MB) for its ~15 s: beside it one
      parse worker, not ``jobs`` (the cores are then both busy, and the dumps are gone before
      the other workers start);
    * a worker's reply stays pickled bytes (about half the size of the events it holds) until
      every worker has exited: a worker's heap (~55 MB of its own) and the bundle's events as
      objects are never held at the same time.

    The tasks are the same list whatever the timing, and are read back in that order, so the
    result is the same as one pool's.
    """
    global _FORKED
    ctx = result.ctx
    classifier.finder  # noqa: B018  (compile once, before forking)
    # many small tasks, not one per worker: a worker then holds a few hundred files' events at
    # a time (not half the bundle's) while it ships them back
    groups = _split(bundle.files, max(jobs * TASKS_PER_JOB, len(bundle.files) // TASK_FILES))
    replies: list[bytes | None] = [None] * len(groups)
    _FORKED = (bundle, classifier, ctx, run_files)
    try:
        k = 0
        if busy():
            with mp.get_context("fork").Pool(1, initializer=_quiet_worker) as pool:
                while k < len(groups) and busy():
                    replies[k] = pool.apply(_pickled_worker, (groups[k],))
                    k += 1
                _end(pool)
        if k < len(groups):
            with mp.get_context("fork").Pool(jobs, initializer=_quiet_worker) as pool:
                for j, reply in enumerate(pool.imap(_pickled_worker, groups[k:]), k):
                    replies[j] = reply
                _end(pool)
    finally:
        _FORKED = None
    events: list[Event] = []
    shared: dict[str, str] = {}
    for j in range(len(replies)):
        data, replies[j] = replies[j], None  # each reply's bytes go as its events come
        assert data is not None
        # the pool's own transport (what Pool would have unpickled on arrival), deferred: bytes our
        # forked workers made, never input read from a file
        evs, part, read, nbytes, flagged = ForkingPickler.loads(data)
        del data
        trim()  # glibc keeps a freed reply's pages (its mmap threshold has grown): give them back now
        _share_fields(evs, shared)
        events.extend(evs)
        _merge(ctx, part)
        result.files_read += read
        result.bytes_read += nbytes
        result.lines_flagged += flagged
    events.sort(key=attrgetter("line"))  # by (file, line), as two stable sorts: no tuple an event
    events.sort(key=attrgetter("source"))
    for i, e in enumerate(events):
        e.id = i
    return events


def _end(pool: Any) -> None:
    """End a pool whose work is done by letting its workers finish: ``close`` sends each its end
    of the task queue. Leaving it to the ``with`` block's ``terminate`` SIGTERMs workers that wait
    on the queue while one of them holds its read lock; under load a suite run once hung there
    (a worker blocked on that lock, the parent joining it). ``terminate`` stays for an error."""
    pool.close()
    pool.join()


def _pickled_worker(indexes: list[int]) -> bytes:
    """:func:`_worker`'s reply as bytes, for the parent to unpickle once the workers are gone."""
    return bytes(ForkingPickler.dumps(_worker(indexes)))


def _share_fields(events: list[Event], shared: dict[str, str]) -> None:
    """One copy of each field value across the workers' batches.

    Inside a worker equal values are one object (the classifier's memo), and pickling keeps that
    within a batch, but every batch arrives with copies of its own: at 16,384 ranks 1.3 million
    field values (sequence numbers, timeouts, op names, ranks) are 84,000 distinct strings, and
    holding one of each saves the main process about 50 MB.
    """
    for e in events:
        f = e.fields
        for k, v in f.items():
            f[k] = shared.setdefault(v, v)
