"""Which link broke, and which end of it: network verdicts placed on the fabric.

A network failure shows as errors on many ranks (every peer of the broken link loses it). The
evidence that places it: the peers NCCL names in its completion errors (``Got completion from
peer 10.0.0.2``, resolved to hosts through NCCL's ``Bootstrap : Using`` lines), the host-side port
events (the kernel's ``Port: 1 Link DOWN``, NCCL's async port errors) and the InfiniBand port state
dumps (``ibstat``, ``ibv_devinfo``, ``rdma link``, counters). A port that went down and came back
is a flap (restart and watch the link); one that stayed down is a dead NIC or cable (exclude the
node).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from firstfault.parse.ibstat import HostIB
from firstfault.parse.nccl import PEER_SIGNATURES, event_host
from firstfault.vocab import Action, Event, Verdict
from firstfault.vocab.topology import Topology, normalize_ip, short_host

# Signatures that say a host's own port / NIC failed, with their weight as evidence.
PORT_SIGNATURES: Mapping[str, float] = {
    "kernel.ib_port_down": 3.0,
    "kernel.mlx5_netdev_link_down": 2.5,
    "nccl.ib_async_port_error": 3.0,
    "nccl.ib_async_fatal": 3.0,
    "kernel.mlx5_module_event": 2.0,
}


@dataclass(slots=True)
class LinkFault:
    """A network fault placed on a link: the two hosts, the port, and which end is to blame.

    ``faulty_side`` is ``host_a``'s or ``host_b``'s name when the evidence decides (that end's
    port went down, its counters moved, or it is the one host common to every failing link), and
    None when it does not; ``reasons`` say why in words.
    """

    host_a: str
    host_b: str | None
    device: str | None = None
    port: str | None = None
    faulty_side: str | None = None
    peer_ip: str | None = None
    first_ts: float | None = None
    evidence: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    score: float = 0.0

    @property
    def link(self) -> str:
        """``host_a<->host_b[:device/port]`` for a verdict's culprit.links."""
        end = f"{self.device}/{self.port}" if self.device and self.port else (self.device or "")
        pair = f"{self.host_a}<->{self.host_b or '?'}"
        return f"{pair}:{end}" if end else pair


@dataclass(slots=True)
class _PortEvidence:
    host: str
    weight: float
    device: str | None
    port: str | None
    reason: str
    ts: float | None = None
    event_id: int | None = None


