"""Attribute: choose the root among the candidates, say how sure, and what to do.

Each candidate from ``correlate`` becomes a :class:`Hypothesis`. The earliest independent
fault wins, lower layers breaking near-ties (a GPU fault explains the CUDA error above it);
when no rank reports a fault of its own, silence is evidence (the rank that stopped first,
or that the flight recorder shows missing); with no error at all, progress may still show a
straggler. Confidence is built from named factors (time margin to the runner-up, timestamp
quality, corroboration by the flight recorder or the host) so the number can be explained.
The verdict is final when :func:`attribute` returns: network localisation is part of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from firstfault.reason.candidates import (
    fr_hang_candidates,
    is_weak,
    merge_host,
    named_cause_candidates,
    orphan_cascade_candidates,
    quoted_cause_candidates,
    scheduler_end_candidates,
    silent_candidates,
    straggler_candidate,
)
from firstfault.reason.causality import OddValue, odd_reported_value
from firstfault.reason.chain import chain, fr_links, later_links, recurrences, restart_failed_otherwise
from firstfault.reason.confidence import confidence
from firstfault.reason.configuration import before_training, common_failure, template_key
from firstfault.reason.correlate import (
    Candidate,
    Correlation,
    arrival_order,
    candidate_order,
    exit_reading,
    exit_signal,
    last_words,
)
from firstfault.reason.crash_site import apply_crash_site
from firstfault.reason.divergence import Divergence, diverged
from firstfault.reason.flightrec import fr_companions
from firstfault.reason.hypothesis import DEFAULT_ACTION, hypothesis
from firstfault.reason.inputs import ReasoningInput, fr_dumped_culprits
from firstfault.reason.lost_hosts import date_lost_hosts
from firstfault.reason.named import named_by_victims, waited_before_exits
from firstfault.reason.nccl_coll import coll_mismatch
from firstfault.reason.network import localize_network
from firstfault.reason.rankless_exits import rankless_exit_candidates
from firstfault.reason.refine import (
    ASSUMED_STARTUP_PENALTY,
    UNKNOWN_RING_PENALTY,
    alike_on_every_rank,
    apply_aer_device,
    apply_before_training,
    apply_coll_mismatch,
    apply_fr_mismatch,
    apply_group_mismatch,
    apply_lone_setup_rank,
    apply_lost_worker,
    apply_raise_site,
    apply_ray_oom_kind,
    apply_shared_exception,
    common_applies,
    world_size,
)
from firstfault.reason.registration import unregistered
from firstfault.reason.same_report import explained_below
from firstfault.reason.stalls import before_outside_stop, stalled_before_limit, stalled_first, waited_at_stop
from firstfault.reason.unrecognised import unrecognised_candidates
from firstfault.reason.went_on import WENT_ON
from firstfault.reason.witnesses import apply_store_clients, apply_witness, wrap_doubt
from firstfault.vocab import (
    Action,
    CandidateKind,
    Category,
    ChainLink,
    Culprit,
    Event,
    Hypothesis,
    Role,
    TsQuality,
    Verdict,
)
from firstfault.vocab.text import clip, rank_list


def _less(conf: float, why: list[str], penalty: float, because: str) -> float:
    """``conf`` lowered by a reading's stated doubt, the reason written beside the other factors."""
    why.append(f"-{penalty:.2f}: {because}")
    return round(max(0.05, conf - penalty), 3)


def _with_last_words(win: Candidate, inp: ReasoningInput) -> Candidate:
    """A rank that exited with a failing code and no traceback, with what its own stderr file
    says last: ``sys.exit("shard 3: no samples left")`` and a script's message before ``exit(1)``
    land there. The exit record says only that it failed; its last line is what a reader looks at
    next, quoted as a fact, not as a cause a signature recognised. A killed rank's last line was
    written before the signal and says nothing of it: not quoted."""
    if win.kind != CandidateKind.EXIT or win.event is None or win.rank is None or exit_signal(win.event):
        return win
    said = last_words(inp.last_words, win.rank)
    if said is None:
        return win
    how, _ = exit_reading(win.event)
    return dataclasses.replace(win, what=how + said[1], reasons=[*win.reasons, said[0]])


