"""``firstfault audit LAYOUT``: the blast radius of each component's failure, before the job runs.

A thin shell over ``firstfault.audit.audit``: a terminal summary (Rich), ``--json`` for programs,
``--html`` for the page with the heatmap. The audit module is imported when the command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from firstfault.cli.common import fail, output_path

if TYPE_CHECKING:
    from firstfault.audit import AuditReport

app = typer.Typer()
SEV_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


@app.command()
def audit(
    layout: Annotated[
        Path, typer.Argument(help="Layout file (YAML or JSON), or the job's launch script (sbatch/srun/torchrun)")
    ],
    with_: Annotated[
        Path | None, typer.Option("--with", help="YAML/JSON keys added to (and overriding) the layout or script")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the audit as one JSON object")] = False,
    html: Annotated[Path | None, typer.Option("--html", help="Write the HTML page (heatmap, blast, findings)")] = None,
) -> None:
    """Audit a training job's layout: per component class, who stops, when it is noticed, what
    evidence is left; configuration findings; checkpoint interval and goodput."""
    from firstfault.audit import audit as run_audit
    from firstfault.audit import load_layout
    from firstfault.vocab.errors import FirstfaultError

    target = output_path(html, "html") if html is not None else None
    try:
        rep = run_audit(load_layout(layout, with_))
        if target is not None:
            from firstfault.audit.html import write_html

            write_html(rep, target)
    except FirstfaultError as exc:
        raise fail(exc) from None
    if json_out:
        print(json.dumps(rep.to_dict(), indent=1))
        return
    _terminal(rep)
    if html is not None:
        Console(stderr=True).print(Text(f"HTML audit written to {html}"))


def _terminal(rep: AuditReport) -> None:
    console = Console()
    d = rep.to_dict()
    lay = rep.layout
    console.print(Text(f"{lay.name or 'layout'}: {lay.world} ranks on {lay.hosts} hosts", style="bold"))
    table = Table("class", "component", "direct", "first hop", "stopped", "detection s", "timeouts", "attributable")
    for b in d["blast"]:
        det = b["detection"]
        table.add_row(
            Text(b["class"]),
            Text(b["component"]),
            str(b["direct_rank_count"]),
            str(b["first_hop_ranks"]),
            str(b["job_ranks_stopped"]),
            Text(f"{det['lo_s']:.0f}-{det['hi_s']:.0f} {det['mechanism']}"),
            "fire" if det["timeouts_fire"] else "-",
            Text("yes" if b["attributable"] else "NO", style="" if b["attributable"] else "bold red"),
        )
    console.print(table)
    for f in d["findings"]:
        console.print(
            Text(f"{f['severity']:8} ", style=SEV_STYLE[f["severity"]]) + Text(f"{f['code']}: {f['message']}")
        )
    ck = d["checkpoint"]
    console.print(
        Text(
            f"MTBF {ck['mtbf_h']} h; checkpoint every {ck['interval_s']:.0f} s (Young {ck['young_s']:.0f} s, "
            f"Daly {ck['daly_s']:.0f} s); goodput {ck['goodput_with_spares']:.1%} with spares, "
            f"{ck['goodput_without_spares']:.1%} without. Rates: {d['failure_rates']['source']}"
        )
    )
