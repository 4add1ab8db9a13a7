"""The HTML report's side panels: culprit, flight-recorder findings, alternatives, warnings.

Each takes a piece of the verdict JSON and returns plain JSON for the page, bounding every
string, since the verdict's text is log text and log text is untrusted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from firstfault.report.html_values import int_or_none, num, ranks_text, utc


def flight_recorder_section(fr: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not fr:
        return None
    culprits = []
    for c in fr.get("culprits") or []:
        if not isinstance(c, Mapping):
            continue
        frames = [str(f)[:300] for f in (c.get("frames") or [])][:12]
        culprits.append(
            {
                "rank": c.get("rank"),
                "kind": c.get("kind"),
                "reason": str(c.get("reason") or ""),
                "pg": c.get("pg"),
                "seq": c.get("seq"),
                "op": c.get("op"),
                "score": num(c.get("score")),
                "frames": frames,
                "time": utc(tns / 1e9) if (tns := num(c.get("time_ns"))) else None,
            }
        )
    groups = []
    for g in fr.get("groups") or []:
        if isinstance(g, Mapping):
            groups.append(
                {
                    str(k): (
                        v if isinstance(v, str | int | float | bool) or v is None else json.dumps(v, default=str)[:300]
                    )
                    for k, v in g.items()
                }
            )
    cols: list[str] = []
    for g in groups:
        for k in g:
            if k not in cols:
                cols.append(k)
    return {"culprits": culprits, "groups": groups, "group_columns": cols[:10]}


def alternatives_section(alts: Iterable[Any], group_of_event: Mapping[Any, int]) -> list[dict[str, Any]]:
    out = []
    for a in alts:
        if not isinstance(a, Mapping):
            continue
        cul = a.get("culprit") or {}
        where = []
        if cul.get("ranks"):
            where.append("rank " + ranks_text([r for r in cul["ranks"] if isinstance(r, int)]))
        if cul.get("hosts"):
            where.append("host " + ", ".join(map(str, cul["hosts"][:4])))
        if cul.get("gpus"):
            where.append("GPU " + ", ".join(map(str, cul["gpus"][:4])))
        out.append(
            {
                "category": str(a.get("category") or ""),
                "action": str(a.get("action") or ""),
                "score": num(a.get("score")),
                "summary": str(a.get("summary") or ""),
                "where": "; ".join(where),
                "reasons": [str(r) for r in a.get("reasons") or []],
                "group": group_of_event.get(a.get("root_event_id")),
            }
        )
    return out


def culprit_of(verdict: Mapping[str, Any]) -> dict[str, list[Any]]:
    vc = verdict.get("culprit") or {}
    return {
        "ranks": [r for r in (int_or_none(x) for x in vc.get("ranks") or []) if r is not None],
        "hosts": [str(h) for h in vc.get("hosts") or []],
        "gpus": [str(g) for g in vc.get("gpus") or []],
        "links": [str(x) for x in vc.get("links") or []],
    }


def warnings_of(v: Mapping[str, Any], fr: Mapping[str, Any] | None) -> list[str]:
    warnings = [str(w) for w in v.get("warnings") or []]
    if fr:  # the pipeline usually copies these into the verdict's own warnings already
        warnings += [f"flight recorder: {w}" for w in fr.get("warnings") or []]
    return list(dict.fromkeys(warnings))
