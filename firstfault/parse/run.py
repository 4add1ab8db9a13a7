"""Parse + match over a whole bundle: every text file, streamed once, to typed events.

Parse and match are separate concerns (``parse.*`` locates a line, the classifier the pipeline hands in,
``match.registry``, says
what it is) but run in one pass over each file, so a byte is read once and a line is decoded
only if the prefilter flagged it.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from operator import attrgetter
from statistics import median
from typing import IO, Any

from firstfault.discover import Bundle, SourceFile
from firstfault.heap import trim
from firstfault.parse import hooks, ibstat, kernel, nccl, slurm  # noqa: F401  (kernel, nccl, slurm register parsers)
from firstfault.parse import progress as progress_mod
from firstfault.parse.base import ParseContext, Progress, SourceParser, parser_for, remap_ranks
from firstfault.parse.classify import LineClassifier
from firstfault.parse.ibstat import HostIB
from firstfault.parse.stream import Hit, scan
from firstfault.parse.timestamps import parse_timestamp
from firstfault.parse.topology import learn_topology, load_topology_file
from firstfault.vocab import TEXT_KINDS, Event, FileKind, RankProgress, TsQuality, settings
from firstfault.vocab.identity import strip_prefixes
from firstfault.vocab.timefmt import year_of
from firstfault.vocab.topology import Topology

MAX_TEXT = 2000
MAX_CONTEXT = 30
RECENT_MIN_STEPS = 5


@dataclass
class ParseResult:
    events: list[Event]
    ctx: ParseContext
    files_read: int = 0
    bytes_read: int = 0
    lines_flagged: int = 0
    skipped: list[str] = field(default_factory=list)
    ib: dict[str, HostIB] = field(default_factory=dict)  # host -> its ibstat/ibv_devinfo/rdma port states

    def known_ranks(self) -> list[int]:
        """Every rank the bundle shows: in progress lines, events, per-rank directories, the world size."""
        ranks: set[int] = set()
        for prog in self.ctx.progress_by_attempt.values():
            ranks.update(prog)
        ranks.update(e.rank for e in self.events if e.rank is not None)
        ranks.update(self.ctx.rank_dirs_local)
        if self.ctx.topology.world_size:
            ranks.update(range(self.ctx.topology.world_size))
        return sorted(ranks)

    def missing_rank_logs(self, ranks: list[int]) -> list[int]:
        """Ranks below the highest known one that have no per-rank torchrun log."""
        logged = self.ctx.rank_dirs_local
        if not logged or not ranks:
            return []
        hi = min(max(ranks), settings.current().limits.max_world)  # a rank of 1e9 is a claim, not 1e9 ranks
        return sorted(set(range(hi + 1)) - logged)

    def hosts(self) -> list[str]:
        """Every host the bundle shows the job on: the topology's, the hosts of its per-rank log
        folders and of its events (the fleet's exposure: which nodes ran this job)."""
        found = set(self.ctx.topology.rank_host.values())
        found.update(p.host for prog in self.ctx.progress_by_attempt.values() for p in prog.values() if p.host)
        found.update(e.host for e in self.events if e.host)
        return sorted(found)

    def looks_like_a_job(self) -> bool:
        """Any line a signature knows (noise included), training under way, an error line, a
        flight-recorder dump or a launcher's per-rank file: evidence that this is what a job left.
        Without any, saying "no failure" would be a lie about a file that is not a job log at all."""
        return bool(
            self.events
            or self.ctx.training_seen
            or any(self.ctx.progress_by_attempt.values())
            or self.ctx.has_fr_dumps
            or self.ctx.has_rank_files
            or self.ctx.has_error_files
            or self.ctx.has_job_output_kind
        )

    def launched(self) -> bool:
        """Does the bundle hold the job's start as a launcher or the scheduler recorded it (not a paste)?"""
        return bool(self.ctx.sched.get("start") or self.ctx.attempt_start or self.ctx.has_launch_output)

    def own_series(self, attempt: int | None = None) -> dict[int, list[float]]:
        """Each rank's own work per step (compute time), in step order: what a straggler shows in."""
        return {rank: list(p.own_ms) for rank, p in self.ctx.progress(attempt).items() if p.own_ms}

    def rank_progress(self, attempt: int | None = None) -> list[RankProgress]:
        out = []
        for rank, p in sorted(self.ctx.progress(attempt).items()):
            med = median(p.step_ms) if p.step_ms else None
            interval = None
            if p.first_ts is not None and p.last_ts is not None and p.last_step and p.last_step > (p.first_step or 0):
                interval = (p.last_ts - p.first_ts) / (p.last_step - (p.first_step or 0))
            tail = p.step_ms[-max(RECENT_MIN_STEPS, len(p.step_ms) // 4) :]
            recent = median(tail) if len(p.step_ms) >= 2 * RECENT_MIN_STEPS else None
            out.append(
                RankProgress(
                    rank=rank,
                    last_step=p.last_step,
                    last_step_ts=p.last_ts,
                    steps_seen=p.steps_seen,
                    median_step_ms=med,
                    host=self.ctx.topology.rank_host.get(rank) or p.host,
                    recent_step_ms=recent,
                    step_interval_s=round(interval, 3) if interval else None,
                )
            )
        return out


def _frames(hit: Hit) -> tuple[str, ...]:
    """The traceback lines above an exception line, up to its 'Traceback' header.

    A paste often starts inside the traceback, without its header: then the frames directly
    above the line (``File "...", line N`` and the source lines under them) are kept, as far up
    as the frames go, so that where the exception was raised is still known.
    """
    above = hit.before(MAX_CONTEXT)
    out: list[str] = []
    for line in reversed(above):
        bare = line.split("]:", 1)[1] if line.startswith("[") and "]:" in line[:20] else line
        out.append(bare)
        if bare.lstrip().startswith("Traceback (most recent call last)"):  # "[rank0]: Traceback": a space
            break
    out.reverse()
    if not (out and out[0].lstrip().startswith("Traceback")):
        out = _headless_frames(out)
    # the same traceback repeats on thousands of ranks: one copy of each frame line
    return tuple(sys.intern(x) for x in out)


def _headless_frames(above: list[str]) -> list[str]:
    """The run of indented frame lines right above an exception line, when one names a file."""
    run: list[str] = []
    for line in reversed(above):
        if not line.startswith(" ") or not line.strip():
            break
        run.append(line)
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
            _head_and_tail(sf, ctx, stats.get("lines", 0), owns_progress(sf, ctx))
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
        info = parser.locate(hit)
        if sf.attempt is not None and info.ts is not None:
            start = ctx.attempt_start.get(sf.attempt)
            if start is None or info.ts < start:
                ctx.attempt_start[sf.attempt] = info.ts
        got = classifier.classify(info.text, sf.kind, hit.literals, unrecognised=parser.job_output)
        if got is None:
            continue
        fields = dict(got.fields)  # hooks and later stages write into an event's own fields
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
            role=got.role,
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
            context=_frames(hit) if got.context_lines else (),
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


PROGRESS_TAIL = 16 * 1024  # ~120 progress lines: the last step and the recent step times
END_LINES = 20  # where a file's last step counter is looked for (the end of training, see _training_end)
SPAN_HEAD = 4096
SPAN_LINES = 200  # how far from either end a timed line is looked for


def _first_time(lines: list[str], ctx: ParseContext) -> float | None:
    for raw in lines[:SPAN_LINES]:
        ts = parse_timestamp(strip_prefixes(raw)[0], ctx.year_hint)
        if ts is not None:
            return ts
    return None


WIDE_HEAD = 64 * 1024
WIDE_HEAD_FILES = 64


def _training_marks(lines: list[str], ctx: ParseContext, blob: str | None = None) -> None:
    """Note that training was under way, and the earliest time a line of these shows it.

    ``blob`` is the lines' text in one string, when the caller has it: most tails (a stderr
    log, a tail of stack dumps) hold no training word at all and are passed over in one C scan.
    The time is that of the marker line or, failing that, of the nearest timed line above it:
    looked up from the marker backwards, so a tail's other lines are never parsed for a time.
    """
    if blob is None:
        blob = "\n".join(lines)
    if not any(lit in blob for lit in progress_mod.TRAINING_LITERALS):
        return
    for i, raw in enumerate(lines):
        if not any(lit in raw for lit in progress_mod.TRAINING_LITERALS):
            continue
        text = strip_prefixes(raw)[0]
        if progress_mod.TRAINING_MARKER.search(text) is None or progress_mod.SETUP_BAR.search(text):
            continue
        ctx.training_seen = True
        ts = _time_at_or_above(lines, i, ctx)
        if ts is not None and (ctx.training_ts is None or ts < ctx.training_ts):
            ctx.training_ts = ts
        return  # the earliest marker of these lines is the one that counts


def _training_end(lines: list[str], first_no: int, sf: SourceFile, ctx: ParseContext) -> None:
    """Note a step counter at its total among a file's last lines: training reached its end.

    Only the last ``END_LINES`` lines are looked at (the end of training is the end of the file,
    give or take a few closing lines), so a tail of thousands of step lines costs nothing more.
    """
    for back, raw in enumerate(reversed(lines[-END_LINES:])):
        if "/" not in raw:
            continue
        text = strip_prefixes(raw)[0]
        m = progress_mod.STEP_OF_TOTAL.search(text)
        if m and int(m["step"]) == int(m["total"]) > 0:
            at = f"{sf.rel}:{first_no + len(lines) - 1 - back}: {text.strip()[:300]}"
            if ctx.training_end is None or at < ctx.training_end:
                ctx.training_end = at
            return


def _time_at_or_above(lines: list[str], i: int, ctx: ParseContext) -> float | None:
    """The time of line ``i``, else of the nearest line above it that has one (a line with a
    training word, or one with a clock's colon: the lines that can carry a time)."""
    for j in range(i, -1, -1):
        raw = lines[j]
        if j != i and _CLOCKISH not in raw and not any(lit in raw for lit in progress_mod.TRAINING_LITERALS):
            continue
        ts = parse_timestamp(strip_prefixes(raw)[0], ctx.year_hint)
        if ts is not None:
            return ts
    return None


_CLOCKISH = ":"
# Lines that state the job's world size: an environment echo, a config dump ("world_size ..... 8"),
# NCCL's init ("nranks 8"), ProcessGroupNCCL's options ("size: 8, global rank: 0"), Lightning's
# "MEMBER: 1/8". A claimed size above ``Limits.max_world`` is not believed (it would only cost memory).
_WORLD = re.compile(
    r"(?:\bWORLD_SIZE=|\bworld[_ ]size\b['\"]?\s*(?:[:=]|\.{3,})\s*|\bn[Rr]anks |\bsize: (?=\d+, global rank: )"
    r"|\bMEMBER: \d+/)(?P<n>\d{1,7})\b"
)


def _world_size(lines: list[str], ctx: ParseContext, blob: str | None = None) -> None:
    """The largest world size a line of these states (the world group, not a sub-group's size)."""
    if blob is not None and "ize" not in blob and "anks" not in blob and "MEMBER" not in blob:
        return
    for raw in lines:
        if "ize" not in raw and "anks" not in raw and "MEMBER" not in raw:
            continue
        for m in _WORLD.finditer(raw):
            n = int(m["n"])
            if 1 < n <= settings.current().limits.max_world and (
                ctx.topology.world_size is None or n > ctx.topology.world_size
            ):
                ctx.topology.world_size = n


def _head_and_tail(sf: SourceFile, ctx: ParseContext, total_lines: int, own_progress: bool) -> None:
    """Progress from the end of a job-output file; its first and last times from both ends.

    Progress lines are the bulk of a healthy log. Reading them all would make every step line
    a Python call; the last step and recent step times are at the end, so only the last
    ``PROGRESS_TAIL`` bytes are read. The first timed line gives the attempt's start, and with
    the last it bounds the job's window (``reason.window``).
    """
    wide = len(ctx.job_files) <= WIDE_HEAD_FILES  # the first files of a bundle: look further for training
    with open(sf.path, "rb") as fh:
        head_text = fh.read(WIDE_HEAD if wide else SPAN_HEAD).decode("utf-8", "replace")
        head = head_text.splitlines()
        offset = max(0, sf.size - PROGRESS_TAIL)
        fh.seek(offset)
        data = fh.read(PROGRESS_TAIL).decode("utf-8", "replace")
    if len(head) > 1 and sf.size > SPAN_HEAD:
        head = head[:-1]  # the last line may be cut
    lines = data.split("\n")
    if offset > 0:
        lines = lines[1:]  # a partial first line
    if lines and lines[-1] == "":
        lines.pop()
    absorb_lines(sf, ctx, head, lines, total_lines - len(lines) + 1, own_progress, head_text, data)


def absorb_lines(
    sf: SourceFile,
    ctx: ParseContext,
    head: list[str],
    lines: list[str],
    first_no: int,
    own_progress: bool,
    head_text: str | None = None,
    tail_text: str | None = None,
) -> None:
    """The facts a job-output file's lines hold beside its events: its first and last times (the
    attempt's start, the job's window), training under way, the world size, and progress.

    ``head`` is the file's beginning, ``lines`` its tail starting at line ``first_no``. A live
    reader (``firstfault.live``) hands each batch of new lines as both: every fact folds in by
    min/max or by accumulation, so batches give what one read of the whole would.
    """
    first = _first_time(head, ctx)
    if sf.attempt is not None and first is not None:
        start = ctx.attempt_start.get(sf.attempt)
        if start is None or first < start:
            ctx.attempt_start[sf.attempt] = first
    last = _first_time(lines[::-1], ctx)
    _training_marks(head, ctx, head_text)
    _training_marks(lines, ctx, tail_text)
    _training_end(lines, first_no, sf, ctx)
    _world_size(head, ctx, head_text)
    if first is not None or last is not None:
        lo, hi = first if first is not None else last, last if last is not None else first
        assert lo is not None and hi is not None
        lo, hi = min(lo, hi), max(lo, hi)
        old = ctx.spans.get(sf.rel)
        ctx.spans[sf.rel] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
    if not own_progress or (tail_text is not None and not any(lit in tail_text for lit in progress_mod.LITERALS)):
        return
    seen: dict[int, _Seen] = {}
    for i, raw in enumerate(lines):
        if not any(lit in raw for lit in progress_mod.LITERALS):
            continue
        text, local_rank, rank = strip_prefixes(raw)
        if rank is None:
            rank = local_rank if local_rank is not None else sf.local_rank
        _progress(text, rank, ctx, sf, first_no + i, seen)
    _merge_progress(seen, ctx, sf)


@dataclass(slots=True)
class _Seen:
    """One rank's progress lines of one file tail; timestamps are read for two lines only."""

    first_step: int
    first_text: str
    last_step: int
    last_text: str
    last_line: int
    steps: int = 0
    ms: list[float] = field(default_factory=list)
    own: list[float] = field(default_factory=list)  # the rank's own work per step, where the line says


def _progress(
    text: str, rank: int | None, ctx: ParseContext, sf: SourceFile, line: int, seen: dict[int, _Seen]
) -> None:
    got = progress_mod.match_progress_own(text)
    if got is None:
        return
    step, ms, named, own = got
    if named is not None and sf.kind == FileKind.ELASTIC_RANK_LOG and named != sf.local_rank:
        # "INFO [rank24] step 9 ..." in attempt_0/0/stdout.log: this directory is global rank 24
        ctx.dir_rank.setdefault(sf.rel.rsplit("/", 1)[0], named)
    r = named if named is not None else rank
    if r is None:
        return
    s = seen.get(r)
    if s is None:
        s = seen[r] = _Seen(step, text, step, text, line)
    elif step < s.first_step:
        s.first_step, s.first_text = step, text
    if step >= s.last_step:
        s.last_step, s.last_text, s.last_line = step, text, line
    s.steps += 1
    if ms is not None:
        s.ms.append(ms)
        if own is not None:
            s.own.append(own)


def _merge_progress(seen: dict[int, _Seen], ctx: ParseContext, sf: SourceFile) -> None:
    """Fold a file's per-rank progress into the bundle's (first and last step, with their times)."""
    prog = ctx.progress_by_attempt.setdefault(sf.attempt or 0, {})
    for r, s in seen.items():
        p = prog.setdefault(r, Progress())
        if sf.kind == FileKind.ELASTIC_RANK_LOG and sf.host:
            p.host = p.host or sf.host  # a rank's own log in a host's folder: where the rank ran
        if p.first_step is None or s.first_step < p.first_step:
            ts = parse_timestamp(s.first_text, ctx.year_hint)
            if ts is not None:
                p.first_step, p.first_ts = s.first_step, ts
        if p.last_step is None or s.last_step >= p.last_step:
            p.last_step = s.last_step
            p.last_ts = parse_timestamp(s.last_text, ctx.year_hint)
            p.last_source, p.last_line, p.last_text = sf.rel, s.last_line, s.last_text[:MAX_TEXT]
        p.steps_seen += s.steps
        room = 100_000 - len(p.step_ms)
        if room > 0:
            p.step_ms.extend(s.ms[:room])
            p.own_ms.extend(s.own[:room])


# Workers pay a fork and the shipping of their events back: worth it for many files or many bytes.
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
PARALLEL_MIN_FILES = 1500
SKIP_TEE_MIN_RANKS = 256
TASK_FILES = 400
# at least this many tasks a worker: a few big files still split finely enough that the one worker
# beside the FR stage hands the rest over soon after the dumps are loaded
TASKS_PER_JOB = 4
_FORKED: tuple[Bundle, LineClassifier, ParseContext] | None = None


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


def _worker(indexes: list[int]) -> tuple[list[Event], ParseContext, int, int, int]:
    assert _FORKED is not None
    bundle, classifier, template = _FORKED
    ctx = ParseContext(
        year_hint=template.year_hint,
        topology=template.topology,
        has_rank_files=template.has_rank_files,
        rank_files=template.rank_files,
        skip_tee_copies=template.skip_tee_copies,
    )
    events, read, nbytes, flagged = _parse_files([bundle.files[i] for i in indexes], classifier, ctx)
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
    for att, t in part.attempt_start.items():
        into.attempt_start[att] = min(t, into.attempt_start.get(att, t))
    into.dir_rank.update(part.dir_rank)
    into.spans.update(part.spans)
    into.job_files |= part.job_files
    into.training_seen = into.training_seen or part.training_seen
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
        events = _parse_forked(bundle, classifier, result, jobs, while_busy or (lambda: False))
    result.events = events
    return complete(result, bundle)


def _parse_forked(
    bundle: Bundle, classifier: LineClassifier, result: ParseResult, jobs: int, busy: Callable[[], bool]
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
    _FORKED = (bundle, classifier, ctx)
    try:
        k = 0
        if busy():
            with mp.get_context("fork").Pool(1, initializer=_quiet_worker) as pool:
                while k < len(groups) and busy():
                    replies[k] = pool.apply(_pickled_worker, (groups[k],))
                    k += 1
        if k < len(groups):
            with mp.get_context("fork").Pool(jobs, initializer=_quiet_worker) as pool:
                for j, reply in enumerate(pool.imap(_pickled_worker, groups[k:]), k):
                    replies[j] = reply
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
