"""Unit tests of the discover stage (firstfault/discover.py): what each file is, from its path and
first bytes, and where it ran (attempt, local rank, host) from the layout launchers write."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.discover import discover, sniff_kind
from firstfault.vocab import BundleError, FileKind


@pytest.mark.parametrize(
    ("rel", "head", "kind"),
    [
        ("logs/run_x/attempt_0/3/stderr.log", b"", FileKind.ELASTIC_RANK_LOG),
        ("logs/run_x/attempt_1/0/error.json", b"{}", FileKind.ELASTIC_ERROR_JSON),
        ("slurm-4242.out", b"hello\n", FileKind.SLURM_OUTPUT),
        ("job.out", b"srun: error: node01: task 1: Exited with exit code 1\n", FileKind.SLURM_OUTPUT),
        (
            "dmesg.txt",
            b"[  12.3] NVRM: Xid (PCI:0000:b1:00): 79, pid=1, GPU has fallen off the bus.\n",
            FileKind.KERNEL_LOG,
        ),
        ("train.log", b"[default0]:[rank0]: step 1\n", FileKind.LAUNCHER_CONSOLE),
        ("nccl.txt", b"node1:123:456 [0] NCCL INFO Bootstrap : Using eth0\n", FileKind.NCCL_DEBUG),
        ("fr/fr_trace_rank_7", b"\x80\x04\x95", FileKind.FR_DUMP),
        ("run.sbatch", b"#!/bin/bash\n#SBATCH -N 2\n", FileKind.SCRIPT),
        ("blob.bin", b"\x00\x01\x02\x03" * 100, FileKind.BINARY),
        ("ibstat.txt", b"CA 'mlx5_0'\n\tCA type: MT4123\n\tPort 1:\n\t\tState: Active\n", FileKind.IB_STATE),
        ("notes.txt", b"just some text\n", FileKind.APP_LOG),
        ("conf/config.yaml", b"trainer:\n  max_steps: 100\n  timeout: 1800\n", FileKind.SCRIPT),
        ("accelerate.toml", b"[deepspeed]\nzero_stage = 2\n", FileKind.SCRIPT),
        # a Kubernetes object is a record of what happened (its status holds "reason: OOMKilled")
        ("pod.yaml", b"apiVersion: v1\nkind: Pod\nstatus:\n", FileKind.APP_LOG),
    ],
)
def test_kind_from_path_and_first_bytes(rel: str, head: bytes, kind: FileKind) -> None:
    assert sniff_kind(rel, head) == kind


def test_layout_gives_attempt_rank_and_host(tmp_path: Path) -> None:
    d = tmp_path / "hosts" / "gpu-7" / "logs" / "run_x" / "attempt_2" / "1"
    d.mkdir(parents=True)
    (d / "stderr.log").write_text("[rank9]: RuntimeError: x\n")
    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / "fr_trace_rank_9").write_bytes(b"\x80\x04\x95")
    b = discover(tmp_path)
    by_kind = {f.kind: f for f in b.files}
    log = by_kind[FileKind.ELASTIC_RANK_LOG]
    assert (log.attempt, log.local_rank, log.stream, log.host) == (2, 1, "stderr", "gpu-7")
    assert by_kind[FileKind.FR_DUMP].rank == 9


def test_files_come_in_a_stable_order(tmp_path: Path) -> None:
    for name in ("b.log", "a.log", "c/z.log", "c/a.log"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    assert [f.rel for f in discover(tmp_path).files] == ["a.log", "b.log", "c/a.log", "c/z.log"]


def test_a_single_file_is_a_bundle_of_one(tmp_path: Path) -> None:
    p = tmp_path / "pasted.txt"
    p.write_text("RuntimeError: boom\n")
    b = discover(p)
    assert [f.rel for f in b.files] == ["pasted.txt"]


def test_nothing_there_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no such file"):
        discover(tmp_path / "missing")
    with pytest.raises(BundleError, match="no readable files"):
        discover(tmp_path)


def test_a_runs_configuration_beside_its_logs_is_not_evidence(tmp_path: Path) -> None:
    """A config's keys and comments ("timeout", an error it works around) must not read as events."""
    import shutil

    from firstfault.pipeline import analyze

    real = Path(__file__).parent / "fixtures" / "realjobs" / "healthy_warnings"
    job = tmp_path / "job"
    shutil.copytree(real, job)
    (job / "config.yaml").write_text(
        "# NCCL_IB_DISABLE=1 works around 'NCCL WARN NET/IB : Got completion from peer'\n"
        "trainer:\n  max_steps: 100\n# was: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    (job / "accelerate.toml").write_text(
        "# torch.distributed.DistNetworkError: connection refused\nnum_processes = 4\n"
    )
    kinds = {f.rel: f.kind for f in discover(job).files}
    assert kinds["config.yaml"] == kinds["accelerate.toml"] == FileKind.SCRIPT
    v = analyze(job)
    assert str(v.category) == "none" and v.culprit.ranks == []


def test_a_log_named_for_its_rank_is_that_ranks(tmp_path: Path) -> None:
    """DeepSpeed's --enable_each_rank_log names "<time>_rank<N>.log"; people name "rank3.log" or
    "log_rank_3.txt". A word that only ends in "rank" is no rank, nor is a file that is not a log."""
    names = {
        "20261207120811_rank2.log": 2,
        "rank3.log": 3,
        "logs/log_rank_7.txt": 7,
        "train-rank-1.out": 1,
        "frank4.log": None,
        "rank5_stats.json": None,
    }
    for rel in names:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("step 1/10 loss 2.3\n")
    b = discover(tmp_path)
    try:
        got = {f.rel: f.rank for f in b.files}
    finally:
        b.close()
    assert got == names
