"""The Incident: what the fleet remembers of one verdict, typed, built from the verdict's JSON.

Why from the JSON and not the ``Verdict`` object: the JSON (``Verdict.to_dict()``) is the
versioned contract. Verdicts reach the fleet from a batch worker (another process, another
machine on Ray), from a ``.json`` file an earlier run wrote, or from a simulator; all of them
speak the contract, none of them needs the object.

The key is a content hash: of the bundle's bytes when the bundle is at hand (the same bundle
added twice is one incident, wherever it lies), else of the verdict's JSON without its run
statistics (the same verdict file added twice is one incident).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firstfault.vocab import Action, Category

#: categories where the verdict blames the code or the user, not the machine: a node is not
#: made a lemon by a job's own exception, bad configuration, OOM or collective mismatch.
CODE_CATEGORIES = frozenset(
    {
        Category.APPLICATION_ERROR,
        Category.CONFIGURATION,
        Category.SOFTWARE_BUG,
        Category.COLLECTIVE_MISMATCH,
        Category.GPU_OOM,
        Category.HOST_OOM,
        Category.NONE,
        Category.UNKNOWN,
    }
)

#: verdict fields that describe the run, not the failure: timing, and where the files lay
_RUN_FIELDS = ("stats",)


@dataclass(frozen=True, slots=True)
class Incident:
    """One verdict as the fleet keeps it. ``failed_at`` is the root event's time (epoch seconds),
    else the end of the job's window, else None; GPUs are ``host/pci`` (a PCI address alone names
    a slot on every host)."""

    key: str
    job: str
    source: str
    category: Category
    action: Action
    confidence: float
    signature: str | None
    hosts: tuple[str, ...]
    gpus: tuple[str, ...]
    links: tuple[str, ...]
    ranks: tuple[int, ...]
    failed_at: float | None
    added_at: float
    summary: str
    signatures: tuple[str, ...]
    verdict_json: str
    ran_on: tuple[str, ...] = ()  # every host the job ran on (its exposure), where the verdict says

    @property
    def healthy(self) -> bool:
        """The job shows no failure (category none): its signatures teach what is noise."""
        return self.category == Category.NONE

    @property
    def blames_machine(self) -> bool:
        """Counted in a host's, GPU's or link's reputation (see ``CODE_CATEGORIES``)."""
        return self.category not in CODE_CATEGORIES

    def places(self) -> list[tuple[str, str]]:
        """``(kind, place)`` for every culprit place: host, gpu, link."""
        return [("host", h) for h in self.hosts] + [("gpu", g) for g in self.gpus] + [("link", lk) for lk in self.links]


def incident_from_verdict(
    data: dict[str, Any], *, job: str, source: str, added_at: float, key: str | None = None
) -> Incident:
    """Build the Incident of one verdict dict (``Verdict.to_dict()``). Raises ValueError when the
    dict is not a firstfault verdict."""
    v = data.get("verdict")
    if data.get("tool") != "firstfault" or not isinstance(v, dict):
        raise ValueError("not a firstfault verdict (no 'tool': 'firstfault' and 'verdict' object)")
    culprit = v.get("culprit") or {}
    hosts = tuple(str(h) for h in culprit.get("hosts") or [])
    root = data.get("root_event") or {}
    gpus = tuple(_gpu_name(str(g), hosts, root) for g in culprit.get("gpus") or [])
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return Incident(
        key=key or verdict_key(data),
        job=str((data.get("inputs") or {}).get("job") or job),
        source=source,
        category=Category(str(v.get("category", "unknown"))),
        action=Action(str(v.get("action", "none"))),
        confidence=float(v.get("confidence") or 0.0),
        signature=str(root["signature"]) if root.get("signature") else None,
        hosts=hosts,
        gpus=gpus,
        links=tuple(str(lk) for lk in culprit.get("links") or []),
        ranks=tuple(int(r) for r in culprit.get("ranks") or []),
        failed_at=_failed_at(data),
        added_at=added_at,
        summary=str(v.get("summary", "")),
        signatures=_signatures(data),
        verdict_json=text,
        ran_on=_ran_on(data, hosts),
    )


def _ran_on(data: dict[str, Any], culprit_hosts: tuple[str, ...]) -> tuple[str, ...]:
    """The hosts the job ran on: the verdict's ``inputs.hosts`` (what the bundle placed ranks and
    events on) and its culprit hosts; none when the verdict does not say (an older verdict)."""
    listed = (data.get("inputs") or {}).get("hosts")
    if not isinstance(listed, list) or not listed:
        return ()
    return tuple(sorted({str(h) for h in listed} | set(culprit_hosts)))


def _gpu_name(gpu: str, hosts: tuple[str, ...], root: dict[str, Any]) -> str:
    if "/" in gpu:
        return gpu
    if root.get("gpu") == gpu and root.get("host"):
        return f"{root['host']}/{gpu}"
    return f"{hosts[0]}/{gpu}" if len(hosts) == 1 else f"?/{gpu}"


def _failed_at(data: dict[str, Any]) -> float | None:
    ts = (data.get("root_event") or {}).get("timestamp")
    if isinstance(ts, int | float):
        return float(ts)
    window = (data.get("inputs") or {}).get("job_window") or {}
    end = window.get("end") if isinstance(window, dict) else None
    return float(end) if isinstance(end, int | float) else None


def _signatures(data: dict[str, Any]) -> tuple[str, ...]:
    """Every signature the verdict shows: root, chain, context, alternatives' roots (sorted, once)."""
    seen: set[str] = set()
    events = [data.get("root_event"), *(data.get("causal_chain") or []), *(data.get("context") or [])]
    events += [a.get("root_event") for a in data.get("alternatives") or [] if isinstance(a, dict)]
    for e in events:
        if isinstance(e, dict) and e.get("signature"):
            seen.add(str(e["signature"]))
    return tuple(sorted(seen))


def verdict_key(data: dict[str, Any]) -> str:
    """The content key of a verdict without a bundle: its JSON minus run statistics and its path
    (a job's name in ``inputs`` stays: two jobs with the same answer are two incidents)."""
    body = {k: v for k, v in data.items() if k not in _RUN_FIELDS}
    if isinstance(body.get("inputs"), dict):
        body["inputs"] = {k: v for k, v in body["inputs"].items() if k != "path"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return "v:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def bundle_key(path: Path) -> str:
    """The content key of a bundle: its files' relative paths and bytes (an archive: its bytes).

    Symbolic links are not followed (discovery refuses links out of the bundle too)."""
    h = hashlib.sha256()
    if path.is_file():
        _hash_file(h, path)
        return "b:" + h.hexdigest()[:32]
    for root, dirs, files in os.walk(path, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            p = Path(root) / name
            if p.is_symlink() or not p.is_file():
                continue
            h.update(str(p.relative_to(path)).encode("utf-8", "surrogateescape") + b"\0")
            _hash_file(h, p)
    return "b:" + h.hexdigest()[:32]


def _hash_file(h: Any, path: Path) -> None:
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    h.update(b"\0")
