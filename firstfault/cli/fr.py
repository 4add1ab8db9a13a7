"""``firstfault fr PATH...``: analyse flight-recorder dumps (a directory, a bundle, or the files).

Mounted by the main CLI as one more command (``registered_commands``); it takes one or more paths,
so a shell glob (``fr dumps/fr_trace_*``) works.  Exit
codes: 0 when an analysis was produced (culprits or not), 2 when the input is
unusable (no dumps, every file refused or broken).  Errors are printed as one
line, never as a traceback, because the people running this are mid-incident.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from firstfault.cli.common import fail, one_line
from firstfault.vocab import settings
from firstfault.vocab.flightrec import compress_ranks

if TYPE_CHECKING:  # the analysis is imported when the command runs: --help stays fast
    from firstfault.flightrec.records import FRLoadResult
    from firstfault.vocab.flightrec import FRAnalysis

DEFAULT_MAX_BYTES = settings.current().limits.fr_dump_bytes

__all__ = ["app", "run_fr"]

app = typer.Typer(add_completion=False, no_args_is_help=True)

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_UNUSABLE = 2


def _parse_hints(values: list[str]) -> dict[str, list[int]]:
    """``NAME=0,1,2`` or ``NAME=0-3`` strings -> {NAME: [ranks]}."""
    out: dict[str, list[int]] = {}
    for v in values:
        name, sep, spec = v.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected NAME=RANKS, got {v!r}")
        ranks: list[int] = []
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                a, b = part.split("-", 1)
                ranks.extend(range(int(a), int(b) + 1))
            else:
                ranks.append(int(part))
        out[name.strip()] = ranks
    return out


def run_fr(
    paths: Path | list[Path],
    *,
    as_json: bool = False,
    world_size: int | None = None,
    hints: dict[str, list[int]] | None = None,
    top: int = 20,
    max_bytes: int = DEFAULT_MAX_BYTES,
    console: Console | None = None,
) -> int:
    """Load, analyse and print; returns the exit code (the Typer command wraps it)."""
    out = console or Console(highlight=False, soft_wrap=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    given = [paths] if isinstance(paths, Path) else list(paths)
    path = given[0] if len(given) == 1 else Path(f"{given[0]} (and {len(given) - 1} more)")
    try:
        missing = [p for p in given if not p.exists()]
        if missing:
            return _fail(as_json, err, f"{missing[0]}: no such file or directory")
        from firstfault.flightrec.analyze import analyze_fr
        from firstfault.flightrec.load import load_dumps

        loaded = load_dumps([str(p) for p in given], max_bytes=max_bytes)
        if not loaded.dumps:
            why = "no usable flight-recorder dumps"
            if loaded.issues:
                refused = len(loaded.refused)
                why += (
                    f" ({len(loaded.issues)} file(s) unusable"
                    + (f", {refused} refused as unsafe" if refused else "")
                    + ")"
                )
            first = loaded.issues[0].message if loaded.issues else ""
            return _fail(as_json, err, f"{path}: {why}" + (f"; first: {first}" if first else ""), loaded)
        if world_size is None and loaded.unusable_ranks:
            world_size = loaded.world_size_hint  # a broken dump still proves the rank exists
        analysis = analyze_fr(loaded.dumps, expected_world_size=world_size, group_hints=hints)
    except Exception as exc:
        return _fail(
            as_json,
            err,
            f"internal error while analysing {path}: {type(exc).__name__}: {exc}",
            code=EXIT_INTERNAL,
        )
    if as_json:
        payload: dict[str, Any] = analysis.to_dict()
        payload["load"] = loaded.to_dict()
        payload["path"] = str(path)
        sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False) + "\n")
        return EXIT_OK
    _print(out, path, loaded, analysis, top)
    return EXIT_OK


def _fail(
    as_json: bool, err: Console, message: str, loaded: FRLoadResult | None = None, code: int = EXIT_UNUSABLE
) -> int:
    if as_json:
        payload: dict[str, Any] = {"error": message, "exit_code": code}
        if loaded is not None:
            payload["load"] = loaded.to_dict()
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        err.print(Text("firstfault: ", style="bold red") + Text(one_line(message)))
    return code


def _print(out: Console, path: Path, loaded: FRLoadResult, a: FRAnalysis, top: int) -> None:
    out.print(
        Text("Flight recorder", style="bold")
        + Text(
            f": {one_line(str(path))}  ({a.ranks_with_dumps} dump(s), world {a.world_size}, "
            f"backend {one_line(a.backend or '?')})"
        )
    )
    out.print(Text("Verdict", style="bold") + Text(": " + one_line(a.verdict)))
    if a.culprits:
        t = Table(title="Culprit ranks (best first)", show_lines=True, expand=True)
        t.add_column("#", justify="right", no_wrap=True)
        t.add_column("rank", justify="right", no_wrap=True)
        t.add_column("kind", no_wrap=True)
        t.add_column("score", justify="right", no_wrap=True)
        t.add_column("group / op", overflow="fold", max_width=34)
        t.add_column("why", overflow="fold", ratio=3)
        for i, c in enumerate(a.culprits[:top], 1):
            where = (
                (f"{c.pg_desc} (pg {c.pg})" if c.pg_desc and c.pg_desc != "undefined" else f"pg {c.pg}")
                if c.pg
                else "-"
            )
            opline = f"{c.op} #{c.seq}" if c.op and c.seq is not None else (c.op or "")
            why = c.reason
            if c.frames:
                why += "\n  at " + "\n  at ".join(c.frames[:3])
            t.add_row(
                *(_cell(x) for x in (str(i), str(c.rank), c.kind, f"{c.score:.3f}", f"{where}\n{opline}".strip(), why))
            )
        out.print(t)
        if len(a.culprits) > top:
            out.print(f"... {len(a.culprits) - top} more culprit(s) (use --top or --json)")
    active = [g for g in a.groups if g.state not in ("ok", "idle")]
    if active:
        t = Table(title="Process groups (where the hang started first)", expand=True)
        for col in (
            "pg",
            "desc",
            "state",
            "seq / op",
            "waiting",
            "missing",
            "stalled",
            "mismatched",
            "explained",
        ):
            t.add_column(col, overflow="fold")
        for g in active[:top]:
            t.add_row(
                _cell(g.pg),
                _cell(g.desc),
                Text(one_line(g.state), style="bold" if g.origin else ""),
                _cell(f"#{g.seq} {g.op or ''}".strip() if g.seq is not None else (g.op or "")),
                compress_ranks(g.waiting),
                compress_ranks(g.missing + g.no_dump),
                compress_ranks(g.stalled),
                compress_ranks(g.mismatched),
                _cell(
                    "; ".join(f"{r}: {v}" for r, v in list(g.explained.items())[:2])
                    + (" ..." if len(g.explained) > 2 else "")
                ),
            )
        out.print(t)
        if len(active) > top:
            out.print(f"... {len(active) - top} more group(s) not idle")
    warnings = loaded.warnings + [w for w in a.warnings if w not in loaded.warnings]
    if warnings:
        out.print("[bold yellow]Warnings[/]", markup=True)
        for w in warnings[:30]:
            out.print(Text(f"  - {one_line(w)}"))
        if len(warnings) > 30:
            out.print(f"  ... {len(warnings) - 30} more")


def _cell(text: str) -> Text:
    """A table cell from dump text: never read as Rich markup, control characters made visible."""
    return Text("\n".join(one_line(line) for line in text.split("\n")))


@app.command("fr")
def fr(
    paths: Annotated[
        list[Path],
        typer.Argument(help="A directory of per-rank dumps, a bundle with fr/ inside, or dump files (a glob works)."),
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    world_size: Annotated[
        int | None,
        typer.Option("--world-size", help="Expected number of ranks (counts ranks that wrote no dump)."),
    ] = None,
    hint: Annotated[
        list[str] | None,
        typer.Option("--group", help="Group membership hint NAME=RANKS (e.g. 1=0,1 or default_pg=0-15); repeatable."),
    ] = None,
    top: Annotated[int, typer.Option("--top", help="How many culprits/groups to print.")] = 20,
    max_mb: Annotated[int, typer.Option("--max-mb", help="Largest dump file accepted, in MB.")] = DEFAULT_MAX_BYTES
    // (1024 * 1024),
) -> None:
    """Analyse PyTorch flight-recorder dumps: name the rank(s) that caused a hang or desync."""
    try:
        hints = _parse_hints(hint or []) if hint else None
    except (ValueError, typer.BadParameter) as exc:
        raise fail(f"bad --group value: {exc}") from None
    code = run_fr(paths, as_json=json_out, world_size=world_size, hints=hints, top=top, max_bytes=max_mb * 1024 * 1024)
    raise typer.Exit(code)


if __name__ == "__main__":  # pragma: no cover - used by ``firstfault bench fr``
    app()
