"""InfiniBand port state and error counters: ``ibstat``, ``ibv_devinfo``, ``rdma link``, sysfs.

A link fault between two hosts shows in NCCL as errors on *both* ends; which end failed is in
the port state and the counters of each host: the port that is ``Down``/``Polling`` or whose
``link_downed`` / ``symbol_error`` counters moved is the suspect. Collectors save these as the
commands' text output or a copy of ``/sys/class/infiniband/<dev>/ports/<p>/counters/*``; this
module reads all of them into :class:`HostIB` per host. Input sizes are tiny (KiB), so files
are read whole but capped at :data:`MAX_BYTES`.

Real formats (rdma-core / iproute2):

* ``ibstat``: ``CA 'mlx5_0'`` ... ``Port 1:`` ``State: Active`` ``Physical state: LinkUp``
  ``Rate: 400`` ``Link layer: InfiniBand``
* ``ibv_devinfo``: ``hca_id: mlx5_0`` ... ``port: 1`` ``state: PORT_ACTIVE (4)``
  ``link_layer: InfiniBand``
* ``rdma link``: ``link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ib0`` (also
  ``8/1: mlx5_bond_0/1: state ...`` and ``link mlx5_0/1: state ...``)
* counters: one integer per file ``.../infiniband/mlx5_0/ports/1/counters/link_downed``, or a
  ``grep -r . /sys/class/infiniband/*/ports/*/counters`` dump (``<path>:<value>``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from firstfault.discover import COUNTER_FILE as _COUNTER_FILE
from firstfault.discover import COUNTER_PATH as _COUNTER_PATH
from firstfault.discover import Bundle, SourceFile
from firstfault.discover import sniff_ib as sniff  # the format check lives with discovery
from firstfault.parse.kernel import host_from_path
from firstfault.vocab import FileKind

MAX_BYTES = 4 * 1024 * 1024

# Counters whose increase means the link (not the traffic) misbehaved.
ERROR_COUNTERS = (
    "link_downed",
    "link_error_recovery",
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
    "port_rcv_constraint_errors",
    "port_xmit_constraint_errors",
    "VL15_dropped",
)
DOWN_STATES = frozenset(
    {
        "down",
        "port_down",
        "polling",
        "disabled",
        "init",
        "port_init",
        "armed",
        "port_armed",
        "sleep",
        "linkerrorrecovery",
        "link_error_recovery",
        "phytest",
    }
)

_CA = re.compile(r"^\s*CA '(?P<dev>[^']+)'")
_IBSTAT_PORT = re.compile(r"^\s*Port (?P<port>\d+):\s*$")
_KV = re.compile(r"^\s*(?P<k>[A-Za-z_ ]+?)\s*:\s*(?P<v>.*?)\s*$")
_HCA = re.compile(r"^\s*hca_id:\s*(?P<dev>\S+)")
_DEVINFO_PORT = re.compile(r"^\s*port:\s*(?P<port>\d+)\s*$")
_RDMA = re.compile(
    r"^\s*(?:link\s+|\d+/\d+:\s*)(?P<dev>[\w.-]+)/(?P<port>\d+):?\s+state\s+(?P<state>\S+)"
    r"(?:\s+physical_state\s+(?P<phys>\S+))?(?:\s+netdev\s+(?P<netdev>\S+))?"
)


@dataclass(slots=True)
class IBPort:
    """One HCA port: its logical and physical state and its counters (as last seen)."""

    device: str
    port: int
    state: str | None = None
    phys_state: str | None = None
    rate: str | None = None
    link_layer: str | None = None
    netdev: str | None = None
    counters: dict[str, int] = field(default_factory=dict)
    source: str = ""

    def is_down(self) -> bool:
        """Logically or physically not up (``Down``, ``Polling``, ``PORT_DOWN``, ``DISABLED``)."""
        for s in (self.state, self.phys_state):
            if s and re.sub(r"\s*\(\d+\)$", "", s).strip().lower().replace(" ", "") in DOWN_STATES:
                return True
        return False

    def error_counters(self) -> dict[str, int]:
        return {k: v for k, v in self.counters.items() if k in ERROR_COUNTERS and v > 0}


@dataclass(slots=True)
class HostIB:
    """A host's InfiniBand ports, and every counter snapshot seen (to tell which counters moved)."""

    host: str | None
    ports: dict[tuple[str, int], IBPort] = field(default_factory=dict)
    snapshots: list[dict[tuple[str, int], dict[str, int]]] = field(default_factory=list)

    def merge(self, ports: Iterable[IBPort]) -> None:
        for p in ports:
            cur = self.ports.get((p.device, p.port))
            if cur is None:
                self.ports[(p.device, p.port)] = p
                continue
            cur.state = p.state or cur.state
            cur.phys_state = p.phys_state or cur.phys_state
            cur.rate = p.rate or cur.rate
            cur.link_layer = p.link_layer or cur.link_layer
            cur.netdev = p.netdev or cur.netdev
            cur.counters.update(p.counters)
            cur.source = cur.source or p.source

    def add_counters(self, snap: dict[tuple[str, int], dict[str, int]], source: str = "") -> None:
        """One snapshot of counters (files read at one time); the last one is the port's value."""
        if not snap:
            return
        self.snapshots.append(snap)
        for (dev, port), vals in snap.items():
            p = self.ports.setdefault((dev, port), IBPort(dev, port, source=source or "counters"))
            p.counters.update(vals)

    def moved_counters(self, device: str, port: int) -> dict[str, int]:
        """Error counters that grew between the first and the last snapshot of this port."""
        seen = [s[(device, port)] for s in self.snapshots if (device, port) in s]
        if len(seen) < 2:
            return {}
        first, last = seen[0], seen[-1]
        return {k: last[k] - first.get(k, 0) for k in ERROR_COUNTERS if k in last and last[k] > first.get(k, 0)}


