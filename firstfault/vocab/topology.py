"""Where things ran: ranks on hosts and GPUs, and the helpers that make two spellings of one place equal.

A rank's GPU appears as ``0000:9b:00`` in NVRM, ``00000000:9B:00.0`` in nvidia-smi and ``9b000`` in
NCCL; a host as ``node01`` in SLURM and ``node01.cluster.local`` in syslog; a peer as
``::ffff:10.0.0.1``. Joins across sources compare the normalised forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PCI_ANY = re.compile(
    r"^(?:(?P<dom>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{1,2}):(?P<dev>[0-9A-Fa-f]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?$"
)


def normalize_pci(pci: str | None) -> str | None:
    """Canonical ``dddd:bb:dd.f`` (lower case) from any spelling a log uses, or None.

    NVRM writes ``0000:9b:00`` (no function), lspci/nvidia-smi ``00000000:9B:00.0`` (8-digit
    domain), NCCL's ``busId`` ``9b000`` or ``0000:9b:00.0``. One spelling lets a kernel Xid join a
    rank's GPU.
    """
    if not pci:
        return None
    s = pci.strip().lower()
    if s.startswith("pci:"):
        s = s[4:]
    m = _PCI_ANY.match(s)
    if m:
        dom = int(m["dom"] or "0", 16)
        return f"{dom:04x}:{int(m['bus'], 16):02x}:{int(m['dev'], 16):02x}.{m['fn'] or '0'}"
    if re.fullmatch(r"[0-9a-f]{4,13}", s):
        # NCCL's int64 busId printed in hex: ...[domain][bus:8][device:5|function:3] -> "9b000"
        v = int(s, 16)
        fn, dev, bus, dom = v & 0xF, (v >> 4) & 0xFF, (v >> 12) & 0xFF, v >> 20
        return f"{dom:04x}:{bus:02x}:{dev:02x}.{fn & 7}"
    return None


def short_host(name: str | None) -> str | None:
    """Host names are compared by their first label: NCCL prints gethostname(), syslog the FQDN."""
    if not name:
        return None
    n = name.strip().lower()
    if re.fullmatch(r"[0-9.]+|[0-9a-f:]+", n):
        return n
    return n.split(".", 1)[0]


def normalize_ip(ip: str | None) -> str | None:
    """IPv4-mapped GIDs and addresses (``::ffff:10.0.0.1``) as plain IPv4."""
    if not ip:
        return None
    s = ip.strip().strip("[]")
    if s.lower().startswith("::ffff:"):
        s = s[7:]
    return s


@dataclass(slots=True)
class Topology:
    """What the bundle says about placement: rank -> host, local rank, GPU; host -> ranks."""

    rank_host: dict[int, str] = field(default_factory=dict)
    rank_local: dict[int, int] = field(default_factory=dict)
    rank_gpu: dict[int, str] = field(default_factory=dict)
    world_size: int | None = None
    # the least number of processes that printed a console's untagged progress lines (parse.facts):
    # ranks up to it ran and printed, but which lines were whose the log does not say
    untagged_printers: int = 0
    groups: dict[str, list[int]] = field(default_factory=dict)
    ip_host: dict[str, str] = field(default_factory=dict)

    def host_ranks(self, host: str) -> list[int]:
        return sorted(r for r, h in self.rank_host.items() if h == host)

    def ranks_on_gpu(self, host: str | None, gpu: str | None) -> list[int]:
        """The ranks that ran on GPU ``gpu`` (any PCI spelling) of ``host``: joins a kernel Xid to ranks."""
        want = normalize_pci(gpu)
        if not want:
            return []
        h = short_host(host)
        return sorted(
            r
            for r, g in self.rank_gpu.items()
            if normalize_pci(g) == want and (h is None or short_host(self.rank_host.get(r)) == h)
        )