def attribute(
    corr: Correlation, inp: ReasoningInput, warnings: Sequence[str] = (), later: Sequence[Event] = ()
) -> Verdict:
    """The verdict: the winning hypothesis, its chain, alternatives and confidence, placed on the
    fabric when it is a network fault. Final when returned (the pipeline adds only run statistics)."""
    cands = candidates(corr, inp)
    if not cands:
        return _finish(_no_root(corr, inp, warnings), inp)
    win, rest = _winner(cands, corr, inp)
    world = world_size(corr, inp)
    win = _with_last_words(win, inp)
    hyp = hypothesis(win, corr, inp)
    if win.kind == CandidateKind.COMMON:
        hyp.culprit.ranks, hyp.culprit.hosts, hyp.culprit.gpus = [], [], []
    apply_raise_site(hyp)
    apply_lost_worker(hyp, inp)
    apply_crash_site(hyp, inp.events)
    apply_aer_device(hyp, inp)
    apply_ray_oom_kind(hyp, inp)
    early, assumed_startup = apply_before_training(hyp, win, inp, corr)
    if win.kind == CandidateKind.COMMON and not early:
        apply_shared_exception(hyp)
    apply_lone_setup_rank(hyp, corr, inp, early)
    if win.kind != CandidateKind.COMMON and not early and not hyp.culprit.ranks and alike_on_every_rank(hyp):
        apply_shared_exception(hyp, copies=1)  # one copy of such a check is every rank's, as all copies are
    apply_store_clients(hyp, corr)
    apply_fr_mismatch(hyp, win, inp)
    other_sender = None
    if not fr_dumped_culprits(inp.fr):
        other_sender = apply_witness(hyp, corr, world)
        apply_group_mismatch(hyp, corr)
        apply_coll_mismatch(hyp, inp)
    conf, why = confidence(win, rest, inp, hyp.culprit.ranks[0] if hyp.culprit.ranks else None)
    if assumed_startup:
        conf = _less(conf, why, ASSUMED_STARTUP_PENALTY, "the set-up reading rests on no line showing training")
    if other_sender is not None:
        conf = _less(
            conf,
            why,
            UNKNOWN_RING_PENALTY,
            f"no traceback names the collective; were it an all-gather, rank {other_sender} sent the buffer",
        )
    doubt = wrap_doubt(hyp, world, inp.topology.world_size is not None)
    if doubt is not None:
        conf = _less(conf, why, UNKNOWN_RING_PENALTY, doubt)
    hyp.score = conf
    seconds = _second_roots(win, rest, hyp.category)
    alternatives = _alternatives(rest, seconds, corr, inp, conf)
    culprit = hyp.culprit
    for c in seconds:
        if c.rank is not None and c.rank not in culprit.ranks:
            culprit.ranks.append(c.rank)
    companions = [c for c in fr_companions(hyp.root_event, inp.fr) if c.rank not in culprit.ranks]
    if companions:
        culprit.ranks += [c.rank for c in companions]
        hyp.reasons.append(
            f"the flight recorder blames rank(s) {rank_list([c.rank for c in companions])} the same way, each from "
            f"its own dump: faults of their own, not victims ({clip(companions[0].reason, 240)})"
        )
    links, frac = chain(corr, win, seconds)
    links += fr_links(inp.fr_events, win, hyp.culprit.ranks)
    links += later_links(later, win)
    warns = list(warnings)
    recur = recurrences(corr, win, later)
    if recur:
        hyp.reasons.append(f"the same failure recurred in attempt(s) {', '.join(map(str, recur))}")
    otherwise = restart_failed_otherwise(later, recur)
    if otherwise is not None:
        hyp.reasons.append(otherwise)
    if hyp.root_event is not None and hyp.root_event.ts_quality != TsQuality.EXACT:
        warns.append(f"root event time is {hyp.root_event.ts_quality}: taken from a nearby line")
    verdict = Verdict(
        category=hyp.category,
        culprit=culprit,
        action=hyp.action,
        confidence=conf,
        summary=_summary(hyp.summary, links, win, seconds),
        root_event=hyp.root_event,
        causal_chain=links,
        explained_fraction=frac,
        alternatives=alternatives,
        warnings=warns,
        reasons=hyp.reasons + [f"confidence: {w}" for w in why],
        progress=inp.progress,
        flight_recorder=inp.fr,
    )
    if verdict.category == Category.NETWORK:
        localize_network(verdict, inp.events, inp.topology, inp.ib)
    return _finish(verdict, inp)


