"""``firstfault mcp``: the MCP server over stdio, for an LLM agent's host to start.

Needs the mcp extra (``pip install 'firstfault[mcp]'``); imported only when the command runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from firstfault.cli.common import fail

app = typer.Typer()


@app.command("mcp")
def mcp_server(
    allow_root: Annotated[
        list[Path] | None,
        typer.Option("--allow-root", metavar="DIR", help="A folder whose bundles the tools may read (repeatable)"),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help="Incident store for list_incidents: a DuckDB file or postgresql:// URL"),
    ] = None,
) -> None:
    """Serve the analyze / explain_event / list_incidents tools over stdio (MCP), read-only."""
    try:
        from firstfault.mcp.server import serve_stdio
        from firstfault.mcp.tools import ToolConfig
        from firstfault.pathpolicy import allowed_roots
    except ImportError as exc:  # pragma: no cover - the extra is not installed
        raise fail(f"the MCP server needs its extra: pip install 'firstfault[mcp]' ({exc})") from None
    try:
        import mcp.server.mcpserver  # noqa: F401 - fail here, in one line, not at the first request
    except ImportError as exc:
        raise fail(f"the MCP server needs its extra: pip install 'firstfault[mcp]' ({exc})") from None
    try:
        roots = allowed_roots(allow_root or [])
    except OSError as exc:
        raise fail(f"--allow-root: {exc}") from None
    serve_stdio(ToolConfig(roots=roots, store=store or os.environ.get("FIRSTFAULT_STORE") or None))
