"""A real SLURM on this host: start the daemons, run real jobs, parse what they leave behind.

One cluster (munged, slurmctld, two slurmds) for the module: a torch job whose rank 1 raises,
a job killed by its time limit, a job cancelled with scancel, and a node that dies mid-job.
The time-limit job runs alongside the others, so the module takes about 100 s.
Skips only when the SLURM/munge binaries (Debian: slurmctld slurmd slurm-client munge) or torch
are missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from firstfault.parse.slurm import expand_tasks
from firstfault_sim.slurm import SCENARIO_NAMES
from firstfault_sim.slurm_cluster import APT_PACKAGES, missing_binaries

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(420)]


def _skip_reason() -> str | None:
    miss = missing_binaries()
    if miss:
        return f"SLURM not installed ({', '.join(miss)} missing; apt-get install {' '.join(APT_PACKAGES)})"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed"
    if os.geteuid() != 0:
        return "the single-host cluster runs slurmd as root"
    if subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode != 0:
        return "cannot create UTS namespaces (unshare -u), which the simulated nodes need"
    return None


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from firstfault_sim.slurm import simulate_slurm

    out = tmp_path_factory.mktemp("slurm")
    made = simulate_slurm(out, SCENARIO_NAMES, fault="exception", rank=1, step=5)
    return {json.loads((b / "truth.json").read_text())["fault"]: b for b in made}


def _events(bundle: Path) -> list:
    import firstfault.parse.slurm  # noqa: F401
    from firstfault.discover import discover
    from firstfault.match.registry import load_registry
    from firstfault.parse.run import parse_bundle

    return parse_bundle(discover(bundle), load_registry()).events


def _sig(events: list, sid: str) -> list:
    return [e for e in events if e.signature == sid]


def _truth(bundle: Path) -> dict:
    return json.loads((bundle / "truth.json").read_text())


def test_bundles_have_every_artefact(bundles: dict[str, Path]) -> None:
    assert set(bundles) == {"exception", "time_limit", "scancel", "node_failure"}
    for b in bundles.values():
        names = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
        assert any(n.startswith("slurm-") and n.endswith(".out") for n in names), names
        for need in (
            f"scontrol_show_job_{_truth(b)['slurm']['job_id']}.txt",
            "sacct.txt",
            "slurmctld.log",
            "host-node01/slurmd.log",
            "job.sbatch",
            "truth.json",
        ):
            assert need in names, (b.name, need)
        sacct = (b / "sacct.txt").read_text().splitlines()
        assert sacct[0].startswith("JobID|") and len(sacct) >= 2


def test_daemons_are_gone(bundles: dict[str, Path]) -> None:
    """Everything the harness started was stopped (by PID) when the cluster closed."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    for b in bundles.values():
        state = str(b.parent)
        assert state not in ps
    mine = [ln for ln in ps.splitlines() if "ffslurm-" in ln and ("slurm" in ln or "munged" in ln)]
    assert not mine, mine


def test_failing_torch_job(bundles: dict[str, Path]) -> None:
    b = bundles["exception"]
    t = _truth(b)
    assert t["slurm"]["job_state"] == "FAILED" and t["culprit_ranks"] == [1]
    assert t["culprit_hosts"] == ["node01"]
    events = _events(b)
    exits = [e for e in _sig(events, "slurm.task_exit") if e.source.startswith("slurm-")]
    # srun prints a task's exit when it reaps it; a peer dying of the culprit's closed connection can
    # be reaped first on a loaded machine, so the culprit's line is looked for, not its position. Tasks
    # reaped together share one line ("srun: error: node01: tasks 0-1: Exited with exit code 1").
    own = [e for e in exits if 1 in expand_tasks(e.fields["tasks"])]
    assert own and own[0].host == "node01" and own[0].fields["exitcode"] == "1"
    assert {e.host for e in exits} == {"node01", "node02"}
    assert {e.fields["job_state"] for e in _sig(events, "slurm.job_state_failed")} == {"FAILED"}
    # the rank's own exception is in the same file, labelled by srun -l, on the right host
    raised = [e for e in events if e.rank == 1 and "expert capacity exceeded" in e.text]
    assert raised and raised[0].host == "node01"


def test_time_limit_job(bundles: dict[str, Path]) -> None:
    b = bundles["time_limit"]
    assert _truth(b)["slurm"]["job_state"] == "TIMEOUT"
    events = _events(b)
    tl = [e for e in _sig(events, "slurm.cancelled_time_limit") if e.source.startswith("slurm-")]
    assert tl and all(e.fields["reason"] == "time_limit" and e.host == "node01" for e in tl)
    assert _sig(events, "slurmctld.time_limit")
    assert {e.fields["job_state"] for e in _sig(events, "slurm.job_state_timeout")} == {"TIMEOUT"}
    assert not _sig(events, "slurmctld.node_not_responding")  # node02's failure is not this job's


def test_scancel_job(bundles: dict[str, Path]) -> None:
    b = bundles["scancel"]
    assert _truth(b)["slurm"]["job_state"] == "CANCELLED"
    events = _events(b)
    assert [e for e in _sig(events, "slurm.cancelled") if e.fields["entity"] == "JOB"]
    assert _sig(events, "slurmctld.kill_job_request")
    assert _sig(events, "slurm.job_state_cancelled")


def test_node_failure_job(bundles: dict[str, Path]) -> None:
    b = bundles["node_failure"]
    t = _truth(b)
    assert t["slurm"]["job_state"] == "NODE_FAIL" and t["culprit_hosts"] == ["node02"]
    events = _events(b)
    assert [e.fields["failed_node"] for e in _sig(events, "slurm.node_failure_srun")] == ["node02"]
    assert [e.fields["failed_node"] for e in _sig(events, "slurmctld.kill_on_failed_node")] == ["node02"]
    # slurmstepd's "CANCELLED ... DUE TO NODE FAILURE" comes only when node01's step is still
    # running when slurmctld gives up on node02 (~20 s); ranks that died of the lost peers first
    # leave srun's and slurmctld's lines as the evidence. Both outcomes are real.
    for e in _sig(events, "slurm.cancelled_node_failure"):
        assert e.host == "node01" and e.fields["reason"] == "node_failure"
    assert {e.fields["job_state"] for e in _sig(events, "slurm.job_state_node_fail")} == {"NODE_FAIL"}
