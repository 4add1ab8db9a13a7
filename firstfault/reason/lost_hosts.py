"""A node that died says nothing: date its death by its last sign of life.

When a host loses power or its kernel panics, its processes vanish mid-line. The first words
about it come from its *peers*, whose InfiniBand sends to it fail after NCCL's retry window
(~34 s: ``Got completion from peer <its IP> with status=12``), and SLURM says so only after
``SlurmdTimeout`` (300 s by default: ``Nodes X not responding, setting DOWN``, ``Node failure
on X``). Ordered by the time each line was printed, the peers' network errors come first and
look like a link fault. Once SLURM names a failed node, the death is dated to that node's last
line, and its peers' connection errors to it (and its own ranks' silence) follow from it.
"""

from __future__ import annotations

from collections.abc import Sequence

from firstfault.parse.nccl import PEER_SIGNATURES
from firstfault.reason.correlate import Candidate, Correlation
from firstfault.vocab import Category, Event, RankProgress, TsQuality
from firstfault.vocab.timefmt import iso
from firstfault.vocab.topology import Topology, normalize_ip, short_host

# connection errors land after NCCL's IB retry window; allow the clock skew between hosts too
_SLACK_S = 2.0


def _about_failure(e: Event) -> bool:
    """SLURM's words *about* a node failure ("Node failure on H", "... DUE TO NODE FAILURE")."""
    return "failed_node" in e.fields or e.fields.get("reason") == "node_failure"


def ranks_on(host: str, topo: Topology, progress: Sequence[RankProgress]) -> set[int]:
    """The ranks that ran on ``host``: from the topology (NCCL's init lines, a layout file) or, with
    neither (``NCCL_DEBUG=WARN``), from the host whose log folder held each rank's progress."""
    want = short_host(host)
    ranks = {r for r, h in topo.rank_host.items() if short_host(h) == want}
    return ranks | {p.rank for p in progress if p.host and short_host(p.host) == want and p.rank not in topo.rank_host}


def last_sign_of_life(host: str, corr: Correlation, progress: Sequence[RankProgress], topo: Topology) -> float | None:
    """The latest time anything on ``host`` wrote: its ranks' events and progress, its kernel log."""
    want = short_host(host)
    ranks = ranks_on(host, topo, progress)
    times = [p.last_step_ts for p in progress if p.last_step_ts is not None and p.rank in ranks]
    for r in ranks:
        v = corr.ranks.get(r)
        if v is not None:
            times += [e.ts for e in v.events if e.ts is not None and not _about_failure(e)]
    for h, evs in corr.host_events.items():
        if short_host(h) == want:  # "srun: error: Node failure on H" is said *about* H, not by it
            times += [e.ts for e in evs if e.ts is not None and not _about_failure(e)]
    return max(times) if times else None


def _peer_host(e: Event, topo: Topology) -> str | None:
    peer = e.fields.get("peer")
    if not peer:
        return None
    ip = normalize_ip(peer.split("<", 1)[0])
    return topo.ip_host.get(ip or "") or short_host(ip)


def _unknown_peer_is_lost(e: Event, cause: Candidate, topo: Topology) -> bool:
    """A peer address no line ties to a host, failing after a host died whose address is unknown,
    is that host's.

    With ``NCCL_DEBUG=WARN`` a dead node never prints its own address (it prints nothing at all),
    so its peers' ``Got completion from peer 10.64.0.14`` cannot be looked up. The scheduler named
    the node that died; an address that belongs to no other host is the dead node's.
    """
    if cause.category != Category.SCHEDULER or cause.event is None or "failed_node" not in cause.event.fields:
        return False
    peer = normalize_ip((e.fields.get("peer") or "").split("<", 1)[0])
    if not peer or peer in topo.ip_host:
        return False
    lost = short_host(cause.host)
    return not any(short_host(h) == lost for h in topo.ip_host.values())


# An untimed NCCL line inherits the time of the line above it: a lower bound. A connection
# error that prints minutes after its cause can carry a time from before the cause.
_LOWER_BOUND_S = 60.0


def _explains_peer_error(cause: Candidate, e: Event, topo: Topology) -> bool:
    """``cause`` (a fault on host H) explains ``e``, a connection error to H, that is not earlier.

    A port that went down on H also explains the connection errors H's own ranks report: NCCL's
    ``status=12`` (retries exceeded) on either end of a link is how a dead port shows up.
    """
    if e.signature not in PEER_SIGNATURES or cause.host is None or cause.ts is None:
        return False
    to_cause = short_host(_peer_host(e, topo)) == short_host(cause.host) or _unknown_peer_is_lost(e, cause, topo)
    on_cause = cause.category == Category.NETWORK and short_host(e.host) == short_host(cause.host)
    if not (to_cause or on_cause):
        return False
    if e.ts is None:
        return True
    slack = _LOWER_BOUND_S if e.ts_quality in (TsQuality.INHERITED, TsQuality.NONE) else _SLACK_S
    return cause.ts <= e.ts + slack


def absorb_peer_errors(cands: list[Candidate], topo: Topology) -> list[Candidate]:
    """A peer's "Got completion from peer H ... status=12" follows from whatever stopped H (its
    process, its GPU, its node or its port)."""
    out = list(cands)
    for c in cands:
        if c not in out or not c.host or c.event is None or c.event.signature in PEER_SIGNATURES:
            continue  # a connection error explains nothing: it is always the echo of something
        followers = [o for o in out if o is not c and o.event is not None and _explains_peer_error(c, o.event, topo)]
        for o in followers:
            assert o.event is not None
            c.supporting.append(o.event)
            out.remove(o)
        if followers:
            c.reasons.append(
                f"{len(followers)} peer(s) lost their connections to {c.host} after it: they follow from it"
            )
    return out


def date_lost_hosts(
    cands: list[Candidate], corr: Correlation, progress: Sequence[RankProgress], topo: Topology
) -> list[Candidate]:
    """Re-date each SLURM node-failure candidate to its node's last sign of life; absorb what follows."""
    out = list(cands)
    for c in cands:
        e = c.event
        lost = e.fields.get("failed_node") if e is not None else None
        if e is None or not lost or c not in out:
            continue
        died = last_sign_of_life(lost, corr, progress, topo)
        if died is None:
            continue
        c.host = lost
        on_host = sorted(ranks_on(lost, topo, progress))
        c.rank = on_host[0] if on_host else None
        if c.ts is None or died < c.ts:
            c.reasons.append(
                f"SLURM declared {lost} failed; its last sign of life was at {iso(died)}, "
                f"{(c.ts or died) - died:.0f} s before SLURM noticed"
            )
            c.ts = died
        c.category = Category.SCHEDULER
        on_lost = [
            o
            for o in out
            if o is not c
            and o.event is not None
            and short_host(o.event.host) == short_host(lost)
            and (o.ts is None or o.ts >= died - _SLACK_S)
        ]
        for o in on_lost:
            assert o.event is not None
            c.supporting.append(o.event)
            out.remove(o)
    return absorb_peer_errors(out, topo)
