"""NCCL's call trace (NCCL_DEBUG_SUBSYS=COLL) names the process that called something else.

Lines in NCCL's own format (src/enqueue.cc ncclEnqueueCheck, src/init.cc Init COMPLETE); the
shape of the first test is NVIDIA/nccl#147's, where rank 0 broadcast 25,503,912 float16 while
the others broadcast 53 int64.
"""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze


def _init(rank: int, pid: int, comm: str) -> str:
    return (
        f"node1:{pid}:{pid} [{rank}] NCCL INFO comm {comm} rank {rank} nranks 4 cudaDev {rank} "
        f"nvmlDev {rank} busId {rank}b000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE\n"
    )


def _call(rank: int, pid: int, comm: str, op_count: int, count: int, datatype: int = 7) -> str:
    return (
        f"node1:{pid}:{pid} [{rank}] NCCL INFO AllReduce: opCount {op_count:x} sendbuff 0x7f88e4000000 "
        f"recvbuff 0x7f88e4000000 count {count} datatype {datatype} op 0 root 0 comm {comm} [nranks=4] "
        "stream 0x55f20d2f5db0\n"
    )


def _trace(odd_rank: int) -> str:
    comms = {r: f"0x7f88e005a2{r}0" for r in range(4)}
    lines = [_init(r, 100 + r, comms[r]) for r in range(4)]
    for r in range(4):
        lines.append(_call(r, 100 + r, comms[r], 0, 1024))
    for r in range(4):
        lines.append(_call(r, 100 + r, comms[r], 1, 2048 if r == odd_rank else 1024))
    return "".join(lines)


def test_the_odd_call_names_its_rank(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(_trace(odd_rank=2))
    v = analyze(log)
    assert str(v.category) == "collective_mismatch"
    assert v.culprit.ranks == [2]
    assert "call #1" in v.summary and "2048 float32" in v.summary


def test_the_timeouts_after_a_mismatch_are_its_consequence(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    timeouts = "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for "
        "600030 milliseconds before timing out.\n"
        for r in (0, 1, 3)
    )
    log.write_text(_trace(odd_rank=2) + timeouts)
    v = analyze(log)
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks == [2]


def test_agreeing_calls_and_ambiguous_communicators_are_no_mismatch(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(_trace(odd_rank=-1))
    assert str(analyze(log).category) == "none"
    # two communicators of one size in each process: their call counters cannot be matched up
    second = "".join(_call(r, 100 + r, f"0x7f99e005a2{r}0", 1, 4096) for r in range(4))
    log.write_text(_trace(odd_rank=-1) + second)
    assert str(analyze(log).category) == "none"


def test_one_process_driving_several_gpus_is_several_members(tmp_path: Path) -> None:
    """nccl-tests -g 2: one process, one communicator member per GPU (its '[dev]' in the prefix)."""
    lines = []
    for pid, host in ((100, "node1"), (101, "node2")):
        for dev in (0, 1):
            count = 4096 if (pid, dev) == (101, 1) else 1024
            lines.append(
                f"{host}:{pid}:{pid} [{dev}] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f88e4000000 recvbuff "
                f"0x7f88e4000000 count {count} datatype 7 op 0 root 0 comm 0x55{pid}{dev}0 [nranks=4] stream 0x55f2\n"
            )
    log = tmp_path / "nccl.log"
    log.write_text("".join(lines))
    v = analyze(log)
    assert str(v.category) == "collective_mismatch"
    assert "node2:101 (CUDA device 1)" in v.summary
