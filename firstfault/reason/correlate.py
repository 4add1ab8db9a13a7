"""Correlate: which events are faults in their own right, and which follow from them.

The input is the aligned timeline; the output is, per rank, the first event of each role,
and a set of *candidates*: the independent faults that could be the root. Three kinds of
evidence make a candidate:

* an event whose signature says it is a root (an exception, an Xid, an OOM kill), unless a
  more fundamental event explains it (a hardware fault on the same host shortly before);
* a process that died with no explanation of its own (SIGKILL, SIGSEGV, a non-zero exit
  without a traceback), seen in the launcher's failure records;
* silence: in a hang the culprit is the rank that does *not* report a timeout, or whose
  progress stopped first, or that the flight recorder shows missing from the collective.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Sequence
from dataclasses import dataclass, field

from firstfault.match.unrecognised import UNRECOGNISED
from firstfault.reason.transients import Recovery, demote_recovered
from firstfault.vocab import CandidateKind, Category, Event, Layer, Role, Severity, TsQuality, settings
from firstfault.vocab.topology import normalize_pci

# Lower layers explain higher ones: a GPU falling off the bus explains the CUDA error above it.
LAYER_DEPTH = {
    Layer.HARDWARE: 0,
    Layer.DRIVER: 1,
    Layer.NETWORK: 2,
    Layer.HOST: 3,
    Layer.SCHEDULER: 4,
    Layer.LAUNCHER: 5,
    Layer.FRAMEWORK: 6,
    Layer.APPLICATION: 7,
}
TEARDOWN_SIGNALS = {"SIGTERM", "SIGINT", "SIGHUP"}
#: How a process reports dying in interpreter shutdown (its threads still running): they say how it
#: died, not why.
SHUTDOWN_ABORTS = frozenset({"python.fatal_abort", "cpp.terminate_no_exception"})
# A signature's ``sets = { defer = "report" }``: a supervisor's report of a process's death (Ray's
# raylet: "A worker died or was killed ... Worker exit type: SYSTEM_ERROR"), which a driver's
# console can print before the lines the process itself wrote on its way out
REPORT = "report"


@dataclass
class Candidate:
    """One independent fault that could be the root."""

    kind: CandidateKind
    event: Event | None
    rank: int | None
    host: str | None
    ts: float | None
    category: Category
    reasons: list[str] = field(default_factory=list)
    supporting: list[Event] = field(default_factory=list)
    what: str | None = None  # what happened, where neither the root's line nor the kind says it

    @property
    def depth(self) -> int:
        return LAYER_DEPTH.get(self.event.layer, 7) if self.event else 7


@dataclass
class RankView:
    rank: int
    first_root: Event | None = None
    first_cascade: Event | None = None
    first_teardown: Event | None = None
    exits: list[Event] = field(default_factory=list)
    roots: list[Event] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    unrecognised: list[Event] = field(default_factory=list)  # its own error lines no signature knows

    def left_no_line(self, progressed: Container[int]) -> bool:
        """No event of this rank (an error, an exit, a tear-down) and no progress line: what is
        known of it comes from the numbering, the world size or its peers (noise lines aside)."""
        return not self.events and self.rank not in progressed

    def said_nothing(self) -> bool:
        """No error of its own and no symptom: a root or a cascade would say what it met."""
        return self.first_root is None and self.first_cascade is None

    def timed_out(self) -> bool:
        """Its first symptom is a timeout waiting on its peers (a watchdog, a store wait)."""
        return self.first_cascade is not None and self.first_cascade.category == Category.HANG


@dataclass
class Correlation:
    ranks: dict[int, RankView]
    host_events: dict[str, list[Event]]
    candidates: list[Candidate]
    errors: list[Event]
    attempts: list[int]
    recoveries: list[Recovery] = field(default_factory=list)
    unrecognised: list[Event] = field(default_factory=list)  # error lines no signature knows, in time order


def candidate_order(c: Candidate) -> tuple[float, int]:
    """Earliest first; a time known only to the second counts from the middle of its second,
    so that it does not beat an exact time a few hundred milliseconds earlier."""
    if c.ts is None:
        return (float("inf"), c.depth)
    coarse = c.event is not None and c.event.ts_quality == TsQuality.COARSE
    return (c.ts + (0.5 if coarse else 0.0), c.depth)


def _console_pos(c: Candidate) -> tuple[str, int, bool] | None:
    """Where the console received an event whose time is a neighbour's: the console line it was
    merged from (True), else its own file and line (False)."""
    if c.event is None or c.event.ts_quality != TsQuality.INHERITED:
        return None
    where = c.event.fields.get("console_line")
    if not where:
        return (c.event.source, c.event.line, False)
    if ":" not in where:
        return None
    src, line = where.rsplit(":", 1)
    return (src, int(line), True) if line.isdigit() else None


# Lines of one file this close that took their time from a neighbour were printed as one moment:
# the file's order is theirs (a rank's exception, and the "terminate called" of its dying process)
ADJACENT_LINES = 5


def _in_order(pa: tuple[str, int, bool], pb: tuple[str, int, bool]) -> bool:
    """Do two positions order their events: both lines of the console they were merged into, or
    both lines of their own file within ``ADJACENT_LINES`` of each other."""
    if pa[2] and pb[2]:
        return True
    return not pa[2] and not pb[2] and abs(pa[1] - pb[1]) <= ADJACENT_LINES


def arrival_order(cands: list[Candidate], window: float = 1.0) -> None:
    """Near-ties between inherited times are decided by the order the console received them,
    or, for lines of one file a few lines apart, by the file's order; a bare exit's second yields
    to an error read in it (:func:`_read_before_bare_exit`)."""
    _read_before_bare_exit(cands)
    changed = True
    while changed:
        changed = False
        for i in range(len(cands) - 1):
            a, b = cands[i], cands[i + 1]
            pa, pb = _console_pos(a), _console_pos(b)
            if pa is None or pb is None or pa[0] != pb[0] or a.ts is None or b.ts is None:
                continue
            if abs(a.ts - b.ts) < window and pb[1] < pa[1] and _in_order(pa, pb):
                cands[i], cands[i + 1] = b, a
                changed = True


def _read_before_bare_exit(cands: list[Candidate]) -> None:
    """An error of its own that no clock puts after a bare exit's second goes before that exit.

    Why: torchrun records a failure's time to the second, and a rank's exit code 1 (an exception,
    its traceback not in the log) says it failed, not why. When another rank's own error, read in
    the log, falls inside that second with no exact clock of its own (a time taken from a line
    below or above it), nothing orders the two; the midpoint rule of ``candidate_order`` would
    then pick the exit over the error half the time. The error explains something; the bare exit
    only says that something happened.

    A file with no clock at all orders a process's lines by where they are: an exit record is
    written once the process has ended, after everything it printed, so an error line above a bare
    exit's record in the same file, neither of them timed, that the exiting process could have
    printed (its rank's, or one that names no rank) came first (a paste of a CUDA OOM over srun's
    "task 4: Exited with exit code 1" records). Another rank's line says nothing of the order."""
    if len(cands) < 2:
        return
    top = cands[0]
    if top.kind != CandidateKind.EXIT or top.event is None or exit_signal(top.event) is not None:
        return
    if top.ts is None:
        above = [
            (c.event.line, i)
            for i, c in enumerate(cands[1:], start=1)
            if c.ts is None
            and c.kind == CandidateKind.EVENT
            and c.event is not None
            and c.event.source == top.event.source
            and c.event.line < top.event.line
            and c.event.rank in (None, top.rank)
        ]
        if above:
            cands.insert(0, cands.pop(min(above)[1]))
        return
    if top.event.ts_quality != TsQuality.COARSE:
        return
    for i, c in enumerate(cands[1:], start=1):
        if c.ts is None or c.ts >= top.ts + 1.0:
            return
        ev = c.event
        own = c.kind == CandidateKind.EVENT and ev is not None and ev.rank is not None
        if own and ev is not None and ev.ts_quality == TsQuality.INHERITED:
            cands.insert(0, cands.pop(i))
            return


