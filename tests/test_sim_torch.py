"""Tests of the real-torchrun failure simulator (bundle layout and truth.json only).

The slow tests run the real ``torchrun`` with 4 gloo ranks on CPU. They check what the
simulator promises (files, ground truth, that the genuine symptom is present, that
nothing is left running), not firstfault's analysis of the bundle.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")

from firstfault_sim import faults
from firstfault_sim.faults import FAULT_KINDS, KINDS, FaultPlan
from firstfault_sim.torch_sim import (
    FR_PREFIX_NAME,
    SPOILED_RERUNS,
    TRUTH_SCHEMA,
    build_command,
    simulate_torch,
)
from tests.spoilers import abort_in_teardown, spoil_first_run

CATEGORIES = {
    "gpu_hardware",
    "gpu_oom",
    "host_oom",
    "network",
    "hang",
    "collective_mismatch",
    "process_crash",
    "application_error",
    "numerical",
    "storage_io",
    "configuration",
    "software_bug",
    "scheduler",
    "straggler",
    "none",
    "unknown",
}
ACTIONS = {"restart", "exclude_and_restart", "stop", "none"}
PROGRESS = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO \[rank(?P<rank>\d+)\] step (?P<step>\d+) "
    r"loss (?P<loss>\S+) step_time_ms (?P<ms>[\d.]+) data_ms [\d.]+ compute_ms -?[\d.]+ comm_ms [\d.]+$"
)


# ---------------------------------------------------------------------------
# fast: no torchrun
# ---------------------------------------------------------------------------


def test_fault_kinds_have_valid_truth() -> None:
    assert FAULT_KINDS[0] == "none"
    assert set(FAULT_KINDS) == {
        "none",
        "exception",
        "sigkill",
        "segfault",
        "hang",
        "desync",
        "host_oom",
        "nan",
        "straggler",
        "exit_code",
        "two_faults",
    }
    for kind in KINDS.values():
        assert kind.category in CATEGORIES
        assert kind.action in ACTIONS


def test_fault_plan_culprits_root_first() -> None:
    assert FaultPlan("none").culprit_ranks() == []
    assert FaultPlan("hang", rank=2).culprit_ranks() == [2]
    assert FaultPlan("two_faults", rank=3, world_size=4).culprit_ranks() == [3, 0]
    with pytest.raises(ValueError):
        FaultPlan("bogus")


def test_hooks_fire_only_on_target() -> None:
    plan = FaultPlan("hang", rank=1, step=5, pg_timeout_s=10)
    assert faults.data_item_delay(plan, 1, 5) >= 10 * 10
    assert faults.data_item_delay(plan, 0, 5) == 0
    assert faults.data_item_delay(plan, 1, 4) == 0
    straggle = FaultPlan("straggler", rank=2, step=3)
    assert faults.compute_delay(straggle, 2, 2) == 0
    assert faults.compute_delay(straggle, 2, 7) == faults.STRAGGLER_DELAY_S
    desync = FaultPlan("desync", rank=1, step=5)
    assert faults.desync_grad_elems(desync, 1, 5, 100) != 100
    assert faults.desync_grad_elems(desync, 0, 5, 100) == 100


def test_build_command_uses_real_torchrun_flags(tmp_path: Path) -> None:
    cmd = build_command(FaultPlan("hang", 2, 5, 4, 3.0), tmp_path / "logs", 29999, 4, 1, 0, 12)
    joined = " ".join(cmd)
    for flag in (
        "--nnodes 1",
        "--nproc-per-node 4",
        "--rdzv-backend c10d",
        "--rdzv-endpoint 127.0.0.1:29999",
        "--max-restarts 1",
        "--tee 3",
        f"--log-dir {tmp_path / 'logs'}",
        "-m firstfault_sim.workload",
        "--fault hang",
        "--fault-rank 2",
        "--pg-timeout 3",
    ):
        assert flag in joined


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fault": "bogus"},
        {"fault": "hang", "rank": 4},
        {"fault": "hang", "step": 12},
        {"fault": "two_faults", "nproc": 1, "rank": 0},
    ],
)
def test_invalid_arguments_rejected_before_running(tmp_path: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        simulate_torch(tmp_path / "b", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "b").exists()


# ---------------------------------------------------------------------------
# slow: real torchrun
# ---------------------------------------------------------------------------


def _leftover_workers(bundle: Path) -> list[int]:
    """PIDs of processes still carrying this bundle's FR prefix in their environment."""
    needle = f"TORCH_FR_DUMP_TEMP_FILE={bundle / 'fr' / FR_PREFIX_NAME}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            pids.append(int(entry))
    return pids