def _resolve_peer(peer: str | None, topology: Topology, known: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(host, ip) of a peer NCCL named by IP or by host name."""
    if not peer:
        return None, None
    ip = normalize_ip(peer.split("<", 1)[0])
    if ip and re.fullmatch(r"\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F:]+:[0-9a-fA-F:]*", ip):
        host = topology.ip_host.get(ip)
        return host, ip
    short = short_host(ip)
    return (known.get(short or "", ip) if short else None), None


def _port_evidence(events: Iterable[Event], ib: Mapping[str, HostIB] | None) -> list[_PortEvidence]:
    out: list[_PortEvidence] = []
    for e in events:
        w = PORT_SIGNATURES.get(e.signature)
        if w is None or not e.host or "recovered_after_s" in e.fields:
            continue  # a port that came back within NCCL's retry window (transients.py) is no suspect
        f = e.fields
        if e.signature == "kernel.mlx5_module_event" and f.get("module_status") == "Cable plugged":
            continue
        device = f.get("ib_dev") or f.get("netdev") or f.get("nic_pci")
        port = f.get("ib_port") or f.get("module")
        what = f.get("link_state") or f.get("ib_event") or f.get("module_status") or "link down"
        out.append(_PortEvidence(e.host, w, device, port, f"{e.signature} ({what}) on {e.host}", e.ts, e.id))
    for host, hib in (ib or {}).items():
        for p in hib.ports.values():
            if p.is_down():
                out.append(
                    _PortEvidence(
                        host,
                        2.5,
                        p.device,
                        str(p.port),
                        f"{p.source or 'port state'}: {p.device}/{p.port} {p.state or p.phys_state}",
                    )
                )
            moved = hib.moved_counters(p.device, p.port)
            if moved:
                names = ", ".join(f"{k}+{v}" for k, v in sorted(moved.items()))
                out.append(
                    _PortEvidence(
                        host,
                        2.0,
                        p.device,
                        str(p.port),
                        f"IB counters moved on {host} {p.device}/{p.port}: {names}",
                    )
                )
            elif p.error_counters():
                names = ", ".join(f"{k}={v}" for k, v in sorted(p.error_counters().items()))
                out.append(
                    _PortEvidence(
                        host,
                        0.75,
                        p.device,
                        str(p.port),
                        f"IB error counters non-zero on {host} {p.device}/{p.port}: {names}",
                    )
                )
    return out


def localize_link_faults(
    events: Iterable[Event],
    topology: Topology,
    ib: Mapping[str, HostIB] | None = None,
    window_s: float = 900.0,
) -> list[LinkFault]:
    """Place the bundle's network failures on links and, where the evidence allows, on one end.

    ``events``: all events of the bundle (NCCL peer errors, kernel link-down lines, NCCL async
    port events); ``topology.ip_host`` resolves the peer IPs NCCL names (parsing fills it from
    NCCL's ``Bootstrap`` lines); ``ib``: per-host InfiniBand state (``ParseResult.ib``: port
    states, counters, counter deltas).

    A host's port evidence counts for a link if it has no time or lies within ``window_s`` of the
    link's first error. The end with the heavier port evidence is the faulty side; with none, a
    host common to two or more failing links is. Port evidence with no NCCL error beside it is
    returned as a single-ended fault (``host_b`` None). Sorted by score, strongest first.
    """
    evs = list(events)
    ports = _port_evidence(evs, ib)
    pairs, unresolved = _links_from_peer_errors(evs, topology)
    faults = list(pairs.values()) + list(unresolved.values())
    # how many failing links each host is on: a host common to all of them is the likely end
    degree: dict[str, int] = defaultdict(int)
    for lf in pairs.values():
        degree[lf.host_a] += 1
        if lf.host_b:
            degree[lf.host_b] += 1
    used: set[int] = set()
    for lf in faults:
        used |= _decide_side(lf, ports, window_s, degree, len(pairs))
    faults += [_port_only(pe) for i, pe in enumerate(ports) if i not in used]
    return _merge(faults)


def _links_from_peer_errors(
    evs: Sequence[Event], topology: Topology
) -> tuple[dict[frozenset[str], LinkFault], dict[tuple[str, str], LinkFault]]:
    """Links named by NCCL's peer errors: host pairs, and errors whose peer the topology cannot place."""
    known: dict[str, str] = {}
    for h in [*topology.rank_host.values(), *topology.ip_host.values(), *(e.host for e in evs if e.host)]:
        s = short_host(h)
        if s and h:
            known.setdefault(s, h)
    pairs: dict[frozenset[str], LinkFault] = {}
    unresolved: dict[tuple[str, str], LinkFault] = {}
    for e in evs:
        if e.signature not in PEER_SIGNATURES:
            continue
        local = event_host(e)
        if not local:
            continue
        peer_host, peer_ip = _resolve_peer(e.fields.get("peer"), topology, known)
        if peer_host is None:
            key_u = (local, peer_ip or e.fields.get("peer", "?"))
            lf = unresolved.setdefault(key_u, LinkFault(host_a=local, host_b=None, peer_ip=peer_ip))
            lf.reasons.append(f"peer {key_u[1]} of {local} not in the topology (no NCCL Bootstrap line for it)")
        else:
            key = frozenset((local, peer_host))
            if key not in pairs:
                a, b = sorted((local, peer_host))
                pairs[key] = LinkFault(host_a=a, host_b=b)
            lf = pairs[key]
            if lf.peer_ip is None and peer_ip and peer_host == lf.host_b:
                lf.peer_ip = peer_ip
        lf.evidence.append(e.id)
        if e.ts is not None and (lf.first_ts is None or e.ts < lf.first_ts):
            lf.first_ts = e.ts
        if e.fields.get("hca") and lf.device is None and local == lf.host_a:
            lf.device = e.fields["hca"].split(":", 1)[0]
        lf.score += 1.0 if e.signature != "nccl.socket_closed_by_peer" else 0.25
    return pairs, unresolved


def _decide_side(
    lf: LinkFault, ports: Sequence[_PortEvidence], window_s: float, degree: Mapping[str, int], n_pairs: int
) -> set[int]:
    """Which end of ``lf`` failed, from its ends' port evidence (or how many failing links each end is on).
    Returns the indexes of the port evidence it used."""
    used: set[int] = set()
    weights: dict[str, float] = defaultdict(float)
    best: dict[str, _PortEvidence] = {}
    for i, pe in enumerate(ports):
        if pe.host not in (lf.host_a, lf.host_b):
            continue
        if pe.ts is not None and lf.first_ts is not None and abs(pe.ts - lf.first_ts) > window_s:
            continue
        weights[pe.host] += pe.weight
        if pe.host not in best or pe.weight > best[pe.host].weight:
            best[pe.host] = pe
        if pe.event_id is not None:
            lf.evidence.append(pe.event_id)
        lf.reasons.append(pe.reason)
        used.add(i)
    ranked = sorted(weights.items(), key=lambda kv: -kv[1])
    if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1] * 1.5):
        side = ranked[0][0]
        lf.faulty_side = side
        lf.device, lf.port = best[side].device or lf.device, best[side].port
        lf.reasons.append(f"{side}'s port failed (its own evidence weighs {ranked[0][1]:.1f})")
        lf.score += ranked[0][1]
    elif ranked:
        lf.reasons.append("both ends show port trouble: the side is undetermined")
        lf.score += ranked[0][1]
    elif lf.host_b and n_pairs >= 2:
        da, db = degree[lf.host_a], degree[lf.host_b]
        if da != db and max(da, db) >= 2:
            side = lf.host_a if da > db else lf.host_b
            lf.faulty_side = side
            lf.reasons.append(f"{side} is on {max(da, db)} of the {n_pairs} failing links; its peers are not")
            lf.score += 0.5
    if lf.faulty_side is None and not ranked:
        lf.reasons.append("no port-down or counter evidence on either end: the side is undetermined")
    return used