def exit_signal(e: Event) -> str | None:
    sig = e.fields.get("signame")
    if sig:
        return sig
    code = e.fields.get("exitcode")
    if code and code.lstrip("-").isdigit() and int(code) < 0:
        import signal as _signal

        try:
            return _signal.Signals(-int(code)).name
        except ValueError:
            return None
    return None


# Exit statuses that say a process failed, not why: 1 is CPython's status for an uncaught exception
# (and most programs' "error"), SIGABRT is abort() under an uncaught C++ exception or a failed check
# (gloo's enforce, c10's TORCH_CHECK, glibc's), and each waiter's watchdog after a peer hung. The
# failure's own words are its error, printed above the exit. A SIGKILL (the OOM killer, a
# scheduler), a SIGSEGV (a crash) or a status the program chose (``sys.exit(3)``) says more.
GENERIC_EXIT_CODES = frozenset({"1"})
GENERIC_EXIT_SIGNALS = frozenset({"SIGABRT"})


def says_only_failed(e: Event) -> bool:
    """Is exit record ``e``'s status one that says only that the process failed (see above)?"""
    return exit_signal(e) in GENERIC_EXIT_SIGNALS or e.fields.get("exitcode", "").strip() in GENERIC_EXIT_CODES


def is_exit_record(e: Event) -> bool:
    return "exitcode" in e.fields


