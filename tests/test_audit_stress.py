"""``firstfault stress``: real torchrun jobs with a fault in attempt 0, a restart that resumes from
the last checkpoint, and the campaign's measurements (marked slow: each job runs real torchrun)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from firstfault_bench.stress import StressFault, run_fault
from tests.spoilers import abort_in_teardown, spoil_first_run


def test_fault_spec() -> None:
    assert StressFault.parse("hang@7:1") == StressFault("hang", 7, 1)
    assert StressFault.parse("nan@3") == StressFault("nan", 3, 1)
    for bad in ("hang", "meteor@3", "hang@x", "hang@3:y"):
        with pytest.raises(ValueError, match="KIND@STEP"):
            StressFault.parse(bad)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spec", "spoiled"),
    [
        ("exception@7:1", False),
        ("hang@7:1", False),
        # torch's teardown aborted a rank (CI, stop 45): the simulator runs the job again, and that
        # run must start from the first one's checkpoint state, not resume after the fault
        ("exception@7:1", True),
    ],
)
def test_fault_restart_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, spoiled: bool) -> None:
    f = StressFault.parse(spec)
    calls = spoil_first_run(monkeypatch, abort_in_teardown) if spoiled else []
    row = run_fault(tmp_path, f, nproc=2, steps=10, ckpt_every=3, timeout=10, wall_limit=240)
    assert row.restarted and row.completed, row
    # checkpoints after steps 2 and 5; the fault at step 7: step 6 was done twice
    assert row.resumed_after == 5 and row.steps_lost == 1, row
    assert row.detect_s is not None and row.restart_s is not None and row.restart_s > row.detect_s, row
    if f.kind == "hang":  # the peers' collective timeout (10 s) is what notices a hang
        assert row.detect_s >= 9.0, row
    assert row.verdict_right, row
    assert not (tmp_path / f"{f.kind}-step7-rank1" / "ckpt.pt").exists()
    assert len(calls) != 1, calls  # a spoiled first run was run again


def test_cli_bad_fault_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, "-m", "firstfault.cli", "stress", "--out", str(tmp_path), "--fault", "meteor@3"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "KIND@STEP" in r.stderr
