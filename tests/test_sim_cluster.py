"""The cluster simulator at small sizes (seconds): layout, propagation, determinism, wording.

The wording test is the one that matters: for every kind of line the simulator writes, a real
line of that kind (from a real bundle in tests/fixtures, or quoted from the public log its
template was copied from) and the simulated line must hit the same signature.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from firstfault.match.registry import load_registry
from firstfault.parse.kernel import parse_line
from firstfault.vocab.identity import strip_prefixes
from firstfault_sim.cluster import FAULT_KINDS, Layout, SimConfig, parse_fault, simulate_cluster
from firstfault_sim.cluster.layout import ProcessGroups
from firstfault_sim.cluster.schedule import Schedule, Stop, propagate
from firstfault_sim.cluster.templates import SOURCES

FIXTURES = Path(__file__).parent / "fixtures"
REAL_TORCHRUN = FIXTURES / "slurm" / "torch_exception_torchrun"


def _sim(tmp: Path, kind: str, name: str | None = None, **kw: object) -> tuple[Path, dict[str, object]]:
    args: dict[str, object] = dict(
        hosts=2,
        gpus_per_host=4,
        layout=Layout(tp=4),
        nccl_timeout_s=60.0,
        steps=40,
        seed=7,
        faults=(parse_fault(kind),) if kind != "none" else (),
    )
    args.update(kw)
    out = tmp / (name or kind)
    truth = simulate_cluster(SimConfig(**args), out)  # type: ignore[arg-type]
    return out, truth


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- model


def test_megatron_groups() -> None:
    g = ProcessGroups.build(Layout(tp=4, pp=2, ep=2), 32)
    assert g.layout.dp == 4
    assert g.group_of(5, "tp").ranks == (4, 5, 6, 7)  # type: ignore[union-attr]
    assert g.group_of(5, "dp").ranks == (1, 5, 9, 13)  # type: ignore[union-attr]
    assert g.group_of(5, "pp").ranks == (5, 21)  # type: ignore[union-attr]
    assert g.group_of(5, "ep").ranks == (1, 5)  # type: ignore[union-attr]
    assert g.group_rank(21, "pp") == 1 and g.stage(21) == 1
    # a group's GUID is its creation index, the same on every member
    assert g.group_of(4, "tp").guid == g.group_of(7, "tp").guid  # type: ignore[union-attr]


def test_hang_blocks_every_other_rank_in_a_collective() -> None:
    g = ProcessGroups.build(Layout(tp=4, pp=2), 32)
    s = Schedule(g)
    blocked = propagate(s, [Stop(rank=9, step=3, index=2)])
    assert set(blocked) == set(range(32))
    assert not blocked[9].inside  # the culprit never entered its next collective
    assert all(b.inside for r, b in blocked.items() if r != 9)
    # its TP peers wait in the very next TP op; its pipeline peer at the boundary
    tmpl = s.template(8)
    assert tmpl[blocked[8].index].slot == "tp" and blocked[8].step == 3


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_every_kind_writes_a_real_layout(tmp_path: Path, kind: str) -> None:
    out, truth = _sim(tmp_path, kind)
    assert truth["fault"] == kind
    assert (out / "truth.json").exists()
    job = truth["job_id"]
    assert (out / f"slurm-{job}.out").exists()
    logs = sorted(out.glob("host-gpu*/logs/ff-*/attempt_0/*/stdout.log"))
    assert len(logs) == 8
    assert (out / "host-gpu0001" / "dmesg.log").exists()
    assert truth["expected_category"] and truth["expected_action"]
    if truth["culprit_key"] in ("rank", "host", "link"):
        assert truth["culprit_ranks"] and truth["culprit_hosts"]
    if kind == "thermal":
        assert truth["job_state"] == "COMPLETED"
    else:
        assert truth["job_state"] != "COMPLETED"


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a, _ = _sim(tmp_path, "dataloader_hang", "a")
    b, _ = _sim(tmp_path, "dataloader_hang", "b")
    fa, fb = _files(a), _files(b)
    fa.pop("truth.json"), fb.pop("truth.json")  # holds the generation time
    assert fa.keys() == fb.keys()
    assert all(hashlib.sha256(fa[k]).digest() == hashlib.sha256(fb[k]).digest() for k in fa)


def test_kill_on_bad_exit_ends_the_step_before_any_timeout(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "exception", "kill", kill_on_bad_exit=True)
    assert truth["timeouts"] == 0
    text = (out / f"slurm-{truth['job_id']}.out").read_text()
    assert f"srun: Terminating StepId={truth['job_id']}.0" in text
    assert "death signal, shutting down workers" in text
    _out2, truth2 = _sim(tmp_path, "exception", "nokill", kill_on_bad_exit=False, remote_errors=False)
    # the culprit's node is torn down by its agent; every other rank times out in its collective
    assert truth2["timeouts"] == 4
    culprit = int(truth2["culprit_ranks"][0])  # type: ignore[index]
    assert truth2["first_timeout_rank"] != culprit


def test_hang_writes_flight_recorder_dumps_that_load(tmp_path: Path) -> None:
    from firstfault.flightrec.load import load_dumps

    out, truth = _sim(tmp_path, "dataloader_hang", hosts=2, gpus_per_host=8, layout=Layout(tp=4, pp=2))
    assert 0 < int(truth["timeouts"]) <= 15  # type: ignore[call-overload]
    dumps = sorted((out / "fr").iterdir())
    assert len(dumps) == 16  # the hung rank is alive and dumps too
    loaded = load_dumps(dumps)
    assert len(loaded.dumps) == 16
    culprit = int(truth["culprit_ranks"][0])  # type: ignore[index]
    entries = {d.rank: d for d in loaded.dumps}
    # the hung rank's last entry is retired; a victim's last one is the op it waits in
    assert culprit in entries


def test_timeouts_fire_exactly_on_ranks_alive_at_their_deadline() -> None:
    from firstfault_sim.cluster.scenario import simulate

    cfg = SimConfig(
        hosts=4,
        gpus_per_host=8,
        layout=Layout(tp=4, pp=2),
        nccl_timeout_s=60.0,
        steps=40,
        seed=3,
        faults=(parse_fault("dataloader_hang"),),
        kill_on_bad_exit=False,
    )
    o = simulate(cfg)
    culprit = o.faults[0].host * 8 + o.faults[0].local
    assert culprit not in o.timeouts
    for r, b in o.blocked.items():
        if r == culprit:
            continue
        assert b.inside
        deadline = o.enter_t[r] + cfg.nccl_timeout_s
        t_exit = o.exits[r][0]
        if r in o.timeouts:
            assert deadline <= o.timeouts[r] <= t_exit  # it was alive when its watchdog fired
        else:
            assert t_exit < deadline + 0.1  # torn down by its agent before its own deadline
    # the rank that timed out first is one that entered its collective first
    first = min(o.timeouts, key=o.timeouts.__getitem__)
    assert o.enter_t[first] == min(o.enter_t[r] for r in o.timeouts)


def test_node_failure_of_the_batch_host_silences_srun(tmp_path: Path) -> None:
    """srun runs on the job's first node: when that node dies, the job output just stops."""
    out, truth = _sim(tmp_path, "node_failure:host=gpu0001", hosts=4, gpus_per_host=4, kill_on_bad_exit=False)
    assert truth["culprit_hosts"] == ["gpu0001"]
    assert "Node failure on" not in (out / f"slurm-{truth['job_id']}.out").read_text()
    assert "error: Nodes gpu0001 not responding, setting DOWN" in (out / "slurmctld.log").read_text()


