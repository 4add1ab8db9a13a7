"""NCCL debug output: where each line comes from, the topology it reveals, and which link broke.

Every NCCL debug line starts with ``<host>:<pid>:<tid> [<cudaDev>]`` (NCCL src/debug.cc), so
even a file of mixed processes says which host and process each line is from. The INFO lines
NCCL prints at start-up are the job's placement, free of charge:

* ``Bootstrap : Using eth0:10.0.0.1<0>`` / ``NET/IB : Using [0]mlx5_0:1/IB ...; OOB eth0:10.0.0.1<0>``
  -- the address peers will name in ``Got completion from peer 10.0.0.1<port>`` (ip -> host);
* ``comm 0x.. rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 9b000 commId 0x.. - Init COMPLETE``
  -- rank -> host, CUDA device and PCI bus id (the id the kernel's Xid line names);
* ``comm 0x.. rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0`` -- rank -> local rank.

NCCL ranks are per communicator; the full-size communicator (``nranks`` = the largest seen) is
taken as the world, as torch's default process group is.

:func:`placement_from_events` reads matched events (from any file kind: NCCL lines are usually
inside rank logs) into an :class:`NcclPlacement`, which ``parse.topology`` merges into the bundle's
topology. Which link broke is reasoning's question (``reason.network``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from firstfault.parse.base import LineInfo, SourceParser, register_parser
from firstfault.parse.stream import Hit
from firstfault.vocab import Event, FileKind
from firstfault.vocab.topology import normalize_ip, normalize_pci

# "<host>:<pid>:<tid> [<cudaDev>] " with an optional "[2026-09-09 10:46:33] " in front
NCCL_PREFIX = re.compile(
    r"(?:^|\s|\]:?)(?P<host>[A-Za-z0-9_][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:\S+:\d+ )?NCCL (?P<level>INFO|WARN|TRACE|ERROR|ABORT)\b"
)
# Signatures whose fields name the peer of a failed connection.
PEER_SIGNATURES = frozenset(
    {
        "nccl.ib_completion_error",
        "nccl.ib_completion_error_v1",
        "nccl.ib_completion_flushed",
        "nccl.socket_closed_by_peer",
    }
)
TOPOLOGY_SIGNATURES = frozenset(
    {
        "nccl.init_complete",
        "nccl.init_local_rank",
        "nccl.bootstrap_interface",
        "nccl.net_ib_using",
        "nccl.net_socket_using",
    }
)


@register_parser(FileKind.NCCL_DEBUG)
class NcclDebugParser(SourceParser):
    """NCCL_DEBUG output: host, pid and CUDA device from each line's prefix.

    The rank is not guessed while streaming: NCCL ranks are per communicator and a sub-group's
    ``Init COMPLETE`` may come before the world's. :func:`learn_topology`, run over all events
    afterwards, gives each ``host:pid`` its world rank.
    """

    def locate(self, hit: Hit) -> LineInfo:
        info = super().locate(hit)
        m = NCCL_PREFIX.search(info.text[:300])
        if m:
            info.host = m["host"]
            info.pid = int(m["pid"])
        return info


@dataclass(slots=True)
class NcclPlacement:
    """What NCCL's start-up lines said about the job, accumulated over a bundle's events."""

    world_size: int | None = None
    rank_host: dict[int, str] = field(default_factory=dict)
    rank_gpu: dict[int, str] = field(default_factory=dict)
    rank_cuda_dev: dict[int, int] = field(default_factory=dict)
    rank_local: dict[int, int] = field(default_factory=dict)
    ip_host: dict[str, str] = field(default_factory=dict)
    host_hcas: dict[str, list[str]] = field(default_factory=dict)
    pid_rank: dict[tuple[str, int], int] = field(default_factory=dict)


def event_host(ev: Event) -> str | None:
    """The host of an NCCL line: the one its own prefix names, else the file's."""
    return ev.fields.get("nccl_host") or ev.host


def placement_from_events(events: Iterable[Event]) -> NcclPlacement:
    """Collect NCCL's placement lines (rank, busId, IP, HCAs) from matched events of any file."""
    evs = [e for e in events if e.signature in TOPOLOGY_SIGNATURES]
    pl = NcclPlacement()
    sizes = [int(e.fields["nranks"]) for e in evs if e.fields.get("nranks", "").isdigit()]
    pl.world_size = max(sizes) if sizes else None
    world_comms: set[str] = set()
    for e in evs:
        host = event_host(e)
        f = e.fields
        if e.signature == "nccl.init_complete" and pl.world_size and f.get("nranks") == str(pl.world_size):
            rank = int(f["nccl_rank"])
            world_comms.add(f.get("comm", ""))
            if host:
                pl.rank_host.setdefault(rank, host)
                if f.get("pid", "").isdigit():
                    pl.pid_rank.setdefault((host, int(f["pid"])), rank)
            gpu = normalize_pci(f.get("bus_id"))
            if gpu:
                pl.rank_gpu.setdefault(rank, gpu)
            if f.get("cuda_dev", "").isdigit():
                pl.rank_cuda_dev.setdefault(rank, int(f["cuda_dev"]))
        elif e.signature in ("nccl.bootstrap_interface", "nccl.net_ib_using", "nccl.net_socket_using"):
            ip = normalize_ip(f.get("ip"))
            if ip and host:
                pl.ip_host.setdefault(ip, host)
            if e.signature == "nccl.net_ib_using" and host and f.get("ib_devs"):
                devs = re.findall(r"\]([\w.-]+:\d+)/", f["ib_devs"])
                pl.host_hcas.setdefault(host, devs)
    for e in evs:
        f = e.fields
        if e.signature == "nccl.init_local_rank" and pl.world_size and f.get("nranks") == str(pl.world_size):
            pl.rank_local.setdefault(int(f["nccl_rank"]), int(f["nccl_local_rank"]))
    return pl
