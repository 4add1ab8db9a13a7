"""``firstfault bench``: accuracy on labelled bundles and the real-world corpus, speed against grep -E,
the flight recorder against torch's fr_trace, the HTML report at scale, cluster-scale accuracy and speed.

The benchmarks live beside the product in ``firstfault_bench``; this module only gives them a
command line, importing them when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from firstfault.cli.common import fail

app = typer.Typer(help="Benchmarks: accuracy on labelled bundles, speed against grep -E.", no_args_is_help=True)


@app.command("accuracy")
def bench_accuracy(
    cases: Annotated[Path | None, typer.Argument(help="Directory of bundles, each with a truth.json")] = None,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="A corpus of real logs (log.txt + label.toml per case) instead"),
    ] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write the table as Markdown")] = None,
) -> None:
    """Per-case accuracy table against truth.json (next to the naive and torchrun baselines), or on a
    labelled corpus of real logs with --corpus."""
    if corpus is not None:
        from firstfault_bench.corpus import run_corpus

        run_corpus(corpus, markdown)
        raise typer.Exit(0)
    if cases is None:
        raise fail("give a directory of bundles, or --corpus DIR")
    from firstfault_bench.accuracy import run_accuracy

    code = run_accuracy(cases, markdown)
    raise typer.Exit(code)


@app.command("sets")
def bench_sets(
    sets: Annotated[
        list[Path], typer.Argument(help="Sets of real jobs (folders of bundles with truth.json), or folders of sets")
    ],
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write the table as Markdown")] = None,
    rows: Annotated[Path | None, typer.Option("--rows", help="Write one JSON line per job (label and verdict)")] = None,
    against: Annotated[
        Path | None, typer.Option("--against", help="A --rows file of an earlier run: list every verdict that moved")
    ] = None,
) -> None:
    """Labelled real jobs set by set (tools/realjobs sets and their excerpts) against the bar:
    category, culprit top-1 where the label names a rank, healthy flagged, failed answered none."""
    from firstfault_bench.real_sets import run_sets

    raise typer.Exit(run_sets(sets, markdown, rows, against))


@app.command("generate")
def bench_generate(
    out: Annotated[Path, typer.Argument(help="Directory to write the labelled bundles into")],
    count: Annotated[int, typer.Option(help="How many bundles")] = 25,
    seed: Annotated[int, typer.Option(help="Seed of the case plan")] = 0,
    jobs: Annotated[int, typer.Option(help="Simulations run at once")] = 2,
) -> None:
    """Generate a labelled case set with the real simulator (needs firstfault\\[torch])."""
    from firstfault_bench.cases import generate

    paths = generate(out, count=count, seed=seed, jobs=jobs)
    print(f"wrote {len(paths)} bundles under {out}")


@app.command("speed")
def bench_speed(
    path: Annotated[Path, typer.Argument(help="A bundle to time")],
    repeat: Annotated[int, typer.Option(help="Runs of each tool")] = 3,
) -> None:
    """Analysis throughput against grep -E over the same bytes (the ratio is the figure)."""
    from firstfault_bench.speed import run_speed

    run_speed(path, repeat)


@app.command("inflate")
def bench_inflate(
    src: Annotated[Path, typer.Argument(help="A real bundle")],
    dst: Annotated[Path, typer.Argument(help="Where to write the inflated bundle")],
    copies: Annotated[int, typer.Option(help="How many host copies")] = 100,
) -> None:
    """Make a bigger bundle for `bench speed` by copying a real one onto many hosts."""
    from firstfault_bench.speed import inflate

    n = inflate(src, dst, copies)
    print(f"wrote {n / 1e6:.1f} MB under {dst}")


@app.command("fr")
def fr(
    cases: Annotated[
        list[str] | None,
        typer.Argument(
            help="Case dirs (default: examples/bundles/* and, where present, shared/peer-data/nvrx-fr-traces/*)."
        ),
    ] = None,
    synthetic: Annotated[
        str, typer.Option("--synthetic", help="Comma-separated synthetic rank counts; '' to skip.")
    ] = "4096,16384",
    fr_timeout: Annotated[float, typer.Option("--fr-timeout", help="Seconds before a tool run is killed.")] = 1800,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the figures to this JSON file.")] = None,
) -> None:
    """Compare firstfault's FR analysis with torch's fr_trace (accuracy, time, memory)."""
    from firstfault_bench.fr import bench_fr

    sizes = [int(x) for x in synthetic.split(",") if x.strip()] if synthetic else []
    res = bench_fr(cases, synthetic=sizes, fr_timeout=fr_timeout)
    if json_out is not None:
        json_out.write_text(json.dumps(res, indent=2))


@app.command("html")
def html(
    ranks: Annotated[int, typer.Option(help="World size of the synthetic failed job")] = 16384,
    gpus_per_host: Annotated[int, typer.Option(help="Ranks (GPUs) per host")] = 8,
    out: Annotated[Path | None, typer.Option(help="Keep the report at this path")] = None,
    runs: Annotated[int, typer.Option(help="Times to open it; the best is reported")] = 3,
    browser: Annotated[bool, typer.Option(help="Open it in headless chromium")] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON")] = False,
) -> None:
    """Size and browser opening time of the HTML report for a synthetic N-rank failure.

    Exits 1 when the report is over budget (10 MiB, or 3 s to open at 16,384 ranks or fewer).
    """
    from firstfault_bench.html import BUDGET_BYTES, BUDGET_OPEN_MS, bench_html

    res = bench_html(ranks, gpus_per_host, out=out, browser=browser, runs=runs)
    over = res["bytes"] > BUDGET_BYTES or (
        ranks <= 16384 and res.get("open_ready_ms") is not None and res["open_ready_ms"] > BUDGET_OPEN_MS
    )
    if json_out:
        res.pop("open_runs", None)
        print(json.dumps(res, indent=2))
    else:
        opened = res.get("open_ready_ms")
        print(f"ranks    {res['ranks']:,} on {res['hosts']:,} hosts, {res['chain_events']:,} chain events")
        print(f"render   {res['render_s']:.2f} s (verdict built in {res['verdict_build_s']:.2f} s)")
        print(f"size     {res['bytes'] / 2**20:.2f} MiB (budget {BUDGET_BYTES / 2**20:.0f} MiB)")
        if opened is None:
            print("open     not measured (needs /usr/bin/chromium and pip install playwright)")
        else:
            print(f"open     {opened} ms until every view is drawn (best of {runs}; budget {BUDGET_OPEN_MS} ms)")
        print(f"report   {res['path']}")
    if over:
        raise typer.Exit(1)


@app.command("scale-accuracy")
def scale_accuracy(
    out: Annotated[Path, typer.Argument(help="Directory for scale_accuracy.{md,json,png}")],
    count: Annotated[int, typer.Option("--count", help="Scenarios (every fault kind, sizes 8..16,384)")] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the scenario plan")] = 0,
    jobs: Annotated[int, typer.Option("--jobs", help="Scenarios below 4,096 ranks run this many at once")] = 2,
    sizes: Annotated[
        str, typer.Option("--sizes", help="Comma-separated job sizes (ranks)")
    ] = "8,16,32,64,128,256,512,1024,2048,4096,16384",
    kinds: Annotated[str, typer.Option("--kinds", help="Comma-separated fault kinds (default: all)")] = "",
    keep: Annotated[bool, typer.Option("--keep", help="Keep the bundles (disk!) under --workdir")] = False,
    workdir: Annotated[Path | None, typer.Option("--workdir", help="Where bundles are written")] = None,
) -> None:
    """Accuracy over simulated cluster jobs: culprit top-1 by kind x size, category, action, confusion."""
    from firstfault_bench.scale import run_accuracy
    from firstfault_sim.cluster.faults import FAULT_KINDS, KINDS

    ks = [k.strip() for k in kinds.split(",") if k.strip()] or list(FAULT_KINDS)
    bad = [k for k in ks if k not in KINDS]
    if bad:
        raise typer.BadParameter(f"unknown kind(s) {bad}; choose from {', '.join(FAULT_KINDS)}")
    results = run_accuracy(out, count, seed, jobs, [int(x) for x in sizes.split(",") if x.strip()], ks, keep, workdir)
    typer.echo((out / "scale_accuracy.md").read_text())
    typer.echo(f"{sum(r.culprit_ok for r in results)}/{len(results)} culprits right; tables in {out}")


@app.command("scale-speed")
def scale_speed(
    out: Annotated[Path, typer.Argument(help="Directory for scale_speed.{md,json,png}")],
    sizes: Annotated[str, typer.Option("--sizes", help="Comma-separated job sizes (ranks)")] = "1024,4096,16384",
    steps: Annotated[int, typer.Option("--steps", help="Training steps of the per-size bundles")] = 60,
    long_steps: Annotated[
        str, typer.Option("--long-steps", help="Longer runs of the largest size (GB-scale bundles)")
    ] = "300,1000",
    kind: Annotated[str, typer.Option("--kind", help="Fault kind of the timed bundles")] = "dataloader_hang",
    keep: Annotated[bool, typer.Option("--keep", help="Keep the bundles")] = False,
    workdir: Annotated[Path | None, typer.Option("--workdir", help="Where bundles are written")] = None,
    limit: Annotated[float, typer.Option("--limit", help="Kill an analysis after this many seconds (0: never)")] = 0.0,
) -> None:
    """Throughput against grep -E, time to verdict and peak memory at 1,024 / 4,096 / 16,384 ranks
    and GB-scale bundles."""
    from firstfault_bench.scale_speed import render_speed, run_speed
    from firstfault_sim.cluster.faults import FAULT_KINDS, KINDS

    if kind not in KINDS:
        raise typer.BadParameter(f"choose from {', '.join(FAULT_KINDS)}")
    rows = run_speed(
        out,
        [int(x) for x in sizes.split(",") if x.strip()],
        [int(x) for x in long_steps.split(",") if x.strip()],
        steps,
        kind,
        workdir=workdir,
        keep=keep,
        limit_s=limit,
    )
    typer.echo(render_speed(rows))


@app.command("fleet")
def bench_fleet(
    out: Annotated[Path, typer.Argument(help="Folder for fleet.md and fleet.json")],
    nodes: Annotated[int, typer.Option("--nodes", help="Hosts in the simulated fleet")] = 2000,
    jobs: Annotated[int, typer.Option("--jobs", help="Jobs over the period")] = 10000,
    days: Annotated[float, typer.Option("--days", help="Period, days")] = 90.0,
    factors: Annotated[str, typer.Option("--factors", help="Comma-separated lemon factors to sweep")] = "25,50,100,150",
    seeds: Annotated[str, typer.Option("--seeds", help="Comma-separated seeds")] = "0,1,2",
    batch: Annotated[
        Path | None, typer.Option("--batch", help="Also time batch analysis of the bundles in this folder")
    ] = None,
    corpus: Annotated[int, typer.Option("--corpus", help="Cluster-simulator bundles to add to --batch's folder")] = 0,
    workers: Annotated[str, typer.Option("--workers", help="Comma-separated worker counts for --batch")] = "1,2",
    ray: Annotated[bool, typer.Option("--ray/--no-ray", help="Include Ray in --batch")] = True,
) -> None:
    """Lemon-node precision/recall against the fleet simulator's truth; batch bundles/s by workers."""
    from firstfault_bench.fleet import as_dicts, bench_batch, make_corpus, render_batch, render_lemons, sweep
    from firstfault_sim.fleet import FleetConfig

    out.mkdir(parents=True, exist_ok=True)
    base = FleetConfig(nodes=nodes, jobs=jobs, days=days)
    rows = sweep(base, [float(x) for x in factors.split(",") if x.strip()], [int(x) for x in seeds.split(",") if x])
    text = render_lemons(rows, base)
    result: dict[str, object] = {"lemons": as_dicts(rows)}
    if batch is not None:
        if corpus:
            make_corpus(batch, corpus)
        brows = bench_batch(batch, [int(x) for x in workers.split(",") if x.strip()], ray=ray)
        text += "\n" + render_batch(brows)
        result["batch"] = as_dicts(brows)
    (out / "fleet.md").write_text(text, encoding="utf-8")
    (out / "fleet.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    typer.echo(text)


@app.command("audit")
def bench_audit(
    layouts: Annotated[list[Path], typer.Argument(help="Layout files (YAML/JSON) to audit and simulate")],
    classes: Annotated[str, typer.Option(help="Comma-separated component classes (default: all)")] = "",
    seed: Annotated[int, typer.Option(help="Simulator seed")] = 1,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write the table as Markdown")] = None,
    analyze: Annotated[
        bool, typer.Option("--analyze/--no-analyze", help="Write each bundle and analyse it (minutes at 16k ranks)")
    ] = True,
) -> None:
    """The audit's blast radius and detection time against the cluster simulator, per component
    class and layout (simulate the fault, analyse the bundle, compare). Exit 1 on any mismatch."""
    from firstfault.audit import load_layout
    from firstfault.vocab.errors import InputError
    from firstfault_bench.audit import check_layout
    from firstfault_bench.audit import markdown as to_markdown

    rows = []
    wanted = tuple(c for c in classes.split(",") if c)
    for path in layouts:
        try:
            lay = load_layout(path)
        except InputError as exc:
            raise fail(exc) from None
        for row in check_layout(lay, seed=seed, classes=wanted, analyze=analyze):
            rows.append(row)
            print(to_markdown([row]).splitlines()[-1], flush=True)
    table = to_markdown(rows)
    print(table)
    if markdown is not None:
        markdown.write_text(table + "\n", encoding="utf-8")
    blast = sum(1 for r in rows if r.blast_ok)
    named = sum(1 for r in rows if r.verdict_ok)
    ran = sum(1 for r in rows if r.verdict_ok is not None)
    agree = sum(1 for r in rows if r.verdict_ok is not None and r.attribution_ok)
    print(
        f"prediction = simulation: {blast}/{len(rows)}; analyze names the faulted component: {named}/{ran}; "
        f"right exactly where the audit said attributable: {agree}/{ran}"
    )
    raise typer.Exit(0 if all(r.ok for r in rows) else 1)


@app.command("serve")
def bench_serve(
    count: Annotated[int, typer.Option(help="Submissions in all")] = 1000,
    clients: Annotated[int, typer.Option(help="Concurrent clients")] = 100,
    kill_at: Annotated[
        int | None, typer.Option("--kill-at", help="SIGKILL the server after this many submissions, then restart it")
    ] = None,
    workers: Annotated[int, typer.Option(help="The server's analysis processes")] = 2,
    store: Annotated[
        str | None, typer.Option("--store", help="An empty PostgreSQL database (postgresql://...) instead of SQLite")
    ] = None,
    lease_s: Annotated[
        float, typer.Option("--lease-s", help="The server's job lease (PostgreSQL recovers by it)")
    ] = 60.0,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write the table as Markdown")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON too")] = False,
) -> None:
    """Load-test `firstfault serve` on loopback: throughput, latency, lost and duplicated jobs
    (needs firstfault\\[service])."""
    if count < 1 or clients < 1 or workers < 1 or (kill_at is not None and not 0 < kill_at < count):
        raise fail("--count, --clients and --workers must be at least 1, and --kill-at between 1 and count - 1")
    from firstfault_bench.serve import run_serve, summary, table

    result = run_serve(count=count, clients=clients, kill_at=kill_at, workers=workers, store=store, lease_s=lease_s)
    text = table([result])
    print(text)
    if as_json:
        print(json.dumps(summary(result)))
    if markdown is not None:
        markdown.write_text(text, encoding="utf-8")
    raise typer.Exit(0 if result.lost == 0 and result.duplicated == 0 else 1)


