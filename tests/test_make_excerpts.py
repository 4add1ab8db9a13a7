"""tools/realjobs/make_excerpts.py cuts what people paste from a real job's console, by a rule
that never looks at the label, and carries the job's label along (docs/accuracy.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "realjobs" / "make_excerpts.py"


def _job(root: Path, name: str, category: str, text: bytes) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "console.log").write_bytes(text)
    (d / "truth.json").write_text(json.dumps({"expected_category": category, "culprit_ranks": [2]}))


def _run(out: Path, sets: Path, *how: str) -> None:
    subprocess.run([sys.executable, str(SCRIPT), str(out), str(sets), *how], check=True, capture_output=True)


def test_tail_and_from_error_cuts_keep_the_label_and_skip_healthy_jobs(tmp_path: Path) -> None:
    sets = tmp_path / "tr1"
    lines = [f"step {i}/20 loss=2.3" for i in range(10)]
    lines[3] = "train:  10%|#         | 2/20\rtrain:  15%|#5        | 3/20"  # a tqdm bar: "\r" is no line end
    lines[6] = "Traceback (most recent call last):"
    _job(sets, "exception_r2", "application_error", ("\n".join(lines) + "\n").encode())
    _job(sets, "healthy", "none", b"step 1/20\n")

    _run(tmp_path / "tail", sets, "--tail", "7")
    cut = (tmp_path / "tail" / "tr1_exception_r2" / "console.log").read_bytes().decode().split("\n")[:-1]
    assert cut == lines[-7:]
    truth = json.loads((tmp_path / "tail" / "tr1_exception_r2" / "truth.json").read_text())
    assert truth["expected_category"] == "application_error" and truth["culprit_ranks"] == [2]
    assert "last 7 lines" in truth["fragment"]
    assert not (tmp_path / "tail" / "tr1_healthy").exists()

    _run(tmp_path / "err", sets, "--from-error", "2")
    cut = (tmp_path / "err" / "tr1_exception_r2" / "console.log").read_text().split("\n")[:-1]
    assert cut == lines[6:8]