def candidates(corr: Correlation, inp: ReasoningInput) -> list[Candidate]:
    """The candidates for the root, strongest kind first: faults of their own (events, unexplained
    exits, host faults), then silence, then error lines no signature knows, then last resorts
    (a plain cancel), then, with no error at all, a straggler."""
    strong = [c for c in corr.candidates if c.kind in (CandidateKind.EVENT, CandidateKind.EXIT) and not is_weak(c)]
    cands = merge_host(strong, inp.topology)
    cands = date_lost_hosts(cands, corr, inp.progress, inp.topology)  # also absorbs peer errors
    cands.sort(key=candidate_order)
    arrival_order(cands)
    explained_below(cands)
    cands = (named_by_victims(cands, corr, inp) or waited_before_exits(cands, corr, inp)) + cands
    if cands:
        stalled = stalled_first(cands[0], corr, inp)
        if stalled is not None:
            cands.insert(0, stalled)
    if not cands:
        cands = named_cause_candidates(corr)
    if not cands:
        cands = silent_candidates(corr, inp)
    if not cands:
        cands = rankless_exit_candidates(corr, inp.progress)
    if not cands:
        cands = orphan_cascade_candidates(corr, inp.progress)
    if not cands:
        cands = quoted_cause_candidates(corr)
    if not cands:
        cands = scheduler_end_candidates(corr)
    if not cands:
        cands = unrecognised_candidates(before_outside_stop(corr, corr.unrecognised))
    if not cands:
        cands = merge_host([c for c in corr.candidates if is_weak(c)], inp.topology)
    if not cands:
        cands = fr_hang_candidates(inp)
    if not cands and not corr.errors:
        s = straggler_candidate(inp)
        if s is not None:
            cands = [s]
    return cands


def _winner(cands: list[Candidate], corr: Correlation, inp: ReasoningInput) -> tuple[Candidate, list[Candidate]]:
    """The first candidate, unless it is a time limit that ended a stall, one copy of a failure
    every rank shared, or a failure whose copies name the rank that differs."""
    win, rest = cands[0], cands[1:]
    stalled = stalled_before_limit(win, corr, inp) or waited_at_stop(win, corr, inp)
    if stalled is not None:
        win, rest = stalled, [win, *rest]
    world = world_size(corr, inp)
    common = common_failure(corr, world)
    # The copies of a shared failure that state each rank's value name the odd rank; so can one
    # copy, the winner, where the order of the check says which ranks it found alike.
    odd = odd_reported_value(corr.errors)
    shared = common.event if common is not None else win.event
    if odd is not None and shared is not None and shared.signature == odd.signature:
        return _odd_one(odd, [win, *rest], shared)
    if common is not None and common_applies(win, common):
        win = Candidate(
            CandidateKind.COMMON,
            common.event,
            None,
            None,
            common.event.ts,
            common.event.category,
            [common.describe(world)],
        )
        rest = [c for c in rest if c.event is None or template_key(c.event) != template_key(common.event)]
    return win, rest


