"""Align: every event on one clock, duplicates folded, in causal order.

With ``torchrun --tee`` the same worker line lands in the rank's own log and in the launcher
console; a pasted console repeats it too. Those copies are one fact, so they are folded into
the copy that knows most (a per-rank file knows its rank and attempt). Per-host clock offsets
(``offsets``) are applied before ordering; estimating them is ``estimate_offsets``'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from statistics import median

from firstfault.vocab import Event, Role, Severity, TsQuality, settings


@dataclass
class Timeline:
    events: list[Event]
    offsets: dict[str, float] = field(default_factory=dict)
    folded: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def start(self) -> float | None:
        times = [e.ts for e in self.events if e.ts is not None]
        return min(times) if times else None


_QUALITY = {TsQuality.EXACT: 3, TsQuality.INHERITED: 2, TsQuality.COARSE: 1, TsQuality.NONE: 0}


def _score(e: Event) -> tuple[int, int, int]:
    """Prefer a per-rank log's copy (it knows rank and attempt), then the finest time."""
    return (
        e.source.endswith(".log") and "/attempt_" in e.source,
        _QUALITY.get(e.ts_quality, 0),
        e.attempt is not None,
    )


def _borrow_time(keep: Event, other: Event) -> None:
    """A per-rank stderr copy has no time; the console copy of the same line often has.

    The console's line number is kept too: the console interleaves every rank's output in the
    order it arrived, which orders two lines whose times are only inherited.
    """
    for e in (other, keep):
        if "/attempt_" not in e.source and "console_line" not in keep.fields:
            keep.set_field("console_line", f"{e.source}:{e.line}")
    if _QUALITY.get(other.ts_quality, 0) > _QUALITY.get(keep.ts_quality, 0):
        keep.ts, keep.ts_quality = other.ts, other.ts_quality
    elif (
        keep.ts_quality == TsQuality.INHERITED
        and other.ts_quality == TsQuality.COARSE
        and other.ts is not None
        and keep.ts is not None
        and other.ts > keep.ts
    ):
        # an inherited time is only a lower bound (the last timed line above, maybe long before);
        # torchrun's error.json records the exception's own second. (A console copy's inherited
        # time is no better: a block-buffered stdout reaches the console late.)
        keep.ts, keep.ts_quality = other.ts, other.ts_quality
    if keep.host is None:
        keep.host = other.host


def _same_fact(a: Event, b: Event) -> bool:
    """Copies of one line are close in time; an inherited time (a lower bound taken from the line
    above, in a console from another host's clock) may be far off, so it gets a wider window."""
    if a.ts is None or b.ts is None:
        return True
    if a.attempt is not None and b.attempt is not None and a.attempt != b.attempt:
        return False
    exact = a.ts_quality == TsQuality.EXACT and b.ts_quality == TsQuality.EXACT
    return abs(a.ts - b.ts) <= (
        settings.current().reasoning.dup_window_s if exact else settings.current().reasoning.inherited_dup_window_s
    )


def _fold_key(e: Event) -> tuple[int | None, str, str]:
    return (e.rank, e.signature, e.text.strip())


def fold_duplicates(events: Sequence[Event]) -> tuple[list[Event], int]:
    """Fold copies of one line (same rank, signature and text, close in time) into one."""
    # Keyed by the key's hash, each entry checked against the key itself (a collision is two keys
    # under one hash, kept apart): a tuple per event held for the whole fold cost ~26 MB at 16,384
    # ranks. A hash's first line is an int (its index in ``kept``), a list only once there are two.
    groups: dict[int, int | list[int]] = {}
    kept: list[Event] = []
    for e in events:
        key = _fold_key(e)
        h = hash(key)
        got = groups.get(h)
        if got is None:
            groups[h] = len(kept)
            kept.append(e)
            continue
        reps = [got] if isinstance(got, int) else got
        for i in reps:
            k = kept[i]
            if _fold_key(k) != key:
                continue  # another key with the same hash
            if e.rank is None and k.source == e.source:
                continue  # a console without prefixes: the same line twice is two processes printing it
            if _same_fact(k, e):
                if _score(e) > _score(k):
                    kept[i], e = e, k
                _borrow_time(kept[i], e)
                break
        else:
            reps.append(len(kept))
            groups[h] = reps
            kept.append(e)
    del groups
    # torchrun's ChildFailedError summary repeats each failed rank's last error line, indented and
    # without the rank prefix: an unplaced line identical to a placed one is that copy.
    unplaced = {(e.signature, e.text.strip()) for e in kept if e.rank is None and e.host is None}
    if unplaced:
        placed = {fk for e in kept if e.rank is not None and (fk := (e.signature, e.text.strip())) in unplaced}
        kept = [
            e for e in kept if e.rank is not None or e.host is not None or (e.signature, e.text.strip()) not in placed
        ]
    _share_block_times(kept)
    return kept, len(events) - len(kept)


