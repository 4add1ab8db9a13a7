"""The ``firstfault`` command line (Typer + Rich): the only package that imports Typer.

Every command is a thin shell over a pure function, so that what the CLI does a service or a batch
job can do too. Commands are mounted by plain imports (a broken import is an error, not a command
that silently vanishes); the heavy work is imported inside each command. Exit codes: 0 a verdict
(or report), 2 unusable input.
"""

from __future__ import annotations

import re
from typing import Any

import typer
import typer.core

from firstfault.cli import analyze, audit, bench, fleet, fr, mcp, serve, simulate, slurm, stress, watch


def _help_shows_no_python_types() -> None:
    """Help rows name what the user types, not the Python annotation behind it.

    Why: Typer (0.2x) prints every parameter's Python type in its help: ``--json <bool>``, which
    reads as if the flag wanted a value, and ``verdicts... <list[Path]>`` (issue 13). A flag's
    row shows nothing there; a repeated value shows its element, ``<path>...``; the rest keep
    Typer's words (``<path>``, ``<int>``, or the metavar the command sets).
    """
    for name in ("TyperOption", "TyperArgument"):
        cls = getattr(typer.core, name, None)
        shown = getattr(cls, "display_type_rich", None)
        if cls is None or shown is None or getattr(shown, "_firstfault", False):
            continue
        cls.display_type_rich = _user_words(shown)


def _user_words(shown: Any) -> Any:
    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and self.metavar is None:
            return None
        text = shown(self, ctx)
        return _LIST_TYPE.sub(lambda m: f"<{m[1].lower()}>", text) if isinstance(text, str) else text

    display_type_rich._firstfault = True  # type: ignore[attr-defined]
    return display_type_rich


_LIST_TYPE = re.compile(r"<list\[(\w+)\]>")
_help_shows_no_python_types()

app = typer.Typer(
    help="Find the first failure in a failed distributed training job.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.registered_commands.extend(analyze.app.registered_commands)  # analyze, signatures, version
app.registered_commands.extend(fr.app.registered_commands)  # fr PATH...
app.registered_commands.extend(audit.app.registered_commands)  # audit LAYOUT
app.registered_commands.extend(stress.app.registered_commands)  # stress --out DIR
app.add_typer(
    simulate.app,
    name="simulate",
    help="Simulate failures on real workloads (needs the torch extra: pip install 'firstfault\\[torch]').",
)
app.add_typer(bench.app, name="bench")
app.add_typer(fleet.history_app, name="history")
app.add_typer(fleet.fleet_app, name="fleet")
app.registered_commands.extend(fleet.app.registered_commands)  # batch DIR
app.add_typer(serve.app, name="serve")
app.add_typer(slurm.app, name="slurm")
app.registered_commands.extend(mcp.app.registered_commands)  # mcp
app.registered_commands.extend(watch.app.registered_commands)  # watch PATH


def _interrupted(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _fast_version() -> bool:
    """``firstfault --version`` / ``version`` answered before Typer and the commands are imported."""
    import sys

    if sys.argv[1:] in (["--version"], ["version"], ["-V"]):
        from firstfault import __version__
        from firstfault.vocab.records import SCHEMA_VERSION

        print(f"firstfault {__version__} (verdict schema {SCHEMA_VERSION})")
        return True
    return False


def main() -> None:
    """Run the command; whatever escapes a command is still one line, never a traceback.

    Input that exhausts memory or nests past the interpreter's limit is unusable input (exit 2);
    anything else is a bug in firstfault (exit 1), said as such. ``FIRSTFAULT_DEBUG=1`` re-raises
    to show the traceback.
    """
    import os
    import signal

    from firstfault.cli.common import fail

    # SIGTERM (a scheduler's, a `timeout`'s) unwinds like Ctrl-C, so temporary folders are removed
    signal.signal(signal.SIGTERM, _interrupted)
    if _fast_version():
        return
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        raise SystemExit(130) from None
    except (MemoryError, RecursionError) as exc:
        if os.environ.get("FIRSTFAULT_DEBUG"):
            raise
        what = "memory" if isinstance(exc, MemoryError) else "the nesting depth Python allows"
        raise SystemExit(fail(f"the input needs more {what} than firstfault will use; refused").exit_code) from None
    except Exception as exc:
        if os.environ.get("FIRSTFAULT_DEBUG"):
            raise
        raise SystemExit(
            fail(f"internal error ({type(exc).__name__}: {exc}); this is a bug, please report it", code=1).exit_code
        ) from None


if __name__ == "__main__":  # pragma: no cover
    main()
