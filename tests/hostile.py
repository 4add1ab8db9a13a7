"""Hostile inputs of the shapes the security probe found (issues 13 and 17), built at test time.

Each builder writes one input under a directory and returns (path to analyse, command); the
inputs stay small on disk (sparse files, DUP-built pickles, compressed archives) and are made
big only where size is the attack. ``run`` runs the real CLI on one of them in a child process
and reports exit code, output, peak memory and time, so the tests can hold every input to the
same bar: exit 0 or 2, one line, no traceback, no raw control sequence, bounded memory and time.
"""

from __future__ import annotations

import io
import os
import pickle
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CONSOLE_OK = (
    "[rank0]:[E1204 10:00:00.000000000 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for 600010 "
    "milliseconds before timing out.\n"
)


@dataclass
class Outcome:
    rc: int
    out: str
    err: str
    peak_mb: float
    seconds: float  # wall time (reported, not asserted: the OS decides it on a loaded machine)
    cpu_seconds: float  # what the input cost the process itself


def run(args: list[str], cwd: Path, timeout: float = 300.0, mem_cap_gb: float = 2.0) -> Outcome:
    """The real CLI in a child process with an address-space cap; peak RSS from wait4."""
    cap = int(mem_cap_gb * 1024**3)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(
            [sys.executable, "-m", "firstfault.cli", *args],
            cwd=cwd,
            stdout=out,
            stderr=err,
            preexec_fn=limit,
            env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        )
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return Outcome(
            p.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            usage.ru_maxrss / 1024,
            seconds,
            usage.ru_utime + usage.ru_stime,
        )


# ---------------------------------------------------------------- pickles, built opcode by opcode


def nested_tuple_key_pickle(depth: int) -> bytes:
    """{((((...),),),): 1} nested ``depth`` deep, without building it in this process."""
    body = b"\x80\x02}" + b")" + b"\x85" * depth + b"K\x01s."
    return body


def dup_list_pickle(n: int) -> bytes:
    """A list of ``n`` references to one dict: tiny on disk, n entries once loaded."""
    entry = pickle.dumps({"record_id": 1, "state": "scheduled", "profiling_name": "nccl:all_reduce"}, protocol=2)[2:-1]
    parts = [b"\x80\x02", b"}", b"X\x07\x00\x00\x00entries", b"]", b"(", entry, b"q\x00"]
    parts += [b"h\x00"] * (n - 1)
    parts += [b"e", b"s", b"."]
    return b"".join(parts)


def empty_dict_bomb(n: int) -> bytes:
    """{"entries": [{}, {}, ...]} with ``n`` one-byte EMPTY_DICTs: ~64 bytes of memory per byte."""
    return b"\x80\x02}(X\x07\x00\x00\x00entriesq\x00(" + b"}" * n + b"lu."


def fr_dump(entries: list[dict[str, object]], **extra: object) -> bytes:
    d: dict[str, object] = {
        "version": "2.4",
        "pg_config": {"0": {"name": "default_pg", "desc": "default_pg", "ranks": "[0, 1]"}},
    }
    d["entries"] = entries
    d.update(extra)
    return pickle.dumps(d, protocol=2)


def fr_entry(**over: object) -> dict[str, object]:
    e: dict[str, object] = {
        "record_id": 0,
        "pg_id": 0,
        "process_group": ["0", "default_pg"],
        "collective_seq_id": 1,
        "p2p_seq_id": 0,
        "op_id": 1,
        "profiling_name": "nccl:all_reduce",
        "time_created_ns": 1_764_000_000_000_000_000,
        "input_sizes": [[10]],
        "input_dtypes": ["Float"],
        "output_sizes": [[10]],
        "output_dtypes": ["Float"],
        "state": "scheduled",
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": False,
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": [{"name": "all_reduce", "filename": "x.py", "line": 1}],
    }
    e.update(over)
    return e


# ---------------------------------------------------------------- archives


def tar_with(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class _Zeros(io.RawIOBase):
    """``n`` zero bytes, read in pieces: a big member without a big buffer."""

    def __init__(self, n: int) -> None:
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        k = min(len(b), self.left)
        b[:k] = bytes(k)
        self.left -= k
        return k


def tar_zeros(path: Path, members: int, size: int) -> Path:
    """``members`` files of ``size`` zero bytes each, gzip'd: KBs on disk, declaring GBs."""
    with tarfile.open(path, mode="w:gz", compresslevel=1) as tf:
        for i in range(members):
            ti = tarfile.TarInfo(f"rank{i}/big.log")
            ti.size = size
            tf.addfile(ti, io.BufferedReader(_Zeros(size), 1 << 20))
    return path


def tar_many(path: Path, members: int) -> Path:
    """``members`` tiny files: the member-count bomb."""
    with tarfile.open(path, mode="w:gz", compresslevel=1) as tf:
        for i in range(members):
            ti = tarfile.TarInfo(f"d{i // 1000}/{i}.log")
            ti.size = 1
            tf.addfile(ti, io.BytesIO(b"x"))
    return path


Builder = Callable[[Path], list[str]]


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    else:
        path.write_bytes(data)
    return path


def sparse(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(b"\x80\x02")
        fh.truncate(size)
    return path


def json_deep(depth: int) -> str:
    return '{"entries": ' + "[" * depth + "]" * depth + ', "pg_config": {}}'
