"""The pipeline, end to end: discover -> parse/match -> align -> correlate -> attribute.

``analyze_bundle`` is a pure function of the bundle's files and the registry, so the same
call serves the CLI, a future HTTP service, or a parallel task over a history store.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from firstfault.align import align, apply_offsets, bound_inherited, estimate_offsets, sort_key
from firstfault.attribute import Evidence, attribute
from firstfault.correlate import correlate, place_rankless
from firstfault.discover import Bundle, BundleError, discover
from firstfault.match.registry import Registry, load_registry
from firstfault.parse import nccl
from firstfault.parse.run import ParseResult, parse_bundle
from firstfault.reason.window import demote_inconsequential, demote_outside, job_window
from firstfault.vocab import Action, Category, Event, Layer, Role, Verdict
from firstfault.vocab.topology import Topology


def _known_ranks(pr: ParseResult, bundle: Bundle) -> list[int]:
    ranks: set[int] = set()
    for prog in pr.ctx.progress_by_attempt.values():
        ranks.update(prog)
    ranks.update(e.rank for e in pr.events if e.rank is not None)
    ranks.update(f.local_rank for f in bundle.files if f.local_rank is not None and f.kind == "elastic_rank_log")
    if pr.ctx.topology.world_size:
        ranks.update(range(pr.ctx.topology.world_size))
    return sorted(ranks)


def _flight_recorder(bundle: Bundle, ranks: Sequence[int], warnings: list[str]) -> dict[str, Any] | None:
    world = max(ranks) + 1 if ranks else None
    fr, warns = flight_recorder_stage([str(f.path) for f in bundle.of_kind("fr_dump")], world)
    warnings.extend(warns)
    return fr


def flight_recorder_stage(paths: Sequence[str], world: int | None) -> tuple[dict[str, Any] | None, list[str]]:
    """Load and analyse FR dumps: (the analysis as a dict, warnings). Pure over its arguments,
    so it can run in a worker beside the log parse and ship back only the (small) result."""
    if not paths:
        return None, []
    from firstfault.flightrec.analyze import analyze_fr
    from firstfault.flightrec.load import load_dumps

    loaded = load_dumps(list(paths))
    warnings = [f"flight recorder: {w}" for w in loaded.warnings]
    if not loaded.dumps:
        return None, warnings
    result = analyze_fr(loaded.dumps, expected_world_size=world)
    warnings.extend(f"flight recorder: {w}" for w in result.warnings)
    return result.to_dict(), warnings


# Below this many dumps the FR stage runs inline: a fork costs more than it saves.
FR_BESIDE_MIN_DUMPS = 256


def _rank_dirs(bundle: Bundle) -> int | None:
    """How many per-rank torchrun directories the bundle has: the world size before parsing."""
    dirs = {f.rel.rsplit("/", 1)[0] for f in bundle.files if f.kind == "elastic_rank_log"}
    return len(dirs) or None


class _FRBeside:
    """The FR stage in a forked process while the logs parse (files to verdict on every core)."""

    def __init__(self, bundle: Bundle) -> None:
        import multiprocessing as mp

        paths = [str(f.path) for f in bundle.of_kind("fr_dump")]
        self.pool = None
        self.job: Any = None
        forkable = "fork" in mp.get_all_start_methods() and not mp.current_process().daemon
        if len(paths) >= FR_BESIDE_MIN_DUMPS and forkable:
            self.pool = mp.get_context("fork").Pool(1)
            self.job = self.pool.apply_async(flight_recorder_stage, (paths, _rank_dirs(bundle)))

    def result(self, bundle: Bundle, ranks: Sequence[int], warnings: list[str]) -> dict[str, Any] | None:
        if self.pool is None:
            return _flight_recorder(bundle, ranks, warnings)
        try:
            fr, warns = self.job.get()
        finally:
            self.close()
        warnings.extend(warns)
        return fr

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None


FR_CATEGORY = {
    "missing": Category.HANG,
    "stalled": Category.HANG,
    "mismatched": Category.COLLECTIVE_MISMATCH,
    "straggler": Category.STRAGGLER,
}


def fr_events(fr: dict[str, Any] | None, bundle: Bundle, start_id: int) -> list[Event]:
    """The flight recorder's culprits as events, so they take a place in the causal chain.

    Each points at the culprit's dump (or, for a rank that wrote none, the dump directory).
    """
    if not fr:
        return []
    dumps = {f.rank: f.rel for f in bundle.of_kind("fr_dump") if f.rank is not None}
    any_dump = next(iter(dumps.values()), "fr")
    out = []
    for i, c in enumerate(fr.get("culprits", [])):
        if not isinstance(c, dict) or c.get("rank") is None:
            continue
        kind = str(c.get("kind", "missing"))
        rank = int(c["rank"])
        t = c.get("time_ns")
        out.append(
            Event(
                id=start_id + i,
                source=dumps.get(rank, any_dump.rsplit("/", 1)[0] if "/" in any_dump else any_dump),
                line=1,
                text=f"flight recorder: {c.get('reason', kind)}",
                signature=f"flightrec.{kind}",
                category=FR_CATEGORY.get(kind, Category.HANG),
                layer=Layer.FRAMEWORK,
                role=Role.ROOT,
                severity="error",
                ts=int(t) / 1e9 if isinstance(t, (int, float)) else None,
                ts_quality="exact" if t else "none",
                rank=rank,
                fields={
                    "fr_kind": kind,
                    "pg": str(c.get("pg") or ""),
                    "seq": str(c.get("seq") or ""),
                    "op": str(c.get("op") or ""),
                    "score": str(c.get("score") or ""),
                },
                context=[str(f) for f in (c.get("frames") or [])][:12],
            )
        )
    return out


def analyze_bundle(bundle: Bundle, registry: Registry) -> Verdict:
    from firstfault.flightrec.load import gc_paused

    fr_beside = _FRBeside(bundle)  # flight-recorder dumps load beside the log parse
    try:
        with gc_paused():  # hundreds of thousands of acyclic events: no cycles for the GC to find
            return _analyze_bundle(bundle, registry, fr_beside)
    finally:
        fr_beside.close()


def _analyze_bundle(bundle: Bundle, registry: Registry, fr_beside: _FRBeside) -> Verdict:
    t0 = time.perf_counter()
    pre: list[str] = []
    pr = parse_bundle(bundle, registry)
    if pr.files_read == 0 and not bundle.of_kind("fr_dump"):
        kinds = ", ".join(sorted({f.kind for f in bundle.files}))
        where = bundle.files[0].path if len(bundle.files) == 1 else bundle.root
        raise BundleError(f"{where}: no log files firstfault can read (found only: {kinds})")
    if not _looks_like_a_job(pr, bundle):
        kinds = ", ".join(sorted({f.kind for f in bundle.files}))
        raise BundleError(
            f"{bundle.root if len(bundle.files) > 1 else bundle.files[0].path}: does not look like the output of a "
            f"training job (no launcher, rank, scheduler, kernel, NCCL or training line; files: {kinds})"
        )
    t_parse = time.perf_counter()
    warnings = pre + list(pr.ctx.warnings)
    tl = align(pr.events)
    rank0_host = pr.ctx.topology.rank_host.get(0) or next((e.host for e in tl.events if e.rank == 0 and e.host), None)
    offsets = estimate_offsets(tl.events, reference=rank0_host)
    if offsets:
        apply_offsets(tl.events, offsets)
        tl.events.sort(key=sort_key)
        for o in offsets:
            warnings.append(
                f"clock of host {o.host} corrected by {o.seconds:+.1f} s against "
                f"{rank0_host or 'the median host'} (from {o.ranks} rank(s) seeing the same failure; "
                f"uncertainty ±{max(o.spread, 1.0):.1f} s)"
            )
    window = job_window(pr.ctx.spans.values(), pr.ctx.sched)
    peer_host = {
        e.id: nccl._resolve_peer(e.fields.get("peer"), pr.ctx.topology, {})[0] for e in tl.events if e.fields.get("peer")
    }
    bound_inherited(tl.events, window.end)
    context = demote_outside(tl.events, window, pr.ctx.job_files)
    context += demote_inconsequential(tl.events, peer_host)
    if context:
        warnings.append(
            f"{len(context)} host event(s) outside the job's window or benign with nothing following them "
            "are context, not candidates (see 'context')"
        )
    assign_attempts(tl.events, pr.ctx.attempt_start)
    first = first_failed_attempt(tl.events)
    now = [e for e in tl.events if e.attempt is None or first is None or e.attempt <= first]
    now_ids = {id(e) for e in now}  # identity, not dataclass __eq__: O(n), not O(n^2)
    later = [e for e in tl.events if id(e) not in now_ids] if first is not None else []
    if later:
        warnings.append(f"torchrun restarted the job; attempt {first} failed first and is the one analysed")
    placed = place_rankless(now)
    if placed is not None:
        warnings.append(f"the console's rank-less traceback is taken to be rank {placed}'s: the only rank that failed on its own")
    ranks = _known_ranks(pr, bundle)
    corr = correlate(now, ranks)
    warnings.extend(r.describe() for r in corr.recoveries[:5])
    if len(corr.recoveries) > 5:
        warnings.append(f"... and {len(corr.recoveries) - 5} more transient(s) that recovered")
    fr = fr_beside.result(bundle, ranks, warnings)
    action_of = {s.id: s.action for s in registry.signatures if s.action is not None}
    launched = bool(pr.ctx.sched.get("start") or pr.ctx.attempt_start) or any(
        f.kind in ("launcher_console", "elastic_rank_log", "slurm_output") for f in bundle.files
    )
    ev = Evidence(
        progress=pr.rank_progress(first), fr=fr, ctx=pr.ctx, action_of=action_of, window=window,
        launch_start=window.start if launched else None, series=pr.own_series(first),
    )
    ev.fr_events = fr_events(fr, bundle, len(pr.events))
    _missing_rank_warnings(bundle, ranks, warnings)
    verdict = attribute(corr, ev, warnings, later=later)
    if verdict.category == Category.NETWORK:
        localize_network(verdict, bundle, tl.events, pr.ctx.topology)
    verdict.warnings = list(dict.fromkeys(verdict.warnings))  # one source may repeat another's warning
    kind_counts = Counter(f.kind for f in bundle.files)
    verdict.inputs = {
        "path": str(bundle.root),
        "files": len(bundle.files),
        "kinds": dict(sorted(kind_counts.items())),
        "clock_offsets_s": {o.host: round(o.seconds, 3) for o in offsets},
        "topology": {"ranks": len(pr.ctx.topology.rank_host), "gpus": len(pr.ctx.topology.rank_gpu)},
        "job_window": window.describe(),
    }
    verdict.context = context
    verdict.stats = {
        "bytes_read": pr.bytes_read,
        "files_read": pr.files_read,
        "lines_flagged": pr.lines_flagged,
        "events": len(pr.events),
        "events_after_folding": len(tl.events),
        "parse_s": round(t_parse - t0, 4),
        "total_s": round(time.perf_counter() - t0, 4),
    }
    return verdict


def _looks_like_a_job(pr: ParseResult, bundle: Bundle) -> bool:
    """Any line a signature knows (noise included), training under way, an error line, a flight-recorder
    dump or a launcher's per-rank file: evidence that this is what a job left. Without any, saying
    "no failure" would be a lie about a file that is not a job log at all."""
    return bool(
        pr.events or pr.ctx.training_seen or any(pr.ctx.progress_by_attempt.values()) or bundle.of_kind("fr_dump")
        or bundle.of_kind("elastic_rank_log", "elastic_error_json")
    )


def assign_attempts(events: Sequence[Event], starts: dict[int, float]) -> None:
    """Give console and host events the torchrun attempt they happened in, by time.

    Attempt K runs from the first line of its per-rank files until attempt K+1 starts.
    """
    if len(starts) < 2:
        return
    order = sorted(starts.items(), key=lambda kv: kv[1])
    last = max(starts)
    for e in events:
        if e.attempt is not None:
            continue
        if e.signature == "torchelastic.failure_record":
            e.attempt = last  # torchrun prints its ChildFailedError summary once, after the last attempt
            continue
        if e.ts is None:
            continue
        att = order[0][0]
        for k, t in order:
            if t <= e.ts:
                att = k
        e.attempt = att


def first_failed_attempt(events: Sequence[Event]) -> int | None:
    atts = [e.attempt for e in events if e.attempt is not None and e.severity == "error" and e.role != Role.NOISE]
    return min(atts) if atts else None


def localize_network(verdict: Verdict, bundle: Bundle, events: Sequence[Event], topo: Topology) -> None:
    """Put a network verdict on a link, and on one end of it when the evidence decides."""
    from firstfault.parse import ibstat

    faults = nccl.localize_link_faults(events, topo, ibstat.collect(bundle))
    if not faults:
        return
    lf = faults[0]
    verdict.culprit.links = [f.link for f in faults[:3]]
    ends = [h for h in (lf.faulty_side,) if h] or [h for h in (lf.host_a, lf.host_b) if h]
    verdict.culprit.hosts = ends + [h for h in verdict.culprit.hosts if h not in ends]
    verdict.reasons.extend(f"link: {r}" for r in lf.reasons)
    if lf.faulty_side:
        on_side = topo.host_ranks(lf.faulty_side) or sorted(
            {e.rank for e in events if e.host == lf.faulty_side and e.rank is not None}
        )
        keep = [r for r in verdict.culprit.ranks[:1] if r in on_side]  # the rank on that HCA, when known
        if on_side and not keep:
            verdict.culprit.ranks = on_side[:1] + [r for r in verdict.culprit.ranks if r not in on_side[:1]]
        back = _port_back_up(events, lf.faulty_side, lf.device)
        if back is None:
            verdict.action = Action.EXCLUDE_AND_RESTART
            verdict.summary += f"; the fault is on {lf.faulty_side}'s side of {lf.link}"
        else:
            # a flap: the port works again, so the node can stay; the link goes on a watch list
            verdict.action = Action.RESTART
            verdict.summary += (
                f"; the fault is on {lf.faulty_side}'s side of {lf.link}, whose port came back up "
                f"({back.text.strip()[-60:]}): a flap, restart and watch the link"
            )
            verdict.reasons.append(f"link: the port went down and came back ({back.source}:{back.line}): a flap")
    else:
        verdict.summary += f"; on link {lf.link} (which end is at fault is not decided by the evidence)"


_PORT_UP = {"kernel.ib_port_state": ("link_state", "ACTIVE"), "nccl.ib_async_port_active": ("ib_event", "port active")}


def _port_back_up(events: Sequence[Event], host: str, device: str | None) -> Event | None:
    """The last 'port up' line of ``host`` (on ``device`` where both name one), if it came after a
    'down' there: a port that stayed down is a dead NIC or cable, one that came back a flap."""
    last_down: float | None = None
    up: Event | None = None
    for e in events:
        if e.host != host or e.ts is None:
            continue
        dev = e.fields.get("ib_dev")
        if device and dev and dev != device:
            continue
        if e.signature in ("kernel.ib_port_down", "nccl.ib_async_port_error"):
            last_down = e.ts if last_down is None else max(last_down, e.ts)
        want = _PORT_UP.get(e.signature)
        if want and e.fields.get(want[0]) == want[1]:
            up = e
    if up is None or last_down is None or up.ts is None or up.ts < last_down:
        return None
    return up


def _missing_rank_warnings(bundle: Bundle, ranks: Sequence[int], warnings: list[str]) -> None:
    logged = {f.local_rank for f in bundle.files if f.kind == "elastic_rank_log" and f.local_rank is not None}
    if logged and ranks:
        missing = sorted(set(range(max(ranks) + 1)) - logged)
        if missing:
            warnings.append(f"no per-rank logs for rank(s) {missing}")


def analyze(path: Path | str, signature_dirs: Sequence[Path] = ()) -> Verdict:
    """Analyse a directory, archive or single log file. Raises BundleError if unusable."""
    registry = load_registry(signature_dirs)
    bundle = discover(path)
    try:
        return analyze_bundle(bundle, registry)
    finally:
        bundle.close()
