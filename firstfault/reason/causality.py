"""Causality beyond "first to die": witnesses that name the culprit, and ranks in a group's numbering.

The rank that reports a fault first is not always the one at fault:

* **a receiver's size check** (``witness = "gloo_ring_recv"``): gloo aborts the rank that
  *receives* a buffer larger than it posted, so the first rank to die of a size mismatch is a
  witness. In gloo's ring algorithms (``gloo/allreduce.cc`` ``ring()``, ``gloo/reduce.cc``) rank
  ``r`` receives from ``(r + 1) % size``: that is the rank that sent the odd buffer.
* **a victim that names whom it waits for** (field ``awaited_rank``): a store wait that timed out
  on a key ending in a rank (``keys: /default_pg/0//cpu//0/2``), a monitored barrier's "Rank 2
  failed to pass monitoredBarrier". Those ranks never arrived: they are the hang's culprits.
* **a group-local rank** (``TORCH_DISTRIBUTED_DEBUG=DETAIL``'s "Detected mismatch between
  collectives on ranks. Rank 1 is running collective ..."): the numbers are ranks *within the
  process group*; each printing rank gives its own group rank first, so the printers map group
  ranks to global ranks, and the rank whose collective differs from the others' is the culprit.
* **one collective, two kinds** (:func:`conflicting_collective`): watchdogs that gave up on the
  same sequence number of one process group name different collectives. The ranks diverged there:
  a mismatch, even where no majority says which side is odd. So do watchdogs of one group that
  gave up at different sequence numbers (:func:`_out_of_step`): a collective completes only once
  every member joined it, so ranks that merely waited on a peer wait at the same one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from firstfault.reason.frames import FRAME, frames, is_programs
from firstfault.vocab import Event, Role, settings
from firstfault.vocab.identity import rank_numbers

RING_RECV = "gloo_ring_recv"


def ring_sender(witness_rank: int, world: int, collective: str | None = None) -> int:
    """The rank a gloo ring participant receives from: in an all-reduce (gloo/allreduce.cc ring(),
    and reduce.cc) ``recvRank = (rank + 1) % size``; in an all-gather (gloo/allgather.cc) ``recvRank
    = (size + rank - 1) % size``. The witness's abort does not say which it was in
    (:func:`ring_collective`); an all-reduce, DDP's gradient buckets, is taken when none is seen."""
    step = -1 if collective == "all_gather" else 1
    return (witness_rank + step) % world


# torch.distributed's own functions, as their frames name them ("distributed_c10d.py", line 4394,
# in all_gather_single): the collective a traceback was in
_C10D_FILE = re.compile(r"[/\\]torch[/\\]distributed[/\\]distributed_c10d\.py$")
_COLLECTIVES = (("all_gather", re.compile(r"all_?gather")), ("all_reduce", re.compile(r"all_?reduce")))


def ring_collective(events: Iterable[Event]) -> str | None:
    """The collective the ranks' tracebacks show them in (``all_gather`` or ``all_reduce``), read from
    their innermost ``distributed_c10d.py`` frame; None when none shows one, or they disagree.

    Why: a gloo receiver that aborts on an odd buffer says nothing of the collective, but its
    peers, left with a connection reset in the same call, print where they were."""
    seen: set[str] = set()
    for e in events:
        funcs = [m["func"] or "" for _, m in frames(e.context) if _C10D_FILE.search(m["path"])]
        if funcs:
            seen.update(name for name, pat in _COLLECTIVES if pat.search(funcs[-1]))
    return seen.pop() if len(seen) == 1 else None


def awaited_ranks(events: Iterable[Event]) -> Counter[int]:
    """How many victims name each rank as the one they waited for (``awaited_rank``; a report that
    names several, "Ranks 2, 3 failed to pass monitoredBarrier", sets ``awaited_ranks``)."""
    out: Counter[int] = Counter()
    cap = settings.current().limits.max_world
    for e in events:
        out.update(rank_numbers(e.fields.get("awaited_rank", ""), cap))
        out.update(rank_numbers(e.fields.get("awaited_ranks", ""), cap))
    return out


# "Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[4], ..."
_FINGERPRINT = re.compile(
    r"Rank (?P<rank>\d+) is running (?:inconsistent )?collective: "
    r"CollectiveFingerPrint\((?P<fp>(?:SequenceNumber=\d+, )?OpType=\w+"
    r"(?:, TensorShape=\[[^\]]{0,200}\])?(?:, TensorDtypes=\w+)?)"
)


@dataclass(frozen=True)
class GroupMismatch:
    """A DETAIL mismatch report resolved to global ranks."""

    culprits: list[int]  # global ranks whose collective differs from the rest (best first)
    local_to_global: dict[int, int]
    fingerprints: dict[int, str]  # global rank -> its collective's fingerprint (short)
    reason: str


