"""Where an exception was raised survives a paste that starts inside its traceback."""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze


def test_headless_traceback_keeps_its_frames(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(
        '[rank0]:   File "/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 1997, in no_sync\n'
        "[rank0]:     assert not self.zero_optimization_partition_gradients(), \\\n"
        "[rank0]: AssertionError: no_sync context manager is incompatible with gradient partitioning logic of ZeRO stage 3\n"
    )
    v = analyze(log)
    assert v.root_event is not None
    assert any("site-packages/deepspeed" in line for line in v.root_event.context)
    assert str(v.category) == "software_bug"


def test_unrelated_lines_above_are_not_frames(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("[rank0]: step 3 loss 2.1\n[rank0]: RuntimeError: boom in layer 3\n")
    v = analyze(log)
    assert v.root_event is not None and v.root_event.context == []
