"""A Markdown report to paste into an incident ticket: verdict, evidence, chain, warnings."""

from __future__ import annotations

from collections import Counter
from typing import Any

from firstfault.report.safe import md_fence, md_text
from firstfault.report.terminal import _culprit
from firstfault.vocab.text import clip
from firstfault.vocab.timefmt import iso


def _cell(s: object) -> str:
    return md_text(clip(str(s), 200))


def render_markdown(v: dict[str, Any], max_rows: int = 60) -> str:
    vd = v["verdict"]
    out = [
        "# firstfault incident report",
        "",
        f"**{md_text(vd['summary'])}**",
        "",
        "| | |",
        "|---|---|",
        f"| category | `{vd['category']}` |",
        f"| culprit | {_cell(_culprit(v))} |",
        f"| action | **{vd['action']}** |",
        f"| confidence | {vd['confidence']:.2f} |",
        f"| explained | {v['explained_fraction'] * 100:.0f}% of {len(v['causal_chain'])} error events |",
        "",
    ]
    re_ = v.get("root_event")
    if re_:
        out += [
            "## Root evidence",
            "",
            f"{md_text(str(re_['file']))}:{re_['line']} at {iso(re_['timestamp'])}"
            + (f", rank {re_['rank']}" if re_.get("rank") is not None else "")
            + (f", host {md_text(str(re_['host']))}" if re_.get("host") else ""),
            "",
            *md_fence([*(re_.get("context") or [])[-15:], re_["text"]]),
            "",
        ]
    if vd.get("reasons"):
        out += ["## Why", ""] + [f"- {md_text(r)}" for r in vd["reasons"]] + [""]
    chain = v["causal_chain"]
    if chain:
        roles = Counter(c["role"] for c in chain)
        out += [
            "## Causal chain",
            "",
            ", ".join(f"{n} {r}" for r, n in roles.items()),
            "",
            "| time | role | rank | signature | rule | text |",
            "|---|---|---|---|---|---|",
        ]
        for c in sorted(chain, key=lambda c: c["timestamp"] or 0)[:max_rows]:
            out.append(
                f"| {iso(c['timestamp'])} | {c['role']} | {c['rank'] if c['rank'] is not None else '-'} "
                f"| {_cell(c['signature'])} | {_cell(c['rule'])} | {_cell(c['text'])} |"
            )
        if len(chain) > max_rows:
            out.append(f"\n… {len(chain) - max_rows} more events in the JSON verdict.")
        out.append("")
    if v.get("alternatives"):
        out += ["## Alternatives considered", ""]
        out += [f"- {a['score']:.2f}: {_cell(a['summary'])}" for a in v["alternatives"]] + [""]
    if v.get("warnings"):
        out += ["## Warnings", ""] + [f"- {_cell(w)}" for w in v["warnings"]] + [""]
    out.append(f"_schema {v['schema_version']}, {v['stats'].get('total_s', '?')} s_")
    return "\n".join(out) + "\n"
