"""``firstfault history``, ``history add``, ``history export``, ``fleet report`` and ``batch``: the
fleet's memory of verdicts (``firstfault.fleet``) on the command line.

The store is a DuckDB file: ``--store PATH``, else ``$FIRSTFAULT_STORE``, else
``$XDG_DATA_HOME/firstfault/incidents.duckdb``. DuckDB and Ray are imported when a command runs.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from firstfault.cli.common import fail, one_line, output_path

if TYPE_CHECKING:  # pragma: no cover
    from firstfault.fleet.incident import Incident
    from firstfault.fleet.store import Store

history_app = typer.Typer(help="The incident store: every verdict kept, with filters.", invoke_without_command=True)
fleet_app = typer.Typer(help="Fleet reputation: lemon nodes, recurrences, noise signatures.", no_args_is_help=True)
app = typer.Typer()

StoreOpt = Annotated[str | None, typer.Option("--store", help="Incident store: a DuckDB file, or a postgresql:// URL.")]
console = Console(highlight=False)


def store_path(store: str | None) -> Path:
    if store is not None:
        return Path(store)
    env = os.environ.get("FIRSTFAULT_STORE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "firstfault" / "incidents.duckdb"


def _where(store: str | None) -> str:
    """The store for a message: a URL without its password, or the file."""
    from firstfault.fleet.backends import URL_SCHEMES, safe_url

    return safe_url(store) if store and store.startswith(URL_SCHEMES) else str(store_path(store))


def open_store(store: str | None, read_only: bool = False) -> Store:
    from firstfault.fleet.backends import URL_SCHEMES, open_store
    from firstfault.vocab import InputError

    if store is not None and store.startswith(URL_SCHEMES):
        try:
            return open_store(store, read_only=read_only)
        except InputError as exc:
            raise fail(exc) from None
    path = store_path(store)
    if read_only and not path.exists():
        raise fail(f"{path}: no incident store yet (firstfault history add PATH... makes one)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open_store(path, read_only=read_only)
    except (InputError, OSError) as exc:
        raise fail(exc) from None


@history_app.callback()
def history(
    ctx: typer.Context,
    store: StoreOpt = None,
    host: Annotated[str | None, typer.Option("--host", help="Only incidents blaming this host.")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Only incidents blaming this GPU (HOST/PCI).")] = None,
    category: Annotated[str | None, typer.Option("--category", help="Only this category.")] = None,
    job: Annotated[str | None, typer.Option("--job", help="Only this job.")] = None,
    days: Annotated[float | None, typer.Option("--days", help="Only failures in the last N days.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many rows.")] = 20,
) -> None:
    """Recent incidents, newest first (``history add PATH...`` stores verdicts)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"store": store}
        return
    from firstfault.fleet.store import Filter
    from firstfault.vocab import Category

    if category is not None and category not in {str(c) for c in Category}:
        raise fail(f"--category: choose from {', '.join(str(c) for c in Category)}")
    since = time.time() - days * 86400 if days is not None else None
    with open_store(store, read_only=True) as s:
        flt = Filter(host, gpu, Category(category) if category else None, job, since, limit)
        rows = s.recent(flt)
        total = s.count()
    table = Table(title=f"{len(rows)} of {total:,} incident(s) in {escape(_where(store))}")
    for col in ("failed at", "job", "category", "culprit", "signature", "action"):
        table.add_column(col)
    for inc in rows:
        table.add_row(*(escape(one_line(x)) for x in _cells(inc)))
    console.print(table)


def _cells(inc: Incident) -> list[str]:
    from firstfault.vocab.timefmt import iso

    where = ", ".join(list(inc.gpus[:2]) or list(inc.hosts[:3])) or ", ".join(inc.links[:1]) or "-"
    return [
        iso(inc.failed_at) if inc.failed_at else "-",
        inc.job,
        str(inc.category),
        where,
        inc.signature or "-",
        str(inc.action),
    ]


