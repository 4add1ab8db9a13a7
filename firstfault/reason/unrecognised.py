"""Never silent: when no signature explains a failure, the earliest unrecognised error does.

A log that ends in an error no signature knows must not be answered "no failure". The error
lines ``match.unrecognised`` kept are grouped into templates with Drain3 (the log-template
miner of He et al., "Drain: An Online Log Parsing Approach with Fixed Depth Tree", ICWS 2017),
across ranks, so that the same message printed by 512 ranks is one template, not 512
candidates. The earliest template wins; at a near-tie a template seen on one rank only is the
stronger candidate (a fault of that rank, not a message every rank prints). The verdict is
``unknown`` with the template and its lines as evidence: honest about what firstfault does not
know, and still pointing at the line to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from firstfault.align import sort_key
from firstfault.reason.correlate import Candidate
from firstfault.vocab import CandidateKind, Category, Event, settings
from firstfault.vocab.text import rank_list

MAX_LINES_MINED = 20_000  # a bundle with more unrecognised lines is mined on its first ones


@dataclass
class Template:
    """One mined template: where it occurs and its first line."""

    text: str
    first: Event
    events: list[Event] = field(default_factory=list)

    @property
    def ranks(self) -> set[int]:
        return {e.rank for e in self.events if e.rank is not None}

    @property
    def places(self) -> set[object]:
        """Ranks, or hosts for lines with no rank: where the template was printed."""
        return {e.rank if e.rank is not None else (e.host or e.source) for e in self.events}

    @property
    def single_place(self) -> bool:
        return len(self.places) == 1


def _miner() -> Any:
    from drain3 import TemplateMiner
    from drain3.masking import MaskingInstruction
    from drain3.template_miner_config import TemplateMinerConfig

    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    cfg.drain_sim_th = 0.5
    cfg.masking_instructions = [
        MaskingInstruction(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\b", "TIME"),
        MaskingInstruction(r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b", "TIME"),
        MaskingInstruction(r"\b0x[0-9a-fA-F]+\b", "HEX"),
        MaskingInstruction(r"(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?", "IP"),
        MaskingInstruction(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])", "NUM"),
    ]
    return TemplateMiner(config=cfg)


def mine_templates(events: Sequence[Event]) -> list[Template]:
    """Templates of ``events`` (unrecognised error lines), earliest first, ties to one-rank ones."""
    if not events:
        return []
    miner = _miner()
    by_id: dict[int, Template] = {}
    for e in sorted(events, key=sort_key)[:MAX_LINES_MINED]:
        got = miner.add_log_message(e.text.strip()[:1000] or "?")
        cid = int(got["cluster_id"])
        t = by_id.get(cid)
        if t is None:
            t = by_id[cid] = Template(got["template_mined"], e)
        t.events.append(e)
    for cid, t in by_id.items():  # a cluster's template generalises as lines join it
        cluster = next((c for c in miner.drain.clusters if c.cluster_id == cid), None)
        if cluster is not None:
            t.text = cluster.get_template()
    templates = list(by_id.values())
    templates.sort(key=lambda t: sort_key(t.first))
    if not templates:
        return []
    # at a near-tie with the earliest, a template of one rank is the stronger candidate
    t0 = templates[0].first.ts
    tie = [
        t
        for t in templates
        if (t.first.ts is None and t0 is None)
        or (t0 is not None and t.first.ts is not None and t.first.ts - t0 < settings.current().reasoning.near_tie_s)
    ]
    rest = [t for t in templates if t not in tie]
    tie.sort(key=lambda t: (not t.single_place, sort_key(t.first)))
    return tie + rest


def unrecognised_candidates(events: Sequence[Event], limit: int = 5) -> list[Candidate]:
    """Candidates from the unrecognised error lines, one per template, best first."""
    out = []
    for t in mine_templates(events)[:limit]:
        e = t.first
        ranks = sorted(t.ranks)
        if t.single_place:
            where = f"rank {e.rank}" if e.rank is not None else (e.host or e.source)
            spread = f"only on {where}"
        else:
            spread = f"on {len(t.places)} places" + (f" (ranks {rank_list(ranks)})" if ranks else "")
        reasons = [
            f"no signature recognises this error line; its template '{t.text[:200]}' occurs {spread}",
            *(f"evidence: {x.source}:{x.line}: {x.text.strip()[:200]}" for x in t.events[:3]),
        ]
        rank = e.rank if t.single_place else None
        host = e.host if (t.single_place or len({x.host for x in t.events}) == 1) else None
        out.append(Candidate(CandidateKind.UNRECOGNISED, e, rank, host, e.ts, Category.UNKNOWN, reasons))
    return out
