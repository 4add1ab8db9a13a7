"""The watched directory's state between reads: which files there are, what each has given.

``refresh`` lists the directory (new files, torchrun's new ``attempt_N`` folders, a rotated file
that moved to a new name, one truncated in place) and reads only each file's new bytes.
``analyze`` then hands a copy of everything parsed so far to the pipeline's later stages
(``parse.run.complete``, then ``pipeline.analyze_parsed``): the same stage functions a batch run
calls, so the final verdict is the batch verdict of the finished directory.

Files read whole rather than line by line: torchrun's ``error.json`` (written once, at a rank's
exit; read when it parses as JSON), flight-recorder dumps (taken once their size stops changing),
``topology.json`` and InfiniBand snapshots (small, read by the later stages as they are).
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from firstfault.discover import SNIFF, Bundle, SourceFile, sniff_kind, source_file, walk
from firstfault.live.tail import FileTail
from firstfault.match.registry import Registry
from firstfault.parse.base import ParseContext
from firstfault.parse.result import ParseResult
from firstfault.parse.run import complete, error_file_events, note_bundle, year_hint
from firstfault.parse.topology import load_topology_file
from firstfault.pipeline import analyze_parsed
from firstfault.vocab import TEXT_KINDS, Event, FileKind, Verdict


@dataclass
class _Whole:
    """A file read whole once it is complete (error.json, a flight-recorder dump, a snapshot)."""

    sf: SourceFile
    key: tuple[int, int]
    last_size: int = -1
    events: list[Event] = field(default_factory=list)
    done: bool = False


@dataclass
class LiveState:
    """Everything read so far from one job's directory, kept between reads."""

    root: Path
    registry: Registry
    ctx: ParseContext = field(default_factory=ParseContext)
    tails: dict[str, FileTail] = field(default_factory=dict)
    wholes: dict[str, _Whole] = field(default_factory=dict)
    gone: list[FileTail] = field(default_factory=list)  # files deleted (or replaced) while watched
    #: a file whose kind its content decides is read once it has held still this long (or filled
    #: the sniff window): a second covers a launcher's start-up lines, and the per-rank files that
    #: carry a fault first are decided by their path and read at once
    sniff_quiet_s: float = 1.0
    growing: dict[str, tuple[int, float]] = field(default_factory=dict)  # rel -> (size, since when)
    bytes_read: int = 0  # bytes read from disk by the line readers (each once)
    file_warnings: dict[str, list[str]] = field(default_factory=dict)  # what discovery said of each file

    @property
    def bytes_parsed(self) -> int:
        return sum(t.bytes_parsed for t in [*self.tails.values(), *self.gone])

    def refresh(self, final: bool = False) -> bool:
        """List the directory, follow moves and truncations, read new bytes. True if anything changed.
        ``final``: the job has ended, every whole-read file is complete as it is."""
        if not self.root.is_dir():
            return False
        listing = walk(self.root, [])
        keys: dict[str, tuple[int, int, int]] = {}
        for path, rel in listing:
            try:
                st = path.stat()
            except OSError:
                continue
            keys[rel] = (st.st_dev, st.st_ino, st.st_size)
        changed = self._follow_moves(keys)
        changed |= self._admit_new(listing, keys, final)
        note_bundle(self.ctx, self.bundle())
        for rel, tail in sorted(self.tails.items()):
            if tail.placeholder:
                continue
            size = keys.get(rel, (0, 0, -1))[2]
            if 0 <= size < tail.read_to:
                tail.restart(self.ctx)
            if size > tail.read_to:
                self.bytes_read += tail.read_new(self.registry, self.ctx)
                changed = True
        for rel, whole in self.wholes.items():
            changed |= self._settle(whole, keys.get(rel, (0, 0, -1))[2], final)
        return changed

    def _follow_moves(self, keys: dict[str, tuple[int, int, int]]) -> bool:
        """A tracked file whose name now holds another file (or nothing) and whose inode is under a
        new name was rotated: it keeps its state under the new name."""
        by_key = {k[:2]: rel for rel, k in keys.items()}
        away: list[FileTail] = []
        for rel, tail in list(self.tails.items()):
            now = keys.get(rel)
            if now is None or now[:2] != tail.key:
                away.append(self.tails.pop(rel))
        for tail in away:  # after every move is known: a chain (log.1 -> log.2, log -> log.1) in one tick
            new_rel = by_key.get(tail.key)
            if new_rel is None or new_rel in self.tails:
                self.gone.append(tail)  # deleted or replaced: its events stay, what was logged happened
            else:
                tail.rename(new_rel, self.root / new_rel)
                self.tails[new_rel] = tail
        return bool(away)

    def _admit_new(self, listing: list[tuple[Path, str]], keys: dict[str, tuple[int, int, int]], final: bool) -> bool:
        """Files not seen before. A file's kind is sniffed once, when its bytes can tell it (see
        ``_conclusive``); an empty file is held as a placeholder, not read, until then."""
        new: list[SourceFile] = []
        for path, rel in listing:
            if rel not in keys or rel in self.wholes:
                continue
            size = keys[rel][2]
            tail = self.tails.get(rel)
            if tail is not None and (not tail.placeholder or size == 0):
                continue
            if size > 0 and not self._conclusive(rel, size, final):
                continue
            warnings: list[str] = []
            sf = source_file(path, self.root, rel, warnings)
            self.file_warnings[rel] = warnings
            if sf.kind in TEXT_KINDS:
                sf.size = 0
                self.tails[rel] = FileTail.open(sf, keys[rel][:2], self.ctx, placeholder=size == 0)
                if size > 0:
                    new.append(sf)
            else:
                self.tails.pop(rel, None)
                self.wholes[rel] = _Whole(sf, keys[rel][:2])
        if new and self.ctx.year_hint is None:
            self.ctx.year_hint = year_hint(Bundle(self.root, new))
        return bool(new)

    def _conclusive(self, rel: str, size: int, final: bool) -> bool:
        """Can the file's first bytes tell its kind yet? Yes when its path alone does (torchrun's
        per-rank logs, ``slurm-N.out``), when it holds the whole sniff window, when it stopped
        growing for ``sniff_quiet_s``, or when the job has ended. A launcher's console sniffed from
        its first line alone (a warning before any ``[default0]:`` prefix) would be taken for an
        application log for good."""
        if final or size >= SNIFF or sniff_kind(rel, b"") != FileKind.APP_LOG:
            return True
        now = time.monotonic()
        seen = self.growing.get(rel)
        if seen is None or seen[0] != size:
            self.growing[rel] = (size, now)
            return self.sniff_quiet_s <= 0
        return now - seen[1] >= self.sniff_quiet_s

    def _settle(self, whole: _Whole, size: int, final: bool) -> bool:
        """A whole-read file counts once its size held still between two reads (and, for torchrun's
        error.json, once it parses)."""
        if whole.done or size < 0:
            return False
        whole.sf.size = size
        if whole.sf.kind == FileKind.ELASTIC_ERROR_JSON:
            try:
                json.loads(whole.sf.path.read_bytes())
            except (OSError, ValueError):
                return False  # still being written
            whole.events = error_file_events(whole.sf, self.registry, self.ctx)
        elif size != whole.last_size and not final:
            whole.last_size = size
            return False
        whole.done = True
        return True

    def bundle(self) -> Bundle:
        """The files as a bundle holds them: the line readers' and the complete whole-read ones."""
        files = [t.sf for t in self.tails.values()] + [w.sf for w in self.wholes.values() if w.done]
        files.sort(key=lambda f: f.rel)
        warnings = [
            w for f in files for w in self.file_warnings.get(f.rel, []) if not (f.size and w.endswith(": empty file"))
        ]
        return Bundle(self.root, files, warnings)

    def events(self) -> list[Event]:
        """Every event so far, in the order a batch parse lists them (file by file, line by line)."""
        out: list[Event] = []
        per_file = [(t.sf.rel, t.events) for t in [*self.tails.values(), *self.gone]]
        per_file += [(w.sf.rel, w.events) for w in self.wholes.values()]
        for _, evs in sorted(per_file, key=lambda x: x[0]):
            out.extend(evs)
        return out

    def parse_result(self, bundle: Bundle) -> ParseResult:
        """A copy of the parse so far, completed as ``parse_bundle`` completes its own."""
        events = copy.deepcopy(self.events())
        for i, e in enumerate(events):
            e.id = i
        ctx = copy.deepcopy(self.ctx)
        if bundle.of_kind(FileKind.TOPOLOGY):
            given = load_topology_file(bundle, ctx.warnings)
            for rank, host in ctx.topology.rank_host.items():
                given.rank_host.setdefault(rank, host)
            given.world_size = given.world_size or ctx.topology.world_size
            ctx.topology = given
        ctx.warnings = list(dict.fromkeys(bundle.warnings + ctx.warnings))
        pr = ParseResult(events, ctx)
        pr.files_read = len(self.tails) + sum(1 for w in self.wholes.values() if w.events)
        pr.bytes_read = self.bytes_parsed
        pr.lines_flagged = sum(t.flagged for t in self.tails.values())
        return complete(pr, bundle)

    def analyze(self) -> Verdict:
        """The verdict over everything read so far (raises BundleError while nothing is a job's log)."""
        bundle = self.bundle()
        return analyze_parsed(bundle, self.parse_result(bundle), self.registry)

    def ended(self) -> bool:
        """Has the job said it ended? torchrun's final failure report, or an error.json from every
        rank of the latest attempt."""
        if any(t.launcher_done for t in self.tails.values()):
            return True
        if not self.ctx.attempt_start and not self.ctx.progress_by_attempt:
            return False
        latest = max([*self.ctx.attempt_start, *self.ctx.progress_by_attempt])
        ranks = {t.sf.local_rank for t in self.tails.values() if t.sf.attempt == latest and t.sf.local_rank is not None}
        failed = {
            w.sf.local_rank
            for w in self.wholes.values()
            if w.done and w.sf.attempt == latest and w.sf.local_rank is not None
        }
        return bool(ranks) and ranks <= failed

    def latest_attempt(self) -> int:
        return max(self.ctx.progress_by_attempt, default=0)