def _short(fp: str) -> str:
    return fp.split(", ", 1)[1] if fp.startswith("SequenceNumber=") and ", " in fp else fp[:120]


def group_mismatch(reports: Sequence[Event]) -> GroupMismatch | None:
    """Resolve DETAIL "Detected mismatch between collectives" reports printed by several ranks.

    Each report is printed by a global rank (the event's rank) and names its own group rank first,
    then the first group rank whose fingerprint differs. The culprit is the rank whose collective
    differs from the majority; with two ranks in a tie, the one running the op the others (and the
    job's other ranks) are not running is named first, and the tie is said.
    """
    local_to_global: dict[int, int] = {}
    fp_of_local: dict[int, str] = {}
    for e in reports:
        found = list(_FINGERPRINT.finditer(e.text))
        if not found:
            continue
        own = found[0]
        if e.rank is not None:
            local_to_global.setdefault(int(own["rank"]), e.rank)
        for m in found:
            fp_of_local.setdefault(int(m["rank"]), _short(m["fp"]))
    if len(fp_of_local) < 2:
        return None
    counts = Counter(fp_of_local.values())
    top = counts.most_common()
    odd = [lr for lr, fp in fp_of_local.items() if counts[fp] < top[0][1]]
    tie = not odd
    if tie:  # two ranks, two collectives: the rarer op type among every report's fingerprints goes first
        ops = Counter(re.sub(r".*OpType=(\w+).*", r"\1", fp) for fp in fp_of_local.values())
        odd = sorted(fp_of_local, key=lambda lr: (ops[re.sub(r".*OpType=(\w+).*", r"\1", fp_of_local[lr])], -lr))
    culprits = [local_to_global.get(lr, lr) for lr in odd]
    fps = {local_to_global.get(lr, lr): fp for lr, fp in fp_of_local.items()}
    mapped = ", ".join(f"group rank {lr} = global rank {g}" for lr, g in sorted(local_to_global.items()))
    reason = (
        "TORCH_DISTRIBUTED_DEBUG=DETAIL's report names ranks within the process group "
        f"({mapped or 'no mapping seen'}); "
        + (
            "the two ranks disagree and neither is the majority"
            if tie
            else f"global rank {culprits[0]} runs a collective the others do not"
        )
        + f": {fps.get(culprits[0], '')}"
    )
    return GroupMismatch(culprits, local_to_global, fps, reason)


T = TypeVar("T")


def strict_minority(values: dict[int, T]) -> tuple[list[int], T, int] | None:
    """The ranks whose value differs from the one a strict majority of three or more share, with
    that value and how many share it; None when fewer than three ranks speak, all agree, or no
    value has a strict majority (two sides alone say only that ranks differ, not which is odd)."""
    if len(values) < 3:
        return None
    (top, n_top), *rest = Counter(values.values()).most_common()
    if not rest or n_top * 2 <= len(values):
        return None
    return sorted(r for r, v in values.items() if v != top), top, n_top


WATCHDOG = "nccl.watchdog_timeout"


@dataclass(frozen=True)
class OddCollective:
    """Ranks whose timed-out collective is not the one the others timed out in."""

    ranks: list[int]
    reason: str


def odd_collective(events: Iterable[Event]) -> OddCollective | None:
    """The watchdog's own words, compared across ranks: who timed out in a different collective.

    Every rank's watchdog names the collective it gave up on (``SeqNum``, ``OpType``, ``NumelIn``).
    When most ranks name one collective and a few name another (an earlier sequence number, a
    different size), those few are not where the others are: they diverged (a different code path,
    a skipped or extra collective) and the others wait for them. It takes three ranks or more and a
    strict majority, so that two ranks disagreeing name nobody.
    """
    first: dict[int, Event] = {}
    for e in events:
        if e.signature == WATCHDOG and e.rank is not None and e.rank not in first:
            first[e.rank] = e
    prints = {r: (e.fields.get("seq"), e.fields.get("op_type"), e.fields.get("numel_in")) for r, e in first.items()}
    found = strict_minority(prints)
    if found is None:
        return None
    odd, top, n_top = found
    r0 = odd[0]
    seq, op, numel = prints[r0]
    reason = (
        f"the watchdog of rank(s) {', '.join(map(str, odd))} timed out in {op} #{seq}"
        + (f" ({numel} elements)" if numel else "")
        + f" while {n_top} other rank(s) timed out in {top[1]} #{top[0]}"
        + (f" ({top[2]} elements)" if top[2] else "")
        + ": they are not in the collective the others wait in"
    )
    return OddCollective(odd, reason)


@dataclass(frozen=True)
class OddValue:
    """Ranks whose own value (a model's parameter count) differs from what most ranks report."""

    ranks: list[int]  # global ranks
    signature: str
    reason: str


