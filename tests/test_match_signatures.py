"""The registry is data: every example is real text its signature matches; users can extend it."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.match.check import check_registry
from firstfault.match.registry import SignatureError, load_registry
from firstfault.pipeline import analyze


def test_builtin_registry_is_consistent() -> None:
    reg = load_registry()
    assert len(reg.signatures) >= 20
    assert check_registry(reg) == []
    for sig in reg.signatures:
        assert sig.source.strip(), f"{sig.id} has no source"


def test_advice_lines_are_noise() -> None:
    reg = load_registry()
    for text in (
        "CUDA kernel errors might be asynchronously reported at some other API call, "
        "so the stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    ):
        sig = reg.match(text, "app_log")
        assert sig is None or str(sig.role) == "noise", (text, sig and sig.id)


def test_user_signatures_extend_and_override(tmp_path: Path) -> None:
    d = tmp_path / "sigs"
    d.mkdir()
    (d / "mine.toml").write_text(
        """
[[signature]]
id = "acme.checkpoint_write"
pattern = 'checkpoint write failed: (?P<path>\\S+)'
literals = ["checkpoint write failed"]
category = "storage_io"
layer = "application"
role = "root"
priority = 30
source = "our trainer's checkpoint.py"
examples = ["checkpoint write failed: /ckpt/step_100"]
"""
    )
    (tmp_path / "rank.log").write_text(
        "2026-12-02 10:00:00,000 INFO [rank3] step 4 loss 1.0\n[rank3]: OSError: checkpoint write failed: /ckpt/s4\n"
    )
    v = analyze(tmp_path / "rank.log", [d])
    assert v.root_event is not None and v.root_event.signature == "acme.checkpoint_write"
    assert str(v.category) == "storage_io"
    assert v.culprit.ranks == [3]


def test_bad_signature_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('[[signature]]\nid = "x"\npattern = "("\n')
    with pytest.raises(SignatureError, match=r"bad\.toml"):
        load_registry([tmp_path])