def _share_block_times(events: Sequence[Event], lines: int = 5) -> None:
    """Lines of one report share its latest time: the ``DistBackendError`` line of a traceback that
    borrowed error.json's second (or a console copy's) lends it to the ``ncclInternalError`` line
    right below. An inherited time is a lower bound, so the latest bound in the block wins."""
    by_source: dict[str, list[Event]] = {}
    for e in events:
        by_source.setdefault(e.source, []).append(e)
    for evs in by_source.values():
        if len(evs) < 2:
            continue
        evs.sort(key=lambda e: e.line)
        for i, e in enumerate(evs):
            if e.ts_quality != TsQuality.INHERITED or e.ts is None:
                continue
            for o in evs[max(0, i - 2) : i]:  # a report's first line lends to the lines below it
                if o.role not in (Role.ROOT, Role.CASCADE) or o.signature.startswith(("cpp.terminate", "python.fatal")):
                    continue  # a tear-down dump or the dying process's abort is a later report of its own
                close = e.line - o.line <= lines and o.ts is not None
                # one report is printed at one moment: any bound on one line bounds them all
                if close and o.ts_quality != TsQuality.NONE and o.ts > e.ts:  # type: ignore[operator]
                    e.ts, e.ts_quality = o.ts, o.ts_quality


_NEVER = float("inf")


def _ts_or_never(e: Event) -> float:
    return e.ts if e.ts is not None else _NEVER


def sort_key(e: Event) -> tuple[float, str, int]:
    return (_ts_or_never(e), e.source, e.line)


def sort_in_time(events: list[Event]) -> None:
    """Sort in place by :func:`sort_key`, as three stable sorts (line, then file, then time).

    Why not ``sort(key=sort_key)``: that builds a tuple per event, 400,000 of them (~35 MB) at
    16,384 ranks, at the moment the whole timeline is held. These keys are the events' own
    attributes, so the sorts allocate only their key lists; the order is the same.
    """
    events.sort(key=attrgetter("line"))
    events.sort(key=attrgetter("source"))
    events.sort(key=_ts_or_never)


def align(events: Sequence[Event], offsets: dict[str, float] | None = None) -> Timeline:
    """Apply per-host clock offsets (seconds to add), fold copies, order by time."""
    offsets = offsets or {}
    for e in events:
        if e.ts is not None and e.host in offsets:
            e.ts += offsets[e.host]
    folded, n = fold_duplicates(events)
    sort_in_time(folded)
    return Timeline(folded, offsets, n)


@dataclass
class Offset:
    host: str
    seconds: float
    spread: float
    ranks: int


def estimate_offsets(
    events: Sequence[Event], min_shift: float = 2.0, reference: str | None = None, max_shift: float | None = None
) -> list[Offset]:
    """Per-host clock offsets from the fan-out of one failure across hosts.

    When a collective breaks, every surviving peer notices within about a second (a closed
    connection) or times out together (the same timeout, started at the same collective). So the
    first cascade event of each rank marks one instant seen through every host's clock. Per host,
    the median of its ranks' first cascade times is that host's reading. The reference clock is
    ``reference``'s (the host of rank 0, which holds the rendezvous store and the launcher's
    clock) when it has a reading, else the median over hosts. Offsets under ``min_shift``
    seconds are within the fan-out's own spread and are left alone; offsets over ``max_shift``
    are not clocks but a second wave of failures (a fault kills one group at once, the others
    time out ten minutes later), and are left alone too. The spread (max-min of a
    host's readings) is the offset's uncertainty.
    """
    limit = max_shift if max_shift is not None else settings.current().reasoning.max_clock_shift_s
    first: dict[int, Event] = {}
    for e in events:
        if e.role == Role.CASCADE and e.rank is not None and e.host and e.ts is not None:
            cur = first.get(e.rank)
            if cur is None or (cur.ts is not None and e.ts < cur.ts):
                first[e.rank] = e
    per_host: dict[str, list[float]] = {}
    for e in first.values():
        assert e.host is not None and e.ts is not None
        per_host.setdefault(e.host, []).append(e.ts)
    if len(per_host) < 2:
        return []
    readings = {h: median(ts) for h, ts in per_host.items()}
    ref = readings[reference] if reference in readings else median(readings.values())
    out = []
    for h, r in sorted(readings.items()):
        shift = ref - r
        if abs(shift) > limit:
            continue  # minutes apart: two failures seen at different times, not a wrong clock
        if abs(shift) >= min_shift:
            ts = per_host[h]
            out.append(Offset(h, shift, max(ts) - min(ts), len(ts)))
    return out


def apply_offsets(events: Sequence[Event], offsets: Sequence[Offset]) -> None:
    by_host = {o.host: o.seconds for o in offsets}
    for e in events:
        if e.ts is not None and e.host in by_host:
            e.ts += by_host[e.host]


