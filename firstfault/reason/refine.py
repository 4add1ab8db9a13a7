"""Readings applied to the winning hypothesis: what the first failure means beyond its own line.

* before training, an exception or a scheduler-enforced memory limit is a set-up failure
  (:func:`apply_before_training`, ``reason.configuration``);
* a receiver's size check names the sender (:func:`apply_witness`), DETAIL's group ranks map to
  global ones (:func:`apply_group_mismatch`), the flight recorder's first divergent entry names
  the rank that called something else (:func:`apply_fr_mismatch`), see ``reason.causality``;
  without a flight recorder, NCCL's call trace does the same for timeouts (:func:`apply_coll_mismatch`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from firstfault.reason.causality import group_mismatch
from firstfault.reason.configuration import (
    PEER_EXITED,
    CommonFailure,
    before_training,
    failed_exit,
    pretraining_category,
    template_key,
)
from firstfault.reason.correlate import (
    Candidate,
    Correlation,
    RankView,
    is_exit_record,
)
from firstfault.reason.frames import frames, installed_package, pickled_as_source
from firstfault.reason.hypothesis import DEFAULT_ACTION, silent_kill_suspects_oom
from firstfault.reason.inputs import ReasoningInput, fr_culprits
from firstfault.reason.nccl_coll import coll_mismatch
from firstfault.reason.stops import survivors_stopped
from firstfault.vocab import CandidateKind, Category, Event, FRKind, Hypothesis, Layer, Role, TsQuality
from firstfault.vocab.text import rank_list

DETAIL_MISMATCH = "torch.collective_mismatch_detail"


def world_size(corr: Correlation, ev: ReasoningInput) -> int | None:
    """The world size the topology knows, else the least the logs show: the highest rank seen plus
    one, or the processes the launcher stopped plus the ranks that had ended on their own (an exit
    code, a signal that was not the launcher's) and so were not among them."""
    if ev.topology.world_size:
        return ev.topology.world_size
    seen = max(corr.ranks) + 1 if corr.ranks else 0
    stopped = survivors_stopped(corr)
    if not stopped:
        return seen or None
    ended = sum(1 for v in corr.ranks.values() if failed_exit(v))
    return max(seen, stopped + ended)


def common_applies(win: Candidate, common: CommonFailure) -> bool:
    """The winner is one copy of the shared failure, or an exit that the shared failure explains."""
    if win.kind == CandidateKind.EXIT:
        return True
    if win.event is None:
        return False
    return template_key(win.event) == template_key(common.event) or (
        win.rank is None and win.event.layer in (Layer.APPLICATION, Layer.FRAMEWORK)
    )


# What a category read from the absence of training lines costs in confidence: the reading rests on
# what the log does not show (a paste may simply start after the steps), not on a recorded start.
ASSUMED_STARTUP_PENALTY = 0.15
# a witness whose collective no traceback shows: the sender is one of its two ring neighbours
UNKNOWN_RING_PENALTY = 0.15


def apply_before_training(hyp: Hypothesis, win: Candidate, ev: ReasoningInput, corr: Correlation) -> tuple[bool, bool]:
    """A failure before any rank made a step is the set-up's: ``configuration`` (see reason.configuration).

    Returns (early, assumed): whether the failure was placed before training, and whether the
    category changed on the strength of no training line at all (neither a step nor a recorded
    start), for which the caller lowers the confidence by ``ASSUMED_STARTUP_PENALTY``."""
    root = hyp.root_event
    at = root.ts if root is not None else win.ts  # the failure's own time, as its line gave it
    ts = at
    exact = root is None or root.ts_quality in (TsQuality.EXACT, TsQuality.COARSE)
    if ts is not None and root is not None and root.ts_quality == TsQuality.COARSE:
        ts += 1.0  # known to the second: it may be anywhere in that second
    end = ev.window.end if ev.window else None
    if not before_training(ts, ev.training, ev.launch_start, exact, end):
        return False, False
    assumed = not ev.training.seen and ev.launch_start is None
    if assumed and not _ranks_spoke([*corr.errors, *corr.unrecognised]):
        return False, False
    unplaced = assumed or (not ev.training.seen and _starts_with_failure(ev, at))
    if root is not None and root.fields.get(PEER_EXITED):
        return True, False  # a peer left first: when says nothing of the set-up (``pretraining_category``)
    if assumed:
        hyp.reasons.append("no line shows training under way (no step, loss or rate): a failure of the start-up")
    else:
        hyp.reasons.append("it happened before training started: no rank had made a step yet")
    if code_defect(root):
        before = hyp.category
        apply_unplaced_defect(hyp)
        return True, assumed and hyp.category != before  # a guess resting on no training line too
    cat = pretraining_category(hyp.category, root, unplaced)
    if cat is None or cat == hyp.category:
        return True, False
    old = recategorize(hyp, cat)
    hyp.reasons.append(f"a failure of the set-up ({old.value} before the first step): fix the configuration")
    return True, assumed


def alike_on_every_rank(hyp: Hypothesis) -> bool:
    """Is the root a check of what every rank holds alike (signature field ``every_rank``)?"""
    return hyp.root_event is not None and hyp.root_event.fields.get("every_rank") == "1"


def apply_shared_exception(hyp: Hypothesis, copies: int = 0) -> None:
    """An exception every rank raised the same way, after training started, is the set-up's too.

    Why: ranks run one program on one configuration. An error that one rank meets is that rank's
    (its data, its device); one that every rank meets in the same words comes from what they share,
    the configuration or the code path they all take (DDP's "Expected to have finished reduction",
    whose fix is ``find_unused_parameters=True``; a schedule with no entry for the step all reached).
    Issue 11 asks for exactly this reading ("every rank failing the same way gives configuration").
    A programming error (``code_defect``) keeps its reading, as it does before the first step, and
    so does anything not an exception (a NaN on every rank is still numerical). ``copies`` 1: the log
    shows one copy of a check every rank holds alike (``every_rank``: DDP's ready-twice error follows
    the model's structure and DDP's flags), which stands for all of them: mp.spawn's console shows
    only the first process it caught, where torchrun's shows every rank's."""
    if hyp.category != Category.APPLICATION_ERROR or code_defect(hyp.root_event):
        return
    old = recategorize(hyp, Category.CONFIGURATION)
    how = (
        "every rank raises it at once (it checks what every rank holds alike; the log shows one copy)"
        if copies == 1
        else "every rank raised it the same way"
    )
    hyp.reasons.append(
        f"{how} ({old.value}): it comes from what they share, the configuration or a code path all of them take, "
        "not from one rank"
    )


# Who writes a launcher's or a scheduler's records: they tell how a process ended, never what it did.
_RECORD_LAYERS = (Layer.LAUNCHER, Layer.SCHEDULER)


def _ranks_spoke(events: list[Event]) -> bool:
    """Does the log hold any line of the job's processes' own, beyond the launcher's and the
    scheduler's records of how they ended?

    Why: the start-up reading rests on no line showing training. That absence says something only
    where the log shows what the processes did: a paste of torchrun's failure summary alone (its
    "Root Cause" record, the tear-down's SIGTERMs) shows nothing of the ranks' lives, before or after
    a first step, so it places the failure nowhere."""
    return any(e.layer not in _RECORD_LAYERS for e in events)


def _starts_with_failure(ev: ReasoningInput, ts: float | None) -> bool:
    """Is the job's start only its output's first timed line, and that line the failure's own?

    Then no time before the failure was seen: an excerpt (the last lines of a slurm-N.out pasted
    into a thread) begins wherever the paste does. A memory-limit kill is read as the set-up's
    only when it is placed at start-up (``pretraining_category``); here it is not placed."""
    if ts is None or ev.launch_start is None or ev.window is None or "scheduler" in ev.window.how:
        return False
    return ev.launch_start >= ts


def recategorize(hyp: Hypothesis, cat: Category) -> Category:
    """Give ``hyp`` another category: its default action, and the summary's category words; the old one."""
    old = hyp.category
    hyp.category = cat
    hyp.action = DEFAULT_ACTION[cat]
    hyp.summary = hyp.summary.replace(old.value.replace("_", " "), cat.value.replace("_", " "), 1)
    return old


# Exceptions Python raises for a mistake in the code itself, not for bad input (the Python
# documentation's "Built-in Exceptions": a failed assert, a missing attribute or key, a wrong type,
# an index out of range, a name not bound, a method left abstract).
PROGRAMMING_ERRORS = frozenset(
    {
        "AssertionError",
        "AttributeError",
        "IndexError",
        "KeyError",
        "NameError",
        "NotImplementedError",
        "TypeError",
        "UnboundLocalError",
    }
)
# A library's own source checkout, installed editable (``pip install -e``): PyPA's "src layout"
# puts the import package under the project's ``src/``, named as the project is
# (``transformers/src/transformers/``, ``LLaMA-Factory/src/llamafactory/``). Other ``src/`` trees are
# not a library's: Docker's ``/usr/src/app``, a template's ``src/models``. A user's own project in
# src layout under its own name still reads as a library: the price of the rule.
_SOURCE_CHECKOUT = re.compile(r"[/\\](?P<project>[^/\\]+)[/\\]src[/\\](?P<package>[A-Za-z_]\w*)[/\\]")
GENERIC_EXCEPTION = "python.exception"


def exception_name(root: Event) -> str:
    """The exception's class without its module ("torch.OutOfMemoryError" -> "OutOfMemoryError")."""
    return root.fields.get("exc", "").rsplit(".", 1)[-1]


# A call that does not fit its callee: an argument the function no longer takes or now needs, an
# attribute a module no longer has (the Python documentation's TypeError and AttributeError texts).
# The code is right for another version of what it calls: versions disagree, which is the set-up's.
_API_MISMATCH = re.compile(
    r"unexpected keyword argument|missing \d+ required (?:positional|keyword-only) argument"
    r"|takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given"
    r"|positional-only arguments? passed as keyword|^(?:module|type object) '[^']+' has no attribute"
    r"|^Descriptors cannot be created directly"  # protobuf's generated code older than the runtime
)
# Lookups that fail on a missing entry (a dict key, a list index) more often name a missing piece of
# the set-up (an environment variable the launcher sets, a key of the config) than a mistake in code:
# ``KeyError: 'LOCAL_RANK'`` is a script started without torchrun. They keep the start-up's reading.
_LOOKUP_ERRORS = frozenset({"KeyError", "IndexError"})


CODE_DEFECT = "code_defect"  # a signature field: its error is a mistake in the caller's code


def code_defect(root: Event | None) -> bool:
    """Is ``root`` a programming error (see ``PROGRAMMING_ERRORS``), not a call between versions?

    A mistake in code fails the same way before the first step as after it, so its being early
    says nothing of the set-up: it keeps its own reading (``application_error``, or the library's
    ``software_bug`` by :func:`apply_raise_site`). An API mismatch (an unexpected keyword argument,
    a module without the attribute) is versions disagreeing, and stays the set-up's. A signature
    whose error is always a mistake in the caller's code (an object pickle refuses) says so with
    ``sets = { code_defect = "1" }``."""
    if root is not None and root.fields.get(CODE_DEFECT) == "1":
        return True
    if root is None or root.signature != GENERIC_EXCEPTION:
        return False
    exc = exception_name(root)
    if exc not in PROGRAMMING_ERRORS or exc in _LOOKUP_ERRORS:
        return False
    return _API_MISMATCH.search(root.fields.get("msg", "")) is None


def apply_unplaced_defect(hyp: Hypothesis) -> None:
    """A programming error with no traceback line to say whose code raised it is read as a library's.

    Early or late, a mistake in code is not the set-up's (:func:`code_defect`); with a frame, the
    frame says whether the user's script or an installed package raised it (:func:`apply_raise_site`).
    With none (a paste of the last line), most of the code a distributed job runs before its first
    step is its frameworks' (launcher, strategy, engine set-up), not the user's script. Measured on
    the corpus (``docs/accuracy.md``): on the development half both verdicts this changed became
    right; held out, one became right and two went from one wrong reading to another.
    """
    root = hyp.root_event
    if root is None or hyp.category != Category.APPLICATION_ERROR or any(frames(root.context)):
        return
    recategorize(hyp, Category.SOFTWARE_BUG)
    exc = exception_name(root)
    hyp.reasons.append(
        f"{exc} is a mistake in code, not in the set-up, and no traceback line says whose: "
        "read as a framework's (its own code runs most of a job's start-up)"
    )


# A batch a DataLoader worker sends reaches the main process as a file descriptor passed over a
# socket (torch/multiprocessing/reductions.py rebuild_storage_fd, through multiprocessing's
# resource_sharer): that connection reset, refused or closed means the worker holding it is gone.
_PEER_GONE = frozenset({"ConnectionResetError", "ConnectionRefusedError", "EOFError"})
_FD_PASSING = re.compile(r'File "[^"]*torch[/\\]multiprocessing[/\\]reductions\.py", line \d+, in rebuild_storage_fd')


# Ray's raylet reports a worker whose socket reached end-of-file with no exit of its own as
# "Worker unexpectedly exits with a connection error code 2. End of file" (ray.toml)
RAY_VANISHED = "ray.worker_vanished"


def _gone_without_a_word(root: Event) -> str | None:
    """What shows that ``root``'s process was killed without a word of its own, or None."""
    if root.signature == RAY_VANISHED:
        return (
            "Ray saw the worker's connection end (exit code 2, end of file) with no exit of its own: "
            "the worker process was killed without a word"
        )
    if root.signature != GENERIC_EXCEPTION or exception_name(root) not in _PEER_GONE:
        return None
    if not any(_FD_PASSING.search(line) for line in root.context):
        return None
    return (
        f"{exception_name(root)} while receiving a batch from a DataLoader worker (rebuild_storage_fd): "
        "the worker process was killed without a word of its own"
    )


# torch's DataLoader reports a worker that died by a signal as "DataLoader worker (pid N) is killed by
# signal: <strsignal>" (torch_io.toml); SIGKILL's "Killed" is a signature of its own
DATALOADER_SIGKILL = "torch.dataloader_worker_sigkill"
_WORKER_SIGNAL = frozenset({"torch.dataloader_worker_killed", DATALOADER_SIGKILL})
CHAIN_LINES = 150  # a chained traceback's links: the next link's exception line is within this many lines


def _signal_told(root: Event, events: list[Event]) -> Event | None:
    """torch's own report of the signal that killed the DataLoader worker ``root`` lost, printed
    in the same file and rank a little below it, or None.

    Why: the main process meets the dead worker's socket first (``ConnectionResetError`` under
    rebuild_storage_fd) and its SIGCHLD check then raises "DataLoader worker (pid N) is killed by
    signal: Segmentation fault" while that error is being handled: CPython prints both, chained
    ("During handling of the above exception, another exception occurred"). The second link says
    what the first could only infer."""
    for e in events:
        if (
            e.signature in _WORKER_SIGNAL
            and e.source == root.source
            and e.rank == root.rank
            and 0 < e.line - root.line <= CHAIN_LINES
        ):
            return e
    return None


def apply_lost_worker(hyp: Hypothesis, ev: ReasoningInput) -> None:
    """A worker process that vanished without a word is read as a bare SIGKILL is.

    Two reports say so without the signal: the socket error of a DataLoader batch's descriptor
    hand-over (torch reports a worker that died between batches as "DataLoader worker (pid N) is
    killed by signal: Killed"; one that dies while the main process is receiving its batch leaves
    only ``ConnectionResetError`` under rebuild_storage_fd: pytorch/pytorch#28950, #1551, and the
    ``dl_worker_kill`` runs of tools/realjobs), and Ray's "connection error code 2. End of file" for
    a worker actor, whichever of Ray's messages carries it. Either is read as
    ``hypothesis.silent_kill_suspects_oom`` reads a bare SIGKILL: the OOM killer, unless a kernel
    log shows none (then a crash). A worker whose own output says why it died is read by that
    output instead (``correlate.REPORT``): only one that said nothing reaches here.
    """
    root = hyp.root_event
    premise = None if root is None else _gone_without_a_word(root)
    if root is None or premise is None:
        return
    told = _signal_told(root, ev.events) if root.signature == GENERIC_EXCEPTION else None
    if told is not None and told.signature != DATALOADER_SIGKILL:
        recategorize(hyp, told.category)
        hyp.reasons.append(
            f"{exception_name(root)} while receiving a batch from a DataLoader worker: the worker died, and "
            f"torch's DataLoader says how further down the same traceback ({told.source}:{told.line}: "
            f"{told.text.strip()[:160]})"
        )
        return
    oom = silent_kill_suspects_oom(hyp.reasons, premise, ev.kernel_logs)
    recategorize(hyp, Category.HOST_OOM if oom else Category.PROCESS_CRASH)


def _same_name(project: str, package: str) -> bool:
    """Does a project's folder name its import package (PEP 503's normalising, case and ``-_.``)?"""
    return re.sub(r"[-_.]+", "", project).lower() == package.replace("_", "").lower()


def raise_site(root: Event) -> str | None:
    """The library whose code raised ``root`` (its innermost frame: an installed package, or a
    library's own source checkout), or None."""
    paths = [m["path"] for _, m in frames(root.context)]
    if not paths:
        return None
    lib = installed_package(paths[-1])
    if lib:
        return lib
    src = _SOURCE_CHECKOUT.search(paths[-1])
    return src["package"] if src and _same_name(src["project"], src["package"]) else None


def apply_raise_site(hyp: Hypothesis) -> None:
    """A programming error raised inside a library is that library's bug.

    An ``AssertionError`` or ``AttributeError`` whose innermost frame is in site-packages (or in a
    library's own src-layout checkout, :func:`raise_site`) is a library's own check or code
    failing, not the training script's: ``software_bug``, naming the package. Raised in the user's
    own file it stays ``application_error``; bad-input errors (``ValueError``,
    ``FileNotFoundError``, ...) keep their reading, since a library rightly refuses a wrong argument.
    """
    root = hyp.root_event
    if root is None or root.signature != GENERIC_EXCEPTION or hyp.category != Category.APPLICATION_ERROR:
        return
    exc = exception_name(root)
    package = raise_site(root) if exc in PROGRAMMING_ERRORS else None
    if package is None:
        return
    recategorize(hyp, Category.SOFTWARE_BUG)
    hyp.reasons.append(f"{exc} raised inside the library {package}: a library's own code failed")


AER_FATAL = "kernel.pcie_aer_fatal"
AER_REPORT_LINES = 20  # the kernel's lines of one AER report: the root port's, then each device's


def _later_in_report(root: Event, events: Sequence[Event], span: int, fits: Callable[[Event], bool]) -> Event | None:
    """The first event of the same file within ``span`` lines after ``root`` that ``fits``: the
    rest of one report, whose later lines name what its first line could not."""
    return next((e for e in events if e.source == root.source and 0 < e.line - root.line <= span and fits(e)), None)


def apply_aer_device(hyp: Hypothesis, ev: ReasoningInput) -> None:
    """A fatal PCIe error names the root port, not the device behind it; the kernel's next lines
    of the same report do ("nvidia 0000:03:00.0: AER: can't recover ..."). When one of them is a
    GPU's, the fault is that GPU's (``gpu_hardware``), not an unknown device's."""
    root = hyp.root_event
    if root is None or root.signature != AER_FATAL or hyp.category != Category.UNKNOWN:
        return
    gpu = _later_in_report(
        root, ev.events, AER_REPORT_LINES, lambda e: e.layer == Layer.HARDWARE and e.category == Category.GPU_HARDWARE
    )
    if gpu is None:
        return
    recategorize(hyp, Category.GPU_HARDWARE)
    hyp.reasons.append(f"the fatal PCIe error's device is a GPU, as the same report goes on: {gpu.text.strip()[:160]}")


RAY_TASK_OOM = "ray.task_error_oom"
# Ray's memory monitor's own words (ray.toml): the OutOfMemoryError a caller re-raises is the host's
RAY_MEMORY_MONITOR = frozenset({"ray.oom_task_killed", "ray.oom_memory_on_node"})
RAY_TRACEBACK_LINES = 40


def apply_ray_oom_kind(hyp: Hypothesis, ev: ReasoningInput) -> None:
    """``RayTaskError(OutOfMemoryError)`` is torch's GPU OOM unless the traceback under it is Ray's
    memory monitor killing the task ("Task was killed due to the node running low on memory"):
    then it is the node's RAM (``host_oom``). The header comes first, so the report's later line decides."""
    root = hyp.root_event
    if root is None or root.signature != RAY_TASK_OOM:
        return
    host = _later_in_report(root, ev.events, RAY_TRACEBACK_LINES, lambda e: e.signature in RAY_MEMORY_MONITOR)
    if host is None:
        return
    recategorize(hyp, Category.HOST_OOM)
    hyp.reasons.append(f"Ray's memory monitor killed the task, as its traceback goes on: {host.text.strip()[:160]}")


def apply_lone_setup_rank(hyp: Hypothesis, corr: Correlation, inp: ReasoningInput, early: bool) -> None:
    """A set-up failure or a library's bug seen on one rank, in a log that shows no other rank,
    names no culprit.

    Every rank reads the same configuration and runs the same library code, so it most likely
    failed on every rank; the log holds one of them (a paste, one rank's file). Naming that rank
    would blame the one the user happened to copy. Where other ranks are in the log and went on
    (a shard missing on rank 1 only), the rank that failed is the culprit and keeps the name.
    A mistake in the user's own code counts too when it came before training (``early``): every
    rank runs the same start-up; later, a data-dependent path may fail on one rank alone. So does a
    check of a value every rank holds alike (a signature's ``every_rank``: the clipped gradient
    norm, taken after the all-reduce), which every rank fails at once whichever batch overflowed.
    Not an object only the failing rank pickles (``frames.pickled_as_source``: the source of
    ``broadcast_object_list``): the same code runs on every rank, but only that rank meets it.
    """
    root = hyp.root_event
    alike = alike_on_every_rank(hyp)
    everyones = (
        hyp.category in (Category.CONFIGURATION, Category.SOFTWARE_BUG) or (early and code_defect(root)) or alike
    )
    if not everyones or len(hyp.culprit.ranks) != 1:
        return
    if pickled_as_source(root):
        hyp.reasons.append(
            "it failed pickling an object that only the source rank of the collective serializes "
            "(torch.distributed's broadcast_object_list, scatter_object_list, send_object_list): its peers "
            "wait for the object and never meet the error, so the rank is the culprit"
        )
        return
    why = (
        "a check of a value every rank holds alike (taken after the all-reduce) fails on every rank at once"
        if alike
        else "a set-up failure, a library's bug or a mistake in the start-up code is every rank's"
    )
    seen = {r for r, v in corr.ranks.items() if v.events or v.unrecognised}
    (rank,) = hyp.culprit.ranks
    went_on = {r for r in seen if went_further(corr.ranks[r])}
    went_on |= {p.rank for p in inp.progress if p.last_step is not None}
    if went_on - {rank} or (seen - {rank} and _names_rank(hyp.root_event, rank)):
        return  # the others got further, or the failure names this rank's own input ("shard-00001")
    hyp.culprit.ranks = []
    # the headline must not name the rank the culprit no longer names
    if seen - {rank}:
        ended = sorted(r for r in seen - {rank} if failed_exit(corr.ranks[r]))
        if ended:  # other ranks ended on their own too: the launcher did not stop them all
            hyp.summary = hyp.summary.replace(f" on rank {rank}", " (first of the ranks to end)", 1)
            how = (
                f"rank {rank} ended first, rank(s) {rank_list(ended)} ended on their own too, and none of them "
                "shows an error of its own in the log"
            )
        else:
            hyp.summary = hyp.summary.replace(f" on rank {rank}", " (first of the ranks; the rest were torn down)", 1)
            how = (
                f"rank {rank} failed first and the launcher stopped the other ranks before they showed anything "
                "of their own"
            )
        hyp.reasons.append(f"{how}: {why}, so no rank is named")
        return
    if rank not in seen:  # named by the ranks that waited for it, with no line of its own
        hyp.summary = hyp.summary.replace(
            f" on rank {rank}", f" (rank {rank}, which the others waited for, shows nothing)", 1
        )
        hyp.reasons.append(
            f"rank {rank}, which the others waited for, has no line of its own in the log: {why}, so no rank is named"
        )
        return
    hyp.summary = hyp.summary.replace(f" on rank {rank}", f" (only rank {rank} is in the log)", 1)
    hyp.reasons.append(f"rank {rank} is the only rank in the log: {why}, so no rank is named")


# whole numbers, not the parts of a decimal ("order 2.0" names no rank 2 or 0)
_NUMBERS = re.compile(r"(?<![\d.])\d+(?!\.\d)")


def _names_rank(root: Event | None, rank: int) -> bool:
    """Does the failure's own line carry the rank's number (its shard, its device, its port)? Then
    it is about that rank's own input, which the others, stopped first, may well have had. A
    launcher's exit record carries a status and a pid, never the rank's input ("exitcode : 1")."""
    if root is None or is_exit_record(root):
        return False
    return rank in {int(n) for n in _NUMBERS.findall(root.text)[:50] if len(n) < 9}


def went_further(v: RankView) -> bool:
    """Does a rank's own output show what it did, beyond being stopped (its exit record, its
    tear-down)? An error, a timeout, an unrecognised line of its own: it got as far as that."""
    return bool(v.unrecognised) or any(e.role != Role.TEARDOWN and not is_exit_record(e) for e in v.events)


def apply_group_mismatch(hyp: Hypothesis, corr: Correlation) -> None:
    """DETAIL's mismatch report names group ranks: map them to global ranks, name the odd one out.

    Every rank of the group raises the report and names itself first, so a report whose line is
    cut inside its own fingerprint (a terminal's width, an excerpt) says which rank printed it,
    not which rank differs: then no rank is named."""
    root = hyp.root_event
    if root is None or root.signature != DETAIL_MISMATCH:
        return
    reports = [e for v in corr.ranks.values() for e in v.events if e.signature == DETAIL_MISMATCH]
    gm = group_mismatch(reports or [root])
    if gm is None:
        if root.fields.get("fingerprint") is not None and root.fields.get("other_group_rank") is None:
            hyp.culprit.ranks, hyp.culprit.hosts = [], []
            hyp.summary = f"collective mismatch: {root.text.strip()[:300]}"
            hyp.reasons.append(
                "the mismatch report is cut inside the first rank's fingerprint: every rank raises it and "
                "names itself first, so which rank runs a different collective is not in the log"
            )
        return
    hyp.culprit.ranks = gm.culprits
    hyp.culprit.hosts = [h for h in [host_of(gm.culprits[0], corr)] if h]
    hyp.summary = f"collective mismatch on rank {gm.culprits[0]}: {gm.fingerprints.get(gm.culprits[0], '')}"
    hyp.reasons.append(gm.reason)


def apply_coll_mismatch(hyp: Hypothesis, ev: ReasoningInput) -> None:
    """Timeouts whose cause NCCL's call trace shows: one process called something else first.

    A mismatch ends in a hang (every rank waits on a call its peers never make), so the watchdog
    timeouts win as the root; the trace (``reason.nccl_coll``) names the call that caused them.
    """
    if hyp.category != Category.HANG:
        return
    coll = coll_mismatch(ev.events)
    if coll is None:
        return
    recategorize(hyp, Category.COLLECTIVE_MISMATCH)
    if coll.ranks:
        hyp.culprit.ranks = list(coll.ranks)
        hyp.culprit.hosts = coll.hosts
    hyp.summary = coll.summary()
    hyp.reasons.append(f"the timeouts follow from a mismatched call: {coll.describe()}")


def host_of(rank: int, corr: Correlation) -> str | None:
    v = corr.ranks.get(rank)
    return sorted(v.hosts)[0] if v is not None and v.hosts else None


def apply_fr_mismatch(hyp: Hypothesis, win: Candidate, ev: ReasoningInput) -> None:
    """In a desync the rank that *detects* the size mismatch is a witness; the flight
    recorder's first divergent entry names the rank that called something else."""
    if hyp.category != Category.COLLECTIVE_MISMATCH:
        return
    mism = [c for c in fr_culprits(ev.fr) if c.kind == FRKind.MISMATCHED]
    if not mism:
        return
    ranks = [mism[0].rank] + [c.rank for c in mism[1:] if c.score >= 0.5]
    if ranks and hyp.culprit.ranks[:1] != ranks[:1]:
        if win.rank is not None:
            hyp.reasons.append(f"rank {win.rank} detected the mismatch; it is a witness, not the culprit")
        hyp.culprit.ranks = ranks
        hyp.summary = f"collective mismatch on rank {ranks[0]}: {mism[0].reason}"
    hyp.reasons.append(f"flight recorder: {mism[0].reason}")
