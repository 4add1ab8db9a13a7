"""Exits a launcher records without a rank, and the rank that owns them.

Some launchers say that a process died and not which rank it was: DeepSpeed's "[...] exits with
return code = -9" (its command list is the last process it started, not the dead one:
``parse.hooks.command_local_rank``), ``mpirun`` without ``--tag-output``, a pasted fragment. The
exit still says what kind of death it was (a signal, a code). These readings give it a rank where
the rest of the log can: the quiet rank its peers lost without a word, or the one rank whose last
step is behind every peer's; and make it the job's failure only when nothing else is a candidate.
"""

from __future__ import annotations

from collections.abc import Sequence

from firstfault.reason.correlate import (
    TEARDOWN_SIGNALS,
    Candidate,
    Correlation,
    candidate_order,
    earlier,
    exit_reading,
    exit_signal,
    is_exit_record,
    last_words,
    quotes_cause,
)
from firstfault.reason.hypothesis import silent_kill_suspects_oom
from firstfault.reason.inputs import ReasoningInput
from firstfault.reason.stalls import behind_every_peer
from firstfault.vocab import CandidateKind, Category, Event, RankProgress, Role, Severity


def _failed_rankless(corr: Correlation) -> list[Event]:
    """The launcher's records, naming no rank, of a process that failed on its own: a code other
    than 0, or a signal that was not the launcher's own tear-down."""
    return [
        e
        for e in corr.host_events.get("", [])
        if is_exit_record(e) and exit_signal(e) not in TEARDOWN_SIGNALS and e.fields.get("exitcode") not in ("0", None)
    ]


def own_rankless_kill(out: list[Candidate], corr: Correlation, ev: ReasoningInput) -> None:
    """The quiet rank its peers lost first takes the launcher's one record of a process that died
    and names no rank: DeepSpeed's "exits with return code = -9" names the command of the last
    process it started, not the one that died (``parse.hooks.command_local_rank``), and the rank
    the peers lost without a word is the process that ended. A SIGKILL is then read as a bare one
    is (a suspected OOM kill), any other signal as a crash, and a code (``sys.exit(1)``, a script's
    ``exit(1)`` after its message) as the process ending itself with an error it reported by its
    status: an application error, quoted from its own stderr where the bundle has it."""
    c = out[0] if out else None
    if c is None or c.category != Category.PROCESS_CRASH or c.rank is None:
        return
    ends = _failed_rankless(corr)
    if len(ends) != 1:
        return
    (end,) = ends
    sig = exit_signal(end)
    how, _ = exit_reading(end)
    premise = (
        f"the launcher's record of a process that {how} names no rank ({end.source}:{end.line}); "
        f"rank {c.rank}, the one its peers lost without a word, is that process"
    )
    c.supporting.append(end)
    if sig is None:
        c.category = Category.APPLICATION_ERROR
        c.reasons.append(premise)
        said = last_words(ev.last_words, c.rank)
        if said is not None:
            c.reasons.append(said[0])
        c.what = f"{how}; its peers lost their connections to it" + (said[1] if said else "")
    elif sig == "SIGKILL" and silent_kill_suspects_oom(c.reasons, premise, ev.kernel_logs):
        c.category = Category.HOST_OOM
    else:
        c.reasons.append(premise)


def rankless_exit_candidates(corr: Correlation, progress: Sequence[RankProgress] = ()) -> list[Candidate]:
    """A launcher's word that a process it ran died, when no line says which rank it was.

    DeepSpeed's launcher ("exits with return code = -9"), mpirun without a rank, a pasted
    fragment: the exit is still the job's failure, and its code or signal says what kind. Only
    when nothing else is a candidate: a rank's own error always says more. A rank whose last step
    is behind every peer's is the process that died (its peers made one more step, then waited
    for it until the launcher killed them): the exit is given that rank (``stalls.behind_every_peer``).
    """
    out = []
    for e in _failed_rankless(corr):
        how, cat = exit_reading(e)
        reason = f"a process of the job {how}; no line says which rank it was"
        out.append(Candidate(CandidateKind.EXIT, e, None, e.host, e.ts, cat, [reason]))
    out.sort(key=candidate_order)
    if out and out[0].event is not None and not exit_signal(out[0].event):
        # An exit code is how a process reports the error it printed: a symptom line printed
        # before it (a store it could not reach, a peer that closed) is that error, and says more.
        exit_ev = out[0].event
        if any(
            (e.role == Role.CASCADE or quotes_cause(e)) and e.severity == Severity.ERROR and earlier(e, exit_ev)
            for e in corr.errors
        ):
            return []
    behind = behind_every_peer(progress) if out else None
    if behind is not None:
        rank, step, ahead = behind
        out[0].rank = rank
        out[0].reasons.append(
            f"rank {rank}'s last step ({step}) is behind every peer's ({ahead}): it is the process that died, "
            "its peers made one more step and waited for it"
        )
    return out[:1]
