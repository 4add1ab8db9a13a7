"""The ``firstfault`` command line (Typer + Rich): the only package that imports Typer.

Every command is a thin shell over a pure function, so that what the CLI does a service or a batch
job can do too. Commands are mounted by plain imports (a broken import is an error, not a command
that silently vanishes); the heavy work is imported inside each command. Exit codes: 0 a verdict
(or report), 2 unusable input.
"""

from __future__ import annotations

import typer

from firstfault.cli import analyze, bench, fr, simulate

app = typer.Typer(
    help="Find the first failure in a failed distributed training job.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.registered_commands.extend(analyze.app.registered_commands)  # analyze, signatures, version
app.add_typer(fr.app, name="fr", help="Analyse PyTorch flight-recorder dumps.")
app.add_typer(
    simulate.app,
    name="simulate",
    help="Simulate failures on real workloads (needs the torch extra: pip install 'firstfault\\[torch]').",
)
app.add_typer(bench.app, name="bench")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        raise SystemExit(130) from None


if __name__ == "__main__":  # pragma: no cover
    main()
