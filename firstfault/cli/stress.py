"""``firstfault stress``: a fault campaign against the real workload under the real torchrun.

A thin shell over ``firstfault_bench.stress`` (imported when the command runs: it needs the
torch extra). Each fault runs as one job with ``--max-restarts 1`` and checkpoints; the table
says, per fault, how long until the failure showed, how long until training ran again, how many
steps were lost, and whether ``analyze`` named the fault.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from firstfault.cli.common import fail

app = typer.Typer()


@app.command()
def stress(
    out: Annotated[Path, typer.Option("--out", help="Directory for the campaign's bundles (created)")],
    fault: Annotated[
        list[str] | None, typer.Option("--fault", help="KIND@STEP[:RANK], repeatable (default: every kind at step 7)")
    ] = None,
    nproc: Annotated[
        int, typer.Option(help="Workers (torchrun --nproc-per-node); desync needs >= 3 for a majority")
    ] = 4,
    steps: Annotated[int, typer.Option(help="Training steps per job")] = 10,
    ckpt_every: Annotated[int, typer.Option(help="Checkpoint every N steps")] = 3,
    timeout: Annotated[float, typer.Option(help="Process-group timeout, seconds")] = 10.0,
    wall_limit: Annotated[float, typer.Option(help="Hard limit per job, seconds")] = 240.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON")] = False,
) -> None:
    """Inject each fault into a real torchrun job with restarts; report detection, restart, steps
    lost and whether the verdict was right."""
    from firstfault_bench.stress import HEADER, STRESS_KINDS, StressFault, row_markdown, run_fault

    try:
        plan = [StressFault.parse(f) for f in (fault or [f"{k}@7:1" for k in STRESS_KINDS])]
    except ValueError as exc:
        raise fail(exc) from None
    for f in plan:
        if not 0 <= f.rank < nproc or not 0 <= f.step < steps:
            raise fail(f"fault {f.kind}@{f.step}:{f.rank}: rank must be < --nproc and step < --steps")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    if not json_out:
        print(HEADER, flush=True)
    for f in plan:
        row = run_fault(out, f, nproc=nproc, steps=steps, ckpt_every=ckpt_every, timeout=timeout, wall_limit=wall_limit)
        rows.append(row)
        if not json_out:
            print(row_markdown(row), flush=True)
    if json_out:
        print(json.dumps([asdict(r) for r in rows], indent=1))
    raise typer.Exit(0 if all(r.verdict_right and r.completed for r in rows) else 1)
