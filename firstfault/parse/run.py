"""Parse + match over a whole bundle: every text file, streamed once, to typed events.

Parse and match are separate concerns (``parse.*`` locates a line, the classifier the pipeline hands in,
``match.registry``, says
what it is) but run in one pass over each file, so a byte is read once and a line is decoded
only if the prefilter flagged it. What a file's head and tail say beside its events is
``parse.facts``; the parse on several cores, ``parse.workers``; what the stage hands on,
``parse.result``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import IO

from firstfault.discover import Bundle, SourceFile
from firstfault.parse import hooks, ibstat, kernel, nccl, slurm  # noqa: F401  (kernel, nccl, slurm register parsers)
from firstfault.parse.base import MAX_TEXT, ParseContext, SourceParser, parser_for, remap_ranks
from firstfault.parse.classify import EVIDENCE, LineClassifier
from firstfault.parse.facts import head_and_tail
from firstfault.parse.result import ParseResult
from firstfault.parse.stream import Hit, scan
from firstfault.parse.timestamps import parse_timestamp
from firstfault.parse.topology import learn_topology, load_topology_file
from firstfault.parse.workers import parse_forked
from firstfault.vocab import TEXT_KINDS, Event, FileKind, Role, TsQuality
from firstfault.vocab.identity import strip_prefixes
from firstfault.vocab.timefmt import year_of
from firstfault.vocab.topology import Topology

MAX_CONTEXT = 30
# CPython's header over a traceback it printed and did not raise (an exception in __del__, a
# finalizer or a callback at exit, "Exception ignored in: <function ...__del__>"): the process went
# on, so the exception is no failure of it (``reason.went_on``)
IGNORED = "Exception ignored "
IGNORED_FIELD = "ignored"  # the field such an exception's event carries
# CPython's header over an exception that ended a thread other than the main one (Lib/threading.py
# excepthook, 3.8 to 3.13: print(f"Exception in thread {name}:", file=stderr)): the thread died,
# the process did not (``reason.went_on``)
THREAD = "Exception in thread "
THREAD_FIELD = "thread"
# torch's own hook for an exception nothing caught: init_process_group replaces sys.excepthook with
# _distributed_excepthook, which writes the interpreter's report with "[rank{get_rank()}]: " before
# every line (torch/distributed/distributed_c10d.py, 2.2 to 2.13.0). CPython calls sys.excepthook
# only for an exception that ends the program: a trainer that catches one and logs it (logging's
# exception(), traceback.print_exc()) writes no such prefix. An exception line under it is one its
# process died of, whatever lines follow it in a shared console (``reason.went_on``).
UNCAUGHT_FIELD = "uncaught"
_EXCEPTHOOK_LABEL = re.compile(r"\[rank\d+\]: $")


def _frames(hit: Hit) -> tuple[tuple[str, ...], str | None]:
    """The traceback lines above an exception line, up to its 'Traceback' header, and the field
    CPython's header over that traceback calls for: ``IGNORED_FIELD`` under "Exception ignored in:
    ..." (``IGNORED``), ``THREAD_FIELD`` under "Exception in thread NAME:" (``THREAD``), else None.

    Each line loses its launcher prefixes the one way (``vocab.identity.strip_prefixes``), so a
    frame printed by a Ray actor or under ``srun -l`` reads like any other. A paste often starts
    inside the traceback, without its header: then the frames directly above the line are kept
    (``_headless_frames``), as far up as they go, so that where the exception was raised is
    still known.
    """
    above = hit.before(MAX_CONTEXT)
    out: list[str] = []
    header: str | None = None
    for i in range(len(above) - 1, -1, -1):
        bare = strip_prefixes(above[i])[0]
        out.append(bare)
        if bare.lstrip().startswith("Traceback (most recent call last)"):  # "[rank0]: Traceback": a space
            head = strip_prefixes(above[i - 1])[0].lstrip() if i > 0 else ""
            header = IGNORED_FIELD if head.startswith(IGNORED) else THREAD_FIELD if head.startswith(THREAD) else None
            break
    out.reverse()
    if not (out and out[0].lstrip().startswith("Traceback")):
        out = _headless_frames(above, out, hit.text)  # no header: ``out`` holds every line above, peeled
    # the same traceback repeats on thousands of ranks: one copy of each frame line
    return tuple(sys.intern(x) for x in out), header


# torchrun's agent reading a dead worker's reply file (error.json) as it records the failure:
# ProcessFailure.__post_init__, called from the process context's _capture_process_failures
_RECORDING = ("in _capture_process_failures", "in __post_init__")
_ELASTIC_ERRORS = ("elastic/multiprocessing/api.py", "elastic/multiprocessing/errors/__init__.py")


def _recording_a_failure(frames: tuple[str, ...]) -> bool:
    """Was this exception raised by torchrun while it recorded a worker's failure?

    Why: the agent reads each failed worker's reply file, and a worker torn down while writing it
    leaves it half-written (torch 2.x: "Failed to parse reply file", then ``JSONDecodeError`` up
    through the agent). That is the launcher stumbling over a failure already under way: a
    tear-down, never the fault, which is whatever made the first worker fail.
    """
    return any(r in f and any(e in f for e in _ELASTIC_ERRORS) for f in frames for r in _RECORDING)


def _label(line: str) -> str:
    """The launcher prefix a line carries ("" when none): what strip_prefixes peels."""
    return line[: len(line) - len(strip_prefixes(line)[0])]


def _headless_frames(above: list[str], bares: list[str], exc_line: str) -> list[str]:
    """The run of frame lines right above an exception line, when one names a file (``bares``:
    the lines ``above`` without their launcher prefixes).

    A frame run is indented, unless a process label stands before it and the indentation is gone
    (Ray's log monitor prints "(Actor pid=N) File ..."): then the run is the lines that carry the
    exception line's own label. Which of the two it is, the line right above says.
    """
    label = _label(exc_line)
    by_label = bool(label and bares) and not bares[-1].startswith(" ")
    run: list[str] = []
    for line, bare in zip(reversed(above), reversed(bares), strict=True):
        same = line.startswith(label) if by_label else bare.startswith(" ")
        if not bare.strip() or not same:
            break
        run.append(bare)
    run.reverse()
    return run if any(x.lstrip().startswith('File "') for x in run) else []


def _year_hint(bundle: Bundle) -> int | None:
    """Glog lines carry no year: borrow it from the first ISO timestamp in the bundle."""
    for sf in bundle.files:
        if sf.kind not in TEXT_KINDS:
            continue
        try:
            with open(sf.path, "rb") as fh:
                head = fh.read(16384).decode("utf-8", "replace")
        except OSError:
            continue
        for line in head.splitlines():
            if (len(line) > 19 and line[:2] in ("19", "20")) or "]:20" in line[:30]:
                ts = parse_timestamp(line.split("]:", 1)[-1])
                if ts is not None:
                    return year_of(ts)
    return None


def _elastic_error_json(sf: SourceFile, classifier: LineClassifier, ctx: ParseContext, next_id: int) -> Iterator[Event]:
    """torchrun's per-rank error.json (written by @record): the exception, to the second."""
    try:
        if sf.size > 16 * 1024 * 1024:
            ctx.warn(f"{sf.rel}: error file larger than 16 MiB; skipped")
            return
        data = json.loads(sf.path.read_bytes().decode("utf-8", "replace"))
        msg = data.get("message", {})
        if isinstance(msg, str):
            msg = {"message": msg}
        text = str(msg.get("message", ""))[:MAX_TEXT]
        extra = msg.get("extraInfo", {}) or {}
        ts = float(extra["timestamp"]) if extra.get("timestamp") else None
        stack = str(extra.get("py_callstack", ""))
    except (OSError, ValueError, AttributeError, TypeError, KeyError) as exc:
        ctx.warn(f"{sf.rel}: unreadable torchelastic error file ({exc})")
        return
    if ts is not None and sf.attempt is not None:
        # a restart that failed at start-up leaves no timed line but this one
        start = ctx.attempt_start.get(sf.attempt)
        if start is None or ts < start:
            ctx.attempt_start[sf.attempt] = ts
    first = text.strip().splitlines()[-1].strip() if text.strip() else ""
    got = classifier.classify(first, sf.kind, None) if first else None
    if got is None:
        return
    yield Event(
        id=next_id,
        source=sf.rel,
        line=1,
        text=first,
        signature=got.signature,
        category=got.category,
        layer=got.layer,
        role=got.role,
        severity=got.severity,
        ts=ts,
        ts_quality=TsQuality.COARSE if ts else TsQuality.NONE,
        rank=sf.local_rank,
        local_rank=sf.local_rank,
        host=sf.host or ctx.default_host,
        attempt=sf.attempt,
        fields=dict(got.fields),
        context=tuple(stack.splitlines()[-MAX_CONTEXT:]),
        priority=got.priority,
    )


def parse_file(sf: SourceFile, classifier: LineClassifier, ctx: ParseContext, start_id: int) -> tuple[list[Event], int]:
    """Events of one text file, and how many lines the prefilter flagged."""
    parser = parser_for(sf, ctx)
    events: list[Event] = []
    stats: dict[str, int] = {}
    try:
        with open(sf.path, "rb") as fh:
            parse_stream(sf, fh, parser, classifier, ctx, events, start_id, stats)
        if parser.job_output:
            head_and_tail(sf, ctx, stats.get("lines", 0), owns_progress(sf, ctx))
    except OSError as exc:
        ctx.warn(f"{sf.rel}: read failed ({exc.strerror or exc}); partial result")
    parser.finish()
    bound_the_head(events)
    return events, stats.get("flagged", 0)


def bound_the_head(events: list[Event]) -> None:
    """Give the untimed events above a file's first timed event that event's time (an upper bound).

    Why: a file is written in order, so a line printed above a timed line happened no later than
    it. A pasted console often opens with a rank's traceback (no clock) and goes on with the
    launcher's timed tear-down lines; left untimed, the traceback sorted after everything and
    the tear-down it caused was taken for the root. With the bound, the two tie and the file's
    line order puts the traceback first. ``events`` are one file's, in line order.
    """
    first = next((e for e in events if e.ts is not None and e.ts_quality == TsQuality.EXACT), None)
    if first is None:
        return
    for e in events:
        if e is first:
            break
        if e.ts is None:
            e.ts, e.ts_quality = first.ts, TsQuality.INHERITED


def owns_progress(sf: SourceFile, ctx: ParseContext) -> bool:
    """Does this file's progress count? With torchrun's per-rank files present, progress comes from
    them (they know the attempt); the console's --tee copy would only count every step twice."""
    return sf.kind == FileKind.ELASTIC_RANK_LOG or not ctx.has_rank_files


def parse_stream(
    sf: SourceFile,
    fh: IO[bytes],
    parser: SourceParser,
    classifier: LineClassifier,
    ctx: ParseContext,
    events: list[Event],
    start_id: int,
    stats: dict[str, int],
    first_line: int = 1,
    context: bytes = b"",
) -> None:
    """Parse and match the lines of ``fh`` (a whole file, or the new bytes of a growing one) into
    ``events``. ``stats`` gets "lines" and "flagged". One seam for the batch parse and a live
    reader (``firstfault.live``), which keeps ``parser`` per file and passes ``first_line`` and the
    ``context`` of the lines just before (see ``parse.stream.scan``)."""
    if parser.job_output:
        ctx.job_files.add(sf.rel)
    warn = lambda m: ctx.warn(f"{sf.rel}: {m}")  # noqa: E731
    for hit in scan(fh, classifier.finder, warn=warn, stats=stats, first_line=first_line, context=context):
        stats["flagged"] = stats.get("flagged", 0) + 1
        if parser.is_copy(hit):
            continue
        if ctx.job_evidence and hit.literals and classifier.evidence_literals.issuperset(hit.literals):
            continue  # the job is already seen: a line that can only say so again is not read
        info = parser.locate(hit)
        if sf.attempt is not None and info.ts is not None:
            start = ctx.attempt_start.get(sf.attempt)
            if start is None or info.ts < start:
                ctx.attempt_start[sf.attempt] = info.ts
        got = classifier.classify(info.text, sf.kind, hit.literals, unrecognised=parser.job_output)
        if got is None:
            continue
        if got.fields.get(EVIDENCE):
            # a line that says only "a job printed this" (a start-up note every rank prints): an event
            # a rank at 16,384 ranks costs seconds downstream and tells attribution nothing
            ctx.job_evidence = True
            continue
        fields = dict(got.fields)  # hooks and later stages write into an event's own fields
        frames, header = _frames(hit) if got.context_lines else ((), None)
        if header is not None:
            fields[header] = "1"
        elif frames and _EXCEPTHOOK_LABEL.search(_label(hit.text)):
            fields[UNCAUGHT_FIELD] = "1"
        role = Role.TEARDOWN if _recording_a_failure(frames) else got.role
        if "cause" in fields:
            _quoted_cause(fields, sf, classifier)
        ev = Event(
            id=start_id + len(events),
            source=sf.rel,
            line=hit.line_no,
            text=info.text[:MAX_TEXT],
            signature=got.signature,
            category=got.category,
            layer=got.layer,
            role=role,
            severity=got.severity,
            ts=info.ts,
            ts_quality=info.ts_quality,
            host=info.host,
            rank=_rank_of(info.rank, fields),
            local_rank=info.local_rank,
            gpu=info.gpu or fields.get("gpu"),
            pid=int(fields["pid"]) if fields.get("pid", "").isdigit() else info.pid,
            attempt=sf.attempt,
            fields=fields,
            context=frames,
            priority=got.priority,
        )
        hooks.apply(got.hook, ev, hit, ctx)
        events.append(ev)


def _quoted_cause(fields: dict[str, str], sf: SourceFile, classifier: LineClassifier) -> None:
    """Match the error a line quotes (its ``cause`` group) as a line of its own.

    Why: a tear-down that re-raises what it caught ("Process group watchdog thread terminated with
    exception: CUDA error: unspecified launch failure") carries its cause's words; when the cause's
    own line is not in the log (a paste of the last lines), those words are the only evidence of
    what broke. The match is kept as ``cause_signature`` / ``cause_category``; attribution uses it
    only when no line of the cause itself is there (``reason.candidates.quoted_cause_candidates``).
    """
    cause = fields["cause"]
    hits = {lit for _, lit in classifier.finder.find(cause.encode("utf-8", "surrogateescape"))}
    got = classifier.classify(cause, sf.kind, hits)  # the prefilter's literals: no scan of them all
    if got is not None:  # (no "unrecognised" match: only a signature names a cause)
        fields["cause_signature"] = got.signature
        fields["cause_category"] = str(got.category)
        fields["cause_role"] = str(got.role)


def _rank_of(prefix_rank: int | None, fields: dict[str, str]) -> int | None:
    """The line's rank: its prefix's, else its own words' ("rank" group), else the default group's."""
    if prefix_rank is not None:
        return prefix_rank
    named = _int_field(fields, "rank")
    return named if named is not None else _default_pg_rank(fields)


def _default_pg_rank(fields: dict[str, str]) -> int | None:
    """The global rank a ProcessGroupNCCL line names, when it names the default group's.

    torch prefixes its watchdog lines with the process group's own rank: "[PG ID 0 ... Rank 3]"
    (default group: the global rank), "[PG ID 2 ... Rank 1]" (a subgroup: not), or, before the
    group ids were printed (torch 2.0-2.2), "[Rank 3]", most often the default group's. Only read
    when the line carries no rank prefix of its own ("[rank3]:").
    """
    pg_rank = fields.get("pg_rank")
    if pg_rank is None or not pg_rank.isdigit() or fields.get("pg_id", "0") != "0":
        return None
    return int(pg_rank)


def _int_field(fields: dict[str, str], name: str) -> int | None:
    """A signature's named group that places the event (``rank``), when the line's prefix did not."""
    v = fields.get(name, "")
    return int(v) if v.isdigit() and len(v) < 9 else None


# Workers pay a fork and the shipping of their events back: worth it for many files or many bytes.
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
PARALLEL_MIN_FILES = 1500
SKIP_TEE_MIN_RANKS = 256


def _new_context(bundle: Bundle, topology: Topology | None) -> ParseContext:
    ctx = ParseContext(year_hint=_year_hint(bundle))
    if topology is not None:
        ctx.topology = topology
    note_bundle(ctx, bundle)
    return ctx


def note_bundle(ctx: ParseContext, bundle: Bundle) -> None:
    """What the bundle's list of files tells the parse (which kinds are present); a live reader
    calls it again whenever files appear."""
    rank_logs = [f for f in bundle.files if f.kind == FileKind.ELASTIC_RANK_LOG]
    ctx.has_rank_files = bool(rank_logs)
    ctx.rank_dirs_local = {f.local_rank for f in rank_logs if f.local_rank is not None}
    ctx.has_fr_dumps = bool(bundle.of_kind(FileKind.FR_DUMP))
    ctx.has_error_files = bool(bundle.of_kind(FileKind.ELASTIC_ERROR_JSON))
    ctx.has_launch_output = any(
        f.kind in (FileKind.LAUNCHER_CONSOLE, FileKind.ELASTIC_RANK_LOG, FileKind.SLURM_OUTPUT) for f in bundle.files
    )
    # a file sniffed as a launcher's, srun's or NCCL's output is a job's log even when no line of it
    # is one a signature knows (a paste of NCCL INFO lines, a slurm-N.out of the job's own prints)
    ctx.has_job_output_kind = any(
        f.kind in (FileKind.LAUNCHER_CONSOLE, FileKind.SLURM_OUTPUT, FileKind.NCCL_DEBUG) for f in bundle.files
    )
    ctx.rank_files = frozenset((f.host, f.local_rank) for f in rank_logs if f.local_rank is not None)
    # At scale the console is one file (one core reads it alone) that repeats every rank's file:
    # its worker lines are skipped. Small jobs keep them: their arrival order breaks near-ties.
    ctx.skip_tee_copies = len(ctx.rank_files) >= SKIP_TEE_MIN_RANKS


def _parse_files(
    files: list[SourceFile], classifier: LineClassifier, ctx: ParseContext
) -> tuple[list[Event], int, int, int]:
    events: list[Event] = []
    read = nbytes = flagged_total = 0
    for sf in files:
        if sf.kind == FileKind.ELASTIC_ERROR_JSON:
            ctx.job_files.add(sf.rel)
            events.extend(_elastic_error_json(sf, classifier, ctx, len(events)))
            read += 1
            continue
        if sf.kind not in TEXT_KINDS:
            continue
        evs, flagged = parse_file(sf, classifier, ctx, len(events))
        events.extend(evs)
        read += 1
        nbytes += sf.size
        flagged_total += flagged
    return events, read, nbytes, flagged_total


def parse_bundle(
    bundle: Bundle, classifier: LineClassifier, jobs: int | None = None, while_busy: Callable[[], bool] | None = None
) -> ParseResult:
    """Every text file of the bundle, parsed and matched; on several cores for big bundles.

    Files are independent, so a big bundle is split across worker processes (forked, so the
    compiled prefilter is shared, not rebuilt) and the per-file results merged in file order.
    ``while_busy`` says another stage holds a core (the flight-recorder worker): until it is
    done one worker parses beside it, and only then are the others forked.
    """
    first_warnings: list[str] = []
    ctx = _new_context(bundle, load_topology_file(bundle, first_warnings))
    ctx.warnings.extend(first_warnings + bundle.warnings)
    text_bytes = sum(f.size for f in bundle.files if f.kind in TEXT_KINDS)
    if jobs is None:
        n_text = sum(1 for f in bundle.files if f.kind in TEXT_KINDS)
        big = text_bytes >= PARALLEL_MIN_BYTES or n_text >= PARALLEL_MIN_FILES
        jobs = min(os.cpu_count() or 1, 8) if big else 1
    jobs = max(1, min(jobs, len(bundle.files)))
    if mp.current_process().daemon:
        jobs = 1  # a pool's worker (a benchmark, a service) may not fork workers of its own
    result = ParseResult([], ctx)
    if jobs == 1 or "fork" not in mp.get_all_start_methods():
        events, result.files_read, result.bytes_read, result.lines_flagged = _parse_files(bundle.files, classifier, ctx)
    else:
        events = parse_forked(bundle, classifier, result, jobs, while_busy or (lambda: False), _parse_files)
    result.events = events
    return complete(result, bundle)


def complete(result: ParseResult, bundle: Bundle) -> ParseResult:
    """The bundle-wide steps after every file is parsed: directories' global ranks, the topology
    from the events, the InfiniBand snapshots. A live reader calls it on a copy of what it has."""
    remap_ranks(result.events, result.ctx)
    learn_topology(result.events, bundle, result.ctx.topology, result.ctx.warnings)
    result.ib = ibstat.collect(bundle)
    return result


def year_hint(bundle: Bundle) -> int | None:
    """The year of the bundle's first ISO timestamp (glog lines carry none)."""
    return _year_hint(bundle)


def error_file_events(sf: SourceFile, classifier: LineClassifier, ctx: ParseContext) -> list[Event]:
    """The event of one torchrun error.json (read whole: torchelastic writes it once, at exit)."""
    ctx.job_files.add(sf.rel)
    return list(_elastic_error_json(sf, classifier, ctx, 0))
