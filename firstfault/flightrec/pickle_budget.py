"""What one flight-recorder dump may cost: its size on disk, and the memory decoding it may add.

A dump is untrusted input from a failed job's directory: a stray 50 GB core file named like a
dump, or a 20-byte pickle that asks for 2**62 bytes, must fail as one clear error, never as an
OOM kill. Both loaders (``unpickler`` and ``fast_loader``) measure against these limits.
"""

from __future__ import annotations

import os

from firstfault.flightrec.pickle_errors import DumpLoadError, DumpTooLargeError
from firstfault.vocab import settings

DEFAULT_MAX_BYTES = settings.current().limits.fr_dump_bytes  # the default at import (Limits.fr_dump_bytes)
"""Largest dump accepted (bytes).  Real dumps are KBs to a few MBs; this only stops
a stray multi-GB file from exhausting memory."""


def decode_budget(size: int) -> int:
    """Bytes decoding a dump of ``size`` bytes may add: ``Limits.fr_decode_bytes`` counts the
    file's own bytes too (they are in memory while it decodes), with at least 64 MiB to decode in."""
    return max(64 * 1024 * 1024, settings.current().limits.fr_decode_bytes - size)


def statm_bytes(field: int) -> int | None:
    """Field ``field`` of ``/proc/self/statm`` in bytes (0: address space, 1: resident set), or
    None where Linux's ``/proc`` is not there to read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def rss_bytes() -> int | None:
    return statm_bytes(1)


def vm_bytes() -> int | None:
    return statm_bytes(0)


def read_limited(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Read a whole file, refusing files over ``max_bytes`` before reading them.

    Why: a 50 GB core file named like a dump must not be slurped into memory.
    Raises :class:`DumpLoadError` subclasses only (unreadable files included).
    """
    source = os.fspath(path)
    try:
        size = os.stat(source).st_size
    except OSError as exc:
        raise DumpLoadError(source, f"cannot stat file: {exc.strerror or exc}") from None
    if size > max_bytes:
        raise DumpTooLargeError(source, f"file is {size} bytes, over the {max_bytes}-byte limit for one dump")
    try:
        with open(source, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise DumpLoadError(source, f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise DumpTooLargeError(source, f"file grew past the {max_bytes}-byte limit while reading")
    return data
