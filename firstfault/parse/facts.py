"""The facts a job-output file's lines hold beside its events.

A file's first and last times (the attempt's start, the job's window), training under way and
its earliest time, the end of training (a step counter at its total), the world size a line
states (``parse.job_marks``), and each rank's progress. Why apart from the line stream (``parse.run``): these are read
from a file's head and tail only, never from every line, and a live reader folds them in batch
by batch (``absorb_lines``); the event stream is another pass with other costs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise

from firstfault.discover import SourceFile
from firstfault.parse import losses as losses_mod
from firstfault.parse import progress as progress_mod
from firstfault.parse.base import MAX_TEXT, ParseContext, Progress
from firstfault.parse.job_marks import rank_tagged, world_size
from firstfault.parse.ray import worker_rank, worker_ranks
from firstfault.parse.timestamps import parse_timestamp
from firstfault.vocab import FileKind
from firstfault.vocab.identity import srun_labels_agent, strip_prefixes
from firstfault.vocab.text import EXCEPTION_LINE, no_ansi

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


def training_marks(lines: list[str], ctx: ParseContext, blob: str | None = None) -> None:
    """Note that training was under way, and the earliest time a line of these shows it.

    ``blob`` is the lines' text in one string, when the caller has it: most tails (a stderr
    log, a tail of stack dumps) hold no training word at all and are passed over in one C scan.
    The time is that of the marker line or, failing that, of the nearest timed line above it:
    looked up from the marker backwards, so a tail's other lines are never parsed for a time.
    A traceback through the backward pass shows training too, untimed (:func:`training_frames`).
    """
    if blob is None:
        blob = "\n".join(lines)
    training_frames(blob, ctx)
    if not any(lit in blob for lit in progress_mod.TRAINING_LITERALS):
        return
    for i, raw in enumerate(lines):
        if not any(lit in raw for lit in progress_mod.TRAINING_LITERALS):
            continue
        if not _training_on(raw, strip_prefixes(raw)[0]):
            continue
        ctx.training_seen = True
        ts = _time_at_or_above(lines, i, ctx)
        if ts is not None and (ctx.training_ts is None or ts < ctx.training_ts):
            ctx.training_ts = ts
        return  # the earliest marker of these lines is the one that counts


# A traceback through autograd's backward pass: the process was running a training step when it
# failed. torch/_tensor.py's and torch/autograd/__init__.py's ``backward`` and 2.4+'s
# torch/autograd/graph.py ``_engine_run_backward`` are where ``loss.backward()`` enters the engine;
# the last is the source line CPython prints under the frame (a paste may begin below the frame).
# Ray Train's ``report`` (ray/train/v2/api/train_fn_utils.py, and Train v1's
# ray/train/_internal/session.py, Ray 2.60) is what a training function calls with a step's or an
# epoch's metrics: a traceback through it failed after a step was done.
_BACKWARD_FRAME = re.compile(
    r'File "[^"]*torch[/\\](?:_tensor\.py|autograd[/\\](?:__init__|graph)\.py)", line \d+, '
    r"in (?:backward|_engine_run_backward)"
    r"|_execution_engine\.run_backward\("
    r'|File "[^"]*ray[/\\]train[/\\](?:v2[/\\]api[/\\]train_fn_utils|_internal[/\\]session)\.py", line \d+, in report\b'
)
_FRAME_WORDS = ("backward", "in report")


def training_frames(blob: str, ctx: ParseContext) -> None:
    """Note training under way when a traceback runs through autograd's backward pass (or Ray
    Train's ``report`` of a step's metrics).

    Why: a step's line is what usually shows training, but a paste may hold only the failure's
    traceback. One whose frames pass through ``loss.backward()`` failed inside a training step, so
    it is no start-up failure (``reason.configuration.before_training``), whatever lines the paste
    left out. The time is not known (a frame has none): training is seen, its start is not placed.
    """
    if ctx.training_seen or not any(w in blob for w in _FRAME_WORDS):
        return
    if _BACKWARD_FRAME.search(blob):
        ctx.training_seen = True


def _shows_training(text: str) -> bool:
    return progress_mod.training_line(text) and not progress_mod.SETUP_BAR.search(text)


def _training_on(raw: str, text: str) -> bool:
    """Does line ``raw`` (``text``: without its prefixes) show training? The second test is a
    training bar the line was printed onto, which ``strip_prefixes`` peels."""
    return _shows_training(text) or ("%|" in raw and _shows_training(raw))


def _trained(
    numbered: Iterable[tuple[int, str]], sf: SourceFile, ctx: ParseContext, pids: dict[int, int] | None
) -> Iterator[tuple[int, int | None]]:
    """The training lines among ``numbered`` (index, line), each with whose it is: the rank its
    prefix names, else its local rank, else the rank Ray Train's worker table (``pids``) gives its
    process. A file whose training lines name a rank is noted as tagged. An exception's line that
    names a step or a loss is not one: after an error, copies of it (Ray's error snippet quotes
    every rank's) would pass for the training the job went on to."""
    for i, raw in numbered:
        if not any(lit in raw for lit in progress_mod.TRAINING_LITERALS):
            continue
        text, local_rank, rank = strip_prefixes(raw)
        if not _training_on(raw, text) or EXCEPTION_LINE.match(text.lstrip()):
            continue
        rank = rank if rank is not None else local_rank
        if rank is None and pids:
            rank = worker_rank(raw, pids)
        if rank is not None:
            ctx.training_tagged.add(sf.rel)
        yield i, rank


WENT_ON_LINES = 3  # training lines after an error that show the job went on from it
WENT_ON_SCAN = 2000  # tail lines read back for them (a tail is PROGRESS_TAIL bytes, ~120 lines)


def _training_after(
    lines: list[str],
    first_no: int,
    sf: SourceFile,
    ctx: ParseContext,
    blob: str | None = None,
    pids: dict[int, int] | None = None,
) -> None:
    """Note, per rank, the line of a file's tail above which ``WENT_ON_LINES`` training lines
    still follow (``reason.went_on`` reads it).

    An error the job went on from is not the job's failure: steps printed after an error line by
    the rank that printed it (wandb's retry loop, an LD_PRELOAD that did not load, a traceback a
    trainer caught and logged) show the rank outlived it. Three lines, not one, and the same
    rank's where lines name their rank: a peer can print a step or two after a rank died, before
    the collective that waits for it blocks. Read from the end of the tail (a per-rank file stops
    after its three lines; a console is read over the whole scan). ``pids``: Ray Train's worker
    table (``parse.ray``), which names the rank of a line labelled only with its process.
    """
    if blob is not None and not any(lit in blob for lit in progress_mod.TRAINING_LITERALS):
        return
    found: dict[int | None, int] = {}
    one = sf.rank is not None or sf.kind == FileKind.ELASTIC_RANK_LOG
    for back, rank in _trained(enumerate(reversed(lines[-WENT_ON_SCAN:])), sf, ctx, pids):
        for key in {None, rank}:
            found[key] = found.get(key, 0) + 1
            if found[key] == WENT_ON_LINES:
                no = first_no + len(lines) - 1 - back
                ctx.training_after[(sf.rel, key)] = max(no, ctx.training_after.get((sf.rel, key), 0))
        if one and min(found.values()) >= WENT_ON_LINES:
            return  # one process's file: its three are all there is to find
    # A console of several ranks is read back over the whole scan: torchrun passes each worker's
    # output on in blocks, so the last lines may all be one rank's while another's steps sit just
    # above them (a healthy job's caught FileNotFoundError on rank 2, its steps 4 to 20 above rank
    # 1's last block, was read as the failure). A rank that died keeps its error's reading: its
    # own last training lines are above that error.


def _training_below(head: list[str], sf: SourceFile, ctx: ParseContext, blob: str | None, pids: dict[int, int]) -> None:
    """The head's side of ``_training_after``: a line above a file's first ``WENT_ON_LINES``
    training lines (of its rank, where they name it) is one the job went on from.

    Why: the tail is read back a few hundred lines only, and a long console (a Ray driver's, with
    every worker's lines in it) can end far below its last step; an error printed at start-up
    (a retried request, a timed-out ``ray.get``) with training after it is still one the job
    outlived. The head is counted from line 1.
    """
    if blob is not None and not any(lit in blob for lit in progress_mod.TRAINING_LITERALS):
        return
    firsts: dict[int | None, list[int]] = {}
    for no, rank in _trained(enumerate(head, 1), sf, ctx, pids):
        for key in {None, rank}:
            seen = firsts.setdefault(key, [])
            if len(seen) < WENT_ON_LINES:
                seen.append(no)
                if len(seen) == WENT_ON_LINES:
                    k = (sf.rel, key)
                    ctx.training_after[k] = max(seen[0], ctx.training_after.get(k, 0))
        if all(len(seen) == WENT_ON_LINES for seen in firsts.values()):
            # every rank seen so far has its three (a rank's own file, a console of one process): as
            # the tail's scan, a rank that starts printing later is not looked for (the safe side)
            return


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
            no = first_no + len(lines) - 1 - back
            at = f"{sf.rel}:{no}: {text.strip()[:300]}"
            if ctx.training_end is None or at < ctx.training_end:
                ctx.training_end = at
            ctx.training_ends[sf.rel] = max(no, ctx.training_ends.get(sf.rel, 0))
            return


CUT_SCAN = 400  # lines read back from a file's end for the traceback it stops in
_DISTRIBUTED_FRAMES = ("/torch/distributed/", "/torch/nn/parallel/")


def _cut_traceback(lines: list[str], first_no: int, sf: SourceFile, ctx: ParseContext) -> None:
    """Note a file that ends inside a Python traceback: frames, and no exception line below them.

    Why: CPython prints a traceback's frames first and the exception's own line last, so a paste
    cut short (or a process killed while printing) can hold a failure's frames without its
    message. No signature reads a frame, and "no failure found" would then be a lie: the frames
    say an exception was raised (``reason.attribute`` says the fault's own line is missing). The
    run is read back from the last line through indented lines (frames, their source lines,
    3.11's carets) to "Traceback (most recent call last):", or to the file's first line when the
    paste starts inside the traceback; it must hold a ``File "..."`` frame. A faulthandler dump
    ("Thread 0x... (most recent call first):") or a complete traceback does not count. A frame
    in torch.distributed or DDP is evidence of a distributed job besides. A live reader's batch
    that ends inside a traceback is noted until a later batch of the file ends otherwise.
    """
    ctx.cut_traceback.pop(sf.rel, None)
    last = _last_filled(lines)
    frames, distributed, i = 0, False, last
    while i >= 0 and last - i < CUT_SCAN:
        bare = strip_prefixes(lines[i])[0]
        text = bare.lstrip()
        if text.startswith("Traceback (most recent call last)"):
            break
        if not text or text == bare:  # a blank line, or one not indented: no frame of a traceback
            return
        if text.startswith('File "'):
            frames += 1
            distributed = distributed or any(d in text for d in _DISTRIBUTED_FRAMES)
        i -= 1
    if not frames or (i < 0 and first_no > 1) or last - i >= CUT_SCAN:
        return  # no frame, or a headless run whose top the tail read does not reach
    ctx.cut_traceback[sf.rel] = f"{sf.rel}:{first_no + last}: {strip_prefixes(lines[last])[0].strip()[:300]}"
    if distributed:
        ctx.job_evidence = True


def _last_words(lines: list[str], first_no: int, sf: SourceFile, ctx: ParseContext) -> None:
    """The last line a rank's own stderr holds: torchrun's per-rank ``stderr.log`` (on one host,
    where its local rank is the rank) or a text log named for its rank. A rank that exited with a
    failing code and no traceback often said why on its way out (``sys.exit("...")`` prints its
    message there; so does a script's ``print(..., file=sys.stderr)`` before ``exit(1)``); the
    verdict quotes it instead of calling the reason missing. The tail read holds the file's end."""
    if sf.kind == FileKind.ELASTIC_RANK_LOG:
        if sf.stream != "stderr" or sf.host is not None or sf.local_rank is None:
            return
        rank = sf.local_rank
    elif sf.rank is not None:
        rank = sf.rank
    else:
        return
    for i in range(len(lines) - 1, -1, -1):
        bare = strip_prefixes(lines[i])[0].rstrip()
        if not bare:
            continue
        # an indented line is a traceback's frame or a warning's source line, and a warning is one
        # the process went on from: the file ends on neither the process's own last message
        if bare[0] not in " \t" and not _WARNING_LINE.search(bare):
            ctx.last_words[rank] = (f"{sf.rel}:{first_no + i}", bare[:MAX_TEXT])
        return


def _last_filled(lines: list[str]) -> int:
    """The index of the last line that is not blank; -1 when every line is."""
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    return last


def _file_end(lines: list[str], first_no: int, sf: SourceFile, ctx: ParseContext) -> None:
    """The number of the file's last line that is not blank (a live reader's later batch moves it)."""
    last = _last_filled(lines)
    if last >= 0:
        ctx.file_ends[sf.rel] = first_no + last


def _losses(lines: list[str], first_no: int, sf: SourceFile, ctx: ParseContext) -> None:
    """Fold the training-loss values of a file's last lines into its series (``parse.losses``);
    a live reader's batches fold in order, so the series stays the file's last values."""
    found: list[tuple[int | None, int, float, int | None]] = []
    stop = max(0, len(lines) - losses_mod.SCAN_LINES)
    i = len(lines) - 1
    # read back from the end: a rank's log holds a loss on every step line, and its last values
    # are all a series needs (a tail of thousands of step lines costs ``SCAN_VALUES`` of them)
    while i >= stop and len(found) < losses_mod.SCAN_VALUES:
        raw = lines[i]
        if "oss" in raw:
            text, local_rank, rank = strip_prefixes(raw)
            got = losses_mod.loss_value(text)
            if got is not None:
                who = rank if rank is not None else local_rank if local_rank is not None else got[0]
                prog = progress_mod.match_progress(text)
                found.append((who, first_no + i, got[1], prog[0] if prog else None))
        i -= 1
    if not found:
        return
    series = ctx.losses.setdefault(sf.rel, {})
    for who, no, value, step in reversed(found):
        losses_mod.fold(series, who, no, value, step)


# CPython's warnings.formatwarning: "path:lineno: CategoryWarning: message"
_WARNING_LINE = re.compile(r":\d+: \w*Warning: ")


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


def head_and_tail(sf: SourceFile, ctx: ParseContext, total_lines: int, own_progress: bool) -> None:
    """Progress from the end of a job-output file; its first and last times from both ends.

    Progress lines are the bulk of a healthy log. Reading them all would make every step line
    a Python call; the last step and recent step times are at the end, so only the last
    ``PROGRESS_TAIL`` bytes are read. The first timed line gives the attempt's start, and with
    the last it bounds the job's window (``reason.window``).
    """
    wide = len(ctx.job_files) <= WIDE_HEAD_FILES  # the first files of a bundle: look further for training
    with open(sf.path, "rb") as fh:
        head_text = no_ansi(fh.read(WIDE_HEAD if wide else SPAN_HEAD).decode("utf-8", "replace"))
        head = head_text.splitlines()
        offset = max(0, sf.size - PROGRESS_TAIL)
        fh.seek(offset)
        data = no_ansi(fh.read(PROGRESS_TAIL).decode("utf-8", "replace"))
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
    training_marks(head, ctx, head_text)
    training_marks(lines, ctx, tail_text)
    _training_end(lines, first_no, sf, ctx)
    _cut_traceback(lines, first_no, sf, ctx)
    _last_words(lines, first_no, sf, ctx)
    _file_end(lines, first_no, sf, ctx)
    _losses(lines, first_no, sf, ctx)
    pids = worker_ranks(head_text, tail_text)
    _training_after(lines, first_no, sf, ctx, tail_text, pids)
    if first_no > 1 and head is not lines:
        # only where the tail read does not reach the file's top (a live reader's batch is both)
        _training_below(head, sf, ctx, head_text, pids)
    world_size(head, ctx, head_text)
    rank_tagged(head, ctx, head_text)
    if first is not None or last is not None:
        lo, hi = first if first is not None else last, last if last is not None else first
        assert lo is not None and hi is not None
        lo, hi = min(lo, hi), max(lo, hi)
        old = ctx.spans.get(sf.rel)
        ctx.spans[sf.rel] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
    if not own_progress or (tail_text is not None and not any(lit in tail_text for lit in progress_mod.LITERALS)):
        return
    seen: dict[int, _Seen] = {}
    unranked: dict[int, _Seen] = {}
    srun = not _srun_labels_agents(sf, head, lines)
    untagged: list[tuple[str, int]] = []
    for i, raw in enumerate(lines):
        if not any(lit in raw for lit in progress_mod.LITERALS):
            continue
        text, local_rank, rank = strip_prefixes(raw, srun=srun)
        if rank is None:  # a torchrun per-rank file's local rank, else the rank a file is named for
            rank = local_rank if local_rank is not None else sf.local_rank if sf.local_rank is not None else sf.rank
        step = _progress(text, rank, ctx, sf, first_no + i, seen, unranked)
        if step is not None:
            untagged.append((text, step))
    _merge_progress(seen, ctx, sf)
    if unranked and not seen:
        _merge_progress(unranked, ctx, sf, {-1: ctx.unranked_progress})
        _printers(untagged, ctx)


# numbers in a progress line, masked to compare lines of one template ("iter #/# | loss # | # ms/it")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# a step count that falls back by more than this is a restart or another loop, not ranks out of step
_LAG = 1
_MIN_STEPS = 3


def _printers(lines: list[tuple[str, int]], ctx: ParseContext) -> None:
    """The least number of processes that printed these untagged progress lines: a lower bound of
    the world size (``Topology.untagged_printers``; ranks below it are known ranks), where no line
    states it.

    Why: a console of ranks that print without a rank tag (``print`` under torchrun without
    ``--tee``/``--role`` prefixes, ``mp.spawn``) holds each step's line once per printing rank:
    "iter 5/20 | loss ..." three times is three processes at step 5. A rank that went quiet is then
    not "a rank that printed nothing and cannot be ruled out" but one of a known number. Counted per
    line template, so that a trainer's two lines of one step (a loss line and a tqdm bar) are not two
    ranks, and only where the steps never fall back by more than one (a restart counts step 1
    again); the median over the steps, so that a step whose lines a terminal merged or a tail cut
    counts for no more than it shows."""
    by_template: dict[str, list[int]] = {}
    for text, step in lines:  # (text, step) of each untagged progress line, in the file's order
        by_template.setdefault(_NUMBER.sub("#", text.strip()), []).append(step)
    bound = 0
    for steps in by_template.values():
        if any(b < a - _LAG for a, b in pairwise(steps)):
            continue
        counts: dict[int, int] = {}
        for st in steps:
            counts[st] = counts.get(st, 0) + 1
        if len(counts) < _MIN_STEPS:
            continue
        ordered = sorted(counts.values())
        bound = max(bound, ordered[len(ordered) // 2])
    if bound > 1:
        ctx.topology.untagged_printers = max(ctx.topology.untagged_printers, bound)


def _srun_labels_agents(sf: SourceFile, head: list[str], lines: list[str]) -> bool:
    """Under ``srun torchrun`` a job output's ``N: `` label is node N's torchrun agent, which prints
    the lines of all its workers: a progress line "1: step 4/20" is then some rank of node 1, not
    rank 1 (``parse.slurm`` reads the labels the same way for events)."""
    if sf.kind != FileKind.SLURM_OUTPUT:
        return False
    return any(("torch/distributed/" in raw or "[default" in raw) and srun_labels_agent(raw) for raw in (*head, *lines))


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
    text: str,
    rank: int | None,
    ctx: ParseContext,
    sf: SourceFile,
    line: int,
    seen: dict[int, _Seen],
    unranked: dict[int, _Seen] | None = None,
) -> int | None:
    """Fold one progress line into ``seen``; the step of a line no rank can be given (counted in
    ``unranked``), which ``_printers`` reads, else None."""
    got = progress_mod.match_progress_own(text)
    if got is None:
        return None
    step, ms, named, own = got
    if named is not None and sf.kind == FileKind.ELASTIC_RANK_LOG and named != sf.local_rank:
        # "INFO [rank24] step 9 ..." in attempt_0/0/stdout.log: this directory is global rank 24
        ctx.dir_rank.setdefault(sf.rel.rsplit("/", 1)[0], named)
    r = named if named is not None else rank
    rankless = r is None
    if r is None:
        if unranked is None:
            return None
        r, seen = -1, unranked  # the job moved; which rank, the line does not say
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
    return step if rankless else None


def _merge_progress(
    seen: dict[int, _Seen], ctx: ParseContext, sf: SourceFile, into: dict[int, dict[int, Progress]] | None = None
) -> None:
    """Fold a file's per-rank progress into the bundle's (first and last step, with their times);
    ``into`` {-1: attempt -> progress} folds the lines no rank can be given into ``unranked_progress``."""
    if into is not None:
        prog = {-1: into[-1].setdefault(sf.attempt or 0, Progress())}
    else:
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
