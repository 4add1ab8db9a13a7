"""Stream a file in large blocks and yield only the lines the prefilter flags.

This is the hot path. A log is read in blocks of a few MiB and scanned once, as bytes, by
the registry's multi-pattern prefilter (``match.prefilter``: Hyperscan where available,
Aho-Corasick otherwise). Only flagged lines are decoded as UTF-8 and handed to Python
regexes. Memory stays bounded whatever the file size: one block, a short tail of the block
before (for backward context such as the frames above an exception line), and an over-long
line is cut at ``max_line`` bytes with a warning rather than buffered whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Protocol

from firstfault.vocab import settings
from firstfault.vocab.text import no_ansi

BLOCK = 4 * 1024 * 1024
TAIL = 64 * 1024


class Finder(Protocol):
    """What the scanner needs from a prefilter: (end offset, literal) of every match."""

    def find(self, data: bytes, start: int = 0) -> list[tuple[int, str]]: ...


@dataclass(slots=True)
class Hit:
    """A flagged line. ``buf``/``start`` let a parser look at the lines just above it."""

    line_no: int
    text: str
    literals: tuple[str, ...]
    buf: bytes
    start: int

    def before(self, n: int) -> list[str]:
        """Up to ``n`` lines above this one (nearest last), from the block in memory."""
        out = [line for _, line in self.iter_before(n)]
        out.reverse()
        return out

    def iter_before(self, n: int, stop: int = 0) -> Iterator[tuple[int, str]]:
        """(offset, line) of up to ``n`` lines above this one, nearest first, not above ``stop``."""
        end = self.start - 1
        count = 0
        while count < n and end > stop:
            s = self.buf.rfind(b"\n", 0, end) + 1
            yield s, _decode(self.buf[s : min(end, s + 4096)])
            end = s - 1
            count += 1

    def after(self, n: int) -> list[str]:
        """Up to ``n`` lines below this one that are in the block in memory."""
        out: list[str] = []
        pos = self.buf.find(b"\n", self.start)
        while pos >= 0 and len(out) < n:
            nxt = self.buf.find(b"\n", pos + 1)
            end = nxt if nxt >= 0 else len(self.buf)
            if end > pos + 1 or nxt >= 0:
                out.append(_decode(self.buf[pos + 1 : min(end, pos + 4097)]))
            pos = nxt
        return out


def _decode(b: bytes) -> str:
    """A flagged line as text: invalid UTF-8 replaced, the NUL runs of a file hole and a
    terminal's colour codes dropped."""
    text = no_ansi(b.decode("utf-8", "replace").rstrip("\r"))
    return text.replace("\x00", "") if "\x00" in text else text


def scan(  # noqa: C901  (the hot loop, see below)
    fh: IO[bytes],
    finder: Finder,
    *,
    block: int = BLOCK,
    max_line: int | None = None,
    warn: Callable[[str], None] | None = None,
    stats: dict[str, int] | None = None,
    first_line: int = 1,
    context: bytes = b"",
) -> Iterator[Hit]:
    """Yield every line of ``fh`` that contains one of the prefilter's literals.

    ``stats["lines"]`` holds the file's line count once the generator is exhausted.

    ``max_line`` defaults to ``Limits.max_line``. ``first_line`` numbers the first line read, and
    ``context`` (complete lines) is what came just before ``fh`` in the file: a live reader that
    resumes a file mid-way passes both, so a flagged line finds its time and its traceback frames
    above it as a whole-file read would. ``context`` is only looked back into, never scanned.

    A deliberate hot loop, kept in one function: it runs once per block of every file of a
    bundle (GBs at scale), and splitting it would add a Python call per block and per hit.
    """
    if max_line is None:
        max_line = settings.current().limits.max_line
    line_no = first_line
    pending = b""
    tail = context[-TAIL:]
    skipping = False
    warned_long = False

    def flagged(carried: bytes, chunk: bytes | memoryview) -> Iterator[Hit]:
        # One buffer per block: the tail of the block before, the cut line carried over, the block
        # up to its last newline (one copy, not one per part). Hits keep it as their ``buf``.
        nonlocal line_no, tail
        s = chunk if isinstance(chunk, bytes) and not tail and not carried else b"".join((tail, carried, chunk))
        base = len(tail)
        counted_to = base
        cur_start = -1
        cur_end = -1
        lits: list[str] = []
        for end_idx, lit in finder.find(s, base):
            if end_idx <= cur_end:
                if lit not in lits:
                    lits.append(lit)
                continue
            if cur_start >= 0:
                line_no += s.count(b"\n", counted_to, cur_start)
                counted_to = cur_start
                yield Hit(line_no, _decode(s[cur_start:cur_end]), tuple(lits), s, cur_start)
            cur_start = s.rfind(b"\n", 0, end_idx) + 1
            nl = s.find(b"\n", end_idx - 1)
            cur_end = nl if nl >= 0 else len(s)
            lits = [lit]
        if cur_start >= 0:
            line_no += s.count(b"\n", counted_to, cur_start)
            counted_to = cur_start
            yield Hit(line_no, _decode(s[cur_start:cur_end]), tuple(lits), s, cur_start)
        line_no += s.count(b"\n", counted_to)
        tail = s[-TAIL:] if len(s) > TAIL else s

    def cut_long(chunk: bytes) -> Iterator[Hit]:
        nonlocal skipping, warned_long
        if warn and not warned_long:
            warn(f"line {line_no} is longer than {max_line} bytes; it was cut")
            warned_long = True
        skipping = True
        yield from flagged(b"", chunk[:max_line] + b"\n")

    while True:
        data = fh.read(block)
        if not data:
            break
        start = 0
        if skipping:
            nl = data.find(b"\n")
            if nl < 0:
                continue
            start = nl + 1
            skipping = False
        cut = data.rfind(b"\n", start)
        if cut < 0:  # no line ends in this block: it all continues the pending line
            rest = data[start:] if start else data
            buf = pending + rest if pending else rest
            if len(buf) > max_line:
                pending = b""
                yield from cut_long(buf)
            else:
                pending = buf
            continue
        whole = start == 0 and cut + 1 == len(data)
        yield from flagged(pending, data if whole else memoryview(data)[start : cut + 1])
        pending = data[cut + 1 :]
        if len(pending) > max_line:
            rest, pending = pending, b""
            yield from cut_long(rest)
    if pending and not skipping:
        yield from flagged(b"", pending)
        line_no += 1
    if stats is not None:
        stats["lines"] = line_no - first_line