def _attempt_dirs(bundle: Path) -> list[Path]:
    runs = [p for p in (bundle / "logs").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return sorted(runs[0].glob("attempt_*"))


def _check_common(bundle: Path, fault: str, nproc: int = 4) -> dict[str, object]:
    truth = json.loads((bundle / "truth.json").read_text())
    assert truth["schema"] == TRUTH_SCHEMA
    assert truth["fault"] == fault
    assert truth["expected_category"] == KINDS[fault].category
    assert truth["expected_action"] == KINDS[fault].action
    assert truth["nproc"] == nproc
    assert truth["backend"] in {"gloo", "nccl"}
    assert truth["timed_out"] is False
    assert "torchrun" in truth["command"][0] or truth["command"][1:3] == ["-m", "torch.distributed.run"]
    assert (bundle / "launcher.log").stat().st_size > 0
    for attempt in _attempt_dirs(bundle):
        assert sorted(p.name for p in attempt.iterdir()) == [str(r) for r in range(nproc)]
        for rank_dir in attempt.iterdir():
            assert (rank_dir / "stdout.log").exists() and (rank_dir / "stderr.log").exists()
    launcher = (bundle / "launcher.log").read_text(errors="replace")
    assert "[default0]:" in launcher  # --tee 3 prefixes worker lines
    deadline = time.monotonic() + 60  # a bound, not a timing: the loop ends as soon as they are gone
    while _leftover_workers(bundle) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _leftover_workers(bundle) == []
    return truth


def _fr_ranks(bundle: Path) -> set[int]:
    return {int(p.name.removeprefix(FR_PREFIX_NAME)) for p in (bundle / "fr").iterdir()}


@pytest.mark.slow
def test_none_completes_with_progress_lines(tmp_path: Path) -> None:
    bundle = simulate_torch(tmp_path / "none", fault="none", steps=6)
    truth = _check_common(bundle, "none")
    assert truth["exit_code"] == 0
    assert truth["culprit_ranks"] == [] and truth["step"] is None
    (attempt,) = _attempt_dirs(bundle)
    for rank in range(4):
        lines = (attempt / str(rank) / "stdout.log").read_text().splitlines()
        assert f"world_size=4 rank={rank} local_rank={rank}" in lines[0]
        steps = [m for m in map(PROGRESS.match, lines) if m]
        assert [int(m["step"]) for m in steps] == list(range(6))
        assert all(int(m["rank"]) == rank for m in steps)
        assert not (attempt / str(rank) / "error.json").exists()
    assert _fr_ranks(bundle) == set()  # nothing failed, nobody dumps
    total = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert total < 200_000


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "spoil"),
    [
        # a run planned to succeed that failed all the same (CI, stop 43: a straggler job's every
        # rank aborted in teardown after its last step)
        pytest.param("straggler", lambda log, rc: -6, id="planned-to-succeed-failed"),
        # a rank that aborted in teardown after its own error (CI, stop 44: the NaN rank's exit
        # status became SIGABRT): a run planned to fail is spoiled too
        pytest.param("exception", abort_in_teardown, id="aborted-in-teardown"),
    ],
)
def test_a_spoiled_run_is_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, spoil: Callable[[Path, int], int]
) -> None:
    """A run spoiled by something not injected is not the bundle its truth names: the simulator
    runs it again and records the spoiled exit statuses."""
    calls = spoil_first_run(monkeypatch, spoil)
    bundle = simulate_torch(tmp_path / fault, fault=fault, rank=1, step=1, nproc=2, steps=3)
    truth = json.loads((bundle / "truth.json").read_text())
    spoiled = truth["spoiled_exit_codes"]
    assert spoiled[:1] == calls[:1]
    assert len(calls) == len(spoiled) + 1  # each spoiled run was run again (the real ones may be spoiled too)
    assert len(spoiled) == SPOILED_RERUNS or calls[-1] == truth["exit_code"]
    if fault == "straggler":  # the run kept is the one that ended as planned, but at the limit
        assert truth["exit_code"] == 0 or len(spoiled) == SPOILED_RERUNS