@app.command("live")
def bench_live(
    kind: Annotated[
        list[str] | None, typer.Option("--kind", help="Fault kind to run (repeatable; default: every kind)")
    ] = None,
    work: Annotated[
        Path | None, typer.Option("--work", help="Where the jobs write (default: a temporary folder)")
    ] = None,
    wall_limit: Annotated[float, typer.Option("--wall-limit", help="Seconds each job may run")] = 120.0,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write the table as Markdown")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON too")] = False,
    slurm: Annotated[
        list[str] | None,
        typer.Option("--slurm", metavar="KIND", help="Also run this kind as a real SLURM job (repeatable)"),
    ] = None,
) -> None:
    """Real torchrun jobs with injected faults, watched live: seconds from the root event to the
    first right verdict, per kind (needs the torch extra; --slurm Debian's SLURM and munge)."""
    import tempfile

    from firstfault_bench.live import run_live, run_slurm_kinds, table
    from firstfault_sim.faults import FAULT_KINDS

    kinds = kind or ([] if slurm else list(FAULT_KINDS))  # --slurm alone runs only the SLURM jobs
    bad = [k for k in [*kinds, *(slurm or [])] if k not in FAULT_KINDS]
    if bad or wall_limit <= 0:
        raise fail(f"unknown kind(s) {bad}; choose from {', '.join(FAULT_KINDS)}" if bad else "--wall-limit > 0")
    work = work or Path(tempfile.mkdtemp(prefix="firstfault-bench-live-"))
    rows = run_live(kinds, work, wall_limit) if kinds else []
    if slurm:
        from firstfault_sim.slurm_cluster import SlurmUnavailable, missing_binaries

        if missing_binaries():
            raise fail(f"--slurm needs SLURM and munge; missing: {', '.join(missing_binaries())}")
        try:
            rows += run_slurm_kinds(slurm, work)
        except SlurmUnavailable as exc:
            raise fail(f"--slurm: {exc}") from None
    text = table(rows)
    print(text)
    if as_json:
        print(json.dumps([r.as_dict() for r in rows]))
    if markdown is not None:
        markdown.write_text(text + "\n", encoding="utf-8")