def _odd_one(odd: OddValue, cands: list[Candidate], shared: Event) -> tuple[Candidate, list[Candidate]]:
    """A failure every rank shared whose copies name the ranks that differ: the first of those is the
    culprit, on its own copy of the failure; the other copies are that failure seen by its peers,
    not competing faults."""
    r = odd.ranks[0]
    own = next((c for c in cands if c.rank == r and c.kind == CandidateKind.EVENT), None)
    if own is None:
        own = Candidate(CandidateKind.EVENT, shared, r, None, shared.ts, shared.category, [])
    win = Candidate(own.kind, own.event, r, own.host, own.ts, own.category, [*own.reasons, odd.reason], own.supporting)
    same = template_key(shared)
    return win, [c for c in cands if c is not own and (c.event is None or template_key(c.event) != same)]


def _second_roots(win: Candidate, rest: Sequence[Candidate], category: Category) -> list[Candidate]:
    """A later root on another rank in the same attempt is a second, independent fault."""
    return [
        c
        for c in rest
        if c.kind == CandidateKind.EVENT
        and c.rank is not None
        and c.rank != win.rank
        and c.event is not None
        and (win.event is None or c.event.attempt == win.event.attempt)
        and c.event.signature != (win.event.signature if win.event else None)
        and not (c.category == Category.NETWORK and category == Category.NETWORK)  # the link's other end
    ]


def _alternatives(
    rest: Sequence[Candidate], seconds: Sequence[Candidate], corr: Correlation, inp: ReasoningInput, conf: float
) -> list[Hypothesis]:
    out = []
    for c in rest[:5]:
        h = hypothesis(c, corr, inp)
        h.score = max(0.01, round(conf * 0.5 if c in seconds else conf * 0.25, 3))
        if c in seconds:
            h.reasons.append("an independent fault of its own, later than the root")
        out.append(h)
    return out


def _summary(head: str, links: Sequence[ChainLink], win: Candidate, seconds: Sequence[Candidate]) -> str:
    n_casc = sum(1 for link in links if link.explained_by is not None or (win.event is None and link.role != Role.ROOT))
    victims = {
        link.event.rank
        for link in links
        if link.role in (Role.CASCADE, Role.TEARDOWN) and link.event.rank not in (None, win.rank)
    }
    summary = head
    if n_casc:
        summary += f" — {n_casc} later error(s) on {len(victims)} other rank(s) follow from it"
    if seconds:
        summary += f"; rank {seconds[0].rank} failed independently {(seconds[0].ts or 0) - (win.ts or 0):.1f} s later"
    return summary


