"""``firstfault serve``: the service (FastAPI on uvicorn), and ``serve token add USER`` for its tokens.

Needs the service extra (``pip install 'firstfault[service]'``); imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from firstfault.cli.common import fail

app = typer.Typer(help="Run firstfault as an HTTP service (needs firstfault\\[service]).", no_args_is_help=False)
token_app = typer.Typer(help="API tokens of the service's users.", no_args_is_help=True)
app.add_typer(token_app, name="token")

DataDir = Annotated[Path, typer.Option("--data", help="The service's folder: its queue, verdicts, tokens and uploads")]
DEFAULT_DATA = Path("firstfault-service")
Store = Annotated[
    str | None,
    typer.Option("--store", help="postgresql://... for a queue shared by several servers (default: SQLite in --data)"),
]


@app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    data: DataDir = DEFAULT_DATA,
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8000,
    allow_root: Annotated[
        list[Path] | None,
        typer.Option("--allow-root", metavar="DIR", help="A folder whose bundles may be submitted by path"),
    ] = None,
    workers: Annotated[int, typer.Option(help="Analyses run at once (each in its own process)")] = 2,
    max_upload_mb: Annotated[int, typer.Option(help="Largest upload accepted (MiB)")] = 256,
    max_unpacked_mb: Annotated[int, typer.Option(help="Most an uploaded archive may unpack to (MiB)")] = 2048,
    rate: Annotated[float, typer.Option(help="Requests a second per user (0: no limit)")] = 20.0,
    burst: Annotated[float, typer.Option(help="Requests a user may make at once before the rate applies")] = 100.0,
    store: Store = None,
    lease_s: Annotated[
        float,
        typer.Option("--lease-s", help="Seconds a claimed job is held without news before another server takes it"),
    ] = 60.0,
) -> None:
    """Serve the API until interrupted. Start it with a token: ``firstfault serve token add USER``."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        import uvicorn

        from firstfault.service.app import ServiceConfig, create_app, preflight
        from firstfault.service.paths import allowed_roots
        from firstfault.service.worker import WorkerConfig
        from firstfault.vocab import InputError
    except ImportError as exc:
        raise fail(f"the service needs its extra: pip install 'firstfault[service]' ({exc})") from None
    if workers < 1 or max_upload_mb < 1 or max_unpacked_mb < 1 or lease_s < 1:
        raise fail("--workers, --max-upload-mb, --max-unpacked-mb and --lease-s must be at least 1")
    try:
        roots = allowed_roots(allow_root or [])
    except OSError as exc:
        raise fail(f"--allow-root: {exc}") from None
    config = ServiceConfig(
        data_dir=data.resolve(),
        roots=roots,
        max_upload=max_upload_mb * 1024**2,
        rate=rate,
        burst=burst,
        worker=WorkerConfig(workers=workers, max_unpacked=max_unpacked_mb * 1024**2, lease_s=lease_s),
        store_url=store,
    )
    if store is not None and not store.startswith(("postgresql://", "postgres://")):
        raise fail("--store takes a postgresql:// URL (the default is SQLite in the data folder)")
    try:
        preflight(config)
    except (RuntimeError, ValueError, OSError, InputError) as exc:
        raise fail(exc) from None
    uvicorn.run(create_app(config), host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)


@token_app.command("add")
def token_add(
    user: Annotated[str, typer.Argument(help="Who the token is for")], data: DataDir = DEFAULT_DATA, store: Store = None
) -> None:
    """Make a token for USER and print it, once: only its hash is kept."""
    from firstfault.service.app import open_store
    from firstfault.service.auth import new_token
    from firstfault.vocab import InputError

    try:
        jobs = open_store(data.resolve(), store)
    except (ValueError, InputError) as exc:
        raise fail(exc) from None
    try:
        print(new_token(jobs, user))
    except ValueError as exc:
        raise fail(exc) from None
    finally:
        jobs.close()
