"""firstfault mcp: a real MCP client (``mcp.client.stdio``) starts the server as a subprocess, lists
its tools and calls them: a verdict for a bundle under the allowed root, one event explained, the
incident store listed, and every path the policy must refuse refused (outside the root, ``..``,
a symbolic link out of the root, a link inside it)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "examples" / "bundles" / "hang_4rank"


def _store(path: Path) -> None:
    import firstfault
    from firstfault.fleet.incident import incident_from_verdict
    from firstfault.fleet.store import Store

    data = firstfault.analyze(BUNDLE).to_dict()
    with Store(path) as s:
        s.add([incident_from_verdict(data, job="job-7", source=str(BUNDLE), added_at=time.time())])


async def _session(args: list[str], calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "firstfault.cli", "mcp", *args],
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


def _refusal(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


@pytest.mark.timeout(180)
def test_mcp_tools_over_stdio(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    outside = tmp_path / "outside"
    shutil.copytree(BUNDLE, allowed / "hang_4rank")
    shutil.copytree(BUNDLE, outside / "secret")
    (allowed / "escape").symlink_to(outside / "secret")  # a link out of the root
    (allowed / "inside").symlink_to(allowed / "hang_4rank")  # a link, even one pointing inside
    store = tmp_path / "incidents.duckdb"
    _store(store)
    good = str(allowed / "hang_4rank")
    tools, results = asyncio.run(
        _session(
            ["--allow-root", str(allowed), "--store", str(store)],
            [
                ("analyze", {"path": good}),
                ("explain_event", {"path": good, "rank": 2}),
                ("explain_event", {"path": good, "rank": 3}),
                ("list_incidents", {}),
                ("list_incidents", {"category": "gpu_hardware"}),
                ("analyze", {"path": str(outside / "secret")}),
                ("analyze", {"path": f"{allowed}/../outside/secret"}),
                ("analyze", {"path": str(allowed / "escape")}),
                ("explain_event", {"path": str(allowed / "inside"), "rank": 2}),
                ("analyze", {"path": "/etc/passwd"}),
                ("explain_event", {"path": good, "event_id": 99999}),
            ],
        )
    )
    assert {t.name for t in tools} == {"analyze", "explain_event", "list_incidents"}
    assert all(t.annotations and t.annotations.read_only_hint for t in tools)
    verdict, root, cascade, listed, none, *refused, unknown = results

    v = _data(verdict)
    assert v["tool"] == "firstfault" and v["verdict"]["category"] == "hang"
    assert v["verdict"]["culprit"]["ranks"] == [2]

    r = _data(root)
    assert r["role"] == "root" and r["event"]["rank"] == 2 and r["why"].startswith("this is the root: hang on rank 2")
    c = _data(cascade)
    assert c["event"]["rank"] == 3 and c["role"] in ("cascade", "teardown")
    assert c["explained_by"] == r["event"]["id"] and c["chain_to_root"][-1]["role"] == "root"

    inc = _data(listed)
    assert inc["total"] == 1 and inc["incidents"][0]["job"] == "job-7" and inc["incidents"][0]["category"] == "hang"
    assert _data(none)["returned"] == 0

    reasons = [_refusal(x) for x in refused]
    assert "not under an allowed root" in reasons[0]
    assert "'..' is not allowed" in reasons[1]
    assert "symbolic links are not followed" in reasons[2] and "symbolic links are not followed" in reasons[3]
    assert "not under an allowed root" in reasons[4]
    assert "no event 99999" in _refusal(unknown)


@pytest.mark.timeout(120)
def test_mcp_without_roots_or_store_refuses(tmp_path: Path) -> None:
    _tools, (paths, incidents) = asyncio.run(
        _session([], [("analyze", {"path": str(BUNDLE)}), ("list_incidents", {"limit": 5})])
    )
    assert "without --allow-root" in _refusal(paths)
    assert "no incident store configured" in _refusal(incidents)
