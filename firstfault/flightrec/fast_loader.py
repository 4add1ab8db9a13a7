"""Many dumps at C speed: the C unpickler with every global refused and the address space capped.

A 16,384-rank job leaves 16,384 dumps; the pure-Python interpreter (``unpickler``) is the
reference and the fallback, this is the fast path. Both accept exactly the same plain data.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import sys
import threading
from typing import Any

from firstfault.flightrec.pickle_budget import DEFAULT_MAX_BYTES, decode_budget, read_limited, vm_bytes
from firstfault.flightrec.pickle_errors import UnsafePickleError
from firstfault.flightrec.unpickler import C_PATH_TUPLE_BYTES, restricted_loads, tuple_bytes

__all__ = ["FastLoader", "fast_restricted_loads", "restricted_load_file"]


class _NoGlobalsUnpickler(pickle.Unpickler):
    """C unpickler that refuses every global (so nothing can be called or built)."""

    def __init__(self, file: io.BufferedReader, source: str) -> None:
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(self._source, f"{module}.{name}", "GLOBAL")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(self._source, f"persistent id {pid!r}", "PERSID")


_json_encode = json.JSONEncoder(check_circular=True, allow_nan=True).encode
_JSON_DEFAULT = json.JSONEncoder().default  # raises TypeError: anything not JSON-shaped


def _json_walk(obj: Any) -> None:
    """Walk ``obj`` as ``json.dumps`` would (TypeError on a set, bytearray, bytes or non-str key,
    ValueError on a cycle), with the C encoder but without escaping strings: a dump's strings
    (a 16,384-rank group's 90 KB member list) are taken as they are, since only the walk's
    verdict is wanted, never its text. Without the C encoder, the plain encode."""
    make = getattr(json.encoder, "c_make_encoder", None)  # the C accelerator (typeshed omits it)
    if make is None:  # pragma: no cover - CPython always has it
        _json_encode(obj)
        return
    # a fresh markers dict per call: it is the cycle detector (ids of the containers being walked)
    make({}, _JSON_DEFAULT, str, None, ":", ",", False, False, True)(obj, 0)


class _Discard:
    """A ``sys.stderr`` stand-in that drops what the C unpickler's failures print.

    Why: CPython 3.11's ``PyByteArray_FromStringAndSize`` frees a bytearray whose export count
    was never set when its allocation fails, and its dealloc prints "SystemError: deallocated
    bytearray object has exported buffers" through ``PyErr_Print`` (no exception reaches the
    caller). The C unpickler allocates a BYTEARRAY8's size before reading its bytes, so a 20-byte
    hostile pickle asking for 2**62 bytes printed that line into the user's terminal (found by
    ``./dev fuzz``). It cannot be screened for cheaply: real dumps hold 0x96 bytes followed by
    large numbers inside their strings and integers, and only an opcode walk tells them apart.
    The load then fails with MemoryError and the interpreter's loader refuses the BYTEARRAY8
    opcode, so the user still gets one clear error.
    """

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


_DISCARD = _Discard()


class FastLoader:
    """Load many dumps with the C unpickler, every global refused, memory capped.

    Why: a 16k-rank job leaves 16k dumps, and the pure-Python interpreter
    (:func:`restricted_loads`) costs ~0.3 ms per small dump.  The C unpickler with
    ``find_class``/``persistent_load`` refusing everything cannot run code, but its
    memo is an array sized by the largest index a file names (a 6-byte
    LONG_BINPUT asks for 2^32 slots, i.e. an OOM kill).  So while it runs the
    process address space is capped (``RLIMIT_AS`` = current size + 256 MiB +
    32x the file, at most ``Limits.fr_decode_bytes`` more), turning that blow-up into a MemoryError.  Any failure other
    than a refusal is re-diagnosed by :func:`restricted_loads` with the cap
    lifted, so errors read the same as on the slow path.  A result that is not
    plain JSON-shaped data (a set, a bytearray, a cycle, bytes) is re-judged by
    the interpreter too, so both paths accept exactly the same types.

    The cap is process-wide, so the fast path is only used while this is the
    only thread; otherwise (or without ``resource``/``/proc``) every call takes
    the pure-Python path.  Use as a context manager around a batch.
    """

    _SLACK = 256 * 1024 * 1024

    def __init__(self) -> None:
        self._ok = False
        self._soft = 0
        self._hard = 0
        self._vm = 0
        self._calls = 0

    def __enter__(self) -> FastLoader:
        try:
            import resource

            self._soft, self._hard = resource.getrlimit(resource.RLIMIT_AS)
        except (ImportError, OSError, ValueError):  # pragma: no cover - non-POSIX
            return self
        vm = vm_bytes()
        self._ok = vm is not None and self._soft == resource.RLIM_INFINITY
        self._vm = vm or 0
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._ok:
            import resource

            try:
                resource.setrlimit(resource.RLIMIT_AS, (self._soft, self._hard))
            except (OSError, ValueError):  # pragma: no cover
                self._ok = False

    def loads(self, data: bytes, source: str = "<bytes>") -> Any:
        """Unpickle one dump; same contract as :func:`restricted_loads`."""
        if not self._ok or not data or threading.active_count() != 1 or tuple_bytes(data) > C_PATH_TUPLE_BYTES:
            return restricted_loads(data, source)
        import resource

        self._calls += 1
        if self._calls % 16 == 0:
            self._vm = vm_bytes() or self._vm
        budget = decode_budget(len(data))
        cap = self._vm + min(self._SLACK + 32 * len(data), budget)
        if self._hard != resource.RLIM_INFINITY:
            cap = min(cap, self._hard)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, self._hard))
        except (OSError, ValueError):
            return restricted_loads(data, source)
        stderr = sys.stderr
        sys.stderr = _DISCARD  # only thread (checked above); see _Discard for why
        try:
            buf = io.BufferedReader(io.BytesIO(data), buffer_size=len(data) + 16)
            obj = _NoGlobalsUnpickler(buf, source).load()  # type: ignore[arg-type]
            # A C-speed walk proving the result is plain JSON-shaped data (no set,
            # bytearray or cycle); anything else is re-judged by the interpreter,
            # which accepts bytes and tuple keys and refuses the rest.
            _json_walk(obj)
            return obj
        except UnsafePickleError:
            raise
        except Exception:  # re-diagnosed below, without the cap
            pass
        finally:
            sys.stderr = stderr
            self._restore()
        self._vm = vm_bytes() or self._vm
        return restricted_loads(data, source)


def fast_restricted_loads(data: bytes, source: str = "<bytes>") -> Any:
    """One-shot :class:`FastLoader` (C speed, globals refused, memory capped)."""
    with FastLoader() as fl:
        return fl.loads(data, source)


def restricted_load_file(
    path: str | os.PathLike[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    fast: bool = True,
    loader: FastLoader | None = None,
) -> Any:
    """Read and restricted-unpickle one file (see :func:`restricted_loads`)."""
    source = os.fspath(path)
    data = read_limited(source, max_bytes)
    if loader is not None and fast:
        return loader.loads(data, source)
    return fast_restricted_loads(data, source) if fast else restricted_loads(data, source)