def test_node_failure_silences_the_host(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "node_failure:host=gpu0003", hosts=4, gpus_per_host=4, kill_on_bad_exit=False)
    dead = truth["culprit_hosts"][0]  # type: ignore[index]
    t_dead = truth["faults"][0]["time"]  # type: ignore[index]
    ctld = (out / "slurmctld.log").read_text()
    assert f"error: Nodes {dead} not responding, setting DOWN" in ctld
    assert f"srun: error: Node failure on {dead}" in (out / f"slurm-{truth['job_id']}.out").read_text()
    # nothing the dead host wrote is later than its death (its own clock may be a bit off)
    for p in (out / f"host-{dead}").rglob("stdout.log"):
        last = p.read_text().strip().splitlines()[-1]
        assert "step" in last or "NCCL" in last or "start" in last
    assert t_dead


def test_lost_host_without_nccl_info_is_the_host_not_its_peer(tmp_path: Path) -> None:
    """NCCL_DEBUG=WARN (noise 0): no line maps the dead node's address to its name, and slurmctld
    says "not responding" after the job ended. The ranks' log folders say where each rank ran, the
    scheduler names the node, and the address no other host owns is the dead node's."""
    from firstfault.pipeline import analyze

    out, truth = _sim(
        tmp_path, "node_failure:host=gpu0004", hosts=4, gpus_per_host=8, layout=Layout(tp=8), noise=0, seed=0
    )
    v = analyze(out)
    assert str(v.category) == truth["expected_category"] == "scheduler"
    assert v.culprit.hosts == ["gpu0004"] and v.culprit.ranks[0] in truth["culprit_ranks"]  # type: ignore[operator]


