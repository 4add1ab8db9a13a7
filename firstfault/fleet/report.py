"""The fleet report as one self-contained HTML page with inline SVG plots.

Why hand-made SVG: three bar charts (incidents per week, top hosts, category mix) need no
plotting library, load with the page, and every value is text in the file (searchable, and
escaped: host names and signatures come from logs).
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence

from firstfault.fleet.reputation import DAY, Fleet, PlaceStats
from firstfault.vocab import Category
from firstfault.vocab.timefmt import iso

_CSS = (
    "body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}.lemon{color:#b00;"
    "font-weight:bold}.noise{color:#777}svg text{font:11px sans-serif}"
)


def weekly(timeline: Sequence[tuple[float, Category]]) -> list[tuple[float, int]]:
    """(week start, incidents) from the first failure to the last, empty weeks included."""
    if not timeline:
        return []
    t0 = timeline[0][0]
    counts = Counter(int((t - t0) // (7 * DAY)) for t, _ in timeline)
    return [(t0 + w * 7 * DAY, counts.get(w, 0)) for w in range(max(counts) + 1)]


def bars_svg(title: str, items: Sequence[tuple[str, float]], width: int = 640, horizontal: bool = False) -> str:
    """A bar chart; ``horizontal`` puts labels on the left (long names), else under the bars."""
    if not items:
        return f"<p>{html.escape(title)}: nothing yet</p>"
    top = max(v for _, v in items) or 1.0
    if horizontal:
        row, label_w = 18, 220
        h = row * len(items) + 30
        parts = [f'<text x="0" y="14" font-weight="bold">{html.escape(title)}</text>']
        for i, (name, v) in enumerate(items):
            y = 24 + i * row
            w = (width - label_w - 60) * v / top
            parts.append(
                f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{html.escape(name)}</text>'
                f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{row - 4}" fill="#4a78b0"/>'
                f'<text x="{label_w + w + 4:.1f}" y="{y + 12}">{v:g}</text>'
            )
    else:
        h, base = 200, 170
        bw = max(1.0, (width - 40) / len(items))
        parts = [f'<text x="0" y="14" font-weight="bold">{html.escape(title)}</text>']
        for i, (name, v) in enumerate(items):
            bh = (base - 30) * v / top
            x = 30 + i * bw
            parts.append(
                f'<rect x="{x:.1f}" y="{base - bh:.1f}" width="{max(bw - 1, 0.5):.1f}" height="{bh:.1f}" '
                f'fill="#4a78b0"><title>{html.escape(name)}: {v:g}</title></rect>'
            )
        parts.append(f'<text x="30" y="{base + 14}">{html.escape(items[0][0])}</text>')
        parts.append(f'<text x="{width - 10}" y="{base + 14}" text-anchor="end">{html.escape(items[-1][0])}</text>')
        parts.append(f'<text x="0" y="34">{top:g}</text>')
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}">{"".join(parts)}</svg>'


def render_html(rep: Fleet, timeline: Sequence[tuple[float, Category]], top: int = 20) -> str:
    weeks = [(iso(t)[:10], float(n)) for t, n in weekly(timeline)]
    hosts = [p for p in rep.places if p.kind == "host"][:top]
    mix = Counter(str(c) for _, c in timeline).most_common()
    p = rep.policy
    body = [
        "<!doctype html><html><head><meta charset='utf-8'><title>firstfault fleet report</title>",
        f"<style>{_CSS}</style></head><body><h1>Fleet report</h1>",
        f"<p>{rep.failed:,} failed and {rep.healthy:,} healthy runs; lemon test: Poisson over "
        f"{rep.population.get('host', 0):,} hosts, Bonferroni alpha {p.alpha:g}, at least {p.min_jobs} jobs "
        f"(docs/fleet.md).</p>",
        f"<p>Lemon nodes ({len(rep.lemon_hosts())}): {html.escape(', '.join(rep.lemon_hosts()) or 'none')}</p>",
        bars_svg("Incidents per week", weeks),
        bars_svg("Top hosts (distinct failed jobs)", [(x.place, float(x.jobs)) for x in hosts], horizontal=True),
        bars_svg("Category mix", [(c, float(n)) for c, n in mix], horizontal=True),
        "<h2>Lemons</h2>",
        _places_table([x for x in rep.places if x.lemon]),
        "<h2>Hosts, GPUs and links</h2>",
        _places_table(rep.places[: top * 3]),
        "<h2>Signatures</h2><table><tr><th>signature</th><th>failed runs</th><th>healthy runs</th><th></th></tr>",
    ]
    for s in rep.signatures[: top * 3]:
        tag = "<span class='noise'>noise: healthy runs print it too</span>" if s.noise else ""
        body.append(
            f"<tr><td>{html.escape(s.signature)}</td><td>{s.failed}</td><td>{s.healthy}</td><td>{tag}</td></tr>"
        )
    body.append("</table></body></html>")
    return "\n".join(body)


def _places_table(places: Sequence[PlaceStats]) -> str:
    rows = [
        "<table><tr><th>kind</th><th>place</th><th>jobs</th><th>incidents</th><th>first seen</th>"
        "<th>last seen</th><th>trend</th><th>p (corrected)</th><th>categories</th></tr>"
    ]
    for x in places:
        cls = " class='lemon'" if x.lemon else ""
        rows.append(
            f"<tr{cls}><td>{x.kind}</td><td>{html.escape(x.place)}</td><td>{x.jobs}</td><td>{x.incidents}</td>"
            f"<td>{_day(x.first_seen)}</td><td>{_day(x.last_seen)}</td><td>{x.trend}</td><td>{x.p_value:.2g}</td>"
            f"<td>{html.escape(', '.join(x.categories))}</td></tr>"
        )
    return "".join(rows) + "</table>"


def _day(t: float | None) -> str:
    return iso(t)[:10] if t is not None else "-"
