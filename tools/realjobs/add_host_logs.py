"""Give real SLURM bundles the kernel logs their nodes would have: days of boot noise, and a fault.

    python tools/realjobs/add_host_logs.py SLURM_SET OUT

For each case below a SLURM bundle of ``make_slurm_set.py`` is copied and every node gets a
``host-<node>/dmesg.log``: the real boot log of a GPU node from leptonai/gpud's test data
(``../shared/peer-data/gpud-kernel-logs/pkg_pstore_*``: cable and SATA link events, mlx5 bring-up,
...) re-timed to a boot two days before the job, in ``dmesg -T`` form on node01 and ``dmesg -x
--time-format iso`` form on node02, plus stale faults of earlier days (an Xid 13 of another job,
an OOM kill of another process). Where the case says so, a fault line is placed inside the job's
window, 300 ms after the culprit rank's last progress line: an Xid 79 ("GPU has fallen off the
bus", NVIDIA's wording as in tests/fixtures/scenarios/xid79_akash209.dmesg) or the kernel OOM
killer's line (tests/fixtures/scenarios/oom_lkml.dmesg's shape). The truth is rewritten to what the
node's fault makes it. Needs ../shared (skips with a message when it is absent).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOOT_LOG = ROOT.parent / "shared" / "peer-data" / "gpud-kernel-logs" / "pkg_pstore_7530486857247_dmesg.txt"
GPU_PCI = {"node01": "0000:3b:00", "node02": "0000:86:00"}
# case -> (source bundle, fault on host, culprit rank, new truth or None to keep the source's)
CASES = {
    "k_exception_noise": ("s_exception_r2", None, None, None),
    "k_oom_r3": ("s_sigkill_r3", "oom", 3, ("host_oom", [3], ["node02"], "stop")),
    "k_xid79_r3": ("s_sigkill_r3", "xid79", 3, ("gpu_hardware", [3], ["node02"], "exclude_and_restart")),
    "k_segfault_noise": ("s_segfault_r0", None, None, None),
    "k_xid79_r0": ("s_segfault_r0", "xid79", 0, ("gpu_hardware", [0], ["node01"], "exclude_and_restart")),
    "k_healthy_noise": ("s_healthy", None, None, None),
    "k_missing_file_noise": ("s_missing_file_all", None, None, None),
    "k_nan_noise": ("s_nan_r3", None, None, None),
    "k_oom_peer_exc_r2": ("s_sigkill_peer_exc_r2", "oom", 2, ("host_oom", [2], ["node02"], "stop")),
    "k_timelimit_noise": ("s_timelimit_progress", None, None, None),
    "k_abort_noise": ("s_abort_r1_kill", None, None, None),
    "k_size_mismatch_noise": ("s_size_mismatch_r2", None, None, None),
}
_PROGRESS = re.compile(r"^\s*(?P<rank>\d+): .*?(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+).*step \d+/")
_TASK_DIED = re.compile(r"^\[(?P<ts>[\d\-T:.]+)\] \[[\d.]+\] get_exit_code task (?P<task>\d+) died")
_MONO = re.compile(r"^<\d>\[\s*(?P<mono>\d+\.\d+)\] (?P<msg>.*)$")


def dmesg_t(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("[%a %b %e %H:%M:%S %Y]")


def dmesg_iso(ts: float, level: str = "info") -> str:
    d = datetime.fromtimestamp(ts, UTC)
    return f"kern  :{level:<5} : " + d.strftime("%Y-%m-%dT%H:%M:%S,%f") + "+00:00"


def stamp(node: str, ts: float, msg: str, level: str = "info") -> str:
    return f"{dmesg_t(ts)} {msg}" if node == "node01" else f"{dmesg_iso(ts, level)} {msg}"


def last_progress(bundle: Path, rank: int) -> float:
    last = None
    for out in bundle.glob("slurm-*.out"):
        for line in out.read_text(errors="replace").splitlines():
            m = _PROGRESS.match(line)
            if m and int(m["rank"]) == rank:
                last = datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
    if last is None:  # an untimed console: slurmd logged when the task died
        for log in bundle.glob("host-*/slurmd.log"):
            for line in log.read_text(errors="replace").splitlines():
                m = _TASK_DIED.match(line)
                if m and int(m["task"]) == rank:
                    died = datetime.strptime(m["ts"], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
                    return died - 0.5
        raise SystemExit(f"{bundle}: no progress line of rank {rank}")
    return last


def job_start(bundle: Path) -> float:
    text = (bundle / "sacct.txt").read_text()
    start = text.splitlines()[1].split("|")[7]
    return datetime.strptime(start, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()


def host_log(node: str, start: float, fault: tuple[str, float] | None) -> str:
    boot = start - 2 * 86400 - 3 * 3600 - 17 * 60
    lines = []
    for raw in BOOT_LOG.read_text(errors="replace").splitlines():
        m = _MONO.match(raw)
        if m:
            lines.append((boot + float(m["mono"]), m["msg"]))
    pci = GPU_PCI[node]
    # stale faults of earlier days: another job's Xid 13, another process's OOM kill
    lines.append(
        (
            boot + 86400 + 5000.25,
            f"NVRM: Xid (PCI:{pci}): 13, pid='<unknown>', name=<unknown>, "
            "Graphics SM Global Exception on (GPC 8, TPC 5, SM 1): Multiple Warp Errors",
        )
    )
    lines.append(
        (
            boot + 1.5 * 86400,
            "Out of memory: Killed process 1669 (xdg-desktop-por) total-vm:105068kB, "
            "anon-rss:9792kB, file-rss:10972kB, shmem-rss:0kB, UID:1000 pgtables:136kB oom_score_adj:200",
        )
    )
    if fault is not None:
        kind, t = fault
        if kind == "xid79":
            lines += [
                (t, f"NVRM: GPU at PCI:{pci}: GPU-979426f2-893a-7cbb-c4cf-81472f89a462"),
                (
                    t + 0.0001,
                    f"NVRM: Xid (PCI:{pci}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                ),
                (t + 0.0002, f"NVRM: GPU {pci}.0: GPU has fallen off the bus."),
            ]
        elif kind == "oom":
            lines.append(
                (
                    t,
                    "Out of memory: Killed process 48213 (python) total-vm:9105068kB, anon-rss:7792040kB, "
                    "file-rss:10972kB, shmem-rss:0kB, UID:0 pgtables:16136kB oom_score_adj:0",
                )
            )
    lines.sort()
    return (
        "\n".join(stamp(node, t, msg, "err" if "Xid" in msg or "Out of memory" in msg else "info") for t, msg in lines)
        + "\n"
    )


def main(src: Path, out: Path) -> None:
    if not BOOT_LOG.exists():
        print(f"skipped: {BOOT_LOG} is absent (../shared is not beside this checkout)")
        return
    for name, (base, fault, rank, truth) in CASES.items():
        s, d = src / base, out / name
        if not s.exists():
            print(f"skipped {name}: no {s}")
            continue
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(s, d)
        start = job_start(s)
        at = (fault, last_progress(s, rank) + 0.3) if fault and rank is not None else None
        for node in ("node01", "node02"):
            host = d / f"host-{node}"
            host.mkdir(exist_ok=True)
            on_node = at if at and truth and node in truth[2] else None
            (host / "dmesg.log").write_text(host_log(node, start, on_node))
        t = json.loads((d / "truth.json").read_text())
        if truth is not None:
            t["expected_category"], t["culprit_ranks"], t["culprit_hosts"], t["expected_action"] = truth
        t["host_logs"] = f"boot noise from {BOOT_LOG.name} two days before the job" + (
            f"; {fault} at {at[1]:.3f}" if at else ""
        )
        (d / "truth.json").write_text(json.dumps(t, indent=1))
        print("wrote", d)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