# ----------------------------------------------------------------------------- wording

# (a real line of each kind, quoted from the public log or real capture the template names,
#  a substring that finds the simulated line of the same kind, the file kind it is parsed as)
REAL_LINES: list[tuple[str, str, str]] = [
    (
        "[rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=20585, OpType=ALLREDUCE, NumelIn=1259621, NumelOut=1259621, Timeout(ms)=600000) ran "
        "for 600000 milliseconds before timing out.",
        "Watchdog caught collective operation timeout",
        "elastic_rank_log",
    ),
    (
        "[rank0]:[E709 17:05:38.162814866 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure "
        "detected by watchdog at work sequence id: 20585 PG status: last enqueued work: 20589, last completed work: 20584",
        "failure detected by watchdog",
        "elastic_rank_log",
    ),
    (
        "[rank0]:[E709 17:05:39.081662161 ProcessGroupNCCL.cpp:684] [Rank 0] Some NCCL operations have failed or timed "
        "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete "
        "data.",
        "Some NCCL operations have failed",
        "elastic_rank_log",
    ),
    (
        "[rank0]:[E709 17:05:39.083402482 ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process "
        "group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=20585, OpType=ALLREDUCE, NumelIn=1259621, NumelOut=1259621, Timeout(ms)=600000) ran for 600000 "
        "milliseconds before timing out.",
        "terminated with exception: [Rank",
        "elastic_rank_log",
    ),
    (
        "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most "
        "recent call first):",
        "Exception raised from checkTimeout",
        "elastic_rank_log",
    ),
    (
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "terminate called after",
        "elastic_rank_log",
    ),
    (
        "[rank8]:[E129 16:38:47.801786726 ProcessGroupNCCL.cpp:1858] [PG ID 0 PG GUID 0(default_pg) Rank 8] Received a "
        "dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. "
        "Last enqueued NCCL work: 62, last completed NCCL work: 62.This is most likely caused by incorrect usages of "
        "collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the "
        "scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other "
        "reasons such as network errors or bugs in the communications library (e.g. NCCL), etc.",
        "from this local rank",
        "elastic_rank_log",
    ),
    (
        "[rank0]:[E129 16:38:47.634597716 ProcessGroupNCCL.cpp:1794] [PG ID 0 PG GUID 0(default_pg) Rank 0] Observed "
        "flight recorder dump signal from another rank via TCPStore.",
        "Observed flight recorder",
        "elastic_rank_log",
    ),
    (
        "[rank0]:[E512 10:21:08.164595040 ProcessGroupNCCL.cpp:2057] [PG ID 12 PG GUID 35(EXPERT_MODEL_PARALLEL_GROUP) "
        "Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was "
        "encountered",
        "terminated with exception: CUDA error",
        "elastic_rank_log",
    ),
    (
        "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
        "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
        "fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f",
        "Got completion from peer",
        "elastic_rank_log",
    ),
    (
        "p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : port error",
        "Got async event : port error",
        "elastic_rank_log",
    ),
    (
        "hostname-test:984:1257 [4] NCCL INFO comm 0x557fe785f7a0 rank 36 nranks 64 cudaDev 4 nvmlDev 4 busId 9b000 "
        "commId 0x5ae77eb5ea4ec1ee - Init COMPLETE",
        "Init COMPLETE",
        "elastic_rank_log",
    ),
    (
        "tpgds-aihub0003:3828979:3828979 [3] NCCL INFO comm 0x56396871db00 rank 3 nRanks 16 nNodes 2 localRanks 8 "
        "localRank 3 MNNVL 0",
        "localRanks",
        "elastic_rank_log",
    ),
    (
        "gpu-a3:47021:47095 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.4.2.31<0>",
        "NET/IB : Using",
        "elastic_rank_log",
    ),
    (
        "ip-10-0-139-244:1465:1465 [0] NCCL INFO Bootstrap : Using eth0:10.0.139.244<0>",
        "Bootstrap : Using",
        "elastic_rank_log",
    ),
    (
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "internal error - please report this issue to the NCCL developers, NCCL version 2.21.5",
        "internal error - please",
        "elastic_rank_log",
    ),
    ("[rank1]: ncclInternalError: Internal check failed.", "ncclInternalError", "elastic_rank_log"),
    (
        "[rank0]: RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file "
        "data.pkl: file write failed",
        "PytorchStreamWriter",
        "elastic_rank_log",
    ),
    (
        "E0709 17:05:39.816000 56204 site-packages/torch/distributed/elastic/multiprocessing/api.py:874] failed "
        "(exitcode: -6) local_rank: 0 (pid: 56213) of binary: /opt/conda/bin/python3.10",
        "failed (exitcode: -6)",
        "launcher_console",
    ),
    (
        "W0616 00:37:22.830000 4015698 torch/distributed/elastic/agent/server/api.py:719] Received Signals.SIGTERM death "
        "signal, shutting down workers",
        "death signal",
        "launcher_console",
    ),
    (
        "W0116 02:43:46.376000 846088 torch/distributed/elastic/multiprocessing/api.py:1010] Sending process 846215 "
        "closing signal SIGTERM",
        "closing signal SIGTERM",
        "launcher_console",
    ),
    (
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 17912 got signal: 15",
        "api.SignalException: Process",
        "launcher_console",
    ),
    ("  traceback : Signal 6 (SIGABRT) received by PID 56213", "(SIGABRT) received by PID", "launcher_console"),
    ("srun: error: nid001097: task 5: Exited with exit code 255", "Exited with exit code", "slurm_output"),
    ("srun: Terminating StepId=40341.0", "srun: Terminating StepId", "slurm_output"),
    ("srun: Force Terminated StepId=40341.0", "Force Terminated", "slurm_output"),
    ("srun: error: node01: task 0: Terminated", ": Terminated", "slurm_output"),
    ("srun: error: Node failure on node02", "Node failure on", "slurm_output"),
    (
        "slurmstepd-node01: error: *** JOB 4 ON node01 CANCELLED AT 2026-12-02T14:54:20 DUE TO NODE FAILURE, SEE "
        "SLURMCTLD LOG FOR DETAILS ***",
        "DUE TO NODE FAILURE",
        "slurm_output",
    ),
    (
        "slurmstepd-node01: error: *** JOB 1 ON node01 CANCELLED AT 2026-12-02T14:54:11 DUE TO TIME LIMIT ***",
        "DUE TO TIME LIMIT",
        "slurm_output",
    ),
    ("[2026-12-02T15:03:08.386] error: Nodes node02 not responding, setting DOWN", "not responding", "slurm_output"),
    ("[2026-12-02T15:03:08.385] Killing JobId=4 on failed node node02", "on failed node", "slurm_output"),
    ("[2026-12-02T15:03:43.413] _job_complete: JobId=1 WEXITSTATUS 1", "WEXITSTATUS", "slurm_output"),
    ("srun: error: nid005651: task 3: Out Of Memory", "Out Of Memory", "slurm_output"),
    (
        "[...] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "): 79,",
        "kernel_log",
    ),
    ("[  228.414765] NVRM: GPU 0000:09:00.0: GPU has fallen off the bus.", "NVRM: GPU 0000", "kernel_log"),
    (
        "[Mon Oct 29 12:07:39 2018] NVRM: Xid (PCI:0000:8a:00): 48, An uncorrectable double bit error (DBE) has been "
        "detected on GPU in the framebuffer at partition 4, subpartition 1.",
        "): 48,",
        "kernel_log",
    ),
    (
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of "
        "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
        "): 119,",
        "kernel_log",
    ),
    ("mlx5_core 0000:08:00.0 mlx5_0: Port: 1 Link DOWN", "Link DOWN", "kernel_log"),
    (
        "[337533.314412] Memory cgroup out of memory: Killed process 23793 (leaker) total-vm:2623712kB, "
        "anon-rss:506500kB, file-rss:1268kB, shmem-rss:0kB",
        "Killed process",
        "kernel_log",
    ),
]


