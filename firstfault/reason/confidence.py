"""How sure the verdict is, as a sum of named factors a reader can check.

A base for the kind of evidence (an error line of the rank's own is worth more than its silence),
then the margin to the runner-up, the timestamp's quality, agreement with the flight recorder
and corroborating host events. Each factor is written into the verdict's reasons.
"""

from __future__ import annotations

from collections.abc import Sequence

from firstfault.reason.correlate import Candidate, says_only_failed
from firstfault.reason.inputs import ReasoningInput, fr_culprits
from firstfault.vocab import CandidateKind, Event, TsQuality, settings

_KIND_PHRASE = {
    CandidateKind.EVENT: "an error event of its own",
    CandidateKind.EXIT: "an exit with no error of its own",
    CandidateKind.SILENT: "a reading of who waited for whom (no error of the rank's own)",
    CandidateKind.SLOW: "a slow rank",
    CandidateKind.UNRECOGNISED: "an error line no signature recognises",
    CandidateKind.COMMON: "a failure every rank shared",
    CandidateKind.STALLED: "a job that stalled long before it was ended (a time limit, a cancel, a stop from outside)",
}


GENERIC_EXIT_PENALTY = 0.25


def generic_exit(win: Candidate) -> bool:
    """Is ``win`` an exit whose status says only that the process failed
    (``correlate.says_only_failed``: exit code 1, SIGABRT)?"""
    return win.kind == CandidateKind.EXIT and win.event is not None and says_only_failed(win.event)


def _same_stop(a: Event | None, b: Event | None) -> bool:
    """Are ``a`` and ``b`` copies of one stop from outside (torchrun's death-signal warning and each
    rank's KeyboardInterrupt for one Ctrl-C: signature field ``reason``)? A copy of the winner is
    no competitor, and one with its own time dates the stop."""
    return (
        a is not None
        and b is not None
        and bool(a.fields.get("reason"))
        and a.fields.get("reason") == b.fields.get("reason")
    )


def confidence(
    win: Candidate, rest: Sequence[Candidate], ev: ReasoningInput, named: int | None = None
) -> tuple[float, list[str]]:
    """``named`` is the rank the verdict names when a reading moved the blame off the winning
    candidate (a witness's sender): the flight recorder is checked against that rank, since
    agreeing with the witness would count for the wrong rank."""
    why: list[str] = []
    rank = win.rank if named is None else named
    base = {
        CandidateKind.EVENT: 0.8,
        CandidateKind.EXIT: 0.7,
        CandidateKind.SILENT: 0.55,
        CandidateKind.SLOW: 0.6,
        CandidateKind.UNRECOGNISED: 0.35,
        CandidateKind.COMMON: 0.8,
        CandidateKind.STALLED: 0.6,
    }.get(win.kind, 0.5)
    score = base
    why.append(f"{base:.2f} for {_KIND_PHRASE.get(win.kind, 'a candidate')}")
    if generic_exit(win):
        score -= GENERIC_EXIT_PENALTY
        said = ev.last_words.get(win.rank) if win.rank is not None else None
        why.append(
            f"-{GENERIC_EXIT_PENALTY:.2f}: its exit status says the process failed, not why; "
            + (
                f"its stderr's last line ({said[0]}) is no error a signature knows"
                if said
                else "no error of its own is in the log"
            )
        )
    others = [c for c in rest if (c.rank != win.rank or c.host != win.host) and not _same_stop(win.event, c.event)]
    if others and win.ts is not None and others[0].ts is not None:
        gap = others[0].ts - win.ts
        if gap < 0:  # put first by the log's order, not by a clock (``correlate.arrival_order``)
            score -= 0.25
            why.append("-0.25: runner-up at the same moment (no clock orders the two)")
        elif gap < 0.1:
            score -= 0.25
            why.append(f"-0.25: runner-up only {gap * 1000:.0f} ms later")
        elif gap < settings.current().reasoning.near_tie_s:
            score -= 0.1
            why.append(f"-0.10: runner-up {gap:.2f} s later")
        else:
            score += 0.1
            why.append(f"+0.10: runner-up {gap:.1f} s later")
    elif not others:
        score += 0.1
        why.append("+0.10: no competing candidate")
    if win.event is not None and win.event.ts_quality == TsQuality.NONE:
        score -= 0.2
        why.append("-0.20: the root event has no timestamp")
    elif (
        win.event is not None
        and win.event.fields.get("reason")
        and win.event.ts_quality == TsQuality.INHERITED
        and not any(
            _same_stop(win.event, e) and e.ts_quality == TsQuality.EXACT
            for e in [*(c.event for c in rest if c.event is not None), *win.supporting]
        )
    ):
        # a stop whose time is the line above's: whether the job still moved when it came, or had
        # stalled long before (reason.stalls: then the stall is the root), is not in the log
        score -= 0.2
        why.append("-0.20: when the stop from outside came is not in the log (its time is the line above's)")
    fr = fr_culprits(ev.fr)
    if fr and rank is not None:
        fr_ranks = [c.rank for c in fr]
        if rank == fr_ranks[0]:
            score += 0.15
            why.append("+0.15: the flight recorder names the same rank first")
        elif rank in fr_ranks:
            score += 0.05
            why.append("+0.05: the flight recorder also names this rank")
        elif win.kind != CandidateKind.EVENT:
            score -= 0.1
            why.append("-0.10: the flight recorder points elsewhere")
    if win.supporting:
        score += 0.05
        why.append(f"+0.05: {len(win.supporting)} corroborating event(s)")
    return max(0.05, min(0.98, score)), why
