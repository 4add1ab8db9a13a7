"""The ``firstfault`` command line (Typer + Rich).

Every command is a thin shell over a pure function, so that what the CLI does a service or
a batch job can do too. Exit codes: 0 a verdict (or report), 2 unusable input.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from firstfault import __version__

app = typer.Typer(
    help="Find the first failure in a failed distributed training job.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
bench_app = typer.Typer(
    help="Benchmarks: accuracy on labelled bundles, speed against grep -E.", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")
err = Console(stderr=True, soft_wrap=True)


def _fail(exc: object, code: int = 2) -> typer.Exit:
    """Print a clear one-line error (no markup interpretation of user text) and exit."""
    from rich.text import Text

    err.print(Text("firstfault: ", style="bold red") + Text(str(exc)))
    return typer.Exit(code)


def _mount(module: str, name: str, help_: str) -> None:
    """Mount an optional sub-app; a missing extra must not break the rest of the CLI."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return
    app.add_typer(mod.app, name=name, help=help_)


_mount(
    "firstfault.simulate.cli_group",
    "simulate",
    "Simulate failures on real workloads (needs firstfault[torch]).",
)
_mount("firstfault.flightrec.cli", "fr", "Analyse PyTorch flight-recorder dumps.")


@app.command()
def version() -> None:
    """Print the version and the verdict schema version."""
    from firstfault.vocab import SCHEMA_VERSION

    print(f"firstfault {__version__} (verdict schema {SCHEMA_VERSION})")


@app.command()
def analyze(
    path: Annotated[Path, typer.Argument(help="Bundle directory, .tar.gz, or a single log file")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the verdict as one JSON object")] = False,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Write a Markdown report here")] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report here")
    ] = None,
    signatures: Annotated[
        list[Path] | None, typer.Option("--signatures", help="Extra signature directory or file (repeatable)")
    ] = None,
) -> None:
    """Analyse what a failed job left behind and print the verdict."""
    from firstfault.discover import BundleError
    from firstfault.match.registry import SignatureError
    from firstfault.pipeline import analyze as run

    try:
        verdict = run(path, signatures or [])
    except (BundleError, SignatureError) as exc:
        raise _fail(exc) from None
    v = verdict.to_dict() if (markdown or html) else {}  # the full dict only for the full reports
    if markdown:
        from firstfault.report.markdown import render_markdown

        markdown.write_text(render_markdown(v), encoding="utf-8")
    if html:
        from firstfault.report.html import write_html

        write_html(v, html)
    if json_out:
        from firstfault.report.json_out import write_json

        write_json(verdict, sys.stdout)
    else:
        from firstfault.report.json_out import terminal_dict
        from firstfault.report.terminal import render

        render(v or terminal_dict(verdict))
        for p, what in ((markdown, "Markdown"), (html, "HTML")):
            if p:
                err.print(f"{what} report written to {p}")


@app.command("signatures")
def signatures_cmd(
    extra: Annotated[list[Path] | None, typer.Option("--signatures", help="Extra signature dir/file")] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Verify every example line matches its pattern")
    ] = False,
) -> None:
    """List the signature registry (built-in plus --signatures), or check it."""
    from rich.table import Table

    from firstfault.match.registry import SignatureError, load_registry

    try:
        reg = load_registry(extra or [])
    except SignatureError as exc:
        raise _fail(exc) from None
    if check:
        from firstfault.match.check import check_registry

        problems = check_registry(reg)
        for p in problems:
            err.print(p, style="red", markup=False)
        print(f"{len(reg.signatures)} signatures, {len(problems)} problem(s)")
        raise typer.Exit(1 if problems else 0)
    t = Table(title=f"{len(reg.signatures)} signatures")
    for col in ("id", "category", "layer", "role", "source"):
        t.add_column(col, overflow="fold")
    for s in reg.signatures:
        t.add_row(s.id, str(s.category), str(s.layer), str(s.role), s.source[:60])
    Console().print(t)


@bench_app.command("accuracy")
def bench_accuracy(
    cases: Annotated[
        Path | None, typer.Argument(help="Directory of bundles, each with a truth.json")
    ] = None,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="A corpus of real logs (log.txt + label.toml per case) instead"),
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the table as Markdown")
    ] = None,
) -> None:
    """Per-case accuracy table against truth.json (next to the naive and torchrun baselines), or on a
    labelled corpus of real logs with --corpus."""
    if corpus is not None:
        from firstfault.bench.corpus import run_corpus

        run_corpus(corpus, markdown)
        raise typer.Exit(0)
    if cases is None:
        raise _fail("give a directory of bundles, or --corpus DIR")
    from firstfault.bench.accuracy import run_accuracy

    code = run_accuracy(cases, markdown)
    raise typer.Exit(code)


@bench_app.command("generate")
def bench_generate(
    out: Annotated[Path, typer.Argument(help="Directory to write the labelled bundles into")],
    count: Annotated[int, typer.Option(help="How many bundles")] = 25,
    seed: Annotated[int, typer.Option(help="Seed of the case plan")] = 0,
    jobs: Annotated[int, typer.Option(help="Simulations run at once")] = 2,
) -> None:
    """Generate a labelled case set with the real simulator (needs firstfault[torch])."""
    from firstfault.bench.cases import generate

    paths = generate(out, count=count, seed=seed, jobs=jobs)
    print(f"wrote {len(paths)} bundles under {out}")


@bench_app.command("speed")
def bench_speed(
    path: Annotated[Path, typer.Argument(help="A bundle to time")],
    repeat: Annotated[int, typer.Option(help="Runs of each tool")] = 3,
) -> None:
    """Analysis throughput against grep -E over the same bytes (the ratio is the figure)."""
    from firstfault.bench.speed import run_speed

    run_speed(path, repeat)


@bench_app.command("inflate")
def bench_inflate(
    src: Annotated[Path, typer.Argument(help="A real bundle")],
    dst: Annotated[Path, typer.Argument(help="Where to write the inflated bundle")],
    copies: Annotated[int, typer.Option(help="How many host copies")] = 100,
) -> None:
    """Make a bigger bundle for `bench speed` by copying a real one onto many hosts."""
    from firstfault.bench.speed import inflate

    n = inflate(src, dst, copies)
    print(f"wrote {n / 1e6:.1f} MB under {dst}")


def _mount_bench(module: str, attr: str, name: str) -> None:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return
    fn = getattr(mod, attr, None)
    if fn is not None:
        bench_app.command(name)(fn)


_mount_bench("firstfault.flightrec.bench", "bench_fr_command", "fr")
_mount_bench("firstfault.report.bench_html", "bench_html_command", "html")
_mount_bench("firstfault.bench.scale", "bench_scale_accuracy_command", "scale-accuracy")
_mount_bench("firstfault.bench.scale", "bench_scale_speed_command", "scale-speed")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        raise SystemExit(130) from None


if __name__ == "__main__":  # pragma: no cover
    main()