def odd_reported_value(events: Iterable[Event]) -> OddValue | None:
    """A shared error whose copies state each rank's value: the ranks whose value most do not share.

    DDP checks at construction that every rank built the same model, and every rank raises "DDP
    expects same model across all ranks, but Rank 1 has 6 params, while rank 0 has inconsistent 4
    params": the same failure on every rank, so it reads as no rank's. But together the copies give
    each rank's count, and when most ranks built one model and a few another, those few read another
    configuration (a rank-dependent branch, a stale file on one node). Ranks in the message are ranks
    of DDP's process group; each copy states its printer's own first, which maps them to global
    ranks. As :func:`odd_collective`, it takes three ranks or more and a strict majority.

    A copy says more than its two ranks: reducer.cpp's ``verify_params_across_processes`` checks the
    ranks in order from 0 and raises at the first whose count differs, so every rank before the one
    a copy names built the printer's model. One copy from a rank that built the common model then
    names the odd one (the last lines of a job, where only that copy is left).
    """
    value: dict[int, str] = {}
    to_global: dict[int, int] = {}
    signature = ""
    for e in events:
        own, n = e.fields.get("ddp_rank"), e.fields.get("num_params")
        other, m = e.fields.get("other_ddp_rank"), e.fields.get("other_num_params")
        if own is None or n is None:
            continue
        signature = e.signature
        value.setdefault(int(own), n)
        if e.rank is not None:
            to_global.setdefault(int(own), e.rank)
        if other is not None and m is not None:
            value.setdefault(int(other), m)
            for before in range(int(other)):  # checked before it, and found alike
                value.setdefault(before, n)
    found = strict_minority(value)
    if found is None:
        return None
    odd_local, top, n_top = found
    odd = sorted({to_global.get(r, r) for r in odd_local})
    reason = (
        f"the ranks' own reports give each rank's parameter count: {n_top} rank(s) built a model of {top} "
        f"parameters, rank(s) {', '.join(map(str, odd))} one of {value[odd_local[0]]}: they read another "
        "configuration"
    )
    return OddValue(odd, signature, reason)


def call_site(e: Event) -> tuple[str, str] | None:
    """Where the program called into the library that raised ``e``: its innermost frame outside
    installed packages and the interpreter, as (``file:line in func``, the code on that line).
    None when the event kept no traceback or every frame is a library's."""
    found: tuple[str, str] | None = None
    lines = e.context
    for i, m in frames(lines):
        if not is_programs(m["path"]):
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) and not FRAME.search(lines[i + 1]) else ""
        found = (f"{m['path'].rsplit('/', 1)[-1]}:{m['line']} in {m['func']}", code)
    return found


def odd_call_site(events: Iterable[Event]) -> OddCollective | None:
    """The ranks' own tracebacks, compared: who timed out waiting at another line of the program.

    A gloo or store timeout does not say which collective it gave up on, but the traceback above
    it does: the line of the program that called into torch (``loss.backward()``, where DDP
    all-reduces; ``dist.barrier()`` in a branch only one rank takes). Every rank waiting at one
    line while a few wait at another is the shape of ranks that called different collectives (a
    rank-only branch, a rank that ran out of data and went on to the end): the few took the other
    path. As :func:`odd_collective`, it takes three ranks or more and a strict majority.
    """
    first: dict[int, tuple[str, str]] = {}
    for e in events:
        if e.role != Role.CASCADE or e.rank is None or e.rank in first or not e.context:
            continue
        site = call_site(e)
        if site is not None:
            first[e.rank] = site
    found = strict_minority({r: site for r, (site, _) in first.items()})
    if found is None:
        return None
    odd, top, n_top = found
    where, code = first[odd[0]]
    top_code = next(c for s, c in first.values() if s == top)
    reason = (
        f"rank(s) {', '.join(map(str, odd))} timed out waiting at {where}"
        + (f" ({code})" if code else "")
        + f" while {n_top} other rank(s) timed out at {top}"
        + (f" ({top_code})" if top_code else "")
        + ": they called another collective than the one the others wait in (a branch only they took)"
    )
    return OddCollective(odd, reason)


# A send and the receive that meets it share a sequence number by design, and a batch of them is
# COALESCED on one side and a lone SEND or RECV on the other: no conflict between those.
P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE", "COALESCED"})


@dataclass(frozen=True)
class CollectiveConflict:
    """Ranks whose watchdogs name one collective (a sequence number) as collectives of different kinds."""

    seq: str
    ops: dict[str, list[int]]  # op type (out of step: "op #seq") -> the ranks that timed out in it
    reason: str
    what: str  # the verdict's headline


