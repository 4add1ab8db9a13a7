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
make it allocate gigabytes the way the C unpickler's array memo can), a memory
budget (``pickle_budget``), and clear errors for empty, truncated and garbage input.  Any failure is
raised as a subclass of :class:`DumpLoadError` (``pickle_errors``); nothing else escapes.
The C-speed path over many dumps, checked against this one, is ``fast_loader``.
"""

from __future__ import annotations

import codecs
import struct
from typing import Any

from firstfault.flightrec.pickle_budget import decode_budget, rss_bytes
from firstfault.flightrec.pickle_errors import (
    DumpLoadError,
    EmptyFileError,
    MalformedPickleError,
    TruncatedPickleError,
    UnsafePickleError,
)

__all__ = ["C_PATH_TUPLE_BYTES", "restricted_loads", "tuple_bytes"]

_MAX_MEMO = 50_000_000
_RSS_EVERY = 1 << 20  # bytes of pickle between two looks at the resident size


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


def tuple_bytes(data: bytes) -> int:
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
    rss0 = rss_bytes()
    check_at = _RSS_EVERY if rss0 is not None else n + 1
    try:
        while True:
            if pos >= check_at:
                check_at = pos + _RSS_EVERY
                grown = (rss_bytes() or 0) - (rss0 or 0)
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