@history_app.command("add")
def history_add(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Bundles (folder, archive, log), verdict .json or .jsonl files")],
    store: StoreOpt = None,
    workers: Annotated[int, typer.Option("--workers", help="Bundles analysed at once (process pool).")] = 1,
    show: Annotated[int, typer.Option("--show", help="Print the 'seen before' lines of at most N incidents.")] = 20,
) -> None:
    """Analyse bundles (or read verdicts) and store each verdict once (keyed by content hash);
    print, per incident, whether its GPU, host, link or signature was seen before."""
    from firstfault.fleet.reputation import fleet, seen_before

    store = store or (ctx.obj or {}).get("store")
    incidents, errors = _collect(paths, workers)
    if not incidents and errors:
        raise fail(f"nothing to add: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    with open_store(store) as s:
        new = s.add(incidents)
        noise = {x.signature for x in fleet(s).signatures if x.noise}
        for inc, fresh in list(zip(incidents, new, strict=True))[: max(0, show)]:
            head = f"{inc.job}: {inc.category}" + (f" on {', '.join(inc.hosts[:3])}" if inc.hosts else "")
            console.print(escape(one_line(head + ("" if fresh else " (already stored)"))))
            for line in seen_before(s, inc, noise):
                console.print("  " + escape(one_line(line)))
        total = s.count()
    if len(incidents) > show:
        console.print(f"... and {len(incidents) - show:,} more")
    console.print(
        f"{sum(new):,} new, {len(new) - sum(new):,} already stored, {len(errors)} unusable; {total:,} in the store"
    )
    for e in errors[:10]:
        console.print(escape(one_line(f"unusable: {e}")))


def _collect(paths: list[Path], workers: int) -> tuple[list[Incident], list[str]]:
    from firstfault.fleet.batch import run_pool
    from firstfault.fleet.incident import incident_from_verdict

    now = time.time()
    incidents: list[Incident] = []
    errors: list[str] = []
    bundles: list[Path] = []
    for p in paths:
        if p.is_file() and p.suffix in (".json", ".jsonl"):
            for where, data, key, job in _verdict_file(p, errors):
                try:
                    incidents.append(incident_from_verdict(data, job=job, source=str(p), added_at=now, key=key))
                except ValueError as exc:
                    errors.append(f"{where}: {exc}")
        elif p.exists():
            bundles.append(p)
        else:
            errors.append(f"{p}: no such file or folder")
    for r in run_pool(bundles, workers):
        if r.verdict is None:
            errors.append(f"{r.path}: {r.error}")
        else:
            incidents.append(incident_from_verdict(r.verdict, job=_job(r.path), source=r.path, added_at=now, key=r.key))
    return incidents, errors


def _job(path: str) -> str:
    name = Path(path).name
    for suffix in (".tar.gz", ".tgz", ".tar", ".zip"):
        name = name.removesuffix(suffix)
    return name


def _verdict_file(path: Path, errors: list[str]) -> Iterator[tuple[str, dict[str, Any], str | None, str]]:
    """(where, verdict, key, job) of a .json file (one verdict) or a .jsonl file: one verdict per
    line, or the lines of ``firstfault batch --out`` (the bundle's key and name kept)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(f"{path}: {exc}")
        return
    lines = text.splitlines() if path.suffix == ".jsonl" else [text]
    for n, line in enumerate(lines):
        where = f"{path}:{n + 1}"
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: not JSON ({exc.msg})")
            continue
        if not isinstance(data, dict):
            errors.append(f"{where}: not a verdict object")
        elif "tool" not in data and "path" in data and "verdict" in data:  # a batch line
            if isinstance(data["verdict"], dict):
                yield where, data["verdict"], data.get("key"), _job(str(data["path"]))
            else:
                errors.append(f"{data['path']}: {data.get('error')}")
        else:
            yield where, data, None, path.stem if len(lines) == 1 else f"{path.stem}:{n + 1}"


@history_app.command("export")
def history_export(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(help="Folder for incidents/places/signatures.parquet")],
    store: StoreOpt = None,
) -> None:
    """Export the store's tables to Parquet."""
    store = store or (ctx.obj or {}).get("store")
    if folder.exists() and not folder.is_dir():
        raise fail(f"{folder}: exists and is not a folder")
    with open_store(store, read_only=True) as s:
        for p in s.export_parquet(folder):
            console.print(escape(str(p)))


@fleet_app.command("report")
def fleet_report(
    store: StoreOpt = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write the HTML report (with plots) here.")] = None,
    hosts: Annotated[
        int | None, typer.Option("--hosts", help="Fleet size (default: the hosts the store knows).")
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Family-wise false-lemon rate (Bonferroni).")] = 0.01,
    min_jobs: Annotated[int, typer.Option("--min-jobs", help="A lemon failed at least this many jobs.")] = 3,
    top: Annotated[int, typer.Option("--top", help="Rows per table.")] = 15,
) -> None:
    """Lemon nodes, the worst hosts / GPUs / links, and signatures learnt as noise."""
    from firstfault.fleet.report import render_html
    from firstfault.fleet.reputation import Policy, fleet

    if html is not None:
        output_path(html, "html")
    if not 0 < alpha < 1 or min_jobs < 1:
        raise fail("--alpha must be in (0, 1) and --min-jobs at least 1")
    with open_store(store, read_only=True) as s:
        rep = fleet(s, Policy(alpha=alpha, min_jobs=min_jobs, hosts=hosts))
        timeline = s.timeline()
    console.print(
        f"{rep.failed:,} failed and {rep.healthy:,} healthy run(s); "
        f"lemon nodes ({len(rep.lemon_hosts())}): {escape(', '.join(rep.lemon_hosts()) or 'none')}"
    )
    table = Table(title="hosts, GPUs and links by distinct failed jobs")
    for col in ("kind", "place", "jobs", "incidents", "last seen", "trend", "p (corrected)", "lemon"):
        table.add_column(col)
    for p in rep.places[:top]:
        last = time.strftime("%Y-%m-%d", time.gmtime(p.last_seen)) if p.last_seen else "-"
        table.add_row(
            p.kind,
            escape(p.place),
            str(p.jobs),
            str(p.incidents),
            last,
            str(p.trend),
            f"{p.p_value:.2g}",
            "LEMON" if p.lemon else "",
        )
    console.print(table)
    noise = [x.signature for x in rep.signatures if x.noise]
    console.print(f"signatures learnt as noise (healthy runs print them too): {escape(', '.join(noise) or 'none')}")
    cats = Counter(str(c) for _, c in timeline)
    console.print("category mix: " + ", ".join(f"{c} {n}" for c, n in cats.most_common()))
    if html is not None:
        html.write_text(render_html(rep, timeline, top), encoding="utf-8")
        console.print(f"HTML report: {escape(str(html))}")


@app.command("batch")
def batch(
    folder: Annotated[Path, typer.Argument(help="A folder of bundles (sub-folders, archives, log files)")],
    ray: Annotated[
        bool, typer.Option("--ray", help="Run as Ray tasks (a local Ray cluster unless --ray-address).")
    ] = False,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Address of a running Ray cluster.")] = None,
    workers: Annotated[int, typer.Option("--workers", help="Processes (or Ray CPUs) to use.")] = 2,
    out: Annotated[Path | None, typer.Option("--out", help="Write one JSON line per bundle here.")] = None,
    store: Annotated[str | None, typer.Option("--store", help="Also add the verdicts to this incident store.")] = None,
) -> None:
    """Analyse every bundle of FOLDER in a local process pool, or on Ray with --ray."""
    from firstfault.fleet.batch import find_bundles, run_pool, run_ray
    from firstfault.fleet.incident import incident_from_verdict
    from firstfault.vocab import InputError

    if workers < 1:
        raise fail("--workers must be at least 1")
    if out is not None:
        output_path(out, "jsonl")
    try:
        paths = find_bundles(folder)
        t0 = time.perf_counter()
        use_ray = ray or ray_address is not None
        results = run_ray(paths, workers, ray_address) if use_ray else run_pool(paths, workers)
        seconds = time.perf_counter() - t0
    except InputError as exc:
        raise fail(exc) from None
    if out is not None:
        with out.open("w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps(r.to_dict(), separators=(",", ":")) + "\n")
    ok = [r for r in results if r.verdict is not None]
    cats = Counter(str(r.verdict["verdict"]["category"]) for r in ok if r.verdict)
    console.print(
        f"{len(results):,} bundle(s), {len(ok):,} verdict(s), {len(results) - len(ok)} unusable in {seconds:.1f} s "
        f"({len(results) / seconds:.1f} bundles/s, {'Ray' if use_ray else 'process pool'}, {workers} worker(s))"
    )
    console.print("categories: " + ", ".join(f"{c} {n}" for c, n in cats.most_common()))
    for r in results:
        if r.error:
            console.print(escape(one_line(f"unusable: {r.path}: {r.error}")))
    if store is not None:
        now = time.time()
        with open_store(store) as s:
            new = s.add(
                incident_from_verdict(r.verdict, job=_job(r.path), source=r.path, added_at=now, key=r.key)
                for r in ok
                if r.verdict
            )
        console.print(f"{sum(new):,} new incident(s) stored in {escape(_where(store))}")
