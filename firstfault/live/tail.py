"""One growing file, read incrementally: each byte is read from disk once and parsed once.

A ``FileTail`` remembers how far it has read, the line count so far (so events keep the line
numbers a batch parse gives them), the events parsed from complete lines, the partial last
line, kept in memory until its newline arrives, and the last 64 KiB parsed, which the next read
looks back into (a line without a clock takes the time above it; an exception line its
frames). The file's ``SourceParser`` is kept too: parsers carry state from line to line (the
last time seen, which a line without a clock inherits).
Parsing itself is the pipeline's own (``parse.run.parse_stream`` and ``absorb_lines``).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field

from firstfault.discover import SourceFile
from firstfault.parse.base import ParseContext, SourceParser, parser_for
from firstfault.parse.classify import LineClassifier
from firstfault.parse.facts import absorb_lines
from firstfault.parse.run import owns_progress, parse_stream
from firstfault.parse.stream import TAIL
from firstfault.vocab import Event

#: Most bytes handed to the parser at once: attaching to a job with gigabytes of log already
#: written reads it in pieces of this size rather than all into memory.
READ_CHUNK = 32 * 1024 * 1024
#: How much of what was parsed is kept to look back into: the scanner's own look-back (``TAIL``).
CONTEXT_BYTES = TAIL
#: torchrun's failure report ends with this block (torch.distributed.elastic's ChildFailedError).
_ROOT_CAUSE = b"Root Cause (first observed failure):"


@dataclass
class FileTail:
    """What has been read of one file and what it gave."""

    sf: SourceFile
    key: tuple[int, int]  # (device, inode): a rotated file keeps it under its new name
    parser: SourceParser
    read_to: int = 0  # bytes read from disk so far
    lines: int = 0  # complete lines parsed so far
    pending: bytes = b""  # the partial last line, until its newline comes
    events: list[Event] = field(default_factory=list)
    flagged: int = 0
    bytes_parsed: int = 0
    placeholder: bool = False  # an empty file, listed but not read until its kind can be told
    launcher_done: bool = False  # torchrun's final failure report has been read in this file
    _tail_of_last: bytes = b""  # the last bytes parsed: a report split across two reads is still seen
    _context: bytes = b""  # the lines just parsed, looked back into (a time, traceback frames), not parsed again

    @classmethod
    def open(cls, sf: SourceFile, key: tuple[int, int], ctx: ParseContext, placeholder: bool = False) -> FileTail:
        return cls(sf, key, parser_for(sf, ctx), placeholder=placeholder)

    def restart(self, ctx: ParseContext) -> None:
        """The file was truncated in place (copytruncate): read it again from its start. The events
        already parsed stay (what was logged happened); the parser starts afresh."""
        self.read_to = 0
        self.lines = 0
        self.pending = b""
        self._context = b""
        self.parser = parser_for(self.sf, ctx)
        ctx.warn(f"{self.sf.rel}: truncated while watched; read again from its start")

    def rename(self, rel: str, path: os.PathLike[str] | str) -> None:
        """A rotation moved the file (log -> log.1): its events follow it to its new name."""
        from pathlib import Path

        old = self.sf.rel
        self.sf.rel, self.sf.path = rel, Path(path)
        for e in self.events:
            if e.source == old:
                e.source = rel

    def read_new(self, classifier: LineClassifier, ctx: ParseContext) -> int:
        """Read what was appended since the last call, parse its complete lines; bytes read."""
        got = 0
        try:
            with open(self.sf.path, "rb") as fh:
                fh.seek(self.read_to)
                while True:
                    data = fh.read(READ_CHUNK)
                    if not data:
                        break
                    got += len(data)
                    self.read_to += len(data)
                    self._feed(data, classifier, ctx)
        except OSError as exc:
            ctx.warn(f"{self.sf.rel}: read failed ({exc.strerror or exc}); partial result")
        self.sf.size = self.read_to
        return got

    def _feed(self, data: bytes, classifier: LineClassifier, ctx: ParseContext) -> None:
        buf = self.pending + data if self.pending else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self.pending = buf
            return
        complete, self.pending = buf[: cut + 1], buf[cut + 1 :]
        stats: dict[str, int] = {}
        parse_stream(
            self.sf,
            io.BytesIO(complete),
            self.parser,
            classifier,
            ctx,
            self.events,
            0,
            stats,
            self.lines + 1,
            self._context,
        )
        if self.parser.job_output:
            text = complete.decode("utf-8", "replace").split("\n")[:-1]
            absorb_lines(self.sf, ctx, text, text, self.lines + 1, owns_progress(self.sf, ctx))
        self.lines += stats.get("lines", 0)
        self.flagged += stats.get("flagged", 0)
        self.bytes_parsed += len(complete)
        self._context = (self._context + complete)[-CONTEXT_BYTES:]
        seen = self._tail_of_last + complete
        at = seen.find(_ROOT_CAUSE)
        if at >= 0 and seen.find(b"\n====", at) >= 0:
            self.launcher_done = True
        self._tail_of_last = seen[-4096:] if at < 0 else seen[at:][-65536:]
