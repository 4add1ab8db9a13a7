"""Snapshot the verdicts firstfault gives on a set of bundles, and compare two snapshots.

Why: a change to signatures or reasoning must not move a verdict by accident. Take a snapshot
before the change, one after, and read the differences (category, culprit, action, root
signature) bundle by bundle.

    python tools/verdict_snapshot.py snap OUT.json [BUNDLE ...]   # default: every fixture bundle
    python tools/verdict_snapshot.py diff BEFORE.json AFTER.json
    --full (with snap): keep the whole verdict JSON, not only its outcome
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def default_bundles() -> list[Path]:
    """Every bundle and single-file log the repository carries as a fixture or example."""
    out: list[Path] = sorted((ROOT / "examples" / "bundles").iterdir())
    out += sorted(p for p in (ROOT / "tests" / "fixtures" / "slurm").iterdir() if p.is_dir())
    out += [ROOT / "tests" / "fixtures" / "host" / "link_flap"]
    for folder in ("scenarios", "host"):
        out += sorted(p for p in (ROOT / "tests" / "fixtures" / folder).iterdir() if p.is_file() and p.suffix != ".md")
    return out


FULL = False  # --full: the whole verdict (minus timings), for a refactor that must change nothing


def summary(path: Path) -> dict[str, object]:
    from firstfault.discover import BundleError
    from firstfault.pipeline import analyze

    try:
        v = analyze(path)
    except BundleError as exc:
        return {"error": str(exc)}
    if FULL:
        d = v.to_dict()
        d.pop("stats", None)
        d.get("inputs", {}).pop("path", None)
        return d
    return {
        "category": str(v.category),
        "ranks": v.culprit.ranks[:3],
        "hosts": v.culprit.hosts[:3],
        "action": str(v.action),
        "root": v.root_event.signature if v.root_event else None,
    }


def main(argv: list[str]) -> int:
    global FULL
    if "--full" in argv:
        FULL = True
        argv = [a for a in argv if a != "--full"]
    if len(argv) >= 2 and argv[0] == "snap":
        paths = [Path(p) for p in argv[2:]] or default_bundles()
        snap = {}
        for p in paths:
            if p.is_dir() and not any(p.iterdir()):
                continue
            key = str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p)
            snap[key] = summary(p)
        Path(argv[1]).write_text(json.dumps(snap, indent=1, sort_keys=True))
        print(f"{len(snap)} verdicts written to {argv[1]}")
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        a = json.loads(Path(argv[1]).read_text())
        b = json.loads(Path(argv[2]).read_text())
        changed = 0
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                changed += 1
                print(f"{k}\n  before: {a.get(k)}\n  after:  {b.get(k)}")
        print(f"{changed} of {len(set(a) | set(b))} verdicts differ")
        return 1 if changed else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
