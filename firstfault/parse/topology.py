"""Where every rank ran: the topology of a bundle, learnt once, at the end of parsing.

The sources, in the order they win: a user's ``topology.json``; what parsing itself learnt while
streaming (torchrun's per-rank directories and their ``[rankN]:`` lines, SLURM's node lists and
``srun -l`` labels, the world size stated in a line); NCCL's start-up lines (``Init COMPLETE``,
``Bootstrap : Using``), which fill only the gaps. Then every event of a rank gets that rank's host
and GPU. Later stages read the finished :class:`~firstfault.vocab.topology.Topology`; none of them
learns placement again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from firstfault.discover import Bundle
from firstfault.parse.headers import place_under_headers
from firstfault.parse.nccl import NcclPlacement, placement_from_events
from firstfault.parse.ray import GROUP_REPORT, learn_from_ray
from firstfault.vocab import Event, FileKind, settings
from firstfault.vocab.topology import Topology, normalize_pci


def load_topology_file(bundle: Bundle, warnings: list[str]) -> Topology:
    """A user-supplied ``topology.json``: ranks -> host, GPU (PCI id or index), local rank.

    ``{"ranks": [{"rank": 0, "host": "gpu-a", "gpu": "0000:18:00.0", "local_rank": 0}, ...],
    "hosts": {"gpu-a": {"ips": ["10.0.0.1"]}}}``. Other sources only fill what it leaves out.
    """
    topo = Topology()
    for sf in bundle.of_kind(FileKind.TOPOLOGY):
        try:
            data = json.loads(sf.path.read_text(encoding="utf-8"))
            for row in data.get("ranks", []):
                r = int(row["rank"])
                if row.get("host"):
                    topo.rank_host[r] = str(row["host"])
                if row.get("gpu") is not None:
                    topo.rank_gpu[r] = normalize_pci(str(row["gpu"])) or str(row["gpu"])
                if row.get("local_rank") is not None:
                    topo.rank_local[r] = int(row["local_rank"])
            for host, info in (data.get("hosts") or {}).items():
                for ip in info.get("ips", []):
                    topo.ip_host[str(ip)] = str(host)
            if data.get("world_size"):
                topo.world_size = int(float(data["world_size"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.append(f"{sf.rel}: unreadable topology file ({exc}); ignored")
    return topo


def place_events(events: Sequence[Event], topo: Topology, warnings: list[str]) -> None:
    """Give every rank's events its host and GPU; a lone kernel-log host hosts every rank."""
    for e in events:
        if e.rank is not None:
            if e.host is None:
                e.host = topo.rank_host.get(e.rank)
            if e.gpu is None:
                e.gpu = topo.rank_gpu.get(e.rank)
    unplaced = [e for e in events if e.rank is not None and e.host is None]
    hosts = {e.host for e in events if e.rank is None and e.host}
    if unplaced and len(hosts) == 1 and not topo.rank_host:
        (host,) = hosts
        warnings.append(f"the ranks' host is not named in their logs; assuming {host}, the only host with host logs")
        for e in unplaced:
            e.host = host


def learn_from_nccl(events: list[Event], topology: Topology) -> NcclPlacement:
    """Fill ``topology`` (rank -> host/GPU/local rank, ip -> host) from NCCL's lines, and give
    events that only carry NCCL's ``host:pid`` prefix their rank and host.

    Existing entries (from torchelastic, SLURM or a user topology.json) are kept: NCCL only fills
    gaps. Returns what NCCL said, for callers that want to cross-check.
    """
    pl = placement_from_events(events)
    if pl.world_size and topology.world_size is None:
        topology.world_size = pl.world_size
    for r, h in pl.rank_host.items():
        topology.rank_host.setdefault(r, h)
    for r, g in pl.rank_gpu.items():
        topology.rank_gpu.setdefault(r, g)
    for r, lr in pl.rank_local.items():
        topology.rank_local.setdefault(r, lr)
    for ip, h in pl.ip_host.items():
        topology.ip_host.setdefault(ip, h)
    for e in events:
        host = e.fields.get("nccl_host")
        if e.host is None and host:
            e.host = host
        if e.rank is None and host and e.pid is not None:
            world_rank = pl.pid_rank.get((host, e.pid))
            if world_rank is not None:
                e.rank = world_rank
                e.gpu = e.gpu or topology.rank_gpu.get(world_rank)
    return pl


def _global_by_pid(events: list[Event]) -> None:
    """A worker's global rank for the agent's lines that name only its local rank.

    torchrun's agent logs "failed (exitcode: 1) local_rank: 0 (pid: 2332)": a local rank, which the
    hooks take for the rank (right on one node, wrong on node 1 of two, where local rank 0 is
    global rank 2). The failure record in the same console says "rank : 2 (local_rank: 0)" for
    the same pid. Where both name a pid, the record's global rank wins."""
    by_pid = {
        (e.source, e.fields["pid"]): e.rank
        for e in events
        if "torchrun_root" in e.fields and e.rank is not None and e.fields.get("pid")  # a failure record
    }
    if not by_pid:
        return
    for e in events:
        pid = e.fields.get("pid")
        if pid and e.local_rank is not None and e.rank == e.local_rank and "torchrun_root" not in e.fields:
            rank = by_pid.get((e.source, pid))
            if rank is not None:
                e.rank = rank


def learn_topology(events: list[Event], bundle: Bundle, topology: Topology, warnings: list[str]) -> None:
    """The end of parsing: NCCL's, Ray Train's and report headers' placement fill the gaps, then every
    rank's events get their place."""
    learn_from_nccl(events, topology)
    learn_from_ray(events, topology)
    _global_by_pid(events)
    place_under_headers(events, skip=(GROUP_REPORT,))  # a launcher's header says whose error follows
    limit = settings.current().limits.max_world
    if topology.world_size is not None and not 0 < topology.world_size <= limit:
        warnings.append(
            f"a world size of {topology.world_size} is not believed (over {limit}, or not positive): "
            "the ranks seen are the ranks there are"
        )
        topology.world_size = None
    place_events(events, topology, warnings)
