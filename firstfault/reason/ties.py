"""Quiet ranks the log does not tell apart: tied at one step, or none of them seen at all.

Why a module of its own: the silent-rank reading (``reason.candidates``) orders quiet ranks by how
far they got, then by when their last line came. That last order is evidence only when the lines
are further apart than a step takes; closer, it is the scheduler's, and no rank is named. Ranks no
line shows at all are a choice too: the lowest is named, and the verdict says it was a choice;
ranks known only from a count of untagged step lines are not (they printed), and none is named.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from firstfault.reason.correlate import Candidate, Correlation
from firstfault.reason.stops import stopped_how, survivors_stopped
from firstfault.vocab import CandidateKind, Category, RankProgress
from firstfault.vocab.text import rank_list


def tied_at_one_step(
    out: Sequence[Candidate],
    prog: dict[int, RankProgress],
    awaited: Mapping[int, int],
    fr_pos_of: Mapping[int, int],
    unseen: Container[int],
) -> Candidate | None:
    """Quiet ranks whose last progress is the same step, reached within one step of each other.

    A launcher that stops the survivors itself (``mp.spawn`` terminating the rest when its first
    process fails) leaves several ranks with no error of their own. When their logs end at the same
    step, at times closer together than a step takes, which of them the others waited for is not
    in the log: the order of their last lines is the scheduler's, not evidence. Naming the first
    would be a coin toss, so no rank is named. Victims that name a rank, the flight recorder, a
    rank further behind, or a rank no line shows (read apart: its silence may be the paste's) all
    decide it otherwise."""
    seen = [c for c in out if c.rank is not None and c.rank not in unseen]
    if len(seen) < 2 or seen[0] is not out[0] or awaited or fr_pos_of:
        return None
    first = prog.get(seen[0].rank or 0)
    if first is None or first.last_step is None or first.last_step_ts is None:
        return None
    grain = max((p.step_interval_s or 0.0) for p in prog.values())
    tied = [
        c.rank
        for c in seen
        if (p := prog.get(c.rank or 0)) is not None
        and p.last_step == first.last_step
        and p.last_step_ts is not None
        and abs(p.last_step_ts - first.last_step_ts) <= grain
    ]
    if len(tied) < 2 or grain <= 0:
        return None
    reasons = [
        f"ranks {rank_list(sorted(r for r in tied if r is not None))} reported no error and their logs all end "
        f"at step {first.last_step}, within one step's time ({grain:.2f} s) of each other: nothing in the log "
        "says which of them the others waited for, so none is named",
    ]
    return Candidate(CandidateKind.SILENT, None, None, None, first.last_step_ts, seen[0].category, reasons)


def note_lowest_unseen(out: list[Candidate], unseen: Container[int], awaited: Mapping[int, int], fr: bool) -> None:
    """Several ranks printed nothing: the lowest is named, and the verdict says it is a choice."""
    others = [c.rank for c in out[1:] if c.rank is not None and c.rank in unseen]
    if out and out[0].rank in unseen and others and out[0].rank not in awaited and not fr:
        out[0].reasons.append(
            f"rank(s) {rank_list(sorted(others))} printed nothing either; rank {out[0].rank} is named as the lowest "
            "(rank 0 alone evaluates, logs and writes checkpoints in most trainers), not from anything it printed"
        )


def printed_untagged(pool: list[int], unseen: Container[int], awaited: Mapping[int, int], printers: int) -> bool:
    """Are the suspects several ranks known only from a count of untagged progress lines?

    Such ranks printed (their steps are in the console, without a rank tag): none of them is "a
    rank that printed nothing", and naming the lowest would be a guess among equals. One such rank
    is still the only rank left to have been the one its peers lost, and rank 0 keeps the lead it
    has among quiet ranks (``note_lowest_unseen``: it alone evaluates, logs and checkpoints in
    most trainers)."""
    return (
        printers > 1
        and len(pool) > 1
        and 0 not in pool
        and all(r in unseen and r not in awaited and r < printers for r in pool)
    )


def untagged_reading(victims: set[int], pool: list[int], printers: int, corr: Correlation) -> Candidate:
    """The victims waited for one of several ranks whose lines carry no rank: say so, name none."""
    timeouts = any(corr.ranks[r].timed_out() for r in victims if r in corr.ranks)
    how = "timed out waiting" if timeouts else "lost their connections"
    reasons = [
        f"rank(s) {rank_list(sorted(victims))} {how}; the console's untagged progress lines show {printers} "
        f"processes at each step, so rank(s) {rank_list(sorted(pool))} ran and printed, but no line says which "
        "is whose: which of them the others waited for is not in the log, and none is named"
    ]
    stopped = survivors_stopped(corr)
    if stopped:
        reasons.append(
            f"the launcher stopped {stopped} other process(es) after the failure ({stopped_how(corr)}): they were "
            "alive, stuck or waiting elsewhere"
        )
    cat = Category.HANG if timeouts else Category.PROCESS_CRASH
    ranks = rank_list(sorted(pool))
    what = f"the ranks that printed errors {how}; one of rank(s) {ranks}, whose lines name no rank, stopped"
    return Candidate(CandidateKind.SILENT, None, None, None, None, cat, reasons, what=what)
