"""A collective mismatch read from NCCL's own call trace (``NCCL_DEBUG_SUBSYS=COLL``).

Why: with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL`` NCCL logs every collective each process
enqueues: its name, the communicator's call counter (``opCount``), count, datatype, op and
root. Every member of a communicator must make the same call at the same ``opCount``; when one
does not, NCCL itself prints no error, the ranks just wait (or, with a larger buffer, corrupt
each other), and the trace is the only record of which process called something else. It is
what NCCL's maintainers ask for in a suspected mismatch (NVIDIA/nccl#147), and the flight
recorder's first-divergent-entry reading (``reason.causality``) applied to NCCL's log.

The comparison is made only where it is sound: calls are grouped by process (host, pid and CUDA
device, since one process may drive several GPUs) and by communicator size, and a size for which
some process holds two communicators is skipped (their ``opCount`` series cannot be told apart
across processes). The odd process is named only when the others agree by a strict majority; its
rank comes from NCCL's ``Init COMPLETE`` line for the same process and communicator, or from the
line's own prefix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from firstfault.vocab import Event

COLL_CALL = "nccl.info.coll_call"
INIT_COMPLETE = "nccl.init_complete"
_P2P = frozenset({"Send", "Recv"})  # point-to-point: the peer differs by design
# ncclDataType_t (NCCL src/nccl.h.in): the numbers the trace prints
_DATATYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16")

Process = tuple[str, str, str]  # (host, pid, CUDA device): one process may drive several GPUs (nccl-tests -g N)
Call = tuple[str, str, str, str, str]  # (collective, count, datatype, op, root)


@dataclass(frozen=True)
class CollMismatch:
    """The first call at which the members of one communicator disagree."""

    op_count: int
    nranks: int
    common: Call  # what the majority called
    odd: list[Event]  # the first line of each process that called something else
    ranks: list[int]  # their ranks, where known
    processes: int  # how many processes the trace shows at that call

    @property
    def hosts(self) -> list[str]:
        return sorted({e.host for e in self.odd if e.host})

    def summary(self) -> str:
        """The verdict's summary: the category, the first odd rank where one is known, the call."""
        on = f" on rank {self.ranks[0]}" if self.ranks else ""
        return f"collective mismatch{on}: {self.describe()}"

    def describe(self) -> str:
        who = ", ".join(f"rank {r}" for r in self.ranks) if self.ranks else ", ".join(map(_where, self.odd))
        odd = _call(self.odd[0]) if self.odd else self.common
        return (
            f"NCCL's call trace: at call #{self.op_count} of a {self.nranks}-rank communicator {who} called "
            f"{_words(odd)} while the other {self.processes - len(self.odd)} called {_words(self.common)}"
        )


def _process(e: Event) -> Process:
    return (e.fields.get("nccl_host") or e.host or "", e.fields.get("pid", ""), e.fields.get("nccl_dev", ""))


def _where(e: Event) -> str:
    """A process the trace shows but no line ranks: its host, pid and CUDA device."""
    host, pid, dev = _process(e)
    return f"process {host}:{pid}" + (f" (CUDA device {dev})" if dev else "")


def _call(e: Event) -> Call:
    f = e.fields
    return (f.get("coll", ""), f.get("count", ""), f.get("datatype", ""), f.get("op", ""), f.get("root", ""))


def _words(c: Call) -> str:
    dt = int(c[2]) if c[2].isdigit() else -1
    dtype = _DATATYPES[dt] if 0 <= dt < len(_DATATYPES) else f"datatype {c[2]}"
    return f"{c[0]} of {c[1]} {dtype} (root {c[4]})"


def coll_mismatch(events: Sequence[Event]) -> CollMismatch | None:
    """The earliest call at which one communicator's members disagree, or None."""
    calls = [e for e in events if e.signature == COLL_CALL and e.fields.get("coll") not in _P2P]
    if len(calls) < 2:
        return None
    comms: dict[tuple[Process, str], set[str]] = defaultdict(set)
    table: dict[tuple[str, int], dict[Process, Event]] = defaultdict(dict)
    for e in calls:
        nranks = e.fields.get("nranks", "")
        comms[(_process(e), nranks)].add(e.fields.get("comm", ""))
        table[(nranks, int(e.fields.get("opcount", "0"), 16))].setdefault(_process(e), e)
    ambiguous = {n for (_, n), ptrs in comms.items() if len(ptrs) > 1}
    for nranks, op_count in sorted(table, key=lambda k: k[1]):
        procs = table[(nranks, op_count)]
        if nranks in ambiguous or len(procs) < 2:
            continue
        votes = Counter(_call(e) for e in procs.values())
        if len(votes) == 1:
            continue
        common, n = votes.most_common(1)[0]
        odd = [e for e in procs.values() if _call(e) != common] if 2 * n > len(procs) else []
        ranks = sorted({r for r in (_rank(e, events) for e in odd) if r is not None})
        return CollMismatch(op_count, int(nranks) if nranks.isdigit() else 0, common, odd, ranks, len(procs))
    return None


def _rank(e: Event, events: Sequence[Event]) -> int | None:
    """The rank of the process that made call ``e``: NCCL's Init COMPLETE for its communicator."""
    comm, proc = e.fields.get("comm"), _process(e)
    for init in events:
        if init.signature == INIT_COMPLETE and init.fields.get("comm") == comm and _process(init) == proc:
            r = init.fields.get("nccl_rank", "")
            if r.isdigit():
                return int(r)
    return e.rank
