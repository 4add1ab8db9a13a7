"""What an operator acts on: the hosts to keep jobs off, and the command that drains them.

The hosts come from verdicts whose action is ``exclude_and_restart`` (the pipeline's own
judgement that the culprit is a machine, not the job's code: an application error on node01
does not make node01 a bad node) and, when given, the fleet's lemon hosts. They are printed in
SLURM's hostlist form, ready for ``sbatch --exclude=`` or ``scontrol show hostnames``.

Draining is off by default: :func:`drain_command` is printed as a dry run, and only an explicit
``--drain`` runs it (``scontrol update NodeName=... State=DRAIN Reason="firstfault: ..."``),
since a drained node takes no new jobs until someone resumes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firstfault.slurm.hostlist import compress_hostlist
from firstfault.slurm.jobs import run_client
from firstfault.vocab import Action

#: SLURM keeps a node's Reason as a short free text; a long one is only noise in ``sinfo -R``
REASON_MAX = 120


@dataclass(frozen=True, slots=True)
class ExcludeList:
    """Hosts to keep jobs off, each with why."""

    hosts: tuple[str, ...]
    why: dict[str, str] = field(default_factory=dict)

    @property
    def hostlist(self) -> str:
        return compress_hostlist(self.hosts)

    def reason(self) -> str:
        """One short Reason for ``scontrol update``: the first host's why, and how many more."""
        if not self.hosts:
            return "firstfault"
        first = self.why.get(self.hosts[0], "flagged")
        more = f" (+{len(self.hosts) - 1} more)" if len(self.hosts) > 1 else ""
        return f"firstfault: {first}{more}"[:REASON_MAX]


def exclude_list(verdicts: Iterable[dict[str, Any]], lemons: Iterable[str] = ()) -> ExcludeList:
    """Culprit hosts of the verdicts that say exclude them, then the lemon hosts."""
    why: dict[str, str] = {}
    for data in verdicts:
        v = data.get("verdict") if isinstance(data, dict) else None
        if not isinstance(v, dict) or v.get("action") != str(Action.EXCLUDE_AND_RESTART):
            continue
        job = (data.get("inputs") or {}).get("job") or Path(str((data.get("inputs") or {}).get("path", ""))).name
        for h in (v.get("culprit") or {}).get("hosts") or []:
            why.setdefault(str(h), f"{v.get('category', 'failure')} in job {job}" if job else str(v.get("category")))
    for h in lemons:
        why.setdefault(h, "lemon node in the fleet history")
    return ExcludeList(tuple(why), why)


def drain_command(hosts: ExcludeList) -> list[str]:
    """``scontrol update NodeName=<hostlist> State=DRAIN Reason=firstfault: ...``, as argv."""
    return ["scontrol", "update", f"NodeName={hosts.hostlist}", "State=DRAIN", f"Reason={hosts.reason()}"]


def drain(hosts: ExcludeList, timeout: float = 15.0) -> tuple[bool, str]:
    """Run the drain command; ``(ok, what scontrol said or why it failed)``."""
    if not hosts.hosts:
        return True, "no host to drain"
    out, why = run_client(drain_command(hosts), timeout)
    return out is not None, (out or "").strip() or why or "drained"


def read_verdicts(path: Path) -> Iterator[dict[str, Any]]:
    """The verdicts in one file: a verdict JSON document, or JSON lines (``watch --jsonl``, where
    each line updates the last: only the last verdict of the file is kept). Unreadable: none."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    last = parse_verdict_text(text)
    if last is not None:
        yield last


def parse_verdict_text(text: str) -> dict[str, Any] | None:
    """The last firstfault verdict in ``text`` (one JSON document, or JSON lines), else None."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and "verdict" in whole:
        return whole
    last: dict[str, Any] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("verdict"), dict):
            last = obj
    return last