def _no_root(corr: Correlation, inp: ReasoningInput, warnings: Sequence[str]) -> Verdict:
    """No candidate: errors nothing places (unknown), NCCL's call trace showing one process calling
    something else (a collective mismatch, see ``reason.nccl_coll``), ranks that never registered
    (a start-up that waits), or no error at all (the job ended well)."""
    coll = None if corr.errors else coll_mismatch(inp.events)
    # training under way shows the process group formed: every rank joined, whatever a paste left out
    reg = None if corr.errors or coll is not None or inp.training.seen else unregistered(inp.events)
    root, culprit = None, Culprit()
    if coll is not None:
        cat, summary, conf, act = (
            Category.COLLECTIVE_MISMATCH,
            coll.summary(),
            0.6,
            DEFAULT_ACTION[Category.COLLECTIVE_MISMATCH],
        )
        root = coll.odd[0] if coll.odd else None
        culprit = Culprit(ranks=list(coll.ranks), hosts=coll.hosts)
    elif reg is not None:
        cat, summary, conf, act = (
            Category.CONFIGURATION,
            f"configuration on the whole job: only {len(reg.announced)} of {reg.world} ranks registered at start-up; "
            f"the job waits for rank(s) {rank_list(reg.missing)}, which never started (launch every task: "
            "srun under sbatch, the node and task counts)",
            0.5,
            DEFAULT_ACTION[Category.CONFIGURATION],
        )
    elif corr.errors:
        cat, summary, conf, act = (
            Category.UNKNOWN,
            "errors were found but none could be placed as the root",
            0.2,
            Action.RESTART,
        )
    elif (down := _torn_down(inp.events)) is not None:
        cat, act, conf = Category.UNKNOWN, Action.RESTART, 0.3
        summary = (
            f"the job was torn down ({_quoted(down)}), and no line in the log says why: the fault's own "
            "output is missing"
        )
        if _before_training(down, inp):
            cat, act = Category.CONFIGURATION, DEFAULT_ACTION[Category.CONFIGURATION]
            summary += _SET_UP_SUFFIX
    elif (call := _failed_call(inp.events)) is not None:
        cat, act, conf, summary = _no_error_but(
            call,
            inp,
            f"a call failed, and no line in the log says why: {_quoted(call)} is a back trace that reports a "
            "failure's code, not its cause (NCCL's own WARN line, above it in a full log, names the call)",
        )
    elif (wait := _still_retrying(inp.events, inp.file_ends)) is not None:
        cat, act, conf, summary = _no_error_but(
            wait,
            inp,
            f"the log ends while a connection was still being retried ({_quoted(wait)}): torch's c10d "
            "socket retries it until its connect timeout, and nothing after it shows the connection made",
        )
    elif inp.cut_traceback is not None:
        cat, act, conf = Category.UNKNOWN, Action.RESTART, 0.3
        summary = (
            f"an exception was raised ({clip(inp.cut_traceback, 160)}), but the log stops inside its "
            "traceback: the exception's own line, the fault, is not in the log"
        )
    elif (climb := _diverging(inp)) is not None:
        cat, act, conf = Category.NUMERICAL, DEFAULT_ACTION[Category.NUMERICAL], 0.4
        summary = f"the loss diverged: {climb.describe()}"
        if climb.rank is not None:
            culprit = Culprit(ranks=[climb.rank])
    else:
        cat, act = Category.NONE, Action.NONE
        summary, conf = _no_failure(inp.events, inp.training_end)
        if any(e.fields.get(WENT_ON) for e in inp.events):  # error lines the job outlived (a warning names them)
            summary = summary.replace(
                "no error in the log, though it does not show the job's end",
                "the job went on from every error it printed (warnings), though the log does not show its end",
            )
    links, frac = chain(corr, None, [])
    return Verdict(
        cat,
        culprit,
        act,
        conf,
        summary,
        root,
        links,
        frac if corr.errors else 1.0,
        [],
        list(warnings),
        progress=inp.progress,
        flight_recorder=inp.fr,
    )


# The reading an unexplained failure gets before training (reason.configuration): the set-up's.
_SET_UP_SUFFIX = "; it came before any training line: read as a failure of the set-up"


def _diverging(inp: ReasoningInput) -> Divergence | None:
    """A loss that climbed away at the end of the log (``reason.divergence``), unless the log shows
    the job's end (a line marking completion, a step counter at its total)."""
    if inp.training_end is not None or _ended_well(inp.events) is not None:
        return None
    return diverged(inp.losses)


def _no_error_but(e: Event, inp: ReasoningInput, summary: str) -> tuple[Category, Action, float, str]:
    """The reading of a line that is no error of its own but says the job did not end well: its
    signature's category (the set-up's before training), at low confidence."""
    cat = e.category
    if _before_training(e, inp):
        cat, summary = Category.CONFIGURATION, summary + _SET_UP_SUFFIX
    return cat, DEFAULT_ACTION[cat], 0.3, summary


def _before_training(e: Event, inp: ReasoningInput) -> bool:
    """Did this line come before any training line (the job's window bounds a line with no time)?"""
    return before_training(e.ts, inp.training, inp.launch_start, True, inp.window.end if inp.window else None)


def _quoted(e: Event) -> str:
    """A line as a verdict quotes it: "file:line: text", clipped."""
    return clip(f"{e.source}:{e.line}: {e.text.strip()}", 160)