def _rank_views(events: Sequence[Event]) -> tuple[dict[int, RankView], dict[str, list[Event]]]:
    ranks: dict[int, RankView] = {}
    hosts: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.role == Role.NOISE or e.signature == UNRECOGNISED:
            if e.rank is not None and e.signature == UNRECOGNISED and e.role != Role.NOISE:
                ranks.setdefault(e.rank, RankView(e.rank)).unrecognised.append(e)
            continue
        if e.rank is None or e.fields.get("job_level") == "1":
            # "" holds events whose place is unknown; a word about the whole job (a cancel, a stop
            # from outside) is no rank's own, whichever process printed it: Ctrl-C's
            # KeyboardInterrupt reaches every rank, and a rank's copy of it is no fault of that rank
            hosts[e.host or ""].append(e)
            continue
        v = ranks.setdefault(e.rank, RankView(e.rank))
        v.events.append(e)
        if e.host:
            v.hosts.add(e.host)
        if is_exit_record(e):
            v.exits.append(e)
            continue
        if e.role == Role.ROOT:
            v.roots.append(e)
            if v.first_root is None:
                v.first_root = e
        elif e.role == Role.CASCADE and v.first_cascade is None and e.fields.get("defer") != REPORT:
            v.first_cascade = e  # a report of the rank's own death (REPORT) is not it losing a peer
        elif e.role == Role.TEARDOWN and v.first_teardown is None:
            v.first_teardown = e
    for v in ranks.values():
        _torn_down_aborts(v)
        v.first_root = _most_specific(v.roots)
    return ranks, hosts


def _torn_down_aborts(v: RankView) -> None:
    """A rank the launcher tore down (SIGTERM) that aborted on its way out did not fail on its own.

    Stopping a process whose communication threads are still running makes it print ``terminate
    called without an active exception`` or ``Fatal Python error: Aborted`` during shutdown; on a
    loaded machine several torn-down ranks do. Those lines are part of the tear-down.
    """
    if not v.roots or any(e.signature not in SHUTDOWN_ABORTS for e in v.roots):
        return
    if not any(exit_signal(x) in TEARDOWN_SIGNALS for x in v.exits):
        return
    for e in v.roots:
        e.role = Role.TEARDOWN
        e.set_field("teardown", "aborted in shutdown after the launcher's SIGTERM")
    v.roots = []


