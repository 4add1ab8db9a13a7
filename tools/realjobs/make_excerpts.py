"""Cut the excerpts people paste from the consoles of failed real jobs, keeping each job's label.

    python tools/realjobs/make_excerpts.py OUT SET [SET ...] --tail 60
    python tools/realjobs/make_excerpts.py OUT SET [SET ...] --from-error 80

A thread rarely holds a whole console: people paste the end of their terminal (``--tail N``: the
last N lines) or the part from the first error down (``--from-error N``: N lines from the first
line holding "Traceback (most recent call last)", "Error" or "error"). Each SET is a folder of
bundles made by the other scripts here (``make_set.py`` and its siblings), one per job, each with
``truth.json``. Every failed job's console (``console.log``; else its ``slurm-N.out``; else its
first ``node*.log``) is cut by the rule alone, which never looks at the label, and written as
``OUT/<set>_<job>/`` with the job's ``truth.json`` (plus a ``fragment`` field saying how it was
cut). The label is the job's: the fault is the same whatever the excerpt shows, so a culprit whose
lines were cut off counts as missed. Healthy jobs are left out (an excerpt of a healthy console
is a healthy console). docs/accuracy.md, "What people paste", reports the scores.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

_FIRST_ERROR = re.compile(r"Traceback \(most recent call last\)|Error|error")


def console_of(job: Path) -> Path | None:
    """The file a user would have on their terminal: torchrun's console, srun's output, or the
    first node's console of a two-agent job."""
    for pattern in ("console.log", "slurm-*.out", "node*.log"):
        found = sorted(job.glob(pattern))
        if found:
            return found[0]
    return None


def cut(lines: list[str], tail: int | None, from_error: int | None) -> list[str] | None:
    """The excerpt of ``lines`` by one rule, or None when the rule finds nothing to cut."""
    if tail is not None:
        return lines[-tail:]
    assert from_error is not None
    first = next((i for i, line in enumerate(lines) if _FIRST_ERROR.search(line)), None)
    return None if first is None else lines[first : first + from_error]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("sets", type=Path, nargs="+")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--tail", type=int, help="the last N lines")
    how.add_argument("--from-error", type=int, help="N lines from the first line with an error word")
    a = p.parse_args()
    made = 0
    for s in a.sets:
        for job in sorted(d for d in s.iterdir() if (d / "truth.json").exists()):
            truth = json.loads((job / "truth.json").read_text())
            console = console_of(job)
            if truth.get("expected_category") == "none" or console is None:
                continue
            lines = console.read_bytes().decode("utf-8", "replace").split("\n")  # as tail(1): "\r" is no line end
            if lines and lines[-1] == "":
                lines.pop()
            part = cut(lines, a.tail, a.from_error)
            if part is None:
                continue
            d = a.out / f"{s.name}_{job.name}"
            d.mkdir(parents=True, exist_ok=True)
            (d / console.name).write_bytes(("\n".join(part) + "\n").encode())
            rule = f"the last {a.tail} lines" if a.tail else f"{a.from_error} lines from the first error word"
            truth["fragment"] = f"{rule} of {s.name}/{job.name}/{console.name}"
            (d / "truth.json").write_text(json.dumps(truth, indent=1))
            made += 1
    print(f"{made} excerpts in {a.out}")


if __name__ == "__main__":
    main()
