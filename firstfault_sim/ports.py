"""Ports for the simulators' daemons and rendezvous that no other socket will be handed meanwhile.

A port the kernel picks for ``bind(0)`` is an ephemeral one. Between choosing it and the process
that listens on it starting (a batch script queued in SLURM, a torchrun agent starting up), the
kernel may hand the same port to any outgoing or listening socket: srun's I/O sockets and
slurmstepd's messages took the c10d store's port on a loaded machine, and the job died with
EADDRINUSE before its fault. Ports below the kernel's ephemeral range
(``net.ipv4.ip_local_port_range``) are never handed out that way; one still free is taken.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 20000  # above the well-known and most registered service ports


def _ephemeral_start() -> int | None:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free right now, below the ephemeral range where there is room
    (else the kernel's own picks, as ``bind(0)`` gives)."""
    start = _ephemeral_start()
    if start is not None and start - _LOWEST >= 4 * n:
        candidates = random.sample(range(_LOWEST, start), min(start - _LOWEST, 200 * n))
        picked = [p for p in candidates if _bindable(p)][:n]
        if len(picked) == n:
            return picked
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(int(s.getsockname()[1]))
    finally:
        for s in socks:
            s.close()
    return ports
