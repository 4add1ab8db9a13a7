"""What every command shares: the stderr console and the one-line error that exits 2."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.text import Text

err = Console(stderr=True, soft_wrap=True)


def fail(exc: object, code: int = 2) -> typer.Exit:
    """Print a clear one-line error (no markup interpretation of user text) and exit."""
    err.print(Text("firstfault: ", style="bold red") + Text(str(exc)))
    return typer.Exit(code)
