"""NCCL, CUDA and host-network evidence: signatures, NCCL topology, InfiniBand state, link faults.

Wording is real (the source of each line is cited next to it, and in the signature files);
tests/fixtures/host/README.md lists the fixtures' sources.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.discover import discover
from firstfault.match.registry import Registry, load_file, load_registry
from firstfault.parse import ibstat
from firstfault.parse.run import parse_bundle
from firstfault.parse.topology import learn_from_nccl
from firstfault.reason.network import localize_link_faults
from firstfault.vocab import Category, Event, Layer, Role
from firstfault.vocab.topology import Topology, normalize_ip, short_host

REPO = Path(__file__).resolve().parent.parent
SIG_DIR = REPO / "firstfault" / "signatures"
FIX = REPO / "tests" / "fixtures" / "host"
MINE = ("kernel.toml", "nccl.toml", "cuda.toml")


@pytest.fixture(scope="module")
def reg() -> Registry:
    return load_registry()


@pytest.mark.parametrize("name", MINE)
def test_each_signature_example_matches_and_has_a_literal(name: str) -> None:
    sigs = load_file(SIG_DIR / name)
    assert sigs
    for sig in sigs:
        assert sig.source, sig.id
        for ex in sig.examples:
            assert sig.pattern.search(ex), (sig.id, ex)
            assert any(lit in ex for lit in sig.literals), (sig.id, ex)


def _match(reg: Registry, line: str) -> tuple[str, dict[str, str]]:
    sig = reg.match(line, "elastic_rank_log")
    assert sig is not None, line
    m = sig.pattern.search(line)
    assert m is not None
    return sig.id, {k: v for k, v in m.groupdict().items() if v is not None}


def test_ib_completion_error_old_and_new_wordings(reg: Registry) -> None:
    # NCCL <= 2.20 (node-2 Azure log, public torch-distributed guide)
    sid, f = _match(
        reg,
        "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion "
        "from peer 10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)",
    )
    assert sid == "nccl.ib_completion_error_v1"
    assert (f["nccl_host"], f["pid"], f["peer"], f["peer_port"], f["wc_status"]) == (
        "node-2",
        "5776",
        "10.2.0.5",
        "33092",
        "12",
    )
    # NCCL 2.21-2.27 (NVIDIA/nccl#1814)
    sid, f = _match(
        reg,
        "NCCL WARN NET/IB : Got completion from peer xxx.xxx.xxx.xxx<55921> with status=12 "
        "opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:29.87.4.221 "
        "remoteGids::ffff:29.87.88.182",
    )
    assert sid == "nccl.ib_completion_error" and f["req_type"] == "Send" and f["remote_gid"] == "::ffff:29.87.88.182"
    # NCCL 2.28+ (p2p.cc ncclIbLogCompletionWithError; public 2.29 log)
    sid, f = _match(
        reg,
        "ubuntu2:319733:319761 [1] transport/net_ib/p2p.cc:648 NCCL WARN NET/IB: Got completion "
        "from peer 10.153.235.13<40554> with status=IBV_WC_RETRY_EXC_ERR(12) "
        "opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) vendor_err=129 localGid ::ffff:1.1.2.2 "
        "remoteGids::ffff:1.1.1.4 hca mlx5_1",
    )
    assert sid == "nccl.ib_completion_error"
    assert (f["wc_status_name"], f["wc_status"], f["hca"]) == ("IBV_WC_RETRY_EXC_ERR", "12", "mlx5_1")
    # IBV_WC_WR_FLUSH_ERR follows an earlier failure: a cascade (torch 'Last error:', NCCL 2.20.5)
    sid, _ = _match(
        reg,
        "NET/IB : Got completion from peer 10.5.0.34<33956> with error 5, opcode 0, len 1, "
        "vendor err 244 (Recv) localGid ::ffff:10.6.0.35 remoteGid ::ffff:10.5.0.34",
    )
    assert sid == "nccl.ib_completion_flushed" and reg.by_id[sid].role is Role.CASCADE


def test_async_events(reg: Registry) -> None:
    # OPT-175B training notes (rdma-sharp plugin), rdma-core ibv_event_type_str wording
    sid, f = _match(reg, "p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : port error")
    assert sid == "nccl.ib_async_port_error" and reg.by_id[sid].role is Role.ROOT
    sid, _ = _match(reg, "NET/IB : Got async event : port active")
    assert sid == "nccl.ib_async_port_active" and reg.by_id[sid].role is Role.NOISE
    # public EFA/NCCL notes
    sid, f = _match(reg, "NET/IB: ibp198s0f0:1 async fatal event on QP: local access violation work queue error")
    assert sid == "nccl.ib_async_fatal" and (f["ib_dev"], f["ib_port"], f["ib_object"]) == (
        "ibp198s0f0",
        "1",
        "QP",
    )


def test_nccl_errors_and_watchdog(reg: Registry) -> None:
    sid, _ = _match(
        reg,
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    )
    assert sid == "nccl.error.remote" and reg.by_id[sid].category is Category.NETWORK
    sid, _ = _match(
        reg,
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
    )
    assert sid == "nccl.error.system"
    sid, f = _match(
        reg,
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.19.3",
    )
    assert sid == "nccl.error.in" and (f["nccl_error"], f["nccl_version"]) == (
        "unhandled system error",
        "2.19.3",
    )
    # torch 2.5 log: the timeout, and the watchdog re-raising it (must not count as a second timeout)
    sid, f = _match(
        reg,
        "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, "
        "NumelOut=131072000, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
    )
    assert sid == "nccl.watchdog_timeout"
    assert (f["pg_rank"], f["seq"], f["op_type"], f["timeout_ms"], f["ran_ms"]) == (
        "0",
        "1",
        "BROADCAST",
        "600000",
        "600081",
    )
    sid, f = _match(
        reg,
        "[rank9]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 9] Process group watchdog thread "
        "terminated with exception: NCCL error: remote process exited or there was a network "
        "error, NCCL version 2.20.5",
    )
    assert sid == "nccl.watchdog_thread_terminated" and reg.by_id[sid].role is Role.TEARDOWN and f["pg_rank"] == "9"
    sid, f = _match(
        reg,
        "[rank1]:[E813 12:25:30.692163833 ProcessGroupNCCL.cpp:2271] [PG ID 1 PG GUID 1 Rank 1]  "
        "failure detected by watchdog at work sequence id: 57 PG status: last enqueued work: 57, "
        "last completed work: 56",
    )
    assert sid == "nccl.watchdog_failure_detected" and (f["last_enqueued"], f["last_completed"]) == (
        "57",
        "56",
    )
    sid, f = _match(
        reg,
        "Exception raised from checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1723 (most recent call first):",
    )
    assert sid == "nccl.exception_raised_from" and reg.by_id[sid].role is Role.TEARDOWN


@pytest.mark.parametrize(
    ("line", "sid", "category"),
    [
        (
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "cuda.illegal_address",
            Category.APPLICATION_ERROR,
        ),
        (
            "RuntimeError: CUDA error: device-side assert triggered",
            "cuda.device_assert",
            Category.APPLICATION_ERROR,
        ),
        (
            "torch.AcceleratorError: CUDA error: unspecified launch failure",
            "cuda.unspecified_launch_failure",
            Category.GPU_HARDWARE,
        ),
        (
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "cuda.ecc_uncorrectable",
            Category.GPU_HARDWARE,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 324.00 MiB. "
            "GPU 0 has a total capacity of 7.63 GiB of which 91.25 MiB is free.",
            "cuda.oom",
            Category.GPU_OOM,
        ),
        (
            "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1422: indexSelectLargeIndex: "
            "block: [54,0,0], thread: [32,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
            "cuda.kernel_assertion",
            Category.APPLICATION_ERROR,
        ),
    ],
)
def test_cuda_errors(reg: Registry, line: str, sid: str, category: Category) -> None:
    got, _ = _match(reg, line)
    assert got == sid and reg.by_id[sid].category is category


@pytest.mark.parametrize(
    "line",
    [  # vllm-project/vllm#16330 and #10855 (HIP build), mlverse torch report, newer torch's search hint
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.",
        "Device-side assertions were explicitly omitted for this error check; the error probably arose while "
        "initializing the DSA handlers.",
    ],
)
def test_cuda_advice_lines_are_noise(reg: Registry, line: str) -> None:
    sid, _ = _match(reg, line)
    sig = reg.by_id[sid]
    assert sig.role is Role.NOISE and sig.severity == "info", sid


def _bundle_events(path: Path) -> tuple[list[Event], Topology]:
    b = discover(path)
    r = parse_bundle(b, load_registry())  # the topology is learnt at the end of parsing
    return r.events, r.ctx.topology


def test_topology_from_nccl_lines() -> None:
    events, topo = _bundle_events(FIX / "link_flap")
    assert topo.rank_host == {0: "gpu-a", 1: "gpu-b"}
    assert topo.rank_gpu == {0: "0000:18:00.0", 1: "0000:9b:00.0"}
    assert topo.ip_host == {"10.2.0.4": "gpu-a", "10.2.0.5": "gpu-b"}
    assert topo.world_size == 2
    # a kernel Xid on gpu-b's 0000:9b:00 (NVRM spelling) names rank 1
    assert topo.ranks_on_gpu("gpu-b", "0000:9b:00") == [1] and topo.ranks_on_gpu("gpu-a", "0000:9b:00") == []
    warn = [e for e in events if e.signature == "nccl.ib_completion_error_v1"]
    assert {(e.host, e.rank, e.pid) for e in warn} == {("gpu-a", 0, 5776), ("gpu-b", 1, 4321)}
    assert all(e.layer is Layer.NETWORK for e in warn)


def test_topology_ignores_sub_communicators() -> None:
    # NVIDIA/nccl#1814 line shape: a 64-rank world comm and an 8-rank sub-comm on the same process
    def ev(i: int, rank: int, nranks: int, bus: str) -> Event:
        return Event(
            id=i,
            source="x",
            line=i,
            text="",
            signature="nccl.init_complete",
            category=Category.NONE,
            layer=Layer.FRAMEWORK,
            role=Role.NOISE,
            pid=984,
            fields={
                "nccl_host": "hostname-test",
                "pid": "984",
                "nccl_rank": str(rank),
                "nranks": str(nranks),
                "bus_id": bus,
                "cuda_dev": "4",
                "comm": f"0x{i}",
            },
        )

    topo = Topology()
    learn_from_nccl([ev(0, 4, 8, "9b000"), ev(1, 36, 64, "9b000")], topo)
    assert topo.rank_host == {36: "hostname-test"} and topo.world_size == 64


def test_link_fault_blames_the_end_whose_port_went_down() -> None:
    events, topo = _bundle_events(FIX / "link_flap")
    faults = localize_link_faults(events, topo, parse_bundle(discover(FIX / "link_flap"), load_registry()).ib)
    lf = faults[0]
    assert (lf.host_a, lf.host_b, lf.faulty_side) == ("gpu-a", "gpu-b", "gpu-b")
    assert (lf.device, lf.port) == ("mlx5_0", "1")
    assert lf.link == "gpu-a<->gpu-b:mlx5_0/1"
    ids = {e.id: e.signature for e in events}
    assert {"nccl.ib_completion_error_v1", "kernel.ib_port_down"} <= {ids[i] for i in lf.evidence}


def test_link_fault_without_port_evidence_is_undetermined() -> None:
    events, topo = _bundle_events(FIX / "link_flap")
    events = [e for e in events if not e.signature.startswith("kernel.")]
    faults = localize_link_faults(events, topo)
    assert len(faults) == 1 and faults[0].faulty_side is None
    assert any("undetermined" in r for r in faults[0].reasons)


def test_link_fault_common_endpoint() -> None:
    # three hosts; both failing links involve gpu-c and no port evidence anywhere
    def err(i: int, host: str, peer: str) -> Event:
        return Event(
            id=i,
            source="x",
            line=i,
            text="",
            signature="nccl.ib_completion_error",
            category=Category.NETWORK,
            layer=Layer.NETWORK,
            role=Role.ROOT,
            host=host,
            fields={"peer": peer, "wc_status": "12"},
        )

    topo = Topology(ip_host={"10.0.0.1": "gpu-a", "10.0.0.2": "gpu-b", "10.0.0.3": "gpu-c"})
    faults = localize_link_faults(
        [err(0, "gpu-a", "10.0.0.3"), err(1, "gpu-b", "10.0.0.3"), err(2, "gpu-c", "10.0.0.1")], topo
    )
    assert {lf.faulty_side for lf in faults} == {"gpu-c"}


def test_counters_that_moved_decide_the_side(tmp_path: Path) -> None:
    # sysfs counter names: Linux Documentation/ABI/stable/sysfs-class-infiniband
    for snap, downed in (("before", 0), ("after", 2)):
        for host in ("gpu-a", "gpu-b"):
            d = tmp_path / host / snap / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
            d.mkdir(parents=True)
            (d / "link_downed").write_text(f"{downed if host == 'gpu-b' else 0}\n")
            (d / "symbol_error").write_text("0\n")
    hosts = ibstat.collect(discover(tmp_path))
    assert hosts["gpu-b"].moved_counters("mlx5_0", 1) == {"link_downed": 2}
    assert hosts["gpu-a"].moved_counters("mlx5_0", 1) == {}
    events, topo = _bundle_events(FIX / "link_flap")
    events = [e for e in events if not e.signature.startswith("kernel.")]
    lf = localize_link_faults(events, topo, hosts)[0]
    assert lf.faulty_side == "gpu-b" and (lf.device, lf.port) == ("mlx5_0", "1")


def test_ibstat_ibv_devinfo_rdma_link() -> None:
    ports = ibstat.parse_ibstat((FIX / "ibstat.txt").read_text())
    assert [(p.device, p.port, p.state, p.phys_state, p.rate, p.is_down()) for p in ports] == [
        ("mlx4_0", 1, "Active", "LinkUp", "40", False),
        ("mlx4_1", 1, "Down", "Polling", "10", True),
    ]
    dev = ibstat.parse_ibv_devinfo((FIX / "ibv_devinfo.txt").read_text())
    assert [(p.device, p.port, p.state, p.link_layer, p.is_down()) for p in dev] == [
        ("ib0", 1, "PORT_ACTIVE (4)", "Ethernet", False)
    ]
    rl = ibstat.parse_rdma_link((FIX / "rdma_link.txt").read_text())
    assert [(p.device, p.is_down(), p.netdev) for p in rl] == [
        ("mlx5_0", True, "ens7f0np0"),
        ("mlx5_1", False, "ens7f1np1"),
        ("mlx5_2", True, "ens10f0np0"),
        ("mlx5_3", False, "ens10f1np1"),
    ]
    # variants from public dumps: bonded devices with an index, and a colon after the port
    alt = ibstat.parse_rdma_link(
        "8/1: mlx5_bond_0/1: state ACTIVE physical_state LINK_UP netdev reth0\n"
        "link mlx5_0/1: state ACTIVE physical_state LINK_UP netdev ens21f0\n"
    )
    assert [(p.device, p.port, p.state) for p in alt] == [
        ("mlx5_bond_0", 1, "ACTIVE"),
        ("mlx5_0", 1, "ACTIVE"),
    ]
    for name, fmt in (
        ("ibstat.txt", "ibstat"),
        ("ibv_devinfo.txt", "ibv_devinfo"),
        ("rdma_link.txt", "rdma_link"),
    ):
        assert ibstat.sniff((FIX / name).read_text()) == fmt
    dump = ibstat.parse_counter_dump(
        "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:3\n"
        "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0\n"
    )
    assert dump == {("mlx5_0", 1): {"link_downed": 3, "symbol_error": 0}}


def test_helpers() -> None:
    assert normalize_ip("::ffff:10.2.0.4") == "10.2.0.4"
    assert short_host("g1064.hostmgmt2001.example.fr") == "g1064"
    assert short_host("10.2.0.4") == "10.2.0.4"