@pytest.mark.slow
def test_exception_writes_error_json_and_fr_dumps(tmp_path: Path) -> None:
    bundle = simulate_torch(tmp_path / "exc", fault="exception", rank=1, step=3, steps=6)
    truth = _check_common(bundle, "exception")
    assert truth["exit_code"] != 0
    assert truth["culprit_ranks"] == [1] and truth["step"] == 3
    (attempt,) = _attempt_dirs(bundle)
    err = json.loads((attempt / "1" / "error.json").read_text())
    assert "RuntimeError: expert capacity exceeded" in err["message"]["message"]
    assert "Root Cause (first observed failure)" in (bundle / "launcher.log").read_text(errors="replace")
    assert 1 in _fr_ranks(bundle)
    dump = pickle.loads((bundle / "fr" / f"{FR_PREFIX_NAME}1").read_bytes())
    assert {"version", "pg_config", "pg_status", "entries"} <= set(dump)
    assert any(e["profiling_name"] == "gloo:all_reduce" for e in dump["entries"])


@pytest.mark.slow
def test_sigkill_with_restart_has_two_attempts_and_no_dump_from_killed_rank(tmp_path: Path) -> None:
    bundle = simulate_torch(tmp_path / "kill", fault="sigkill", rank=2, step=2, steps=5, max_restarts=1)
    truth = _check_common(bundle, "sigkill")
    assert truth["max_restarts"] == 1 and truth["exit_code"] != 0
    attempts = _attempt_dirs(bundle)
    assert [a.name for a in attempts] == ["attempt_0", "attempt_1"]
    for attempt in attempts:
        assert not (attempt / "2" / "error.json").exists()
        assert "attempt=" in (attempt / "0" / "stdout.log").read_text()
    log = (bundle / "launcher.log").read_text(errors="replace")
    if "Failed to parse reply file" not in log:
        # torch's agent can die of a victim's half-written error.json before it prints the killed
        # rank's record: a race a loaded machine makes likelier (CI beside a CPU hog, 2026-12-07;
        # tests/fixtures/torchrun/reply_file_race.log), which the simulator does not decide
        assert "Signal 9 (SIGKILL) received by PID" in log
    assert 2 not in _fr_ranks(bundle)


@pytest.mark.slow
def test_hang_times_out_peers_and_every_rank_dumps(tmp_path: Path) -> None:
    bundle = simulate_torch(tmp_path / "hang", fault="hang", rank=2, step=2, steps=5, timeout=3.0)
    truth = _check_common(bundle, "hang")
    assert truth["exit_code"] != 0
    stderr = "".join(p.read_text(errors="replace") for p in (bundle / "logs").rglob("stderr.log"))
    assert "Timed out waiting 3000ms" in stderr
    assert _fr_ranks(bundle) == {0, 1, 2, 3}  # the hung rank dumps too, via the store request


@pytest.mark.slow
def test_wall_limit_kills_everything(tmp_path: Path) -> None:
    bundle = simulate_torch(tmp_path / "wl", fault="hang", rank=1, step=1, timeout=60.0, wall_limit=6.0)
    truth = json.loads((bundle / "truth.json").read_text())
    assert truth["timed_out"] is True
    assert truth["duration_s"] < 25
    deadline = time.monotonic() + 60  # a bound, not a timing: the loop ends as soon as they are gone
    while _leftover_workers(bundle) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _leftover_workers(bundle) == []
