"""What parsing needs from matching: a prefilter to scan with, and a classifier for flagged lines.

Parsing streams bytes and locates lines; matching (``match.registry``) knows what a line *is*.
Parsing only speaks this protocol, so it never imports the matcher: the pipeline hands it the
registry. The answer for a line is a :class:`LineMatch`, the signature's verdict on it with the
named groups it captured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from firstfault.parse.stream import Finder
from firstfault.vocab import Category, Layer, Role, Severity

# A signature's ``sets = { evidence = "1" }``: a line that only shows a job printed it. Parsing notes
# it and keeps no event (parse.run); the registry knows which literals only such lines use.
EVIDENCE = "evidence"


@dataclass(frozen=True, slots=True)
class LineMatch:
    """A classified line: which signature (or ``unrecognised``), what it says, what it captured."""

    signature: str
    category: Category
    layer: Layer
    role: Role
    severity: Severity
    priority: int = 0
    context_lines: int = 0  # >0: keep the traceback frames above the line
    hook: str | None = None  # a named enrichment (parse.hooks)
    fields: dict[str, str] = field(default_factory=dict)


class LineClassifier(Protocol):
    """The matcher as parsing sees it (implemented by ``match.registry.Registry``)."""

    @property
    def finder(self) -> Finder: ...

    @property
    def evidence_literals(self) -> frozenset[str]:
        """Literals that only signatures of job evidence (``sets.evidence``) use."""
        ...

    def classify(
        self, line: str, file_kind: str, literal_hits: Iterable[str] | None, unrecognised: bool = False
    ) -> LineMatch | None:
        """The line's match, or None. With ``unrecognised``, an error-looking line no signature knows
        comes back as the ``unrecognised`` match instead of None."""
        ...
