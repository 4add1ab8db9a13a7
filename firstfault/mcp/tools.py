"""The MCP server's tools as plain functions: a path checked by the allowed-roots policy, then the
pipeline (``firstfault.analyze``) or the incident store, then a JSON-ready dict.

They raise :class:`ToolRefusal` with a one-line reason for anything the caller should be told
(a refused path, unusable input, no store); the server turns that into an MCP tool error.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firstfault.pathpolicy import PathRefused, check_path
from firstfault.vocab import Category, InputError

#: incidents one call may return: an agent's context is small, and a store has millions
MAX_INCIDENTS = 200
_SHORT = ("id", "file", "line", "timestamp", "rank", "host", "gpu", "signature", "category", "text")


class ToolRefusal(Exception):
    """What a tool tells its caller instead of an answer (one line)."""


@dataclass(frozen=True, slots=True)
class ToolConfig:
    roots: tuple[Path, ...] = ()  # resolved (pathpolicy.allowed_roots)
    store: str | None = None  # a DuckDB file or a postgresql:// URL


def _checked(raw: str, config: ToolConfig) -> Path:
    if not config.roots:
        raise ToolRefusal("this server reads no paths (it was started without --allow-root)")
    try:
        return check_path(raw, config.roots)
    except PathRefused as exc:
        raise ToolRefusal(f"path refused: {exc}") from None


def analyze(raw: str, config: ToolConfig) -> dict[str, Any]:
    """The verdict of the bundle at ``raw`` (``Verdict.to_dict()``, the versioned contract)."""
    import firstfault

    real = _checked(raw, config)
    try:
        verdict = firstfault.analyze(real)
    except InputError as exc:
        raise ToolRefusal(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    data: dict[str, Any] = verdict.to_dict()
    return data


def _short(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: ev.get(k) for k in _SHORT}


def _events(data: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Every event the verdict shows, by id: the root (role root) and the causal chain's links."""
    out: dict[int, dict[str, Any]] = {}
    root = data.get("root_event")
    if isinstance(root, dict) and root.get("id") is not None:
        out[int(root["id"])] = {**root, "role": "root", "explained_by": None, "rule": "the first independent fault"}
    for link in data.get("causal_chain") or []:
        if isinstance(link, dict) and link.get("id") is not None:
            out.setdefault(int(link["id"]), link)
    return out


def _pick(events: dict[int, dict[str, Any]], root_id: int | None, event_id: int | None, rank: int | None) -> int:
    if event_id is not None:
        if event_id not in events:
            known = ", ".join(str(i) for i in sorted(events)[:40])
            raise ToolRefusal(f"no event {event_id} in this verdict (its events: {known or 'none'})")
        return event_id
    if rank is not None:
        if root_id is not None and events[root_id].get("rank") == rank:
            return root_id
        mine = [i for i, e in events.items() if e.get("rank") == rank]
        if not mine:
            raise ToolRefusal(f"no event on rank {rank} in this verdict's chain")
        return min(mine, key=lambda i: (events[i].get("timestamp") is None, events[i].get("timestamp") or 0.0, i))
    if root_id is None:
        raise ToolRefusal("this verdict has no root event (nothing failed, or nothing could be placed)")
    return root_id


def explain_event(raw: str, config: ToolConfig, event_id: int | None = None, rank: int | None = None) -> dict[str, Any]:
    """One event of the bundle's verdict (by id, or a rank's first; default the root): its role,
    the rule that gave it, the chain of events explaining it up to the root, and the verdict."""
    data = analyze(raw, config)
    events = _events(data)
    root = data.get("root_event") or {}
    root_id = int(root["id"]) if root.get("id") is not None else None
    chosen = _pick(events, root_id, event_id, rank)
    ev = events[chosen]
    chain, seen, here = [], {chosen}, ev.get("explained_by")
    while here is not None and int(here) in events and int(here) not in seen:
        seen.add(int(here))
        link = events[int(here)]
        chain.append({**_short(link), "role": link.get("role")})
        here = link.get("explained_by")
    v = data.get("verdict") or {}
    if ev.get("role") == "root":
        why = f"this is the root: {v.get('summary', '')}"
    else:
        by = events.get(int(ev["explained_by"])) if ev.get("explained_by") is not None else None
        cause = f"; explained by event {by['id']} ({by.get('signature')} on rank {by.get('rank')})" if by else ""
        why = f"{ev.get('role')}: {ev.get('rule')}{cause}"
    return {
        "event": {k: v2 for k, v2 in ev.items() if k not in ("role", "explained_by", "rule")},
        "role": ev.get("role"),
        "rule": ev.get("rule"),
        "explained_by": ev.get("explained_by"),
        "why": why,
        "chain_to_root": chain,
        "verdict": {k: v.get(k) for k in ("category", "culprit", "action", "confidence", "summary", "reasons")},
    }


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def list_incidents(
    config: ToolConfig,
    category: str | None = None,
    host: str | None = None,
    job: str | None = None,
    days: float | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    """The store's incidents, newest first, narrowed like ``firstfault history``."""
    from firstfault.fleet.backends import open_store
    from firstfault.fleet.store import Filter

    if not config.store:
        raise ToolRefusal("no incident store configured (start the server with --store)")
    cats: Sequence[str] = [str(c) for c in Category]
    if category is not None and category not in cats:
        raise ToolRefusal(f"category: choose from {', '.join(cats)}")
    limit = max(1, min(int(limit), MAX_INCIDENTS))
    since = time.time() - days * 86400 if days is not None else None
    flt = Filter(host=host, category=Category(category) if category else None, job=job, since=since, limit=limit)
    try:
        with open_store(config.store, read_only=True) as s:
            rows, total = s.recent(flt), s.count()
    except InputError as exc:
        raise ToolRefusal(str(exc).splitlines()[0]) from None
    return {
        "total": total,
        "returned": len(rows),
        "incidents": [
            {
                "key": i.key,
                "job": i.job,
                "category": str(i.category),
                "action": str(i.action),
                "confidence": i.confidence,
                "signature": i.signature,
                "hosts": list(i.hosts),
                "gpus": list(i.gpus),
                "ranks": list(i.ranks),
                "failed_at": _iso(i.failed_at),
                "summary": i.summary,
            }
            for i in rows
        ],
    }