def _port_only(pe: _PortEvidence) -> LinkFault:
    """A host's port evidence with no NCCL error beside it: a single-ended fault."""
    lf = LinkFault(
        host_a=pe.host,
        host_b=None,
        device=pe.device,
        port=pe.port,
        faulty_side=pe.host,
        first_ts=pe.ts,
        score=pe.weight,
        reasons=[pe.reason],
    )
    if pe.event_id is not None:
        lf.evidence.append(pe.event_id)
    return lf


def _merge(faults: Sequence[LinkFault]) -> list[LinkFault]:
    """Single-ended faults of one host and port become one; strongest first."""
    merged: dict[tuple[str, str | None, str | None, str | None], LinkFault] = {}
    for lf in faults:
        if lf.host_b is None and lf.faulty_side:
            k = (lf.host_a, None, lf.device, lf.port)
            if k in merged:
                m = merged[k]
                m.evidence += lf.evidence
                m.reasons += lf.reasons
                m.score += lf.score
                m.first_ts = min((t for t in (m.first_ts, lf.first_ts) if t is not None), default=None)
                continue
            merged[k] = lf
        else:
            merged[(lf.host_a, lf.host_b, lf.peer_ip, str(id(lf)))] = lf
    out = list(merged.values())
    for lf in out:
        lf.evidence = sorted(set(lf.evidence))
        lf.reasons = list(dict.fromkeys(lf.reasons))
    out.sort(key=lambda lf: (-lf.score, lf.first_ts if lf.first_ts is not None else float("inf"), lf.host_a))
    return out


def localize_network(verdict: Verdict, events: Sequence[Event], topo: Topology, ib: Mapping[str, HostIB]) -> None:
    """Put a network verdict on a link, and on one end of it when the evidence decides."""
    faults = localize_link_faults(events, topo, ib)
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


def peer_hosts(events: Sequence[Event], topology: Topology) -> dict[int, str | None]:
    """For each event naming a peer (an IP, a host), the host it names, where the topology knows it."""
    return {e.id: _resolve_peer(e.fields.get("peer"), topology, {})[0] for e in events if e.fields.get("peer")}