def bound_inherited(events: Sequence[Event], end: float | None) -> None:
    """Give every event whose time was inherited the latest time it can have: the next line below it
    in the same file that has a time of its own, else ``end`` (the job's end)."""
    by_source: dict[str, list[Event]] = {}
    for e in events:
        by_source.setdefault(e.source, []).append(e)
    for evs in by_source.values():
        evs.sort(key=lambda e: e.line)
        upper = end
        for e in reversed(evs):
            if e.ts_quality == TsQuality.EXACT and e.ts is not None:
                upper = e.ts
            elif e.ts_quality == TsQuality.INHERITED and e.ts is not None:
                e.ts_hi = max(e.ts, upper) if upper is not None else None


def correct_clocks(events: list[Event], reference: str | None) -> tuple[list[Offset], list[str]]:
    """Estimate per-host clock offsets from the failure's fan-out, apply them, re-order: (offsets, warnings)."""
    offsets = estimate_offsets(events, reference=reference)
    warnings = []
    if offsets:
        apply_offsets(events, offsets)
        sort_in_time(events)
        for o in offsets:
            warnings.append(
                f"clock of host {o.host} corrected by {o.seconds:+.1f} s against "
                f"{reference or 'the median host'} (from {o.ranks} rank(s) seeing the same failure; "
                f"uncertainty ±{max(o.spread, 1.0):.1f} s)"
            )
    return offsets, warnings


def assign_attempts(events: Sequence[Event], starts: dict[int, float]) -> None:
    """Give console and host events the torchrun attempt they happened in, by time.

    Attempt K runs from the first line of its per-rank files until attempt K+1 starts.

    torchrun numbers attempts from 0, so a first known start at attempt K > 0 says attempt K-1 ran
    before it even when its files hold no timed line (print-style logs, a rank killed before it
    wrote one): what came before attempt K's first line is that earlier attempt's, not K's.
    """
    if starts and min(starts) > 0:
        starts = {min(starts) - 1: float("-inf"), **starts}
    if len(starts) < 2:
        return
    order = sorted(starts.items(), key=lambda kv: kv[1])
    last = max(starts)
    for e in events:
        if e.attempt is not None:
            continue
        if e.signature == "torchelastic.failure_record":
            e.attempt = last  # torchrun prints its ChildFailedError summary once, after the last attempt
            continue
        if e.ts is None:
            continue
        att = order[0][0]
        for k, t in order:
            if t <= e.ts:
                att = k
        e.attempt = att


RESTART = "torchelastic.restart"  # "[default] Worker group FAILED. 1/1 attempts left; will restart worker group"
WORKER_FAILED = "torchelastic.worker_failed"  # "failed (exitcode: -9) local_rank: 1 (pid: N) of binary: ..."


def console_attempt_starts(events: Sequence[Event]) -> dict[int, float]:
    """Where torchrun's attempts begin in a console, when no per-rank files give it (a pasted or
    redirected console of a job that restarted).

    torchrun announces a restart ("Worker group FAILED. 1/1 attempts left; will restart worker
    group") only at INFO, but logs each attempt's first failure at ERROR ("failed (exitcode: -9)
    local_rank: 1 ..."), once per attempt: every such line but the last ends an attempt that was
    restarted. One console only: two nodes' agents each log their own line for the same attempt.
    Under ``srun torchrun`` both agents write into one job output (their srun labels tell them
    apart, and the parser gives each line its agent's host): the failure lines are then counted
    per host, and only a host that logged more than one has restarts to show.
    """
    restarts = sorted({e.ts for e in events if e.signature == RESTART and e.ts is not None and e.attempt is None})
    per_host: dict[str | None, set[float]] = {}
    for e in events:
        if e.signature == WORKER_FAILED and e.ts is not None and e.attempt is None:
            per_host.setdefault(e.host, set()).add(e.ts)
    most = max(per_host.values(), key=lambda ts: len(ts), default=set[float]())
    failed = sorted(most)
    sources = {e.source for e in events if e.signature in (RESTART, WORKER_FAILED) and e.attempt is None}
    bounds = restarts or failed[:-1]
    if len(sources) != 1 or not bounds:
        return {}
    first = min(e.ts for e in events if e.ts is not None)
    starts = {0: min(first, bounds[0])}
    for k, b in enumerate(bounds, 1):
        starts[k] = b + 0.001  # the boundary line itself is the attempt it ends
    return starts


def first_failed_attempt(events: Sequence[Event]) -> int | None:
    atts = [
        e.attempt for e in events if e.attempt is not None and e.severity == Severity.ERROR and e.role != Role.NOISE
    ]
    return min(atts) if atts else None


def split_attempts(events: list[Event], starts: dict[int, float]) -> tuple[list[Event], list[Event], int | None]:
    """The events of the first attempt that failed, those of the restarts after it, and that attempt."""
    assign_attempts(events, starts)
    first = first_failed_attempt(events)
    now = [e for e in events if e.attempt is None or first is None or e.attempt <= first]
    now_ids = {id(e) for e in now}  # identity, not dataclass __eq__: O(n), not O(n^2)
    later = [e for e in events if id(e) not in now_ids] if first is not None else []
    return now, later, first