# How far below an announcement (``sets.defer``) the reason it announces may be: ``terminate called
# after throwing ...`` and its ``what():`` line, with a frame or two between them
ANNOUNCED_WITHIN = 5


def _announces(e: Event) -> bool:
    """A line that only announces a reason to follow (``sets = {defer = "1"}``)."""
    return e.fields.get("defer") == "1"


def _most_specific(roots: list[Event]) -> Event | None:
    """The first root event, or a more specific one right beside it.

    A C++ abort prints ``terminate called after throwing ...`` and then ``what(): <reason>``:
    signatures that only announce a reason to follow carry ``sets = {defer = "1"}``, and the
    more specific event right after them is the better root. A report of the process's death by
    whoever supervised it (``defer = "report"``) gives way to the process's own root anywhere later
    in the same file: the process's own words say why; the report only says that it died.
    """
    if not roots:
        return None
    first = roots[0]
    if first.fields.get("defer") == REPORT:
        own = (e for e in roots[1:] if e.source == first.source and e.fields.get("defer") != REPORT)
        return next(own, first)
    best = first
    if not _announces(first):
        return first
    for e in roots[1:]:
        same_place = e.source == first.source and 0 <= e.line - first.line <= ANNOUNCED_WITHIN
        if same_place and e.priority > best.priority:
            best = e
    return best


def earlier(a: Event | None, b: Event | None) -> bool:
    """a happened before b (unknown times sort last; the file order breaks ties)."""
    if a is None:
        return False
    if b is None:
        return True
    if a.source == b.source and a.ts == b.ts:
        return a.line < b.line
    ta = a.ts if a.ts is not None else float("inf")
    tb = b.ts if b.ts is not None else float("inf")
    return ta < tb


# The process dying after an exception: always a report of its own, never the exception's tail.
_ABORTS = ("cpp.terminate", "python.fatal_abort")


def same_block(a: Event, b: Event, lines: int = 3) -> bool:
    """Two lines of one message: ``DistBackendError: NCCL error in: ... internal error`` and the
    ``ncclInternalError: Internal check failed.`` right below it are one report, not a victim's
    timeout followed by an error of its own. (``Connection reset by peer`` and the
    ``terminate called without an active exception`` of the dying process below it are two.)"""
    if b.signature.startswith(_ABORTS) or a.signature.startswith(_ABORTS):
        return False
    near_in_time = a.ts is None or b.ts is None or abs(a.ts - b.ts) < 1
    return a.source == b.source and 0 < b.line - a.line <= lines and near_in_time


def victim_first(v: RankView) -> bool:
    """The rank lost a peer (a timeout, a closed connection) before its own error: the error follows.

    One test for the candidate list and for "every rank failed the same way": the abort a rank
    prints after its peer vanished is the peer's failure, not a second copy of it.
    """
    fc, fr = v.first_cascade, v.first_root
    return fc is not None and fr is not None and earlier(fc, fr) and not same_block(fc, fr)


def exit_reading(e: Event) -> tuple[str, Category]:
    """What an exit record says of its process, in words ("was killed by SIGKILL (exit code -9)",
    "exited with code 1"), and its category: a signal is a crash, a code an error the process
    reported (its traceback, if any, elsewhere)."""
    sig, code = exit_signal(e), e.fields.get("exitcode", "?")
    if sig:
        return f"was killed by {sig} (exit code {code})", Category.PROCESS_CRASH
    return f"exited with code {code}", Category.APPLICATION_ERROR