def _parse_port_blocks(
    text: str, source: str, device: re.Pattern[str], port: re.Pattern[str], keys: dict[str, str]
) -> list[IBPort]:
    """``ibstat`` and ``ibv_devinfo`` share one shape: a device header, port headers, then
    ``key: value`` lines; only the header wording and the key names differ (``keys`` maps a
    tool's key to the IBPort field)."""
    out: list[IBPort] = []
    dev: str | None = None
    cur: IBPort | None = None
    for line in text.splitlines():
        m = device.match(line)
        if m:
            dev, cur = m["dev"], None
            continue
        m = port.match(line)
        if m and dev:
            cur = IBPort(dev, int(m["port"]), source=source)
            out.append(cur)
            continue
        if cur is None:
            continue
        kv = _KV.match(line)
        if kv and (attr := keys.get(kv["k"].strip().lower())):
            setattr(cur, attr, kv["v"])
    return out


def parse_ibstat(text: str, source: str = "ibstat") -> list[IBPort]:
    """Ports of ``ibstat`` output (indentation-agnostic: pasted output often loses the tabs)."""
    keys = {"state": "state", "physical state": "phys_state", "rate": "rate", "link layer": "link_layer"}
    return _parse_port_blocks(text, source, _CA, _IBSTAT_PORT, keys)


def parse_ibv_devinfo(text: str, source: str = "ibv_devinfo") -> list[IBPort]:
    """Ports of ``ibv_devinfo [-v]`` output."""
    keys = {
        "state": "state",
        "phys_state": "phys_state",
        "link_layer": "link_layer",
        "active_speed": "rate",
        "rate": "rate",
    }
    return _parse_port_blocks(text, source, _HCA, _DEVINFO_PORT, keys)


def parse_rdma_link(text: str, source: str = "rdma link") -> list[IBPort]:
    """Ports of ``rdma link [show]`` output."""
    out: list[IBPort] = []
    for line in text.splitlines():
        m = _RDMA.match(line)
        if m:
            out.append(
                IBPort(
                    m["dev"],
                    int(m["port"]),
                    state=m["state"],
                    phys_state=m["phys"],
                    netdev=m["netdev"],
                    source=source,
                )
            )
    return out


