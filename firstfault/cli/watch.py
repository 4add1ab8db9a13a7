"""``firstfault watch PATH``: follow a running job's logs and say what broke while it breaks.

A thin shell over ``firstfault.live.watch``; inotify needs the live extra
(``pip install 'firstfault[live]'``), polling (``--poll``) needs nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from firstfault.cli.common import fail, one_line, output_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from firstfault.live.watch import Update

app = typer.Typer()


def _terminal(console: Console) -> Callable[[Update], None]:
    def show(up: Update) -> None:
        v = up.verdict
        ranks = ",".join(str(r) for r in v.culprit.ranks) or "?"
        stamp = time.strftime("%H:%M:%S", time.localtime(up.observed_at))
        tag = "final" if up.final else up.trigger
        line = Text(f"[{stamp}] ", style="dim") + Text(f"{v.category}", style="bold red")
        line += Text(f" rank {ranks} ({tag}, confidence {v.confidence:.2f}): ") + Text(one_line(v.summary))
        console.print(line)

    return show


@app.command()
def watch(
    path: Annotated[Path, typer.Argument(help="The running job's log directory (it may not exist yet)")],
    jsonl: Annotated[Path | None, typer.Option("--jsonl", help="Append each verdict as a JSON line here")] = None,
    webhook: Annotated[str | None, typer.Option("--webhook", help="POST each verdict as JSON to this URL")] = None,
    poll: Annotated[bool, typer.Option("--poll", help="Poll instead of inotify (network file systems)")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between polls and silence checks")] = 0.25,
    until_exit: Annotated[
        bool, typer.Option("--until-exit", help="Stop when the job ends (torchrun's final report, or --pid gone)")
    ] = False,
    pid: Annotated[int | None, typer.Option("--pid", help="The launcher's process: the job ends when it does")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Stop after this many seconds")] = None,
    silence_k: Annotated[
        float, typer.Option("--silence-k", help="A rank is silent after this many median step times without progress")
    ] = 5.0,
    silence_floor: Annotated[
        float, typer.Option("--silence-floor", help="... and never sooner than this many seconds")
    ] = 3.0,
    min_confidence: Annotated[
        float, typer.Option("--min-confidence", help="Say a reading only from this confidence on (the final always)")
    ] = 0.4,
    signatures: Annotated[
        list[Path] | None,
        typer.Option("--signatures", metavar="PATH", help="Extra signature directory or file (repeatable)"),
    ] = None,
) -> None:
    """Follow PATH as the job writes it; print a verdict as soon as a root is decided, then each change."""
    from firstfault.live.emit import JsonlSink, WebhookSink
    from firstfault.live.silence import SilenceSettings
    from firstfault.live.watch import Sink, WatchOptions
    from firstfault.live.watch import watch as run_watch
    from firstfault.match.registry import load_registry
    from firstfault.vocab import InputError

    if interval <= 0 or silence_k <= 0 or silence_floor < 0 or (timeout is not None and timeout <= 0):
        raise fail("--interval, --silence-k and --timeout must be positive, --silence-floor not negative")
    if not 0 <= min_confidence <= 1:
        raise fail("--min-confidence must be between 0 and 1")
    if path.exists() and not path.is_dir():
        raise fail(f"{path}: not a directory; watch follows a job's log directory")
    if webhook is not None and not webhook.startswith(("http://", "https://")):
        raise fail(f"--webhook {webhook}: not an http(s) URL")
    if jsonl is not None and jsonl.resolve().is_relative_to(path.resolve()):
        raise fail(f"--jsonl {jsonl}: inside the watched directory; write it elsewhere")
    try:
        registry = load_registry(signatures or [])
    except InputError as exc:
        raise fail(exc) from None
    console = Console(soft_wrap=True)
    sinks: list[Sink] = [_terminal(console)]
    if jsonl is not None:
        sinks.append(JsonlSink(output_path(jsonl, "jsonl")))
    if webhook is not None:
        sinks.append(WebhookSink(webhook))
    opts = WatchOptions(
        poll=poll,
        interval_s=interval,
        timeout_s=timeout,
        until_exit=until_exit or pid is not None,
        pid=pid,
        silence=SilenceSettings(silence_k, silence_floor),
        min_confidence=min_confidence,
    )
    last = run_watch(path, registry, sinks, opts)
    if last is None and not path.is_dir():
        raise fail(f"{path}: never appeared while watched; no verdict")
    if last is None:  # as `analyze` on a folder without a job's log: said so, exit 2
        raise fail(f"{path}: no verdict: nothing in the directory was a job's log")
