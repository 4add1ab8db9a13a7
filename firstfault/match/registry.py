"""The signature registry: error wordings as data, with one fast prefilter over all of them.

Signatures live in TOML files, one per family (``firstfault/signatures/*.toml``); users add
their own directory with ``--signatures DIR``. Each signature names the literal strings that
must appear in a line for its regex to be worth running (``literals``). All literals of all
signatures go into one multi-pattern prefilter (``match.prefilter``), so a log is scanned
once at C speed and the Python regexes run only on the few lines that can match. See docs/signatures.md.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from firstfault.match.prefilter import AhoCorasickFinder, HyperscanFinder, make_finder
from firstfault.match.unrecognised import ERROR_LITERALS, UNRECOGNISED, is_error_line
from firstfault.parse.classify import EVIDENCE, LineMatch
from firstfault.vocab import Action, Category, Layer, Role, Severity
from firstfault.vocab.errors import SignatureError

# The memo of line -> match. What repeats (a stack frame, "Fatal Python error: Aborted") repeats
# within a few thousand lines; the rest carry a rank or pid and never hit. 8,192 lines parse the
# 2,048-rank FR-heavy bundle in the same CPU time as 65,536 (3.6-3.7 s), and each parse worker of
# the 16,384-rank one holds ~30 MB less.
CLASSIFY_CACHE = 8192
_MISS = object()
_REQUIRED = ("id", "pattern", "literals", "category", "layer", "role", "source")


class LazyPattern:
    """A signature's regex, compiled on its first use.

    Why: 800 regexes cost ~0.6 s to compile, and a bundle's lines hit the literals of a few dozen.
    Built-in patterns are checked by ``signatures --check`` and the tests; a user's file is
    compiled when it is loaded, so a bad pattern is reported at once.
    """

    __slots__ = ("_re", "source")

    def __init__(self, source: str, compiled: re.Pattern[str] | None = None) -> None:
        self.source = source
        self._re = compiled

    def compiled(self) -> re.Pattern[str]:
        if self._re is None:
            self._re = re.compile(self.source)
        return self._re

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled().search(text, pos, endpos)


@dataclass(slots=True)
class Signature:
    id: str
    pattern: LazyPattern
    literals: tuple[str, ...]
    category: Category
    layer: Layer
    role: Role
    source: str
    severity: Severity = Severity.ERROR
    action: Action | None = None
    remediation: str = ""
    priority: int = 0
    applies_to: tuple[str, ...] = ()
    context_lines: int = 0
    sets: dict[str, str] = field(default_factory=dict)
    examples: tuple[str, ...] = ()
    hook: str | None = None
    origin: str = ""

    def applies(self, file_kind: str) -> bool:
        return not self.applies_to or file_kind in self.applies_to


def _parse_one(raw: dict[str, object], origin: str, lazy: bool = False) -> Signature:
    sid = str(raw.get("id", "?"))
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise SignatureError(f"{origin}: signature {sid!r} lacks {', '.join(missing)}")
    try:
        pattern = LazyPattern(str(raw["pattern"]), None if lazy else re.compile(str(raw["pattern"])))
    except re.error as exc:
        raise SignatureError(f"{origin}: signature {sid!r} has a bad pattern: {exc}") from exc
    literals = raw["literals"]
    if not isinstance(literals, list) or not literals or not all(isinstance(x, str) and x for x in literals):
        raise SignatureError(f"{origin}: signature {sid!r}: literals must be a non-empty list of strings")
    try:
        action_raw = raw.get("action")
        return Signature(
            id=sid,
            pattern=pattern,
            literals=tuple(literals),
            category=Category(str(raw["category"])),
            layer=Layer(str(raw["layer"])),
            role=Role(str(raw["role"])),
            source=str(raw["source"]),
            severity=Severity(str(raw.get("severity", "error"))),
            action=Action(str(action_raw)) if action_raw else None,
            remediation=str(raw.get("remediation", "")),
            priority=int(raw.get("priority", 0)),  # type: ignore[call-overload]
            applies_to=tuple(raw.get("applies_to", ())),  # type: ignore[arg-type]
            context_lines=int(raw.get("context_lines", 0)),  # type: ignore[call-overload]
            sets={str(k): str(v) for k, v in dict(raw.get("sets", {})).items()},  # type: ignore[call-overload]
            examples=tuple(raw.get("examples", ())),  # type: ignore[arg-type]
            hook=str(raw["hook"]) if raw.get("hook") else None,
            origin=origin,
        )
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{origin}: signature {sid!r}: {exc}") from exc


def load_file(path: Path | str, text: str | None = None, lazy: bool = False) -> list[Signature]:
    origin = str(path)
    try:
        data = tomllib.loads(text if text is not None else Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SignatureError(f"{origin}: cannot read signatures: {exc}") from exc
    rows = data.get("signature", [])
    if not isinstance(rows, list):
        raise SignatureError(f"{origin}: expected [[signature]] tables")
    return [_parse_one(r, origin, lazy) for r in rows]


def builtin_files() -> list[tuple[str, str]]:
    """(name, text) of every bundled signature file, in a stable order."""
    pkg = resources.files("firstfault.signatures")
    out = []
    for entry in sorted(pkg.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            out.append((f"firstfault/signatures/{entry.name}", entry.read_text(encoding="utf-8")))
    return out


class Registry:
    """All signatures plus the prefilter that flags lines for them."""

    def __init__(self, signatures: Sequence[Signature], prefilter: str | None = None):
        seen: dict[str, Signature] = {}
        for sig in signatures:
            seen[sig.id] = sig  # a user file may override a built-in id
        self.signatures: list[Signature] = list(seen.values())
        self.by_id = {s.id: s for s in self.signatures}
        by_literal: dict[str, list[int]] = {}
        for idx, sig in enumerate(self.signatures):
            for lit in sig.literals:
                by_literal.setdefault(lit, []).append(idx)
        for lit in ERROR_LITERALS:  # error lines no signature knows are flagged too (match.unrecognised)
            by_literal.setdefault(lit, [])
        self._literals = by_literal
        # literals only evidence-only signatures (``sets.evidence``) use: once a job is seen, a line
        # holding nothing else cannot add anything, and at 16,384 ranks is not worth reading again
        self.evidence_literals = frozenset(
            lit
            for lit, idxs in by_literal.items()
            if idxs and all(self.signatures[i].sets.get(EVIDENCE) == "1" for i in idxs)
        )
        self._prefer = prefilter
        self._cache: dict[tuple[str, str, bool], LineMatch | None] = {}
        self._finder: AhoCorasickFinder | HyperscanFinder | None = None

    @property
    def finder(self) -> AhoCorasickFinder | HyperscanFinder:
        """Built on first use: compiling the database costs a few milliseconds."""
        if self._finder is None:
            self._finder = make_finder(self._literals, self._prefer)
        return self._finder

    def classify(
        self, line: str, file_kind: str, literal_hits: Iterable[str] | None, unrecognised: bool = False
    ) -> LineMatch | None:
        """Best signature for ``line`` and its named groups (``sets`` included), memoised.

        A failure repeats the same line on thousands of ranks (stack frames, "Fatal Python error:
        Aborted", the watchdog's advice): the regexes run once per distinct line and kind. With
        ``unrecognised``, an error-looking line that no signature matches comes back as the
        ``unrecognised`` match (``match.unrecognised``) instead of None.
        """
        key = (line, file_kind, unrecognised)
        got = self._cache.get(key, _MISS)
        if got is not _MISS:
            return got  # type: ignore[return-value]
        hits = list(literal_hits) if literal_hits is not None else None
        sig = self.match(line, file_kind, hits)
        out: LineMatch | None = None
        if sig is not None:
            m = sig.pattern.search(line)
            fields = {k: v for k, v in (m.groupdict() if m else {}).items() if v is not None}
            fields.update(sig.sets)
            out = LineMatch(
                sig.id,
                sig.category,
                sig.layer,
                sig.role,
                sig.severity,
                sig.priority,
                sig.context_lines,
                sig.hook,
                fields,
            )
        elif unrecognised and _error_literal(hits, line) and is_error_line(line):
            out = UNRECOGNISED_MATCH
        if len(self._cache) >= CLASSIFY_CACHE:
            self._cache.clear()  # bounded memory; a new burst of lines refills it
        self._cache[key] = out
        return out

    def match(self, line: str, file_kind: str, literal_hits: Iterable[str] | None = None) -> Signature | None:
        """Best signature for ``line`` (highest priority), or None.

        At equal priority a fault in its own right beats a symptom, and a symptom a tear-down: a
        paste that lost its newlines holds a teardown's words and the fault's on one line
        ("Some NCCL operations have failed ... Last error: NET/IB : Got completion from peer ...
        with error 12"), and the fault is what the line says. Then the id, for a stable choice.
        Noise (advice printed under an error) does not take a line that holds the error's own line
        too, the two joined by an escaped newline (:meth:`_fault_beside_noise`)."""
        if literal_hits is None:
            literal_hits = [lit for lit in self._literals if lit in line]
        cand: set[int] = set()
        for lit in literal_hits:
            cand.update(self._literals.get(lit, ()))
        best: Signature | None = None
        for idx in cand:
            sig = self.signatures[idx]
            if best is not None and sig.priority < best.priority:
                continue
            if not sig.applies(file_kind):
                continue
            if sig.pattern.search(line) is None:
                continue
            # higher priority; at equal priority the better role; then the smaller id
            if best is None or _better(sig, best):
                best = sig
        if best is not None and best.role == Role.NOISE and "\\n" in line:
            return self._fault_beside_noise(line, file_kind, cand, best) or best
        return best

    def _fault_beside_noise(self, line: str, file_kind: str, cand: set[int], noise: Signature) -> Signature | None:
        """The best match that is not noise, where a message quoted with its newlines escaped (a
        torchelastic error record's JSON pasted into a log, a repr) holds the fault's own line and
        the advice printed under it on one line, joined by an escaped newline; else None."""
        m = noise.pattern.search(line)
        if m is None:
            return None
        fault: Signature | None = None
        for idx in cand:
            sig = self.signatures[idx]
            if sig.role == Role.NOISE or not sig.applies(file_kind) or (fault is not None and not _better(sig, fault)):
                continue
            f = sig.pattern.search(line)
            if f is not None and _escaped_apart(line, m.span(), f.span()):
                fault = sig
        return fault


def _better(sig: Signature, than: Signature) -> bool:
    return (sig.priority, -_ROLE_RANK[sig.role], than.id) > (than.priority, -_ROLE_RANK[than.role], sig.id)


def _escaped_apart(line: str, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Are two matches lines of their own, joined by an escaped newline ("\\n") between them?"""
    lo, hi = (a, b) if a[0] <= b[0] else (b, a)
    return lo[1] <= hi[0] and "\\n" in line[lo[1] : hi[0] + 1]


_ERROR_LITERAL_SET = frozenset(ERROR_LITERALS)
_ROLE_RANK = {Role.ROOT: 0, Role.CASCADE: 1, Role.TEARDOWN: 2, Role.NOISE: 3}
# An error line no signature knows: kept as evidence, never a confident root (reason.unrecognised).
UNRECOGNISED_MATCH = LineMatch(
    UNRECOGNISED, Category.UNKNOWN, Layer.APPLICATION, Role.ROOT, Severity.ERROR, 0, 30, None, {UNRECOGNISED: "1"}
)


def _error_literal(hits: list[str] | None, line: str) -> bool:
    if hits is None:
        return any(lit in line for lit in _ERROR_LITERAL_SET)
    return any(lit in _ERROR_LITERAL_SET for lit in hits)


def load_registry(extra_dirs: Sequence[Path] = (), prefilter: str | None = None) -> Registry:
    sigs: list[Signature] = []
    for name, text in builtin_files():
        sigs.extend(load_file(name, text, lazy=True))  # built-ins: checked by signatures --check
    for d in extra_dirs:
        d = Path(d)
        files = sorted(d.glob("*.toml")) if d.is_dir() else [d]
        if not files:
            raise SignatureError(f"{d}: no *.toml signature files")
        for f in files:
            sigs.extend(load_file(f))
    return Registry(sigs, prefilter)
