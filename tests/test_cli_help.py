"""Every command's help says what its source says: no text lost to Rich markup.

Help strings are Rich markup in Typer, so ``firstfault[torch]`` printed as ``firstfault`` and
``KIND[@TIME][:TARGET]`` as ``KIND[:TARGET]`` (issue 13). This renders ``--help`` of every
command and checks that each bracketed phrase of its docstring and option help is there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from firstfault.cli import app

BRACKETED = re.compile(r"\\?\[[^\]\s]*\]")


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under ``group`` (Typer vendors its own click: duck-typed, not isinstance)."""
    yield path, group
    for name, cmd in (getattr(group, "commands", None) or {}).items():
        yield from _commands(cmd, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) or "firstfault" for p, _ in COMMANDS])
def test_help_keeps_every_bracketed_phrase(path: tuple[str, ...], cmd: Any) -> None:
    texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    wanted = {m.group(0).lstrip("\\") for t in texts for m in BRACKETED.finditer(t)}
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    lost = sorted(w for w in wanted if w not in flat)
    assert not lost, f"{' '.join(path)} --help lost {lost}"


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) or "firstfault" for p, _ in COMMANDS])
def test_help_shows_no_python_types(path: tuple[str, ...], cmd: Any) -> None:
    """A flag takes no value: no ``<bool>`` beside it; no ``<list[Path]>`` either (issue 13)."""
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output and "list[" not in res.output, res.output