def last_words(said: dict[int, tuple[str, str]], rank: int) -> tuple[str, str] | None:
    """What a rank's own stderr file says last (``parse.facts._last_words``), as a reason and as
    the tail of a verdict's "what": quoted as a fact, not as a cause a signature recognised."""
    got = said.get(rank)
    if got is None:
        return None
    where, text = got
    return f"the last line rank {rank} wrote to its stderr ({where}): {text}", f"; its stderr's last line: {text}"


def _exit_candidate(v: RankView) -> Candidate | None:
    """A rank that died with no explanation of its own (no traceback, not torn down)."""
    for ex in v.exits:
        sig = exit_signal(ex)
        if sig in TEARDOWN_SIGNALS:
            continue
        if v.first_root is not None or v.first_cascade is not None:
            return None  # its own log explains the exit
        how, cat = exit_reading(ex)
        reason = f"rank {v.rank} {how} " + ("with no error of its own" if sig else "without a traceback")
        return Candidate(CandidateKind.EXIT, ex, v.rank, ex.host, ex.ts, cat, [reason])
    return None


def quotes_cause(e: Event) -> bool:
    """A tear-down that quotes the error it caught, matched at parse time (``cause_signature``)."""
    return e.role == Role.TEARDOWN and "cause_signature" in e.fields


_WATCHDOG_TEARDOWN = "nccl.async_error_teardown"


def _quoted_symptoms(events: Sequence[Event]) -> None:
    """A tear-down quoting a symptom (the watchdog re-raising the timeout it caught) is that
    symptom: the rank that printed it waited for a peer, as its timeout line would have said."""
    for e in events:
        if e.role == Role.TEARDOWN and e.fields.get("cause_role") == Role.CASCADE.value:
            e.role = Role.CASCADE
            e.category = Category(e.fields.get("cause_category", e.category))


def _announced_symptoms(events: Sequence[Event]) -> None:
    """An abort that announces a symptom is that symptom's tail, not a crash of its own.

    ``terminate called after throwing an instance of 'c10::DistBackendError'`` (``defer``) is the
    process dying of the exception its ``what():`` line, right below, spells out. When that line is
    a peer's timeout or a watchdog re-raising what it caught (a cascade or a tear-down), the abort
    is part of it: it takes that role (and rank), and the quoted cause, if any, stays the evidence.
    With nothing below it (the paste stops there), the watchdog's "we are taking the entire process
    down" right above it says the same. Announcements are rare: only their files are looked at.
    """
    sources = {e.source for e in events if e.role == Role.ROOT and _announces(e)}
    if not sources:
        return
    by_source: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.source in sources:
            by_source[e.source].append(e)
    for evs in by_source.values():
        evs.sort(key=lambda e: e.line)
        for i, e in enumerate(evs):
            if e.role != Role.ROOT or not _announces(e):
                continue
            nxt = next((n for n in evs[i + 1 :] if n.line > e.line), None)
            if nxt is not None and nxt.line - e.line <= ANNOUNCED_WITHIN:
                if nxt.role not in (Role.CASCADE, Role.TEARDOWN):
                    continue  # the reason below is a fault of its own: the announcement defers to it
            else:
                # no reason below (a paste cut after it): the watchdog's "we are taking the entire
                # process down" right above says what the abort is
                prv = next((p for p in reversed(evs[:i]) if p.line < e.line), None)
                if prv is None or e.line - prv.line > 3 or prv.signature != _WATCHDOG_TEARDOWN:
                    continue
                nxt = prv
            e.role, e.category = nxt.role, nxt.category
            if e.rank is None:
                e.rank = nxt.rank
            e.set_field("teardown", f"the process aborting on the error its next line spells out ({nxt.signature})")


