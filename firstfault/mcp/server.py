"""The MCP server: the three tools registered on ``mcp``'s ``MCPServer`` (FastMCP in mcp 1.x),
served over stdio.

Every tool is annotated read-only, idempotent and closed-world (it reads the allowed roots and
the store, nothing else). A :class:`~firstfault.mcp.tools.ToolRefusal` becomes an MCP tool
error with its one-line reason (``isError``), never a stack trace on the wire. Nothing is
printed to standard output but the protocol: it is the transport.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from firstfault.mcp import tools
from firstfault.mcp.tools import ToolConfig, ToolRefusal

INSTRUCTIONS = (
    "firstfault finds the first failure in a failed distributed training job. Call analyze with "
    "a bundle's absolute path (a job's log folder, a .tar.gz or one log) under the allowed roots; "
    "explain_event tells why one event of that verdict is the root or what it follows from; "
    "list_incidents searches past verdicts in the fleet's incident store."
)


def build_server(config: ToolConfig) -> Any:
    """An ``MCPServer`` with the tools bound to ``config`` (needs the mcp extra)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    import firstfault

    server = MCPServer(name="firstfault", instructions=INSTRUCTIONS, version=firstfault.__version__)
    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    @server.tool(annotations=read_only)
    def analyze(
        path: Annotated[str, Field(description="Absolute path of the bundle under an allowed root")],
    ) -> dict[str, Any]:
        """Analyse a failed job's bundle; the verdict JSON (category, culprit, action, root event, chain)."""
        try:
            return tools.analyze(path, config)
        except ToolRefusal as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=read_only)
    def explain_event(
        path: Annotated[str, Field(description="Absolute path of the bundle under an allowed root")],
        event_id: Annotated[int | None, Field(description="An event id from the verdict (default: the root)")] = None,
        rank: Annotated[int | None, Field(description="Or a rank: its first event in the chain")] = None,
    ) -> dict[str, Any]:
        """One event of the bundle's verdict: its role in the causal chain, why, and the links to the root."""
        try:
            return tools.explain_event(path, config, event_id=event_id, rank=rank)
        except ToolRefusal as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=read_only)
    def list_incidents(
        category: Annotated[str | None, Field(description="Only this verdict category (e.g. gpu_hardware)")] = None,
        host: Annotated[str | None, Field(description="Only incidents blaming this host")] = None,
        job: Annotated[str | None, Field(description="Only this job")] = None,
        days: Annotated[float | None, Field(description="Only failures in the last N days")] = None,
        limit: Annotated[int, Field(description="At most this many (1-200)")] = 20,
    ) -> dict[str, Any]:
        """Past incidents from the fleet's incident store, newest first."""
        try:
            return tools.list_incidents(config, category=category, host=host, job=job, days=days, limit=limit)
        except ToolRefusal as exc:
            raise ToolError(str(exc)) from None

    return server


def serve_stdio(config: ToolConfig) -> None:
    """Run until the client closes stdin."""
    build_server(config).run("stdio")