def _ended_well(events: Sequence[Event]) -> Event | None:
    """The first line a signature marks ``completed`` (a job's end, as its launcher or trainer
    says it), or None."""
    return next((e for e in events if e.fields.get("completed")), None)


def _first_unended(events: Sequence[Event], keep: Callable[[Event], bool]) -> Event | None:
    """The first line (by file and line) of those ``keep`` picks, when nothing says the job ended
    well: a line a signature marks ``completed`` outweighs them."""
    if _ended_well(events) is not None:
        return None
    picked = [e for e in events if keep(e)]
    return min(picked, key=lambda e: (e.source, e.line)) if picked else None


def _torn_down(events: Sequence[Event]) -> Event | None:
    """The first line saying the job or a process was being taken down (a watchdog's "we are taking
    the entire process down", a launcher's closing signal), when nothing says the job ended well.

    Why: ``none`` means the job ended well. A tear-down is a failure's consequence even when the
    failure's own line is not in the paste; saying "no failure" there would be a lie.
    """
    return _first_unended(events, lambda e: e.role == Role.TEARDOWN)


def _failed_call(events: Sequence[Event]) -> Event | None:
    """The first line saying a call failed without saying why (signature field ``failed_call``:
    NCCL's INFO back trace "bootstrap.cc:270 -> 2"), when nothing says the job ended well.

    Why: such a line is no error of its own (the WARN line above it in a full log is), so it never
    competes with one; but a job whose log holds it did not end well, and a paste of only such lines
    read as healthy would be a lie. Its code says how the call failed (the signature's category)."""
    return _first_unended(events, lambda e: e.fields.get("failed_call") == "1")


def _still_retrying(events: Sequence[Event], file_ends: dict[str, int]) -> Event | None:
    """A connection retry its file ends on (signature field ``retrying``), when nothing says the
    job ended well.

    Why: torch's c10d client socket retries a connection to the store (a name that does not
    resolve, a refused or unroutable port) until its connect timeout, warning as it goes
    (socket.cpp ``SocketConnectOp::tryConnect``: ``retry = true``, "warn only every 30 seconds").
    A healthy job prints such a warning and goes on: the connection is made and the log goes on
    below it. A log whose last line is the retry shows a job still waiting to reach its store, not
    one that ended well; "no failure found" there would be a lie. The real pastes: a worker pod's
    rendezvous host that did not resolve (kubernetes-sigs/jobset#603, vllm#15498), a port with no
    route (kubeflow/trainer#2041)."""
    return _first_unended(events, lambda e: e.fields.get("retrying") == "1" and file_ends.get(e.source) == e.line)


def _no_failure(events: Sequence[Event], training_end: str | None) -> tuple[str, float]:
    """What "no failure" rests on: a line saying the job ended well, or only the absence of errors.

    Why: ``none`` should mean the job ended well, and a paste that stops before the end (a
    hang, a cut excerpt) shows no error either. A signature that marks a job's end (torchrun's
    "worker group successfully finished", the Trainer's "Training completed", Lightning's
    "`Trainer.fit` stopped: `max_epochs=N` reached", nccl-tests' closing bandwidth) sets
    ``completed``, and a step counter at its total ("step 150/150") is training's end too; without
    either the summary says that the end is not in the log, and the confidence is lower: the
    answer rests on what the log does not show.
    """
    done = _ended_well(events)
    if done is not None:
        return f"no failure found: the job ended well ({_quoted(done)})", 0.95
    if training_end is not None:
        return f"no failure found: training reached its last step ({clip(training_end, 160)})", 0.9
    return "no failure found: no error in the log, though it does not show the job's end (a paste may stop early)", 0.6


def _finish(verdict: Verdict, inp: ReasoningInput) -> Verdict:
    """What the bundle held, the context and the warnings, once each (one source may repeat another's)."""
    verdict.warnings = list(dict.fromkeys(verdict.warnings))
    verdict.inputs = dict(inp.inputs)
    verdict.context = list(inp.context)
    return verdict