def _group_of(e: Event) -> tuple[str, str] | None:
    """Which process group a watchdog line speaks for, as far as the line tells: its PG id where it
    names one, else the default group when the rank it prints is the global rank (a subgroup's
    ranks number from 0 again); ``None`` when the line cannot be placed. The timeout is part of the
    key: groups made with other timeouts are other groups."""
    pg_rank = e.fields.get("pg_rank")
    if e.fields.get("pg_id") is not None:
        group = "pg" + e.fields["pg_id"]
    elif pg_rank is None or (e.rank is not None and pg_rank == str(e.rank)):
        group = "default?"
    else:
        return None
    return group, e.fields.get("timeout_ms", "")


def conflicting_collective(events: Iterable[Event]) -> CollectiveConflict | None:
    """Watchdogs that timed out in the same collective call, named as different collectives.

    A process group numbers its collectives in the order each member issues them, so one sequence
    number is one call on every rank of the group. When one rank's watchdog gave up in ALLREDUCE #n
    and another's in BROADCAST #n, the ranks were not in the same collective: their code took
    different paths, and each waits for peers that will never join it. PyTorch's flight-recorder
    analysis reads recorded collectives the same way (``torch/distributed/flight_recorder``:
    entries of one ``collective_seq_id`` whose ``profiling_name`` differ are a mismatch). Unlike
    :func:`odd_collective` this needs no majority: two ranks are enough to show the mismatch,
    though not which side is odd. Lines that cannot be placed in one group are left out.
    """
    first: dict[int, Event] = {}
    for e in events:
        if e.signature == WATCHDOG and e.rank is not None and e.rank not in first and e.fields.get("seq"):
            first[e.rank] = e
    calls: dict[tuple[tuple[str, str], str], dict[str, list[int]]] = {}
    for r, e in sorted(first.items()):
        group, op = _group_of(e), e.fields.get("op_type", "")
        if group is None or not op or op in P2P_OPS:
            continue
        calls.setdefault((group, e.fields["seq"]), {}).setdefault(op, []).append(r)
    for (_, seq), ops in sorted(calls.items(), key=lambda kv: int(kv[0][1])):
        if len(ops) < 2:
            continue
        said = "; ".join(f"rank(s) {', '.join(map(str, rs))} in {op}" for op, rs in ops.items())
        reason = (
            f"the watchdogs name collective #{seq} as different collectives ({said}): the ranks took "
            "different paths there, and each waits for peers that will not join it"
        )
        what = "the ranks timed out in one collective call, named as different collectives: they took different paths"
        return CollectiveConflict(seq, ops, reason, what)
    return _out_of_step(calls)


OUT_OF_STEP_MAX = 32  # collectives a rank can be ahead of a peer (see ``_out_of_step``)


def _out_of_step(calls: dict[tuple[tuple[str, str], str], dict[str, list[int]]]) -> CollectiveConflict | None:
    """Watchdogs of one group that gave up at different collectives: the ranks are out of step.

    A watchdog reports the first collective its rank has not completed, and a collective
    completes only once every member of the group has joined it: ranks that wait on a peer wait at
    the same sequence number. A rank whose watchdog names a later one completed calls that the
    other rank, which issued them too, never completed: the two did not issue the same
    collectives in the same order (a skipped or extra call, a branch, uneven data). Which side is
    odd, two ranks do not say. Point-to-point calls are numbered apart and left out.

    A rank runs ahead only as far as it can queue calls before something blocks it (a few; 2 and 4
    in the real pastes), so numbers further apart than ``OUT_OF_STEP_MAX`` are more likely two
    groups whose lines do not say which they are (a subgroup whose ranks number as the world's).

    ``calls`` is :func:`conflicting_collective`'s table, (group, sequence number) -> op -> ranks,
    with one op per call (a call named as two was a conflict of its own)."""
    at: dict[tuple[str, str], dict[int, tuple[str, list[int]]]] = {}
    for (group, seq), ops in calls.items():
        ((op, ranks),) = ops.items()
        at.setdefault(group, {})[int(seq)] = (op, ranks)
    for _, seqs in sorted(at.items()):
        if len(seqs) < 2 or max(seqs) - min(seqs) > OUT_OF_STEP_MAX:
            continue
        named = {f"{op} #{q}": rs for q, (op, rs) in sorted(seqs.items())}
        said = "; ".join(f"rank(s) {', '.join(map(str, rs))} at {call}" for call, rs in named.items())
        reason = (
            f"the watchdogs of one group gave up at different collectives ({said}): a collective completes only "
            "once every member joined it, so a rank further on completed calls its peer never did; the ranks "
            "did not issue the same collectives in the same order"
        )
        what = (
            "the ranks' watchdogs gave up at different collectives of one group: they did not issue the same "
            "collectives in the same order"
        )
        return CollectiveConflict(str(min(seqs)), named, reason, what)
    return None
