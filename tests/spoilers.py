"""Spoil a real ``torchrun`` run the way torch's own teardown does on a loaded machine, so that the
simulator's and the stress campaign's handling of it is tested against the real launcher."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from firstfault_sim.torch_sim import TEARDOWN_ABORT


def spoil_first_run(monkeypatch: pytest.MonkeyPatch, spoil: Callable[[Path, int], int]) -> list[int]:
    """Run the real ``torchrun`` as ``simulate_torch`` does, letting ``spoil`` alter the first run
    (its launcher log and exit status) as torch's own teardown abort does on a loaded machine.
    Returns every run's exit status as the simulator saw it."""
    from firstfault_sim import torch_sim

    real = torch_sim._run_bounded
    calls: list[int] = []

    def spoiled(cmd: list[str], env: dict[str, str], log: Path, *rest: object) -> tuple[int, bool]:
        rc, timed_out = real(cmd, env, log, *rest)  # type: ignore[arg-type]
        rc = spoil(log, rc) if not calls else rc
        calls.append(rc)
        return rc, timed_out

    monkeypatch.setattr(torch_sim, "_run_bounded", spoiled)
    return calls


def abort_in_teardown(log: Path, rc: int) -> int:
    """Append libstdc++'s teardown abort to the launcher log, leaving the exit status as it was."""
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(TEARDOWN_ABORT + "\n")
    return rc
