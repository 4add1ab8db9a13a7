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


def test_at_equal_priority_the_fault_beats_the_teardown_on_one_line() -> None:
    """A paste that lost its newlines (tatsu-lab/stanford_alpaca#207) holds ProcessGroupNCCL's
    tear-down and the InfiniBand completion error on one line: the line says the fault."""
    line = (
        "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous "
        "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. "
        "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down. "
        "terminate called after throwing an instance of 'std::runtime_error' what(): NCCL error: remote process "
        "exited or there was a network error, NCCL version 2.14.3 ncclRemoteError: A call failed possibly due to "
        "a network error or a remote process exiting prematurely. Last error: NET/IB : Got completion from peer "
        "11.214.147.122<39138> with error 12, opcode 0, len 0, vendor err 129"
    )
    sig = load_registry().match(line, "app_log")
    assert sig is not None and str(sig.role) == "root" and str(sig.category) == "network", sig and sig.id


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