def _texts(root: Path) -> dict[str, list[str]]:
    """Simulated lines by the file kind they live in (prefixes left on)."""
    out: dict[str, list[str]] = {"elastic_rank_log": [], "launcher_console": [], "slurm_output": [], "kernel_log": []}
    for p in root.rglob("*"):
        if not p.is_file() or p.name in ("truth.json", "job.sbatch") or "/fr/" in p.as_posix():
            continue
        text = p.read_text(errors="replace").splitlines()
        if p.name in ("stdout.log", "stderr.log"):
            out["elastic_rank_log"] += text
        elif p.name == "dmesg.log":
            out["kernel_log"] += text
        else:
            out["slurm_output"] += text
            out["launcher_console"] += text
    return out


def _bare(line: str, kind: str) -> str:
    if kind == "kernel_log":
        return parse_line(line).msg
    text = line
    # srun -l label, torchrun's [defaultN]:, torch's [rankN]: (what the parsers peel)
    head, sep, rest = text.partition(": ")
    if sep and head.strip().isdigit():
        text = rest
    text, _, _ = strip_prefixes(text, srun=False)
    return text


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("wording")
    lines: dict[str, list[str]] = {}
    runs = [
        ("dataloader_hang", {}),
        ("xid79", {}),
        ("xid48", {}),
        ("xid119", {}),
        ("nic_down", {}),
        ("host_oom", {}),
        ("node_failure:host=gpu0002", {"kill_on_bad_exit": False}),
        ("nccl_bug", {}),
        ("disk_full", {}),
        ("time_limit", {}),
        ("exception", {"kill_on_bad_exit": False}),
    ]
    for kind, kw in runs:
        out, _ = _sim(root, kind, hosts=2, gpus_per_host=4, **kw)  # type: ignore[arg-type]
        for k, v in _texts(out).items():
            lines.setdefault(k, []).extend(v)
    return lines


