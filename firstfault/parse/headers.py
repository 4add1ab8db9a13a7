"""Whose error a header introduces: the lines below a report's header are the rank it names.

Why: some launchers reprint a failed process's traceback under a header that names the process,
and that copy is often the only one (the process sent its exception to the parent rather than
printing it). ``torch.multiprocessing.spawn`` raises ``ProcessRaisedException`` in the parent:
"-- Process 2 terminated with the following error:" and then the child's whole traceback, with no
rank prefix on any line. Ray Train's ``WorkerGroupError`` heads each quoted error with
"[Rank 2 Error Snippet]:". Without the header the error names no rank, and the culprit is lost.

Which lines are headers is data: a signature's ``sets = { owns_below = "N" }`` says the error lines
within N lines below it (up to the next header) are the header's rank's: the ranks its
``snippet_ranks`` names, else the rank it was placed on (``local_rank``, the spawn index). A header
naming several ranks ("0,1,2,3": they failed alike) places nobody: no one of them is the culprit.
Like NCCL's and Ray's placement, this fills gaps and never overwrites a rank a line's own prefix gave,
with one exception: a header that quotes another rank's error in the printer's own output
(``sets = { quoted = "yes" }``). torch.distributed.checkpoint gathers every rank's exception and
raises the same ``CheckpointException`` on every rank, each copy quoting the failed rank's traceback
under "Traceback (most recent call last): (RANK 2)"; below such a header, the printer's own prefix
("[rank0]:") says who printed the copy, and the header says whose error it is.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection

from firstfault.vocab import Event

OWNS_BELOW = "owns_below"
QUOTED = "quoted"


def _owner(h: Event) -> int | None:
    ranks = h.fields.get("snippet_ranks")
    if ranks is not None:
        return int(ranks) if ranks.isdigit() else None
    return h.rank


def place_under_headers(events: list[Event], skip: Collection[str] = ()) -> None:
    """Give the rank-less events under a header (see the module's docstring) the header's rank.

    ``skip``: signatures never placed so (a report about the ranks below it, not an error of the
    rank whose header stands above it)."""
    by_file: dict[str, list[Event]] = defaultdict(list)
    for e in events:  # one pass: this runs on every bundle
        if OWNS_BELOW in e.fields:
            by_file[e.source].append(e)
    if not by_file:
        return
    for hs in by_file.values():
        hs.sort(key=lambda h: h.line)
    lines = {src: [h.line for h in hs] for src, hs in by_file.items()}
    for e in events:
        if OWNS_BELOW in e.fields or e.signature in skip or e.source not in by_file:
            continue
        i = bisect_left(lines[e.source], e.line)  # the headers above e: those before index i
        if not i:
            continue
        h = by_file[e.source][i - 1]
        if e.rank is not None and not (h.fields.get(QUOTED) and e.rank == h.rank):
            continue  # a rank the line's own prefix gave, unless it is the printer of a quoted copy
        reach = h.fields[OWNS_BELOW]
        owner = _owner(h)
        if owner is not None and reach.isdigit() and e.line - h.line <= int(reach):
            e.rank = owner
