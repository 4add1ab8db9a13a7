"""Failures of the set-up, not of one rank: every rank failing the same way, or failing before training.

A missing input file, a world size the model cannot divide, a missing module, a version check:
every rank reads the same configuration, so every rank fails the same way, at start-up. The
earliest of them is not a culprit; the job is. Two readings follow:

* **every rank failed the same way** (:func:`common_failure`): the ranks that failed on their own
  all show one template (signature and message, numbers masked), on at least two ranks and on at
  least half the world where the world size is known (the launcher tears the rest down before
  they print), or as many rank-less copies as ranks that failed. Then no single rank is the
  culprit. Not a failure of a host's own resource (a full disk, its memory) on the ranks of one
  host of several: that host is the culprit.
* **before training** (:func:`before_training`): the failure came before any rank's first
  progress line; with no progress at all, within ``Reasoning.pretrain_max_s`` of the job's first line. An
  exception there (``application_error``), an unrecognised error, or a scheduler-enforced memory
  limit is a ``configuration`` failure: the user fixes the set-up, not the code path of one rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from firstfault.parse.progress import training_line
from firstfault.reason.correlate import TEARDOWN_SIGNALS, Correlation, exit_signal, says_only_failed, victim_first
from firstfault.vocab import Category, Event, Layer, Role, settings

_MASK = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_PROCESS_LAYERS = (Layer.APPLICATION, Layer.FRAMEWORK)
# What a failure before training becomes: the set-up is wrong, not the training code path
PRETRAIN_CATEGORIES = (Category.APPLICATION_ERROR, Category.UNKNOWN)


def template_key(e: Event) -> tuple[str, str]:
    """Signature and message with numbers masked: "shard-00003.bin" on rank 3 is the same failure."""
    return e.signature, _MASK.sub("#", e.text.strip())[:300]


@dataclass
class CommonFailure:
    """One failure every rank shared."""

    event: Event  # its earliest copy
    ranks: list[int] = field(default_factory=list)  # the ranks seen failing this way
    copies: int = 0  # copies in all, rank-less ones included
    failed: int = 0  # ranks that failed on their own (event or unexplained exit)

    def describe(self, world: int | None) -> str:
        of = f" of {world}" if world else ""
        return f"{self.copies}{of} ranks failed the same way: no single rank is the culprit"


def _rankless_roots(corr: Correlation) -> list[Event]:
    """Exceptions printed by a process that no line places on a rank (a console without prefixes).

    A training line (a step's loss at NaN, a metrics dict) is not one: trainers log those from one
    process, step after step, so its copies are a time series, not one copy per rank, and they
    must not make a failure "every rank's".
    """
    return [
        e
        for e in corr.host_events.get("", [])
        if e.role == Role.ROOT and e.layer in _PROCESS_LAYERS and not training_line(e.text)
    ]


def common_failure(corr: Correlation, world: int | None) -> CommonFailure | None:
    """The failure every rank shared, when there is one (see the module's docstring)."""
    own: dict[int, Event] = {}
    for r, v in corr.ranks.items():
        if v.first_root is not None and not victim_first(v):
            own[r] = v.first_root
    rankless = _rankless_roots(corr)
    keys = {template_key(e) for e in own.values()}
    if len(keys) > 1:
        return None  # some rank failed differently
    if not keys and not rankless:
        return _common_exit(corr, world)
    if not keys:
        counts: dict[tuple[str, str], int] = {}
        for e in rankless:
            counts[template_key(e)] = counts.get(template_key(e), 0) + 1
        keys = {max(counts, key=lambda k: counts[k])}
    (key,) = keys
    if _one_hosts_resource(corr, own):
        return None
    same = [e for e in rankless if template_key(e) == key]
    exits = [r for r, v in corr.ranks.items() if v.said_nothing() and failed_exit(v)]
    failed = len(own) + len(exits)
    copies = len(own) + len(same)
    need = max(2, (world + 1) // 2 if world else failed)
    if copies < need:
        return None
    earliest = min([*own.values(), *same], key=lambda e: (e.ts if e.ts is not None else float("inf"), e.line))
    return CommonFailure(earliest, sorted(own), copies, failed)


# Failures of a resource each host has of its own: its disk, its memory
_HOST_RESOURCES = (Category.STORAGE_IO, Category.HOST_OOM)


def _one_hosts_resource(corr: Correlation, own: dict[int, Event]) -> bool:
    """Did the ranks that failed the same way all sit on one host of a job that spans several, in a
    failure of a host's own resource (a full local disk, its memory)?

    Why: every rank reads the same configuration, so a set-up failure is every rank's wherever it
    runs; but a disk or a memory fills on one machine. When the ranks of one host fail writing
    their checkpoint and the other hosts' ranks do not, that host is the culprit, not the job,
    however many ranks it holds (four of eight is half the world)."""
    if not own or next(iter(own.values())).category not in _HOST_RESOURCES:
        return False
    hosts = {h for r in own for h in corr.ranks[r].hosts}
    everywhere = {h for v in corr.ranks.values() for h in v.hosts}
    return len(hosts) == 1 and len(everywhere) > 1


def _common_exit(corr: Correlation, world: int | None) -> CommonFailure | None:
    """Every rank died of the same signal (or exit code) with nothing printed: one cause, no culprit."""

    exits: dict[int, Event] = {}
    for r, v in corr.ranks.items():
        if v.said_nothing():
            for e in v.exits:
                if exit_signal(e) not in TEARDOWN_SIGNALS:
                    exits.setdefault(r, e)
    how = {exit_signal(e) or e.fields.get("exitcode") for e in exits.values()}
    need = max(2, (world + 1) // 2 if world else 2)
    if len(how) != 1 or len(exits) < need:
        return None
    if all(says_only_failed(e) for e in exits.values()):
        return None  # exit code 1 or SIGABRT on every rank: each failed, not one cause for all
    first = min(exits.values(), key=lambda e: (e.ts if e.ts is not None else float("inf"), e.line))
    return CommonFailure(first, sorted(exits), len(exits), len(exits))


def failed_exit(v: object) -> bool:
    """The rank ended on its own (an exit code, a signal that was not a tear-down's)."""

    return any(exit_signal(e) not in TEARDOWN_SIGNALS for e in getattr(v, "exits", []))


def before_training(
    ts: float | None, training: TrainingSeen, job_start: float | None, exact: bool = True, job_end: float | None = None
) -> bool:
    """Did a failure at ``ts`` come before training started?

    Training is seen from any line that shows it under way (a step, a loss, a tqdm rate; see
    ``parse.progress.TRAINING_MARKER``). With none anywhere, a failure within ``Reasoning.pretrain_max_s``
    of a job start that a launcher or the scheduler recorded is a start-up failure. With neither a
    training line nor a recorded start (a pasted console, a lone log file), nothing shows that the
    job ever trained: the failure is read as one of the start-up, which is what such logs mostly
    are (measured on the corpus's development half: 3 more right of 61, none lost; on the
    simulated and real bundles, which all print steps, nothing changes). ``exact``: the failure's
    own line gave its time (not a line above it); ``job_end`` bounds a failure that has no time at all.
    """
    if training.seen:  # an inherited time is only a lower bound: it cannot place a failure before a step
        return ts is not None and exact and training.first_ts is not None and ts < training.first_ts
    if job_start is None:
        return True  # no step and no start anywhere: nothing shows the job ever trained
    at = ts if ts is not None else job_end  # an untimed failure happened before the job's last line
    return (
        job_start is not None and at is not None and 0 <= at - job_start <= settings.current().reasoning.pretrain_max_s
    )


@dataclass(frozen=True)
class TrainingSeen:
    """Whether any line showed training under way, and the earliest time one did."""

    seen: bool
    first_ts: float | None


# A signature's ``sets = { startup = "configuration" }``: a generic return code (NCCL's "unhandled
# system error", "unhandled cuda error", a CUDA call failing in NVLS set-up, a rendezvous connect
# timing out) that says a call failed, not what failed. Before training it is the set-up: NCCL's
# troubleshooting guide (user guide 2.26, "Errors" and "IP Network Interfaces") says these codes
# mean an external call failed, and that interfaces that are up but cannot reach the other nodes
# make NCCL "fail during the init functions". Later in a run the signature keeps its own category.
STARTUP = "startup"
# A signature's ``sets = { peer_exited = "1" }``: the line says the other end of a connection closed
# it (gloo's "Connection closed by peer", NCCL's "Connection closed by remote peer"): the peer's
# process left first, for a reason only its own output holds (``reason.candidates``)
PEER_EXITED = "peer_exited"


# Where a line says the machine failed, not the job's set-up: a kernel's or a device's own report
# keeps its reading whenever it came (a fatal PCIe error at start-up is still the hardware's).
_MACHINE_LAYERS = (Layer.HARDWARE, Layer.DRIVER, Layer.NETWORK)


def pretraining_category(cat: Category, root: Event | None, assumed: bool = False) -> Category | None:
    """The category a failure before training takes, or None when it keeps its own.

    ``assumed``: "before training" rests only on no line showing training (a paste). A job
    outgrowing its memory limit is a set-up fault only when it is known to have happened at
    start-up (it loaded more than the limit allows); a paste of slurmstepd's kill alone says
    nothing of when, and the kill keeps its reading (``host_oom``)."""
    if root is not None and root.fields.get(PEER_EXITED):
        return None  # a peer left first: its cause, set-up or not, is in its own output
    if cat in PRETRAIN_CATEGORIES and (root is None or root.layer not in _MACHINE_LAYERS):
        return Category.CONFIGURATION
    if root is not None and root.fields.get(STARTUP) == Category.CONFIGURATION.value:
        return Category.CONFIGURATION
    if cat == Category.HOST_OOM and root is not None and root.layer == Layer.SCHEDULER and not assumed:
        return Category.CONFIGURATION  # the job's memory limit, enforced by the scheduler at start-up
    return None
