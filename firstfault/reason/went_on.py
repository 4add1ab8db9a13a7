"""Errors the job went on from: lines followed by more training are not its failure.

Steps printed after an error line by the rank that printed it show the rank outlived it, and a
step needs every rank in the process group, so the job did too. Parse notes, per file and rank,
the line above which the file's tail still shows ``parse.facts.WENT_ON_LINES`` training lines of
that rank (``ParseContext.training_after``; any rank's in a file whose lines name none). Before
correlation, four kinds of line above it are demoted to noise, as a transient that healed is
(``reason.transients``):

* an error line **no signature knows** (the "never silent" candidates): wandb's "Network error
  (ConnectionError), entering retry loop.", an LD_PRELOAD that did not load, CPython's
  "Exception ignored in: ..." at a loader's exit;
* a **Python exception** (not one torch's excepthook wrote, "[rank2]: IndexError: ...", which its
  process died of: ``parse.run.UNCAUGHT_FIELD``): one only the generic signature reads
  (``python.exception``), or one a known signature of the application's own layer reads (a
  ``FileNotFoundError`` of an index a trainer rebuilds, a ``PermissionError``): a traceback a
  trainer caught and logged (an upload to a hub that failed with HTTP 502) before its next step. A
  known one counts only where the steps after it are its rank's own (a per-rank log, steps that
  name their rank) or training reached its last step, or the file holds it once per rank the job
  has (each rank printed it, so the steps after it are steps of ranks that went on from it): in a
  console whose steps name no rank they may otherwise be its peers' (Ray's console: one rank's NaN,
  then the others' steps);
* a known signature of **warning** severity that the process says of its own environment (layers
  application, framework, driver: torch's "GradScaler is enabled, but CUDA is not available",
  "Can't initialize NVML", NCCL's RAS version mismatch). A later error is then the failure (an
  OOM three steps after NVML's warning is the OOM's). The scheduler's and the launcher's warnings
  (a preemption, a death signal) end jobs, and the kernel's and the fabric's are a host's, whose
  flapping port is the classic first sign of a later timeout: those keep their readings (but for
  the next kind);
* an error whose reading is that **nothing started** (signature field ``no_start``: the shell's
  "command not found", read as a launcher missing from the environment): training lines after it
  in the same file refute that reading. The job script went past a command it lacked (a
  ``nvidia-smi`` the node does not have), and a later fault, a SIGKILL at step 7, is the failure;
* any other error, where **training reached its end** after it (a step counter at its total, a
  line that marks the job's end): a job script's own commands before the launcher (no
  ``nvidia-smi`` on the node, a GPU check that raises on a CPU node, an optional ``pip install``
  that found nothing), or a fault a restart got past. What training then finished was not stopped
  by it: the job ended well, and the error is named in a warning.

Where a file's training lines name no rank, they may be other ranks' steps: ranks in a sub-mesh
train on while one outside it died. An exception there that is its rank's last, when the launcher
then records that rank's exit with status 1 (CPython's for an uncaught exception), was not caught:
the rank died of it, and it keeps its reading.

An exception CPython printed under "Exception in thread NAME:" ended a thread, not its process:
it is demoted where training reached its end, or where its rank's steps went on past it in any of
the rank's files (``_demote_threads``), and keeps its reading where its rank stopped.

One report comes *after* training's end and is still no failure: torchrun's agent enters its exit
barrier only once its own worker group SUCCEEDED, and logs a failure there and goes on
(``_exit_barrier``'s ``logger.exception("Error waiting on exit barrier ...")`` in
torch/distributed/elastic/agent/server/api.py, 2.0 to 2.13). When the store's host left first, the
barrier's wait fails with "Failed to recv, got 0 bytes" on the other nodes of a job that trained to
its end (the race of the agent's TCP store on exit_barrier, pytorch/pytorch#69520). Where training
reached its end, that report (the barrier's line, its traceback, and the store client's own warning
of the same failed read) is demoted too.

Other known errors keep their readings whatever follows them, short of training's end: a
framework's failed collective, a driver's or a host's fault. What is demoted is named in a
warning, never dropped, so an error the job survived is still reported; it is not called the
job's failure.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field

from firstfault.match.unrecognised import UNRECOGNISED
from firstfault.parse.run import IGNORED_FIELD, THREAD_FIELD, UNCAUGHT_FIELD
from firstfault.reason.correlate import is_exit_record
from firstfault.reason.refine import GENERIC_EXCEPTION
from firstfault.vocab import Event, Layer, Role, Severity
from firstfault.vocab.text import EXCEPTION_LINE, clip

OWN_LAYERS = frozenset({Layer.APPLICATION, Layer.FRAMEWORK, Layer.DRIVER})
WENT_ON = "went_on"  # the field a demoted event carries
NO_START = "no_start"  # a signature field: its reading is that no process of the job started


def went_on_from(
    events: Sequence[Event], training_after: dict[tuple[str, int | None], int], tagged: Set[str] = frozenset()
) -> list[Event]:
    """Those of ``events`` that training lines of the same file (and rank, where the file's
    training lines name theirs) still follow."""
    out = []
    for e in events:
        key = (e.source, e.rank if e.rank is not None and e.source in tagged else None)
        after = training_after.get(key)
        if after is not None and e.line < after:
            out.append(e)
    return out


def caught_exception(e: Event) -> bool:
    """Is ``e`` a Python exception line that a trainer could have caught and gone on from: one only
    the generic signature reads, or one a known signature of the application's own layer reads?
    Framework, driver and host errors are not: torch's failed collective or a GPU's fault printed
    before more steps (async reports, other ranks' lines) is no caught exception."""
    if e.role != Role.ROOT or e.fields.get(UNCAUGHT_FIELD):
        return False  # torch's excepthook wrote it: nothing caught it (``parse.run.UNCAUGHT_FIELD``)
    if e.signature == GENERIC_EXCEPTION:
        return True
    return e.layer == Layer.APPLICATION and e.signature != UNRECOGNISED and bool(EXCEPTION_LINE.match(e.text.strip()))


def died_of(caught: Sequence[Event], events: Sequence[Event], mixed: Set[str]) -> list[Event]:
    """The exceptions, in ``mixed`` files (whose training lines may be other ranks'), that their
    rank died of: each one its rank's last, where the launcher records that rank's exit with status 1.

    A file that holds one rank's output (torchrun's per-rank logs), or whose training lines name
    their rank, is not mixed: a training line after an exception there shows the rank went on,
    whatever it died of later (in its stderr, another file)."""
    exited = {e.rank for e in events if e.rank is not None and is_exit_record(e) and e.fields.get("exitcode") == "1"}
    last: dict[tuple[int | None, str], Event] = {}
    for e in caught:
        key = (e.rank, e.source)
        if e.rank in exited and e.source in mixed and (key not in last or e.line > last[key].line):
            last[key] = e
    return list(last.values())


def printed_by_every_rank(caught: Sequence[Event], world: int | None) -> set[int]:
    """The ids of those ``caught`` exceptions whose kind a file holds once per rank of the job.

    Why: in a console whose steps name no rank, the steps after a known exception may be the
    other ranks' (Ray's console: one rank's NaN, then its peers' steps), so such an exception
    keeps its reading. But where the file holds the exception as many times as the job has ranks
    (each rank caught the same missing index and rebuilt it), every rank printed one, and a step
    after the copies is a step of a rank that printed it: no rank is left to have died of it.
    """
    if world is None or world < 2:
        return set()
    kinds: dict[tuple[str, str | None], list[Event]] = {}
    for e in caught:
        kinds.setdefault((e.source, e.signature), []).append(e)
    return {id(e) for evs in kinds.values() if len(evs) >= world for e in evs}


def _demote_ignored(events: Sequence[Event]) -> list[str]:
    """Exceptions CPython printed under "Exception ignored in: ..." are noise wherever they stand.

    Why: CPython prints that header for an exception it could not raise (in ``__del__``, a
    finalizer, a callback at interpreter exit) and goes on; the process's exit status is not
    touched. A DataLoader's ``_shutdown_workers`` failing after a run's last line is the common
    case. No training line need follow: the header itself says the process went on.
    """
    gone = [e for e in events if e.fields.get(IGNORED_FIELD) and e.role != Role.NOISE]
    return _demoted(
        gone,
        'exception(s) CPython printed as ignored ("Exception ignored in: ..."), which no process dies of: '
        "not read as the failure",
    )


def _demote_threads(events: Sequence[Event], ended: bool, last_step_ts: dict[int, float]) -> list[str]:
    """Exceptions that ended a thread, not its process, where the job or their rank went on.

    Why: CPython prints "Exception in thread NAME:" over an exception that ended a thread other
    than the main one (a metrics upload, a checkpoint writer, a prefetcher) and the process goes
    on. Such an exception is the job's failure only if the job stopped because of it (a loader
    thread that died leaves the main thread waiting: a hang whose root it is). So it is demoted
    where training reached its end, or where its rank's steps went on past it, in whichever of
    the rank's files they are (torchrun's per-rank stderr holds the traceback, its stdout the
    steps)."""
    gone = []
    for e in events:
        if not e.fields.get(THREAD_FIELD) or e.role == Role.NOISE:
            continue
        later = e.rank is not None and e.ts is not None and last_step_ts.get(e.rank, float("-inf")) > e.ts
        if ended or later:
            gone.append(e)
    return _demoted(
        gone,
        'exception(s) that ended a thread, not its process ("Exception in thread ..."), after which training '
        "went on: not read as the failure",
    )


def _position(e: Event) -> list[tuple[str, int]]:
    """Where ``e`` was printed: its own file and line, and the console line it was copied to
    (torchrun's ``--tee`` copy of a per-rank file's line, ``console_line`` from align's folding)."""
    out = [(e.source, e.line)]
    src, _, line = e.fields.get("console_line", "").rpartition(":")
    if src and line.isdigit():
        out.append((src, int(line)))
    return out


def _before_the_end(events: Sequence[Event], ends: dict[str, int]) -> list[Event]:
    """The lines printed above a step counter at its total ("step 20/20") in its file (``ends``:
    file -> that line, for every file that reached it), or copied into such a file above it:
    training reached its end after them, so nothing of theirs stopped it. Found by position, not
    by time: a per-rank stderr line has no clock, but its console copy has a place."""
    if not ends:
        return []
    return [e for e in events if e.role != Role.NOISE and any(n < ends.get(f, 0) for f, n in _position(e))]


def _demoted(gone: Sequence[Event], why: str) -> list[str]:
    """``_demote``'s warning as a list: empty when nothing was demoted."""
    note = _demote(gone, why)
    return [note] if note else []


def _demote(gone: Sequence[Event], why: str) -> str | None:
    """Demote ``gone`` to noise (marked as gone on from); the warning naming them, first one quoted."""
    for e in gone:
        e.role = Role.NOISE
        e.set_field(WENT_ON, "1")
    if not gone:
        return None
    first = min(gone, key=lambda e: (e.source, e.line))
    return f"{len(gone)} {why} (first: {first.source}:{first.line}: {clip(first.text.strip(), 120)})"


EXIT_BARRIER = "torchelastic.exit_barrier_error"
# the store client's failed read the barrier reports: its C++ warning and its Python exception
_STORE_READS = frozenset({"torch.store_recv_zero"})
_REPORT_LINES = 40  # a traceback of the barrier's logger, and the C++ warning printed just before it


def _exit_barrier_reports(events: Sequence[Event]) -> list[Event]:
    """The events of torchrun's exit-barrier reports: each "Error waiting on exit barrier" line and,
    in the same file and second, the failed store read it logged (see the module's docstring) and
    the lines of that read's C++ backtrace no signature knows ("Exception raised from recvBytes")."""
    barriers = [b for b in events if b.signature == EXIT_BARRIER and b.ts is not None]
    if not barriers:
        return []
    reads: dict[str, list[Event]] = {}  # by file: a barrier on each of thousands of nodes is no n^2
    for e in events:
        if (e.signature in _STORE_READS or e.signature == UNRECOGNISED) and e.ts is not None:  # + a C++ head
            reads.setdefault(e.source, []).append(e)
    out = list(barriers)
    for b in barriers:
        assert b.ts is not None
        out += [
            e
            for e in reads.get(b.source, [])
            if abs(e.line - b.line) <= _REPORT_LINES and e.ts is not None and abs(e.ts - b.ts) < 1.0
        ]
    return out


# A process's exit with a thread still running (libstdc++'s std::thread destructor calls terminate
# on a joinable thread): what a shutdown prints, never how training failed
_SHUTDOWN_ABORTS = frozenset({"cpp.terminate_no_exception"})


def _shutdown_aborts(events: Sequence[Event], training_end: str | None) -> list[Event]:
    """The aborts of exiting processes below the line where training reached its end ("step N/N"),
    in that line's file: the training ran to its end before any of them."""
    if not training_end:
        return []
    src, _, line = training_end.split(": ", 1)[0].rpartition(":")
    if not src or not line.isdigit():
        return []
    end = int(line)
    return [e for e in events if e.signature in _SHUTDOWN_ABORTS and e.source == src and e.line > end]


@dataclass(frozen=True)
class TrainingFacts:
    """What the parse learnt of the job's training, which an error is weighed against: the line
    per (file, rank) above which training lines still follow (``training_after``), the files whose
    training lines name their rank (``tagged``) or that hold one rank's output (``own``), whether
    training reached its last step or a line marks the job's end (``ended``), how many ranks the
    bundle shows (``world``), the step counter at its total as "file:line: text" (``training_end``)
    and each file's such line (``training_ends``), and each rank's last step's time
    (``last_step_ts``)."""

    training_after: dict[tuple[str, int | None], int] = field(default_factory=dict)
    tagged: Set[str] = frozenset()
    own: Set[str] = frozenset()
    ended: bool = False
    world: int | None = None
    training_end: str | None = None
    training_ends: dict[str, int] = field(default_factory=dict)
    last_step_ts: dict[int, float] = field(default_factory=dict)


def demote_went_on(events: Sequence[Event], facts: TrainingFacts) -> list[str]:
    """Demote the lines the job went on from to noise; the warnings that name them. The kinds
    above are named first; whatever else stands above training's end in its console (a line of
    a per-rank file whose console copy is there) is named last."""
    notes = _went_on_kinds(events, facts)
    if facts.ended:
        notes += _demoted(
            _before_the_end(events, facts.training_ends),
            "line(s) printed before training reached its last step, in the same console: the job went on from "
            "them to its end, so they are not read as its failure",
        )
    return notes


def _went_on_kinds(events: Sequence[Event], facts: TrainingFacts) -> list[str]:
    """``demote_went_on``'s kinds of line, each named in a warning of its own."""
    training_after, tagged, own, ended = facts.training_after, facts.tagged, facts.own, facts.ended
    notes = _demote_ignored(events)
    notes += _demote_threads(events, ended, facts.last_step_ts)
    if ended:
        notes += _demoted(
            _exit_barrier_reports(events),
            "line(s) of torchrun's exit-barrier report, which an agent writes only once its workers succeeded, after "
            "training reached its end: not read as a failure",
        )
        notes += _demoted(
            _shutdown_aborts(events, facts.training_end),
            'abort(s) of a process exiting with a thread still running ("terminate called without an active '
            "exception\"), after training reached its end: a shutdown, not read as the job's failure",
        )
    if not training_after:
        return notes
    unknown = [e for e in events if e.signature == UNRECOGNISED and e.role != Role.NOISE]
    caught = [e for e in events if caught_exception(e)]
    mixed = {e.source for e in caught if e.source not in own and e.source not in tagged}
    died = {id(e) for e in died_of(caught, events, mixed)}
    # A known exception in a console whose steps name no rank may be followed by other ranks'
    # steps (Ray's console: a rank's NaN, then its peers' steps): it is survived only where the
    # steps are its rank's own, or where training reached its end (nothing died of it).
    if not ended:
        every = printed_by_every_rank(caught, facts.world)
        died |= {id(e) for e in caught if e.signature != GENERIC_EXCEPTION and e.source in mixed and id(e) not in every}
    caught = [e for e in caught if id(e) not in died]
    warned = [
        e
        for e in events
        if e.signature != UNRECOGNISED
        and e.role == Role.ROOT
        and e.severity == Severity.WARNING
        and e.layer in OWN_LAYERS
    ]
    unstarted = [e for e in events if e.role == Role.ROOT and e.fields.get(NO_START) == "1"]
    kinds = [
        ("error line(s) no signature knows", unknown),
        ("Python exception(s) a trainer caught", caught),
        ("warning(s) of a known kind", warned),
        ("error(s) that say nothing started", unstarted),
    ]
    if ended:  # the job ended well: whatever training followed did not stop it
        seen = {id(e) for _, evs in kinds for e in evs}
        rest = [e for e in events if e.role == Role.ROOT and id(e) not in seen]
        kinds.append(("error(s) of other kinds, before training that reached its end,", rest))
    for what, evs in kinds:
        note = _demote(
            went_on_from(evs, training_after, tagged),
            f"{what} were followed by more training, so the job went on from them: not read as its failure",
        )
        if note:
            notes.append(note)
    return notes
