"""A restricted unpickler for flight-recorder dumps.

Why this exists: a flight-recorder dump is a pickle, and ``pickle.load`` on a file
picked up from a failed job's output directory runs whatever the file says (any
``__reduce__`` payload).  Dumps written by PyTorch contain only plain data (dicts,
lists, tuples, strings, ints, floats, bools and None; protocol 2, no globals at
all), so this module interprets the pickle opcode stream itself and builds only
those types.  Every opcode that could name or call a Python object (GLOBAL,
STACK_GLOBAL, INST, OBJ, REDUCE, BUILD, NEWOBJ, NEWOBJ_EX, EXT*, PERSID,
BINPERSID, out-of-band buffers) is refused with :class:`UnsafePickleError`
*before* anything is looked up, so nothing is imported and nothing runs.

It is a small stack machine written for speed on the opcodes torch emits (the
common ones are tested first), with a dict memo (so a hostile memo index cannot
make it allocate gigabytes the way the C unpickler's array memo can), a file-size
cap, and clear errors for empty, truncated and garbage input.  Any failure is
raised as a subclass of :class:`DumpLoadError`; nothing else escapes.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import pickle
import struct
import sys
import threading
from typing import Any

from firstfault.vocab import settings
from firstfault.vocab.errors import InputError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DumpLoadError",
    "DumpTooLargeError",
    "EmptyFileError",
    "FastLoader",
    "MalformedPickleError",
    "TruncatedPickleError",
    "UnsafePickleError",
    "fast_restricted_loads",
    "read_limited",
    "restricted_load_file",
    "restricted_loads",
]

DEFAULT_MAX_BYTES = settings.current().limits.fr_dump_bytes  # the default at import (Limits.fr_dump_bytes)
"""Largest dump accepted (bytes).  Real dumps are KBs to a few MBs; this only stops
a stray multi-GB file from exhausting memory."""

_MAX_MEMO = 50_000_000
_RSS_EVERY = 1 << 20  # bytes of pickle between two looks at the resident size


class DumpLoadError(InputError):
    """Base of every error raised while reading one dump file.

    Carries the file name so a caller that loads thousands of dumps can turn each
    failure into one warning line instead of a traceback.
    """

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source
        self.detail = message


class UnsafePickleError(DumpLoadError):
    """The pickle asks for something other than plain data (a global, a call).

    ``refused`` names what was refused: ``module.name`` for a global, or the
    opcode name when no global name is available.
    """

    def __init__(self, source: str, refused: str, opcode: str) -> None:
        super().__init__(
            source,
            f"refused to unpickle {refused!r} (opcode {opcode}): flight-recorder dumps "
            "contain only plain data; this file asks for code to be run",
        )
        self.refused = refused
        self.opcode = opcode


class TruncatedPickleError(DumpLoadError):
    """The pickle ends before its STOP opcode (a dump cut short while writing)."""


class MalformedPickleError(DumpLoadError):
    """The bytes are not a well-formed pickle (garbage, wrong format, bad opcode)."""


class DumpTooLargeError(DumpLoadError):
    """The file is larger than the configured cap."""


class EmptyFileError(DumpLoadError):
    """The file has zero bytes (a dump that was never written)."""


#: How deep a tuple used as a dict key may nest. Hashing a tuple recurses in C with no recursion
#: check: a key nested a million deep (a 1 MB pickle of TUPLE1 opcodes) overflows the C stack and
#: kills the process. Real dumps use no tuple keys at all.
MAX_KEY_DEPTH = 64
#: Tuple-building opcode bytes (TUPLE1-3 and TUPLE) a pickle may hold for the C unpickler to load
#: it: every level of nesting needs one, and the C unpickler hashes keys as it goes. Above this
#: (an upper bound, since the bytes also occur inside strings) the interpreter, which checks
#: every tuple key's depth first, loads it instead.
C_PATH_TUPLE_BYTES = 50_000


def _shallow_key(key: tuple[Any, ...], source: str) -> None:
    """Refuse a tuple dict key nested deeper than :data:`MAX_KEY_DEPTH` (walked without recursion)."""
    todo: list[tuple[Any, int]] = [(key, 1)]
    while todo:
        t, depth = todo.pop()
        if depth > MAX_KEY_DEPTH:
            raise MalformedPickleError(source, f"a dict key nested more than {MAX_KEY_DEPTH} deep")
        todo.extend((x, depth + 1) for x in t if type(x) is tuple)


def _tuple_bytes(data: bytes) -> int:
    return data.count(b"\x85") + data.count(b"\x86") + data.count(b"\x87") + data.count(b"t")


_REFUSED_OPCODES: dict[int, str] = {
    ord("P"): "PERSID",
    ord("Q"): "BINPERSID",
    ord("R"): "REDUCE",
    ord("b"): "BUILD",
    ord("c"): "GLOBAL",
    ord("i"): "INST",
    ord("o"): "OBJ",
    0x81: "NEWOBJ",
    0x82: "EXT1",
    0x83: "EXT2",
    0x84: "EXT4",
    0x8F: "EMPTY_SET",
    0x90: "ADDITEMS",
    0x91: "FROZENSET",
    0x92: "NEWOBJ_EX",
    0x93: "STACK_GLOBAL",
    0x96: "BYTEARRAY8",
    0x97: "NEXT_BUFFER",
    0x98: "READONLY_BUFFER",
}

_u1 = struct.Struct("<B").unpack_from
_u2 = struct.Struct("<H").unpack_from
_u4 = struct.Struct("<I").unpack_from
_i4 = struct.Struct("<i").unpack_from
_u8 = struct.Struct("<Q").unpack_from
_f8 = struct.Struct(">d").unpack_from


class _Truncated(Exception):
    pass


def _refuse(source: str, data: bytes, pos: int, op: int, stack: list[Any]) -> UnsafePickleError:
    """Build the refusal error, naming the global when the opcode carries one."""
    name = _REFUSED_OPCODES.get(op, f"0x{op:02x}")
    refused = name
    if op == ord("c") or op == ord("i"):
        # GLOBAL / INST: two newline-terminated lines "module\nname\n".
        end1 = data.find(b"\n", pos)
        end2 = data.find(b"\n", end1 + 1) if end1 >= 0 else -1
        if end1 >= 0 and end2 >= 0:
            module = data[pos:end1].decode("latin-1", "replace")
            qual = data[end1 + 1 : end2].decode("latin-1", "replace")
            refused = f"{module}.{qual}"
    elif op == 0x93 and len(stack) >= 2:
        module, qual = stack[-2], stack[-1]
        if isinstance(module, str) and isinstance(qual, str):
            refused = f"{module}.{qual}"
    return UnsafePickleError(source, refused, name)


def _readline(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.find(b"\n", pos)
    if end < 0:
        raise _Truncated()
    return data[pos:end], end + 1


def restricted_loads(data: bytes, source: str = "<bytes>") -> Any:  # noqa: C901  (the opcode loop, see below)
    """Unpickle ``data`` building only plain containers and primitives.

    Why not ``pickle.Unpickler`` with ``find_class`` overridden: that blocks code
    execution, but the C unpickler's memo is an array sized by the largest index
    the file names, so a 6-byte hostile pickle can make it allocate tens of GB.
    Here the memo is a dict and every opcode is checked against an allow-list.

    Raises a :class:`DumpLoadError` subclass on anything else; never another type.

    A deliberate hot loop, kept in one function: one iteration per pickle opcode (millions for
    a 16k-rank job's dumps), with the opcode dispatch inline; a call per opcode would double it.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise MalformedPickleError(source, f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    n = len(data)
    if n == 0:
        raise EmptyFileError(source, "file is empty (0 bytes); not a flight-recorder dump")
    # One flat stack plus a list of MARK positions (as the C unpickler does), so
    # ``push`` can be bound once; the hot opcodes come first in the chain.
    stack: list[Any] = []
    push = stack.append
    pop = stack.pop
    marks: list[int] = []
    mark = marks.append
    unmark = marks.pop
    memo: dict[int, Any] = {}
    pos = 0
    op = -1
    # Memory, not file size, is what a hostile dump spends: look at the process's resident size
    # every _RSS_EVERY bytes of input (one comparison per opcode) and refuse past the budget.
    budget = decode_budget(n)
    rss0 = _rss_bytes()
    check_at = _RSS_EVERY if rss0 is not None else n + 1
    try:
        while True:
            if pos >= check_at:
                check_at = pos + _RSS_EVERY
                grown = (_rss_bytes() or 0) - (rss0 or 0)
                if grown > budget:
                    raise MalformedPickleError(
                        source,
                        f"refused: decoding took more than {budget >> 20} MiB by byte {pos} of {n} "
                        "(a pickle built to expand; Limits.fr_decode_bytes)",
                    )
            op = data[pos]
            pos += 1
            # A 1-byte argument read past the end raises IndexError with pos >= n and
            # a short struct read raises struct.error: both are reported as truncation.
            if op == 0x68:  # BINGET
                push(memo[data[pos]])
                pos += 1
            elif op == 0x71:  # BINPUT
                memo[data[pos]] = stack[-1]
                pos += 1
            elif op == 0x28:  # MARK
                mark(len(stack))
            elif op == 0x5D:  # EMPTY_LIST
                push([])
            elif op == 0x4D:  # BININT2
                push(_u2(data, pos)[0])
                pos += 2
            elif op == 0x65:  # APPENDS
                mk = unmark()
                items = stack[mk:]
                del stack[mk:]
                lst = stack[-1]
                if type(lst) is not list:
                    raise MalformedPickleError(source, "APPENDS on a non-list")
                lst.extend(items)
            elif op == 0x61:  # APPEND
                v = pop()
                lst = stack[-1]
                if type(lst) is not list:
                    raise MalformedPickleError(source, "APPEND on a non-list")
                lst.append(v)
            elif op == 0x4B:  # BININT1
                push(data[pos])
                pos += 1
            elif op == 0x58:  # BINUNICODE
                ln = _u4(data, pos)[0]
                pos += 4
                if pos + ln > n:
                    raise _Truncated()
                push(str(data[pos : pos + ln], "utf-8", "surrogatepass"))
                pos += ln
            elif op == 0x4E:  # NONE
                push(None)
            elif op == 0x89:  # NEWFALSE
                push(False)
            elif op == 0x7D:  # EMPTY_DICT
                push({})
            elif op == 0x75:  # SETITEMS
                mk = unmark()
                items = stack[mk:]
                del stack[mk:]
                d = stack[-1]
                if type(d) is not dict:
                    raise MalformedPickleError(source, "SETITEMS on a non-dict")
                if len(items) % 2:
                    raise MalformedPickleError(source, "SETITEMS with an odd number of items")
                for k in items[::2]:
                    if type(k) is tuple:
                        _shallow_key(k, source)
                d.update(zip(items[::2], items[1::2], strict=True))
            elif op == 0x4A:  # BININT
                push(_i4(data, pos)[0])
                pos += 4
            elif op == 0x86:  # TUPLE2
                b = pop()
                stack[-1] = (stack[-1], b)
            elif op == 0x8A:  # LONG1
                ln = data[pos]
                pos += 1
                if pos + ln > n:
                    raise _Truncated()
                push(int.from_bytes(data[pos : pos + ln], "little", signed=True))
                pos += ln
            elif op == 0x88:  # NEWTRUE
                push(True)
            elif op == 0x94:  # MEMOIZE
                if len(memo) >= _MAX_MEMO:
                    raise MalformedPickleError(source, "memo too large")
                memo[len(memo)] = stack[-1]
            elif op == 0x8C:  # SHORT_BINUNICODE
                ln = data[pos]
                pos += 1
                if pos + ln > n:
                    raise _Truncated()
                push(str(data[pos : pos + ln], "utf-8", "surrogatepass"))
                pos += ln
            elif op == 0x2E:  # STOP
                if marks:
                    raise MalformedPickleError(source, "STOP inside an open MARK")
                if len(stack) != 1:
                    raise MalformedPickleError(source, f"STOP with {len(stack)} items on the stack (expected 1)")
                return stack[0]
            elif op == 0x80:  # PROTO
                proto = data[pos]
                pos += 1
                if proto > 5:
                    raise MalformedPickleError(source, f"unsupported pickle protocol {proto}")
            elif op == 0x95:  # FRAME (protocol 4+): length prefix only
                if pos + 8 > n:
                    raise _Truncated()
                pos += 8
            elif op == 0x85:  # TUPLE1
                stack[-1] = (stack[-1],)
            elif op == 0x87:  # TUPLE3
                c3 = pop()
                b3 = pop()
                stack[-1] = (stack[-1], b3, c3)
            elif op == 0x29:  # EMPTY_TUPLE
                push(())
            elif op == 0x74:  # TUPLE
                mk = unmark()
                items = stack[mk:]
                del stack[mk:]
                push(tuple(items))
            elif op == 0x6C:  # LIST
                mk = unmark()
                items = stack[mk:]
                del stack[mk:]
                push(items)
            elif op == 0x64:  # DICT
                mk = unmark()
                items = stack[mk:]
                del stack[mk:]
                if len(items) % 2:
                    raise MalformedPickleError(source, "DICT with an odd number of items")
                for k in items[::2]:
                    if type(k) is tuple:
                        _shallow_key(k, source)
                push(dict(zip(items[::2], items[1::2], strict=True)))
            elif op == 0x73:  # SETITEM
                v = pop()
                k = pop()
                d = stack[-1]
                if type(d) is not dict:
                    raise MalformedPickleError(source, "SETITEM on a non-dict")
                if type(k) is tuple:
                    _shallow_key(k, source)
                d[k] = v
            elif op == 0x72:  # LONG_BINPUT
                if len(memo) >= _MAX_MEMO:
                    raise MalformedPickleError(source, "memo too large")
                memo[_u4(data, pos)[0]] = stack[-1]
                pos += 4
            elif op == 0x6A:  # LONG_BINGET
                push(memo[_u4(data, pos)[0]])
                pos += 4
            elif op == 0x70:  # PUT (text index)
                line, pos = _readline(data, pos)
                if len(memo) >= _MAX_MEMO:
                    raise MalformedPickleError(source, "memo too large")
                memo[int(line)] = stack[-1]
            elif op == 0x67:  # GET (text index)
                line, pos = _readline(data, pos)
                push(memo[int(line)])
            elif op == 0x30:  # POP
                if marks and marks[-1] == len(stack):
                    unmark()
                else:
                    pop()
            elif op == 0x31:  # POP_MARK
                mk = unmark()
                del stack[mk:]
            elif op == 0x32:  # DUP
                push(stack[-1])
            elif op == 0x47:  # BINFLOAT
                push(_f8(data, pos)[0])
                pos += 8
            elif op == 0x8B:  # LONG4
                ln = _i4(data, pos)[0]
                pos += 4
                if ln < 0:
                    raise MalformedPickleError(source, "LONG4 with a negative length")
                if pos + ln > n:
                    raise _Truncated()
                push(int.from_bytes(data[pos : pos + ln], "little", signed=True))
                pos += ln
            elif op == 0x8D:  # BINUNICODE8
                ln = _u8(data, pos)[0]
                pos += 8
                if pos + ln > n:
                    raise _Truncated()
                push(str(data[pos : pos + ln], "utf-8", "surrogatepass"))
                pos += ln
            elif op == 0x42:  # BINBYTES
                ln = _u4(data, pos)[0]
                pos += 4
                if pos + ln > n:
                    raise _Truncated()
                push(data[pos : pos + ln])
                pos += ln
            elif op == 0x43:  # SHORT_BINBYTES
                ln = data[pos]
                pos += 1
                if pos + ln > n:
                    raise _Truncated()
                push(data[pos : pos + ln])
                pos += ln
            elif op == 0x8E:  # BINBYTES8
                ln = _u8(data, pos)[0]
                pos += 8
                if pos + ln > n:
                    raise _Truncated()
                push(data[pos : pos + ln])
                pos += ln
            elif op == 0x49:  # INT (protocol 0 text; "00"/"01" are bools)
                line, pos = _readline(data, pos)
                if line == b"00":
                    push(False)
                elif line == b"01":
                    push(True)
                else:
                    push(int(line))
            elif op == 0x4C:  # LONG (protocol 0 text, optional trailing L)
                line, pos = _readline(data, pos)
                if line.endswith(b"L"):
                    line = line[:-1]
                push(int(line))
            elif op == 0x46:  # FLOAT (protocol 0 text)
                line, pos = _readline(data, pos)
                push(float(line))
            elif op == 0x56:  # UNICODE (protocol 0)
                line, pos = _readline(data, pos)
                push(str(line, "raw-unicode-escape"))
            elif op == 0x53:  # STRING (protocol 0 quoted)
                line, pos = _readline(data, pos)
                if len(line) >= 2 and line[0] == line[-1] and line[:1] in (b'"', b"'"):
                    line = line[1:-1]
                else:
                    raise MalformedPickleError(source, "STRING opcode argument must be quoted")
                push(codecs.escape_decode(line)[0].decode("latin-1"))
            elif op == 0x54:  # BINSTRING (py2 str)
                ln = _i4(data, pos)[0]
                pos += 4
                if ln < 0:
                    raise MalformedPickleError(source, "BINSTRING with a negative length")
                if pos + ln > n:
                    raise _Truncated()
                push(data[pos : pos + ln].decode("latin-1"))
                pos += ln
            elif op == 0x55:  # SHORT_BINSTRING (py2 str)
                ln = data[pos]
                pos += 1
                if pos + ln > n:
                    raise _Truncated()
                push(data[pos : pos + ln].decode("latin-1"))
                pos += ln
            elif op in _REFUSED_OPCODES:
                raise _refuse(source, data, pos, op, stack)
            else:
                raise MalformedPickleError(
                    source,
                    f"invalid pickle opcode 0x{op:02x} at byte {pos - 1}; not a pickle (or not a flight-recorder dump)",
                )
    except _Truncated:
        raise TruncatedPickleError(
            source,
            f"pickle is truncated: data ends at byte {n} before the STOP opcode "
            "(the dump was probably cut short while being written)",
        ) from None
    except DumpLoadError:
        raise
    except KeyError as exc:
        raise MalformedPickleError(source, f"pickle refers to memo entry {exc} that was never stored") from None
    except struct.error:
        raise TruncatedPickleError(
            source,
            f"pickle is truncated: data ends at byte {n} inside an opcode argument "
            "(the dump was probably cut short while being written)",
        ) from None
    except IndexError:
        if pos >= n:
            raise TruncatedPickleError(
                source,
                f"pickle is truncated: data ends at byte {n} before the STOP opcode "
                "(the dump was probably cut short while being written)",
            ) from None
        raise MalformedPickleError(
            source, f"malformed pickle: stack underflow at opcode 0x{op:02x} (byte {pos - 1})"
        ) from None
    except MemoryError:
        raise MalformedPickleError(source, "malformed pickle: out of memory while decoding") from None
    except RecursionError:
        raise MalformedPickleError(source, "malformed pickle: nesting too deep") from None
    except Exception as exc:
        raise MalformedPickleError(source, f"malformed pickle at byte {pos - 1}: {type(exc).__name__}: {exc}") from None


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


def decode_budget(size: int) -> int:
    """Bytes decoding a dump of ``size`` bytes may add: ``Limits.fr_decode_bytes`` counts the
    file's own bytes too (they are in memory while it decodes), with at least 64 MiB to decode in."""
    return max(64 * 1024 * 1024, settings.current().limits.fr_decode_bytes - size)


def _statm_bytes(field: int) -> int | None:
    """Field ``field`` of ``/proc/self/statm`` in bytes (0: address space, 1: resident set), or
    None where Linux's ``/proc`` is not there to read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _rss_bytes() -> int | None:
    return _statm_bytes(1)


def _vm_bytes() -> int | None:
    return _statm_bytes(0)


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
        vm = _vm_bytes()
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
        if not self._ok or not data or threading.active_count() != 1 or _tuple_bytes(data) > C_PATH_TUPLE_BYTES:
            return restricted_loads(data, source)
        import resource

        self._calls += 1
        if self._calls % 16 == 0:
            self._vm = _vm_bytes() or self._vm
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
        self._vm = _vm_bytes() or self._vm
        return restricted_loads(data, source)


def fast_restricted_loads(data: bytes, source: str = "<bytes>") -> Any:
    """One-shot :class:`FastLoader` (C speed, globals refused, memory capped)."""
    with FastLoader() as fl:
        return fl.loads(data, source)


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
