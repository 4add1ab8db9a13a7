"""One report of several lines: the line that says what failed leads the one that says a call failed.

Why a module of its own: the candidates are ordered by time, and a report's lines share one time;
when the first of them is a generic failure (NCCL's CUDACHECK: "Cuda failure 'invalid argument'")
and the line below it in the same report is the context (what the call was for), the order of the
lines is not the order of meaning. ``correlate.same_block`` says what one report is.
"""

from __future__ import annotations

from firstfault.reason.correlate import Candidate, same_block
from firstfault.vocab import CandidateKind, Category, Event, Role


def explained_below(cands: list[Candidate]) -> None:
    """A generic failure line gives way to the line below it in the same report that says what failed.

    NCCL's CUDACHECK prints "Cuda failure 'invalid argument'" where the call fails and then, on
    its way out, the context ("Error while creating shared memory segment /dev/shm/nccl-... (size
    9637888)"): the first says only that a call failed (its category is ``unknown``), the second
    what it was for. When the earliest candidate reads ``unknown`` and a candidate of a known
    category is the same report (same file and rank, within three lines below), that one leads.

    So does an exception's header with no message ("accelerate.utils.operations.
    DistributedOperationException:"): CPython prints ``f"{type}: {message}"``, so a message that
    starts with a newline leaves the header bare and puts the message, what failed, below it.
    """
    if not cands or cands[0].event is None:
        return
    if cands[0].category != Category.UNKNOWN and not _bare_header(cands[0].event):
        return
    top = cands[0].event
    why = (
        f"the line above it in the same report ({top.source}:{top.line}: {top.text.strip()[:120]}) says only "
        "that a call failed; this one says what for"
    )
    for e in cands[0].supporting:  # folded into it as one report
        if e.category != Category.UNKNOWN and _below_in_report(top, e):
            c = Candidate(CandidateKind.EVENT, e, e.rank, e.host, e.ts, e.category, [*cands[0].reasons, why])
            c.supporting = [x for x in cands[0].supporting if x is not e] + [top]
            cands[0] = c
            return
    for i, c in enumerate(cands[1:], 1):
        if c.category != Category.UNKNOWN and c.event is not None and _below_in_report(top, c.event):
            c.reasons.append(why)
            cands.insert(0, cands.pop(i))
            return


def _bare_header(e: Event) -> bool:
    """An uncaught exception's line that names its type and no message ("pkg.SomeError:")."""
    return e.signature == "python.exception" and e.text.rstrip().endswith(":") and not e.fields.get("msg")


def _below_in_report(top: Event, e: Event) -> bool:
    """``e`` is a fault line of ``top``'s own report: the same rank, within three lines."""
    return e.rank == top.rank and e.role == Role.ROOT and same_block(top, e)