def correlate(events: Sequence[Event], known_ranks: Sequence[int] = ()) -> Correlation:
    _quoted_symptoms(events)
    _announced_symptoms(events)
    recoveries = demote_recovered(events)
    ranks, host_events = _rank_views(events)
    for r in known_ranks:
        ranks.setdefault(r, RankView(r))
    candidates: list[Candidate] = []
    # Host-level roots (kernel, scheduler) are candidates of their own; they may explain ranks.
    host_roots: dict[str, list[Event]] = {}
    for host, evs in host_events.items():
        roots = [e for e in evs if e.role == Role.ROOT]
        if roots:
            host_roots[host] = roots
            first = _most_specific(roots) or roots[0]  # an announcement defers to the reason below it
            candidates.append(
                Candidate(CandidateKind.EVENT, first, None, host or None, first.ts, first.category, [], roots[1:])
            )
    for v in ranks.values():
        if v.first_root is not None:
            e = v.first_root
            if victim_first(v):
                continue  # this rank was a victim first; its later exception follows from that
            candidates.append(Candidate(CandidateKind.EVENT, e, v.rank, e.host, e.ts, e.category))
        else:
            c = _exit_candidate(v)
            if c is not None:
                candidates.append(c)
    candidates.sort(key=candidate_order)
    arrival_order(candidates)
    errors = [
        e
        for e in events
        if e.role != Role.NOISE and e.severity in (Severity.ERROR, Severity.WARNING) and e.signature != UNRECOGNISED
    ]
    unrecognised = [e for e in events if e.signature == UNRECOGNISED and e.role != Role.NOISE]
    attempts = sorted({e.attempt for e in events if e.attempt is not None})
    return Correlation(ranks, dict(host_events), candidates, errors, attempts, recoveries, unrecognised)


def near(host_event: Event, rank_event: Event) -> bool:
    """Same host, and the host event at most a few minutes before (or seconds after) the rank's."""
    if host_event.host is None or host_event.host != rank_event.host:
        return False
    if host_event.ts is None or rank_event.ts is None:
        return True
    latest = rank_event.ts_hi if rank_event.ts_hi is not None else rank_event.ts  # an inherited time is a lower bound
    return (
        rank_event.ts - host_event.ts <= settings.current().reasoning.host_explains_window_s
        and latest - host_event.ts >= -5.0
    )


def same_process(host_event: Event, rank_event: Event) -> bool | None:
    """True/False when both name a pid (an OOM kill and torchrun's failure record), else None."""
    if host_event.pid is None or rank_event.pid is None:
        return None
    return host_event.pid == rank_event.pid


def _other_gpu(host_event: Event, rank_event: Event) -> bool:
    if not host_event.gpu or not rank_event.gpu:
        return False
    a, b = normalize_pci(host_event.gpu), normalize_pci(rank_event.gpu)
    return bool(a and b and a != b)


def host_explains(host_event: Event, rank_event: Event) -> bool:
    """A lower-layer fault on the same host, shortly before, explains a rank's error.

    An application-class fault seen by the driver (Xid 13, 31, 43: the GPU reporting what the
    program did) explains nothing: the rank's own error is the root and the Xid corroborates.
    """
    if not near(host_event, rank_event):
        return False
    if host_event.source == rank_event.source and host_event.line > rank_event.line:
        # one file is written in order: a line below the rank's error came after it, whatever the
        # inherited times allow (a traceback above slurmstepd's "CANCELLED AT ... DUE TO TIME LIMIT")
        return False
    if _other_gpu(host_event, rank_event):
        return False  # a fault on another GPU of the host does not explain this rank
    pid = same_process(host_event, rank_event)
    if pid is False and host_event.category == Category.HOST_OOM:
        return False  # the OOM killer took another process
    return LAYER_DEPTH.get(host_event.layer, 7) < LAYER_DEPTH.get(rank_event.layer, 7)


def corroborates(host_event: Event, rank_event: Event) -> bool:
    """A host event of the same or a higher layer that agrees with a rank's own fault: on its GPU
    (where both name one) and its process (where both name one)."""
    return (
        near(host_event, rank_event)
        and not host_explains(host_event, rank_event)
        and not _other_gpu(host_event, rank_event)
        and same_process(host_event, rank_event) is not False
    )
