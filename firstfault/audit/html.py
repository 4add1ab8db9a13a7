"""The audit as one self-contained HTML page: criticality heatmap, blast radius, findings.

Same conventions as the incident report (``firstfault/report/``): one file, no request leaves
the page, no script at all here; every text that came from the layout (its name, host names)
or from the audit passes through :func:`html.escape`. The heatmap is inline SVG: one cell per
GPU, hosts side by side (64 to a row), coloured by criticality (the share of that rank's model
shard's replicas that one host, leaf switch or rack failure takes: see ``blast.criticality``);
the hosts of the audited components are outlined.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from firstfault.audit import AuditReport

HOSTS_PER_ROW = 64
TITLES_UP_TO = 4096  # per-cell tooltips up to this many ranks (a 16,384-rank page stays small)

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1400px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}
th{background:#f3f3f3}.critical{color:#fff;background:#b3261e}.warning{background:#f2c14e}.info{background:#d7e7f7}
.sev{font-weight:600;padding:1px 6px;border-radius:3px}.no{color:#b3261e;font-weight:600}.yes{color:#1b7f3b}
.legend span{display:inline-block;width:14px;height:14px;margin:0 2px;vertical-align:middle}
ul{margin:0;padding-left:18px}small{color:#555}
"""


def colour(v: float) -> str:
    """0 (pale) to 1 (dark red)."""
    v = min(1.0, max(0.0, v))
    r = int(255 - 75 * v)
    g = int(240 - 215 * v)
    b = int(200 - 170 * v)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(rep: AuditReport) -> str:
    lay = rep.layout
    g = lay.gpus_per_host
    c = 18 if lay.hosts <= 16 else 10 if lay.hosts <= 64 else 5
    host_w, host_h = c + 2, g * c + 6
    per_row = min(HOSTS_PER_ROW, lay.hosts)
    rows = (lay.hosts + per_row - 1) // per_row
    marked = {h for b in rep.blasts for h in b.hosts[:1]}
    out = [
        f'<svg id="heatmap" xmlns="http://www.w3.org/2000/svg" width="{per_row * host_w + 4}" '
        f'height="{rows * host_h + 4}" role="img" aria-label="criticality per GPU">'
    ]
    titles = lay.world <= TITLES_UP_TO
    for h in range(lay.hosts):
        x0, y0 = 2 + (h % per_row) * host_w, 2 + (h // per_row) * host_h
        name = lay.host(h)
        if name in marked:
            out.append(
                f'<rect class="audited" x="{x0 - 1}" y="{y0 - 1}" width="{c + 2}" height="{g * c + 2}" '
                f'fill="none" stroke="#000" stroke-width="1"/>'
            )
        for k in range(g):
            r = h * g + k
            v = rep.criticality[r]
            tip = f"<title>{escape(name)} GPU {k} rank {r}: {v:.2f}</title>" if titles else ""
            out.append(
                f'<rect class="gpu" x="{x0}" y="{y0 + k * c}" width="{c - 1}" height="{c - 1}" '
                f'fill="{colour(v)}" data-rank="{r}">{tip}</rect>'
            )
    out.append("</svg>")
    return "".join(out)


def _blast_rows(d: dict[str, Any]) -> str:
    rows = []
    for b in d["blast"]:
        det = b["detection"]
        ev = "".join(
            f"<li>{escape(e['where'])}: {escape(e['what'])}"
            f"{'' if e['collected'] else ' <span class=no>(not collected)</span>'}</li>"
            for e in b["evidence"]
        )
        groups = ", ".join(f"{escape(k)} {v}" for k, v in b["groups_hit"].items())
        att = "yes" if b["attributable"] else "no"
        rows.append(
            f"<tr class='blast'><td>{escape(b['class'])}</td><td>{escape(b['component'])}</td>"
            f"<td>{b['direct_rank_count']}</td><td>{b['first_hop_ranks']}</td><td>{groups}</td>"
            f"<td>{b['replicas_hit']} of {b['dp']}; {b['shards_without_replica']} shard(s) with no replica left</td>"
            f"<td>{b['job_ranks_stopped']}</td><td>{det['lo_s']:.1f}-{det['hi_s']:.1f} s "
            f"({escape(det['mechanism'])}); timeouts {'fire' if det['timeouts_fire'] else 'do not fire'}</td>"
            f"<td class='{att}'>{att}: {escape(b['attribution'])}</td><td><ul>{ev}</ul></td>"
            f"<td>{escape(b['isolation'])}</td></tr>"
        )
    return "".join(rows)


def _findings(d: dict[str, Any]) -> str:
    items = [
        f"<li class='finding' data-severity='{escape(f['severity'])}'><span class='sev {escape(f['severity'])}'>"
        f"{escape(f['severity'])}</span> <code>{escape(f['code'])}</code> {escape(f['message'])}</li>"
        for f in d["findings"]
    ]
    return f"<ul id='findings'>{''.join(items)}</ul>" if items else "<p id='findings'>No findings.</p>"


def _goodput(d: dict[str, Any]) -> str:
    ck = d["checkpoint"]
    rows = "".join(
        f"<tr><td>{escape(c['class'])}</td><td>{c['failures_per_hour']}</td><td>{c['detect_s']}</td>"
        f"<td>{c['lost_s']}</td><td>{c['lost_gpu_hours']}</td></tr>"
        for c in ck["per_class"]
    )
    return (
        f"<p>Job MTBF {ck['mtbf_h']} h; checkpoint every {ck['interval_s']:.0f} s; Young's optimum "
        f"{ck['young_s']:.0f} s, Daly's {ck['daly_s']:.0f} s. Expected goodput: {ck['goodput_with_spares']:.1%} with "
        f"spares, {ck['goodput_without_spares']:.1%} without, {ck['goodput_at_daly']:.1%} at Daly's interval.</p>"
        "<table id='goodput'><tr><th>class</th><th>failures / hour</th><th>detection s</th><th>lost s per failure</th>"
        f"<th>GPU-hours per failure</th></tr>{rows}</table>"
        f"<p><small>Rates: {escape(d['failure_rates']['source'])}, scaled by GPU count.</small></p>"
    )


def render_html(rep: AuditReport) -> str:
    d = rep.to_dict()
    lay = rep.layout
    p = lay.parallel
    title = f"Resilience audit: {lay.name or f'{lay.world} ranks'}"
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{escape(title)}</h1>"
        f"<p>{lay.hosts} hosts x {lay.gpus_per_host} GPUs = {lay.world} ranks; TP {p.tp}, CP {p.cp}, EP {p.ep}, "
        f"DP {lay.dp()}, PP {p.pp} (order {escape(p.order)}); {lay.hosts_per_leaf} hosts a leaf switch; "
        f"NCCL timeout {lay.timeouts.nccl_timeout_s:.0f} s.</p>"
        f"<h2>Findings</h2>{_findings(d)}"
        "<h2>Criticality over the topology</h2><p>One cell per GPU, one column per host. Colour: the share of "
        "that rank's model shard's data-parallel replicas that one host, leaf switch or rack failure takes "
        "(dark: one failure leaves no copy). Outlined: the hosts audited below.</p>"
        f"<p class='legend'>0 <span style='background:{colour(0)}'></span><span style='background:{colour(0.5)}'>"
        f"</span><span style='background:{colour(1)}'></span> 1</p>{heatmap(rep)}"
        "<h2>Blast radius per component</h2><table id='blast'><tr><th>class</th><th>component</th>"
        "<th>ranks stopped directly</th><th>peers blocked first</th><th>groups hit</th><th>DP replicas hit</th>"
        "<th>ranks stopped in the end</th><th>detection</th><th>attributable</th><th>evidence</th>"
        f"<th>isolation</th></tr>{_blast_rows(d)}</table>"
        f"<h2>Checkpoint interval and goodput</h2>{_goodput(d)}</body></html>"
    )


def write_html(rep: AuditReport, path: Path) -> None:
    path.write_text(render_html(rep), encoding="utf-8")
