"""The Rich terminal summary: the verdict first, then the evidence that carries it."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from firstfault.report.safe import visible_tree
from firstfault.vocab.text import clip
from firstfault.vocab.timefmt import iso

_STYLE = {"root": "bold red", "cascade": "yellow", "teardown": "cyan", "noise": "dim"}
# glog/c10 header ("E1202 15:07:19.721000 12077 path/api.py:1002] "): the time is in its own column
_GLOG_HEAD = re.compile(r"^\[?[IWEF]\d{4} [\d:.]+\s+\d+ \S+\] ?")


def message(text: str) -> str:
    """The part of a line worth reading in a narrow column."""
    return _GLOG_HEAD.sub("", text.strip(), count=1)


def _culprit(v: dict[str, Any]) -> str:
    c = v["verdict"]["culprit"]
    parts = []
    if c["ranks"]:
        parts.append("rank " + ", ".join(map(str, c["ranks"])))
    if c["hosts"]:
        parts.append("host " + ", ".join(c["hosts"]))
    if c["gpus"]:
        parts.append("GPU " + ", ".join(c["gpus"]))
    if c["links"]:
        parts.append("link " + ", ".join(c["links"]))
    return "; ".join(parts) or "-"


def render(v: dict[str, Any], console: Console | None = None, max_chain: int = 12) -> None:
    v = visible_tree(v)  # a log's escape sequences are shown, never sent to the terminal
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=140)
    vd = v["verdict"]
    head = Table.grid(padding=(0, 2))
    what = vd["summary"].partition(": ")[2]
    if what:
        head.add_row("what", Text(clip(what, 600)))
    head.add_row("category", Text(vd["category"], style="bold"))
    head.add_row("culprit", Text(_culprit(v), style="bold red"))
    head.add_row("action", Text(vd["action"], style="bold green"))
    head.add_row("confidence", f"{vd['confidence']:.2f}")
    re_ = v.get("root_event")
    if re_:
        head.add_row("root event", Text(f"{re_['file']}:{re_['line']}  {iso(re_['timestamp'])}"))
        head.add_row("", Text(clip(re_["text"], 300), style="red"))
    head.add_row(
        "explained",
        f"{v['explained_fraction'] * 100:.0f}% of {v.get('causal_chain_total', len(v['causal_chain']))} error events",
    )
    # the headline is "<category> on <where>"; what happened goes inside, wrapped, never cut mid-word
    headline = vd["summary"].partition(": ")[0]
    console.print(Panel(head, title=Text(clip(headline, 100), style="bold"), title_align="left"))
    if vd.get("reasons"):
        for r in vd["reasons"]:
            console.print(f"  • {r}", style="dim" if r.startswith("confidence:") else None, markup=False)
    chain = v["causal_chain"]
    if chain:
        roles = v.get("causal_chain_roles") or Counter(c["role"] for c in chain)
        total = v.get("causal_chain_total", len(chain))
        t = Table(title=f"causal chain ({', '.join(f'{n} {r}' for r, n in roles.items())})", show_lines=False)
        for col in ("time", "role", "rank", "signature", "text"):
            t.add_column(col, overflow="fold")
        shown = sorted(chain, key=lambda c: (c["role"] != "root", c["timestamp"] or 0))[:max_chain]
        for c in sorted(shown, key=lambda c: c["timestamp"] or 0):
            t.add_row(
                iso(c["timestamp"])[11:23],
                Text(c["role"], style=_STYLE.get(c["role"], "")),
                "-" if c["rank"] is None else str(c["rank"]),
                Text(c["signature"]),
                Text(clip(message(c["text"]), 160)),
            )
        console.print(t)
        if total > max_chain:
            console.print(f"  … {total - max_chain} more events (use --json or --markdown for all)", style="dim")
    if v.get("alternatives"):
        console.print("alternatives:", style="bold")
        for a in v["alternatives"]:
            console.print(f"  {a['score']:.2f}  {clip(a['summary'], 160)}", markup=False)
    for w in v.get("warnings", [])[:20]:
        console.print(f"warning: {w}", style="yellow", markup=False)
