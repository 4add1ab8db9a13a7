"""Placing: giving a rank to the failure lines that name none, before correlation.

A pasted console, a console without ``--tee``, or one node's agent prints a worker's traceback
with no rank on it, and the correlation that follows reasons per rank. Three readings place such
lines, each only where one rank can own them: torchrun's failure records (the one rank that failed
on its own owns the rank-less exceptions printed before its record), the rank a job's peers lost
(the one rank whose peers all reported losing it), and a rank whose watchdog re-raises the error
it caught ("[Rank 1] NCCL watchdog thread terminated with exception: ..."). They run in the
pipeline between align and correlate (``pipeline._after_parse``), and they live apart from
``correlate`` because they change the events, where correlation only reads them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Container, Sequence

from firstfault.match.unrecognised import UNRECOGNISED
from firstfault.reason.correlate import TEARDOWN_SIGNALS, earlier, exit_signal, is_exit_record, quotes_cause
from firstfault.vocab import Event, Layer, Role

_PROCESS_LAYERS = (Layer.APPLICATION, Layer.FRAMEWORK)


def place_rankless(events: Sequence[Event]) -> int | None:
    """Give a rank to the exceptions a console printed without one, when only one rank can own them.

    Without ``--tee`` (or with a pasted console) a worker's traceback carries no rank. torchrun's
    failure records say which ranks failed on their own: an exit that is not a tear-down signal,
    by a rank with no error line of its own. When exactly one rank did, the rank-less exceptions
    of processes (application and framework layers) printed before its record are that rank's.
    When several ranks did, across a bundle of several consoles (one per node's torchrun agent),
    each console's own records are read alone: the rank-less lines of a node's console are its
    workers', and a console whose records name one such rank gives its lines to that rank.
    Returns the rank (the first placed), or None when nothing was placed.
    """
    own = {
        e.rank
        for e in events
        if e.rank is not None
        and not is_exit_record(e)
        and e.role in (Role.ROOT, Role.CASCADE)
        and e.signature != UNRECOGNISED
    }
    placed = _place_rankless_in(events, own)
    if placed is not None or len({e.source for e in events}) < 2:
        return placed
    by_source: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        by_source[e.source].append(e)
    got = [r for evs in by_source.values() if (r := _place_rankless_in(evs, own)) is not None]
    return got[0] if got else None


def _place_rankless_in(events: Sequence[Event], own: Container[int | None]) -> int | None:
    """``place_rankless`` over ``events`` (a bundle, or one console of it); ``own``: the ranks
    with an error line of their own."""
    failed: dict[int, Event] = {}
    for e in events:
        if e.rank is not None and is_exit_record(e) and exit_signal(e) not in TEARDOWN_SIGNALS and e.rank not in own:
            failed.setdefault(e.rank, e)
    if len(failed) != 1:
        return None
    ((rank, record),) = failed.items()
    if exit_signal(record) == "SIGKILL":
        return None  # killed outright: it printed nothing, the rank-less lines are someone else's
    # Identical copies in a console without prefixes are several processes printing one message
    # (align keeps them apart for that reason): the failed rank owns one; the others stay rank-less,
    # printed by ranks torn down before they could exit on their own, as long as there were
    # that many processes to print them.
    printers = len({e.rank for e in events if e.rank is not None and is_exit_record(e)})
    copies = Counter((e.signature, e.text.strip()) for e in events if e.rank is None and e.layer in _PROCESS_LAYERS)
    owned: set[tuple[str, str]] = set()
    placed = 0
    for e in events:
        if e.rank is not None or e.layer not in _PROCESS_LAYERS or e.role == Role.NOISE or is_exit_record(e):
            continue
        if e.role == Role.TEARDOWN or (record.ts is not None and e.ts is not None and e.ts > record.ts + 1.0):
            continue
        key = (e.signature, e.text.strip())
        if key in owned and 1 < copies[key] <= printers:
            continue
        owned.add(key)
        e.rank = rank
        e.set_field("rank_from", "the only rank torchrun reports failing on its own")
        placed += 1
    return rank if placed else None


def place_on_lost(events: Sequence[Event], world: int | None) -> int | None:
    """Give a rank to the errors a console printed without one, when its peers all lost one rank.

    A console puts no rank on every line: torch prefixes a traceback with ``[rankN]:``, but a C++
    ``terminate called ...`` and its ``what():`` reach stderr unprefixed, and a plain ``logging``
    format under Lightning's or Accelerate's launcher names no rank at all. When every other rank
    of the world reports an error of a peer (a closed connection, a timeout) and one rank printed
    no error, the rank-less errors printed before the first of those reports are that rank's: its
    last words, read as its own. No launcher record is needed (``place_rankless`` uses torchrun's),
    and none may disagree: with one, this defers to it. Returns the rank, or None.
    """
    if not world or world < 2 or any(is_exit_record(e) for e in events if e.role != Role.NOISE):
        return None
    erred: set[int] = set()
    first: Event | None = None
    for e in events:
        if e.rank is None or e.role not in (Role.ROOT, Role.CASCADE):
            continue
        erred.add(e.rank)
        if e.role == Role.CASCADE and (first is None or earlier(e, first)):
            first = e
    lost = [r for r in range(world) if r not in erred]
    if first is None or len(lost) != 1 or len(erred) != world - 1:
        return None
    placed = 0
    for e in events:
        if e.rank is None and e.role == Role.ROOT and e.layer in _PROCESS_LAYERS and earlier(e, first):
            e.rank = lost[0]
            e.set_field("rank_from", "the only rank of the world its peers lost and that printed no error")
            placed += 1
    return lost[0] if placed else None


def place_quoted(events: Sequence[Event]) -> int | None:
    """Give a rank-less error the rank whose tear-down quotes it.

    torch's watchdog re-raises, in the same process, the exception it caught ("[Rank 1] NCCL
    watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered"):
    a rank-less error line of the same signature printed before it is that process's. Only when
    exactly one rank quotes that error. Returns the rank, or None when nothing was placed.
    """
    quoted: dict[str, set[int]] = {}
    first_quote: dict[str, Event] = {}
    for e in events:
        if e.rank is not None and quotes_cause(e):
            sig = e.fields["cause_signature"]
            quoted.setdefault(sig, set()).add(e.rank)
            if sig not in first_quote or earlier(e, first_quote[sig]):
                first_quote[sig] = e
    placed = None
    for e in events:
        ranks = quoted.get(e.signature)
        if e.rank is not None or e.role != Role.ROOT or not ranks or len(ranks) != 1:
            continue
        if not earlier(e, first_quote[e.signature]):
            continue
        (rank,) = ranks
        e.rank = rank
        e.set_field("rank_from", f"rank {rank}'s watchdog quotes this error")
        placed = rank
    return placed


# ProcessGroupNCCL's "Some NCCL operations have failed or timed out ... we are taking the entire
# process down": the watchdog's own word that the abort after it is its tear-down
