"""The multi-pattern byte prefilter: every signature literal, one pass over the bytes.

Hyperscan (Intel's SIMD regex engine, via the ``hyperscan`` wheel) scans literals at GB/s;
it is the default where its wheel installs (x86-64 Linux). pyahocorasick is the portable
fallback: about 40 MB/s here, but pure C and everywhere. Both answer the same question, so
the rest of the pipeline does not know which one ran.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import cast

import ahocorasick

try:  # pragma: no cover - depends on the platform's wheels
    import hyperscan

    HAVE_HYPERSCAN = True
except ImportError:  # pragma: no cover
    HAVE_HYPERSCAN = False


class AhoCorasickFinder:
    """Aho-Corasick over the block decoded as latin-1 (one char per byte: offsets stay)."""

    name = "aho-corasick"

    def __init__(self, literals: Iterable[str]):
        self._a = ahocorasick.Automaton()
        for lit in literals:
            self._a.add_word(lit.encode("utf-8").decode("latin-1"), lit)
        self._a.make_automaton()

    def find(self, data: bytes, start: int = 0) -> list[tuple[int, str]]:
        s = data.decode("latin-1")
        return [(end + 1, lit) for end, lit in self._a.iter(s, start)]


class HyperscanFinder:
    """Hyperscan block-mode database of literal patterns."""

    name = "hyperscan"

    def __init__(self, literals: Iterable[str]):
        self._lits = list(literals)
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        exprs = [re.escape(lit).encode("utf-8") for lit in self._lits]
        self._db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs))
        self._local = threading.local()  # a scratch is one scan's at a time: one a thread (finders are shared)

    def find(self, data: bytes, start: int = 0) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        lits = self._lits

        def on_match(idx: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            out.append((to + start, lits[idx]))

        # a view, not a slice: the block is scanned where it lies, never copied (hyperscan reads any
        # buffer; its stubs say bytes)
        view = cast(bytes, memoryview(data)[start:]) if start else data
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        self._db.scan(view, match_event_handler=on_match, scratch=scratch)
        out.sort()
        return out


# One compiled finder per literal set, kept for the process: a service, a batch or the fuzz
# campaign loads the registry once an analysis, and the hyperscan binding keeps a reference to
# every id it is given at compile time (~28 KB an analysis, measured with tracemalloc: 20,000
# analyses grew one process to 600 MB). Bounded: user signature sets are few.
_FINDERS: dict[tuple[tuple[str, ...], bool], AhoCorasickFinder | HyperscanFinder] = {}
_FINDERS_MAX = 8


def make_finder(literals: Iterable[str], prefer: str | None = None) -> AhoCorasickFinder | HyperscanFinder:
    lits = tuple(sorted(set(literals)))
    use_hs = bool(HAVE_HYPERSCAN and prefer != "aho-corasick" and lits)
    key = (lits, use_hs)
    got = _FINDERS.get(key)
    if got is None:
        got = HyperscanFinder(lits) if use_hs else AhoCorasickFinder(lits)
        if len(_FINDERS) >= _FINDERS_MAX:
            _FINDERS.clear()
        _FINDERS[key] = got
    return got
