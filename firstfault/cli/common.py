"""What every command shares: the stderr console, the one-line error that exits 2, and the checks on
the paths a command will write, so that a bad output path is one line too, never a traceback."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

err = Console(stderr=True, soft_wrap=True)


def fail(exc: object, code: int = 2) -> typer.Exit:
    """Print a clear one-line error (no markup interpretation of user text) and exit."""
    err.print(Text("firstfault: ", style="bold red") + Text(one_line(str(exc))))
    return typer.Exit(code)


def one_line(text: str) -> str:
    """Text from a bundle, safe for a terminal: control characters (escape sequences, bells,
    carriage returns) become visible escapes, and newlines spaces, so it stays one line."""
    out = []
    for ch in text:
        o = ord(ch)
        if ch in "\n\t":
            out.append(" ")
        elif o < 32 or o == 127 or 0x80 <= o < 0xA0:
            out.append(f"\\x{o:02x}")
        else:
            out.append(ch)
    return "".join(out)


def output_path(path: Path, what: str) -> Path:
    """Where a report will be written: its folder is created; a folder or an unwritable place is an
    input error (exit 2, one line), found before the analysis runs rather than after."""
    if path.is_dir():
        raise fail(f"{path}: is a directory; give the {what} report a file name (e.g. {path / ('report.' + what)})")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"{path}: cannot create its folder ({exc.strerror or exc})") from None
    return path