@pytest.mark.parametrize(("real", "needle", "kind"), REAL_LINES, ids=[x[1][:30] for x in REAL_LINES])
def test_simulated_lines_hit_the_same_signature_as_real_ones(
    simulated: dict[str, list[str]], real: str, needle: str, kind: str
) -> None:
    reg = load_registry()
    sim = next((ln for ln in simulated[kind] if needle in ln), None)
    assert sim is not None, f"the simulator never wrote a {needle!r} line"
    want = reg.match(_bare(real, kind), kind)
    got = reg.match(_bare(sim, kind), kind)
    assert want is not None, f"no signature for the real line {real!r}"
    assert got is not None and got.id == want.id, (sim, got and got.id, want.id)


def test_real_torchrun_bundle_and_simulated_one_share_signatures(tmp_path: Path) -> None:
    """A real 2-node srun+torchrun capture and a simulated job with the same fault (an exception)."""
    if not REAL_TORCHRUN.exists():
        pytest.skip("real SLURM capture not present")
    from firstfault.discover import discover
    from firstfault.parse.run import parse_bundle

    reg = load_registry()

    def sigs(p: Path) -> set[str]:
        b = discover(p)
        try:
            return {e.signature for e in parse_bundle(b, reg).events}
        finally:
            b.close()

    out, _ = _sim(tmp_path, "exception", kill_on_bad_exit=False, remote_errors=False)
    real, sim = sigs(REAL_TORCHRUN), sigs(out)
    launcher_and_app = {
        "python.exception",
        "python.faulthandler_dump",
        "torchelastic.failure_record",
        "torchelastic.worker_failed",
        "torchelastic.closing_signal",
        "torchelastic.child_failed",
        "torchelastic.no_error_file",
        "slurm.task_exit",
        "slurm.job_state_failed",
        "slurmctld.job_complete_fail",
    }
    assert launcher_and_app <= real
    assert launcher_and_app <= sim, launcher_and_app - sim


