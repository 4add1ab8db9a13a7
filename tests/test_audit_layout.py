"""The audit's layout reader and its rank -> group arithmetic (Megatron's order semantics).

Groups are checked against the cluster simulator's independent construction
(``firstfault_sim.cluster.layout.ProcessGroups``) on the default order, and by hand on another.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from firstfault.audit import layout_from_dict, load_layout
from firstfault.audit.groups import Grid
from firstfault.vocab.errors import InputError
from firstfault_sim.cluster.layout import Layout as SimLayout
from firstfault_sim.cluster.layout import ProcessGroups

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_are_the_shipped_software() -> None:
    lay = layout_from_dict({"hosts": 2})
    assert lay.world == 16 and lay.dp() == 16
    assert lay.timeouts.nccl_timeout_s == 600.0  # torch's default process-group timeout
    assert lay.evidence.flight_recorder_entries == 0 and not lay.evidence.dump_on_timeout
    assert abs(lay.ib_retry_s - 34.36) < 0.01  # 4.096 us * 2^20 * (7 + 1)
    assert lay.host(0) == "gpu0001"


def test_example_layouts_load() -> None:
    for p in sorted((ROOT / "examples" / "audit").iterdir()):
        lay = load_layout(p)
        assert lay.world >= 16, p


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"gpus_per_host": 8}, "'hosts' is required"),
        ({"hosts": 2, "gpu_per_host": 8}, "unknown key 'gpu_per_host'"),
        ({"hosts": "two"}, "hosts must be an integer"),
        ({"hosts": True}, "hosts must be an integer"),
        ({"hosts": 2, "parallel": {"tp": 3}}, "not divisible by tp*pp*cp"),
        ({"hosts": 2, "parallel": {"tp": 8, "order": "tp-dp"}}, "must name tp, cp, dp, pp"),
        ({"hosts": 2, "parallel": {"tp": 8, "ep": 3}}, "ep=3 must divide dp=2"),
        ({"hosts": 2, "parallel": {"tq": 8}}, "unknown key parallel.tq"),
        ({"hosts": 2, "timeouts": {"nccl_timeout_s": -1}}, "must be >= 0"),
        ({"hosts": 2, "timeouts": {"nccl_timeout_s": float("nan")}}, "must be a number"),
        ({"hosts": 2, "evidence": {"dump_on_timeout": "yes"}}, "true or false"),
        ({"hosts": 2, "timeouts": []}, "timeouts must be a mapping"),
        ({"hosts": 1 << 20}, "more than"),
        ([1, 2], "must be a mapping"),
    ],
)
def test_bad_layouts_are_one_line_errors(doc: object, needle: str) -> None:
    with pytest.raises(InputError) as ei:
        layout_from_dict(doc)
    assert needle in str(ei.value) and "\n" not in str(ei.value)


def test_bad_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("hosts: [1\n", encoding="utf-8")
    (tmp_path / "b.json").write_text("{hosts: 1}", encoding="utf-8")
    (tmp_path / "c.yaml").write_bytes(b"\xff\xfe\x00garbage")
    for name in ("a.yaml", "b.json", "c.yaml", "missing.yaml"):
        with pytest.raises(InputError) as ei:
            load_layout(tmp_path / name)
        assert "\n" not in str(ei.value)


def test_cli_bad_layout_exit_2_one_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"hosts": 2, "parallel": {"tp": 3}}), encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "firstfault.cli", "audit", str(p)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "not divisible" in r.stderr


@pytest.mark.parametrize(("tp", "pp", "cp", "ep", "hosts"), [(8, 2, 1, 1, 4), (2, 2, 2, 2, 4), (4, 1, 1, 4, 4)])
def test_groups_equal_the_simulators(tp: int, pp: int, cp: int, ep: int, hosts: int) -> None:
    lay = layout_from_dict({"hosts": hosts, "parallel": {"tp": tp, "pp": pp, "cp": cp, "ep": ep}})
    grid = Grid.of(lay)
    sim = ProcessGroups.build(SimLayout(tp=tp, pp=pp, cp=cp, ep=ep), lay.world)
    assert set(grid.kinds()) == set(sim.kinds)
    for r in range(lay.world):
        for kind in sim.kinds:
            g = sim.group_of(r, kind)
            assert g is not None
            assert sorted(grid.members(r, kind)) == sorted(g.ranks), (r, kind)
            assert grid.group_key(r, kind) == min(g.ranks)


def test_another_order_by_hand() -> None:
    # tp-pp-dp: pipeline stages inner to data parallel -> stride tp=1, pp=8, dp=16
    lay = layout_from_dict({"hosts": 4, "parallel": {"tp": 8, "pp": 2, "order": "tp-cp-pp-dp"}})
    grid = Grid.of(lay)
    assert grid.members(17, "tp") == list(range(16, 24))
    assert grid.members(17, "pp") == [17, 25]
    assert grid.members(17, "dp") == [1, 17]


def test_layout_from_the_simulators_sbatch(tmp_path: Path) -> None:
    """The cluster simulator writes the job.sbatch a real job would have; reading it back gives
    the layout it simulated."""
    from firstfault_sim.cluster import Layout as SL
    from firstfault_sim.cluster import SimConfig, simulate_cluster

    cfg = SimConfig(hosts=4, gpus_per_host=8, layout=SL(tp=8, pp=2), nccl_timeout_s=300, steps=20, noise=0)
    simulate_cluster(cfg, tmp_path / "b")
    lay = load_layout(tmp_path / "b" / "job.sbatch")
    assert (lay.hosts, lay.gpus_per_host, lay.parallel.tp, lay.parallel.pp) == (4, 8, 8, 2)
    assert lay.timeouts.nccl_timeout_s == 300
    ev = lay.evidence
    assert (ev.flight_recorder_entries, ev.dump_on_timeout, ev.nccl_debug) == (2000, True, "WARN")
    assert lay.launcher.kill_on_bad_exit and lay.launcher.max_restarts == 0


def test_layout_from_a_real_capture_sbatch_with_overlay(tmp_path: Path) -> None:
    script = ROOT / "tests" / "fixtures" / "slurm" / "torch_exception_torchrun" / "job.sbatch"
    lay = load_layout(script)
    assert (lay.hosts, lay.gpus_per_host, lay.timeouts.nccl_timeout_s) == (2, 2, 10.0)
    assert not lay.launcher.kill_on_bad_exit  # `srun -l` without -K: srun's default is off
    assert lay.evidence.flight_recorder_entries == 0  # nothing exported: the flight recorder is off
    over = tmp_path / "over.json"
    over.write_text(json.dumps({"hosts_per_leaf": 1, "evidence": {"kernel_logs": True}}), encoding="utf-8")
    lay2 = load_layout(script, over)
    assert lay2.hosts_per_leaf == 1 and lay2.evidence.kernel_logs and lay2.hosts == 2


def test_script_without_nodes_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "run.sh"
    p.write_text("#!/bin/bash\ntorchrun --nproc-per-node 8 train.py --tensor-model-parallel-size 8\n", encoding="utf-8")
    with pytest.raises(InputError, match="no '#SBATCH --nodes'"):
        load_layout(p)
    p.write_text(
        "#!/bin/bash\n#SBATCH -N 16\nexport NCCL_DEBUG=WARN TORCH_NCCL_TRACE_BUFFER_SIZE=4000\n"
        "srun -K torchrun --nproc_per_node=8 pretrain_gpt.py --tensor-model-parallel-size 8 "
        "--pipeline-model-parallel-size 2 --distributed-timeout-minutes 30\n",
        encoding="utf-8",
    )
    lay = load_layout(p)
    assert (lay.hosts, lay.gpus_per_host, lay.parallel.tp, lay.parallel.pp) == (16, 8, 8, 2)
    assert lay.timeouts.nccl_timeout_s == 1800 and lay.launcher.kill_on_bad_exit
    assert lay.evidence.flight_recorder_entries == 4000 and lay.evidence.nccl_debug == "WARN"