def parse_counter_dump(text: str) -> dict[tuple[str, int], dict[str, int]]:
    """``<...>/infiniband/<dev>/ports/<p>/counters/<name>:<value>`` lines (``grep -r .`` of sysfs)."""
    out: dict[tuple[str, int], dict[str, int]] = {}
    for line in text.splitlines():
        m = _COUNTER_PATH.search(line.strip())
        if m:
            out.setdefault((m["dev"], int(m["port"])), {})[m["name"]] = int(m["value"])
    return out


def parse_text(text: str, source: str = "") -> tuple[list[IBPort], dict[tuple[str, int], dict[str, int]]]:
    """Ports and a counter snapshot from any of the supported outputs (concatenations too)."""
    ports = parse_ibstat(text, source or "ibstat") + parse_ibv_devinfo(text, source or "ibv_devinfo")
    ports += parse_rdma_link(text, source or "rdma link")
    return ports, parse_counter_dump(text)


def _host_of(sf: SourceFile) -> str | None:

    return sf.host or host_from_path(sf.rel)


_EARLY = re.compile(r"(?:^|[/_.-])(?:before|pre|start|begin|first|t0)(?:$|[/_.-])", re.I)
_LATE = re.compile(r"(?:^|[/_.-])(?:after|post|end|final|last|t1)(?:$|[/_.-])", re.I)


def _snapshot_order(prefix: str) -> tuple[int, str]:
    """Counter snapshots in time order: ``before/`` < (timestamped or other dirs, by name) < ``after/``."""
    if _EARLY.search(prefix):
        return (0, prefix)
    if _LATE.search(prefix):
        return (2, prefix)
    return (1, prefix)


def _host_from_prefix(prefix: str) -> str | None:
    """Host of a copied sysfs tree from the path above ``infiniband/`` (``node1/sys/class/``)."""

    return host_from_path(prefix.rstrip("/") + "/counters") if prefix.strip("/") else None


def collect(bundle: Bundle) -> dict[str, HostIB]:
    """Every host's InfiniBand state found in a bundle, keyed by host (``"?"`` when unknown).

    Text outputs are recognised by content, counter trees by path; counter files of one host
    under different parent directories (``before/``, ``after/``, or timestamped ones) become
    separate snapshots, in time order (``before`` first, ``after`` last, others by name), so
    :meth:`HostIB.moved_counters` can tell which counters grew.
    """
    hosts: dict[str, HostIB] = {}
    counter_groups: dict[tuple[str, str], dict[tuple[str, int], dict[str, int]]] = {}
    for sf in bundle.of_kind(FileKind.IB_STATE, FileKind.IB_COUNTER):
        if sf.size > MAX_BYTES:
            continue
        m = _COUNTER_FILE.search(sf.rel)
        host = (sf.host or _host_from_prefix(sf.rel[: m.start()]) if m else _host_of(sf)) or "?"
        if m:
            try:
                raw = sf.path.read_bytes()[:64].decode("ascii", "replace").strip()
            except OSError:
                continue
            if raw.isdigit():
                snap_key = sf.rel[: m.start()]
                grp = counter_groups.setdefault((host, snap_key), {})
                grp.setdefault((m["dev"], int(m["port"])), {})[m["name"]] = int(raw)
            continue
        try:
            with open(sf.path, "rb") as fh:
                head = fh.read(8192).decode("utf-8", "replace")
        except OSError:
            continue
        if sniff(head) is None:
            continue
        try:
            text = sf.path.read_bytes()[:MAX_BYTES].decode("utf-8", "replace")
        except OSError:
            continue
        ports, counters = parse_text(text, sf.rel)
        hib = hosts.setdefault(host, HostIB(host if host != "?" else None))
        hib.merge(ports)
        hib.add_counters(counters, sf.rel)
    for (host, _key), snap in sorted(counter_groups.items(), key=lambda kv: (kv[0][0], _snapshot_order(kv[0][1]))):
        hib = hosts.setdefault(host, HostIB(host if host != "?" else None))
        hib.add_counters(snap, "sysfs counters")
    return hosts