def test_every_template_names_its_source() -> None:
    assert len(SOURCES) > 60
    for name, src in SOURCES.items():
        assert src.source.strip() and src.text.strip(), name
    doc = Path(__file__).parent.parent / "docs" / "cluster-simulator.md"
    if doc.exists():  # the docs' template table lists every template
        text = doc.read_text()
        assert [n for n in SOURCES if f"| {n} |" not in text] == []


def test_scale_bench_scores_and_draws(tmp_path: Path) -> None:
    from firstfault_bench.png import _FONT, Canvas
    from firstfault_bench.scale import plan, render_accuracy, run_one, score

    assert all(len(g) == 35 for g in _FONT.values())
    scen = plan(19, seed=3, sizes=[8, 16])
    assert {s.kinds[0] for s in scen} == set(FAULT_KINDS)
    r = run_one(next(s for s in scen if s.kinds[0] == "xid79"), str(tmp_path))
    assert not r.error and r.truth_gpus and r.key == "rank"
    assert "Culprit top-1 by fault kind" in render_accuracy([r])
    truth = {
        "culprit_key": "link",
        "culprit_hosts": ["gpu0003"],
        "culprit_ranks": [18],
        "culprit_gpus": [],
        "culprit_links": ["gpu0003:mlx5_2/1<->leaf-p000-r2:3"],
        "expected_category": "network",
        "expected_action": "restart",
    }
    verdict = {
        "verdict": {
            "culprit": {"hosts": ["gpu0003"], "links": ["gpu0003<->gpu0001:mlx5_2/1"]},
            "category": "network",
            "action": "restart",
        }
    }
    assert score(truth, verdict)["culprit_ok"]
    png = Canvas(20, 10).png()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and b"IEND" in png


def test_scale_speed_bench_measures_both_tools_on_one_bundle(tmp_path: Path) -> None:
    """``bench scale-speed`` end to end on an 8-rank bundle: grep and firstfault over the same
    files, the verdict scored, the table, JSON and chart written. No time is asserted."""
    from firstfault_bench.scale_speed import run_speed

    (row,) = run_speed(tmp_path / "out", sizes=(8,), long_steps=(), workdir=tmp_path / "work")
    assert row.ranks == 8 and row.rc == 0 and row.correct and row.files > 0
    assert row.ff_rss_mb > 0 and row.ratio > 0
    out = tmp_path / "out"
    assert "| 8 | 60 |" in (out / "scale_speed.md").read_text()
    assert json.loads((out / "scale_speed.json").read_text())[0]["ranks"] == 8
    assert (out / "scale_speed.png").read_bytes().startswith(b"\x89PNG")


def test_cli_writes_a_bundle(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from firstfault.cli.simulate import app

    res = CliRunner().invoke(
        app,
        [
            "cluster",
            "--out",
            str(tmp_path / "b"),
            "--hosts",
            "2",
            "--gpus-per-host",
            "4",
            "--fault",
            "xid79@30:rank=5",
            "--steps",
            "40",
            "--nccl-timeout",
            "60",
        ],
    )
    assert res.exit_code == 0, res.output
    truth = json.loads((tmp_path / "b" / "truth.json").read_text())
    assert truth["culprit_ranks"] == [5] and truth["culprit_gpus"] == ["0000:18:00.0"]
    bad = CliRunner().invoke(app, ["cluster", "--out", str(tmp_path / "c"), "--fault", "nosuch"])
    assert bad.exit_code != 0
