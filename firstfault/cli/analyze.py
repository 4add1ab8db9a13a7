"""``firstfault analyze``, ``signatures`` and ``version``: the product's own commands.

Each is a thin shell over a pure function (``pipeline.analyze``, the registry, the reports), imported
when the command runs so that ``--help`` and ``version`` start fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from firstfault import __version__
from firstfault.cli.common import err, fail, output_path

app = typer.Typer()


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
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report here")] = None,
    signatures: Annotated[
        list[Path] | None,
        typer.Option("--signatures", metavar="PATH", help="Extra signature directory or file (repeatable)"),
    ] = None,
) -> None:
    """Analyse what a failed job left behind and print the verdict."""
    from firstfault.pipeline import analyze as run
    from firstfault.vocab import InputError

    markdown = output_path(markdown, "md") if markdown else None
    html = output_path(html, "html") if html else None
    try:
        verdict = run(path, signatures or [])
    except InputError as exc:
        if json_out:  # a JSON consumer gets an object either way, as from `fr --json`
            print(json.dumps({"error": str(exc), "exit_code": 2}))
        raise fail(exc) from None
    v = verdict.to_dict() if (markdown or html) else {}  # the full dict only for the full reports
    try:
        if markdown:
            from firstfault.report.markdown import render_markdown

            markdown.write_text(render_markdown(v), encoding="utf-8", errors="replace")
        if html:
            from firstfault.report.html import write_html

            write_html(v, html)
    except OSError as exc:
        raise fail(f"cannot write the report: {exc.strerror or exc} ({exc.filename or ''})") from None
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
    extra: Annotated[
        list[Path] | None, typer.Option("--signatures", metavar="PATH", help="Extra signature dir/file")
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Verify every example line matches its pattern")] = False,
) -> None:
    """List the signature registry (built-in plus --signatures), or check it."""
    from rich.table import Table

    from firstfault.match.registry import load_registry
    from firstfault.vocab import SignatureError

    try:
        reg = load_registry(extra or [])
    except SignatureError as exc:
        raise fail(exc) from None
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
