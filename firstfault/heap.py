"""Give memory the analysis has freed back to the operating system.

Why: CPython returns freed objects to its own arenas and to glibc's heap, which keep the pages.
Reading the workers' pickled replies one after another, glibc kept ~70 MB of freed replies at
16,384 ranks (its mmap threshold grows), on top of the events they became; ``malloc_trim``
between replies gives them back. A no-op where glibc is absent.

``malloc_trim`` is looked up once, when this module is imported (in the parent, before any
worker is forked), through the process's own symbols: no library search, which would start a
subprocess, and a forked child of a threaded process must not take locks another thread held.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable


def _lookup() -> Callable[[int], int] | None:
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):
        return None


_TRIM = _lookup()


def trim() -> None:
    """``malloc_trim(0)``: hand free heap pages back to the kernel (glibc only)."""
    if _TRIM is not None:
        _TRIM(0)
