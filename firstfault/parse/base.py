"""The parser interface: how one kind of file turns flagged lines into located lines.

Every text file goes through the same streaming scan (``parse.stream``) and the same
signature match; what differs per source is how a line says *where* and *when* it
happened: torchrun's ``[default3]:`` prefix, ``srun -l``'s ``3: ``, torch's ``[rank3]:``,
a syslog host field, a dmesg monotonic stamp. A :class:`SourceParser` subclass handles one
family of files; ``register_parser`` makes it the handler for a file kind. Parsers may also
learn facts (which rank runs on which host and GPU, a rank's progress) through the shared
:class:`ParseContext`.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from firstfault.discover import SourceFile
from firstfault.parse.losses import Series
from firstfault.parse.stream import Hit
from firstfault.parse.timestamps import parse_timestamp
from firstfault.vocab import FileKind, TsQuality
from firstfault.vocab.identity import ELASTIC_PREFIX, RANK_PREFIX, RAY_PREFIX, peel_pdsh, peel_quote, strip_prefixes
from firstfault.vocab.topology import Topology

# The longest text of a line an event keeps: a 100 MB line (a tensor dump) must not become a 100 MB event.
MAX_TEXT = 2000
# cheap precheck: every timestamp format firstfault reads has a clock in it
_CLOCK = re.compile(r"\d\d:\d\d:\d\d")


def _rank_dir(rel: str) -> str:
    return rel.rsplit("/", 1)[0]


def remap_ranks(events: list[Any], ctx: ParseContext) -> None:
    """Give every event of a per-rank directory the global rank that directory's lines name.

    torchrun numbers its per-rank directories by *local* rank; on a multi-node job the node's
    second agent writes ``attempt_0/0/`` for global rank 8. torch prefixes a rank's errors with
    ``[rank8]:``, so one such line fixes the whole directory, error.json included. Console lines
    of the same host learn the mapping through ``(host, local_rank)``.
    """
    if not ctx.dir_rank:
        return
    by_host_local: dict[tuple[str | None, int], int] = {}
    for e in events:
        g = ctx.dir_rank.get(_rank_dir(e.source))
        if g is not None:
            if e.local_rank is not None:
                by_host_local.setdefault((e.host, e.local_rank), g)
            e.rank = g
    for e in events:
        if _rank_dir(e.source) in ctx.dir_rank or e.local_rank is None:
            continue
        g = by_host_local.get((e.host, e.local_rank))
        if g is not None and (e.rank is None or e.rank == e.local_rank):
            e.rank = g


@dataclass(slots=True)
class LineInfo:
    """A flagged line with its prefixes peeled off and its place and time resolved."""

    text: str
    ts: float | None = None
    ts_quality: TsQuality = TsQuality.NONE
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    gpu: str | None = None
    pid: int | None = None


@dataclass(slots=True)
class Progress:
    """Per-rank training progress, accumulated without keeping every step line."""

    last_step: int | None = None
    last_ts: float | None = None
    first_step: int | None = None  # the first step of the window read (the file's tail)
    first_ts: float | None = None
    steps_seen: int = 0
    # C doubles, not lists of float objects: 16,384 ranks x their steps were 40 MB as lists
    step_ms: array[float] = field(default_factory=lambda: array("d"))
    own_ms: array[float] = field(default_factory=lambda: array("d"))  # own work per step (compute_ms), where given
    last_source: str | None = None
    last_line: int | None = None
    last_text: str | None = None
    host: str | None = None  # the host whose per-rank log folder held these lines


@dataclass
class ParseContext:
    year_hint: int | None = None
    topology: Topology = field(default_factory=Topology)
    # attempt -> rank -> progress; torchrun restarts start every rank's count again
    progress_by_attempt: dict[int, dict[int, Progress]] = field(default_factory=dict)
    # attempt -> progress lines no rank can be given (a node's agent under srun torchrun prints all its
    # workers' lines): they still say when the job last moved (reason.stalls)
    unranked_progress: dict[int, Progress] = field(default_factory=dict)
    # attempt -> earliest time seen in that attempt's per-rank files
    attempt_start: dict[int, float] = field(default_factory=dict)
    has_rank_files: bool = False
    rank_dirs_local: set[int] = field(default_factory=set)  # local ranks of torchrun's per-rank log files
    has_fr_dumps: bool = False
    has_error_files: bool = False
    has_launch_output: bool = False  # a launcher console, srun output or per-rank files: the job from its start
    has_job_output_kind: bool = False  # a file sniffed as a launcher's, srun's or NCCL's output
    # (host, local rank) of every torchrun per-rank log; with ``skip_tee_copies`` a console's
    # "[defaultN]:" line of such a rank is a --tee copy and is not parsed twice
    rank_files: frozenset[tuple[str | None, int]] = frozenset()
    skip_tee_copies: bool = False
    # per-rank directory (".../attempt_K/<local_rank>") -> the global rank its lines name
    dir_rank: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    default_host: str | None = None
    # file -> (first, last) time of the job's own output (ranks, launcher, srun): the job's window
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    # what the scheduler recorded: "start", "end" (scontrol StartTime/EndTime, sacct Start/End)
    sched: dict[str, float] = field(default_factory=dict)
    # files that are the job's own output (``SourceParser.job_output``); the rest are host logs
    job_files: set[str] = field(default_factory=set)
    # training was seen under way (a step, a loss, a tqdm rate) and the earliest time of such a line
    training_seen: bool = False
    # a line of a signature that is evidence of a job and nothing more (``sets.evidence``): noted, no event
    job_evidence: bool = False
    training_ts: float | None = None
    # "file:line: text" of a step counter at its total ("step 150/150"): training reached its end
    training_end: str | None = None
    # file -> the line of its step counter at its total, for every file that has one (each node's
    # console of a multi-node job reaches its own "step 20/20")
    training_ends: dict[str, int] = field(default_factory=dict)
    # (file, rank) -> the line before which the file's tail still shows ``facts.WENT_ON_LINES``
    # training lines of that rank (rank None: of any rank): an error above it is one the job went
    # on from; ``training_tagged`` holds the files whose training lines name their rank
    training_after: dict[tuple[str, int | None], int] = field(default_factory=dict)
    training_tagged: set[str] = field(default_factory=set)
    # file -> "file:line: text" of the last frame where the file ends inside a Python traceback
    # (its exception line never printed: a paste cut there, a process killed mid-print)
    cut_traceback: dict[str, str] = field(default_factory=dict)
    # file -> the number of its last line that is not blank (the tail read holds the file's end):
    # a line that says a wait was still going counts only where nothing follows it
    file_ends: dict[str, int] = field(default_factory=dict)
    # rank -> ("file:line", text) of the last line its own stderr file holds (torchrun's per-rank
    # stderr.log on one host, a log named for its rank): what a rank that exited without a
    # traceback wrote last ("shard 3: no samples left", sys.exit's message)
    last_words: dict[int, tuple[str, str]] = field(default_factory=dict)
    # file -> series (a rank, None where the lines name none) -> its trailing climb of training-loss
    # values as (line, value, step) (``parse.losses``): a climb at the end is a divergence with no
    # error line
    losses: dict[str, Series] = field(default_factory=dict)

    def progress(self, attempt: int | None = None) -> dict[int, Progress]:
        """Per-rank progress of one attempt (default: the first one seen)."""
        if not self.progress_by_attempt:
            return {}
        key = min(self.progress_by_attempt) if attempt is None else attempt
        return self.progress_by_attempt.get(key, {})

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)


class SourceParser:
    """Default handler: peel launcher prefixes, read ISO/glog times, inherit the time above."""

    inherit_lines: ClassVar[int] = 40

    @property
    def job_output(self) -> bool:
        """Is this file the job's own output (ranks, launcher, srun, NCCL)? Its lines bound the
        job's window, and its error lines that no signature knows are kept as unrecognised. Host
        logs (kernel, scheduler daemons) are not: they hold days of other activity."""
        return True

    def __init__(self, sf: SourceFile, ctx: ParseContext):
        self.sf = sf
        self.ctx = ctx
        self.last_ts: float | None = None
        # where the previous flagged line sat, so a backward search for a time stops there
        self._prev: tuple[bytes, int, float | None] = (b"", -1, None)
        # hosts pdsh named on this file's bracketed lines; their "host: " is peeled from any line
        self._pdsh_hosts: set[str] = set()

    def _strip_pdsh(self, text: str, info: LineInfo) -> str:
        """Peel pdsh's "host: " and take the host from it (see ``PDSH_PREFIX``). A host seen on a
        bracketed line is that host's label on its other lines too ("worker-1: Traceback ...")."""
        colon = text.find(": ", 0, 80)
        if colon > 0 and text[:colon] in self._pdsh_hosts:
            info.host = text[:colon]
            return text[colon + 2 :]
        text, host = peel_pdsh(text)
        if host is not None:
            self._pdsh_hosts.add(host)
            info.host = host
        return text

    def strip(self, text: str, info: LineInfo) -> str:
        srun = self.sf.kind in (FileKind.SLURM_OUTPUT, FileKind.LAUNCHER_CONSOLE, FileKind.APP_LOG)
        text = self._strip_pdsh(peel_quote(text), info)
        if text[:1] == "(" and info.pid is None and (ray := RAY_PREFIX.match(text)):
            info.pid = int(ray["pid"])  # the worker process Ray's log monitor names (parse.ray maps it to a rank)
        text, local_rank, rank = strip_prefixes(text, srun, pdsh=False)
        if local_rank is not None:
            info.local_rank = local_rank
        if rank is not None:
            info.rank = rank
        return text

    def timestamp(self, hit: Hit, text: str) -> tuple[float | None, TsQuality]:
        ts = parse_timestamp(text, self.ctx.year_hint) if _CLOCK.search(text, 0, 140) else None
        if ts is None and len(text) < len(hit.text) and _CLOCK.search(hit.text, 0, 40):
            # the time was in a prefix peeled off the line: a log collector's in front of Open MPI's
            # tag ("2019-06-02T16:13:44.884Z: [1,12]<stdout>:..."), the line's own time all the same
            ts = parse_timestamp(hit.text, self.ctx.year_hint)
        buf_id, prev_start, prev_ts = self._prev
        same = buf_id is hit.buf
        stop = prev_start if same else 0
        if ts is not None:
            if ts == int(ts):
                # a time to the second ("CANCELLED AT 2026-12-06T20:51:07") names the whole second: a
                # line below one stamped 20:51:07.120 in the same file was written after it, not before
                above = self._time_above(hit, stop)
                if above is None and same:
                    above = prev_ts  # the flagged line just above (its own or inherited time)
                if above is not None and ts < above < ts + 1:
                    ts = above
            self._prev = (hit.buf, hit.start, ts)
            return ts, TsQuality.EXACT
        ts = self._time_above(hit, stop)
        if ts is None:
            ts = prev_ts if same and prev_ts is not None else self.last_ts
        self._prev = (hit.buf, hit.start, ts)
        return (ts, TsQuality.INHERITED) if ts is not None else (None, TsQuality.NONE)

    def _time_above(self, hit: Hit, stop: int) -> float | None:
        """The time of the nearest timed line above ``hit`` (within ``inherit_lines``, not above ``stop``)."""
        for _, above in hit.iter_before(self.inherit_lines, stop):
            if not _CLOCK.search(above, 0, 140):
                continue
            ts = parse_timestamp(above, self.ctx.year_hint)
            if ts is None:
                m = ELASTIC_PREFIX.match(above) or RANK_PREFIX.match(above)
                if m:
                    ts = parse_timestamp(above[m.end() :], self.ctx.year_hint)
            if ts is not None:
                return ts
        return None

    def locate(self, hit: Hit) -> LineInfo:
        info = LineInfo(text="")
        info.local_rank = self.sf.local_rank
        info.rank = self.sf.rank
        info.host = self.sf.host or self.ctx.default_host
        explicit = self.sf.rank
        text = self.strip(hit.text, info)
        if info.rank is not None and info.rank != explicit and self.sf.kind == FileKind.ELASTIC_RANK_LOG:
            # torch's "[rank3]:" prefix in a per-rank file names the process's global rank
            self.ctx.dir_rank[_rank_dir(self.sf.rel)] = info.rank
        info.text = text
        info.ts, info.ts_quality = self.timestamp(hit, text)
        if info.ts is not None:
            self.last_ts = info.ts
        if info.rank is None and info.local_rank is not None:
            info.rank = self.global_rank(info.local_rank, info.host)
        if info.rank is not None:
            if info.host is None:
                info.host = self.ctx.topology.rank_host.get(info.rank)
            info.gpu = self.ctx.topology.rank_gpu.get(info.rank)
        return info

    def global_rank(self, local_rank: int, host: str | None) -> int:
        """Local -> global rank: identity until the bundle says otherwise (see ``remap_ranks``)."""
        return local_rank

    def is_copy(self, hit: Hit) -> bool:
        """True for a line that another file of the bundle holds too (see ``skip_tee_copies``)."""
        return False

    def finish(self) -> None:
        """Called after the last line of the file."""


PARSERS: dict[str, type[SourceParser]] = {}


def register_parser(*kinds: FileKind) -> Callable[[type[SourceParser]], type[SourceParser]]:
    def deco(cls: type[SourceParser]) -> type[SourceParser]:
        for k in kinds:
            PARSERS[k] = cls
        return cls

    return deco


def parser_for(sf: SourceFile, ctx: ParseContext) -> SourceParser:
    return PARSERS.get(sf.kind, SourceParser)(sf, ctx)
