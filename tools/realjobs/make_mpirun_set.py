"""Build a labelled set of real jobs started by Open MPI's ``mpirun`` from ``train.py``'s faults.

    python tools/realjobs/make_mpirun_set.py OUT [--only CASE ...] [--set 2|3] [--jobs 2]

``mpirun_train.py`` maps Open MPI's rank variables to torch's; the ranks form a gloo group over TCP.
``mpirun`` (Debian's openmpi-bin, 4.1) is run with ``--oversubscribe`` (more ranks than cores) and,
for some cases, ``--tag-output`` (each line prefixed ``[jobid,rank]<stdout>:``). When a process
fails, mpirun reports it in its own words and kills the rest; it never names a fault, only the
first process it saw end. The bundle is the console (``console.log``), as people paste it, plus
``truth.json``, labelled from the injection and written before firstfault sees the bundle (the
labels follow ``make_set.py``'s: a bare SIGKILL with no kernel log is a suspected host OOM; a rank
that stops in a collective is a hang on it). Kept outside the repository.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from make_set import fault_args, free_port, job_env, run_cases, run_job, save_truth, truth_record  # the sibling script

HERE = Path(__file__).resolve().parent
# (name, fault, rank, step, expected category, culprit ranks, action, extra); extra "tag": mpirun
# --tag-output; "nproc": ranks (4 by default)
CASES: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mpi_healthy_4r", "none", 0, 0, "none", [], "none", {}),
    ("mpi_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {}),
    ("mpi_sigkill_r1", "sigkill", 1, 4, "host_oom", [1], "stop", {}),
    ("mpi_segfault_r3", "segfault", 3, 5, "process_crash", [3], "restart", {"style": "print"}),
    ("mpi_abort_r0", "abort", 0, 3, "process_crash", [0], "restart", {}),
    ("mpi_exit_r1", "exit", 1, 6, "application_error", [1], "stop", {"style": "print"}),
    ("mpi_hang_r2", "hang", 2, 5, "hang", [2], "restart", {}),
    ("mpi_size_mismatch_r1", "size_mismatch", 1, 4, "collective_mismatch", [1], "stop", {}),
    ("mpi_missing_file_all", "missing_file_all", 0, 0, "configuration", [], "stop", {}),
    ("mpi_nan_r3", "nan_one", 3, 5, "numerical", [3], "stop", {}),
    ("mpi_tag_exception_r1", "exception", 1, 5, "application_error", [1], "stop", {"tag": True}),
    ("mpi_tag_sigkill_r2", "sigkill", 2, 6, "host_oom", [2], "stop", {"tag": True}),
    ("mpi_tag_hang_r3_print", "hang", 3, 4, "hang", [3], "restart", {"tag": True, "style": "print"}),
    ("mpi_tag_healthy_2r", "none", 0, 0, "none", [], "none", {"tag": True, "nproc": 2}),
]

# A second set, written after the first's rules and scored once: other sizes, ranks and styles.
CASES_2: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mpi2_exit_r2_3r_tag", "exit", 2, 5, "application_error", [2], "stop", {"tag": True, "nproc": 3}),
    ("mpi2_hang_r0_print", "hang", 0, 4, "hang", [0], "restart", {"style": "print"}),
    ("mpi2_hang_r1_json_tag", "hang", 1, 6, "hang", [1], "restart", {"tag": True, "style": "json"}),
    ("mpi2_size_mismatch_r3_tag", "size_mismatch", 3, 5, "collective_mismatch", [3], "stop", {"tag": True}),
    ("mpi2_sigkill_r0_2r", "sigkill", 0, 5, "host_oom", [0], "stop", {"nproc": 2}),
    (
        "mpi2_exception_r3_print_tag",
        "exception",
        3,
        4,
        "application_error",
        [3],
        "stop",
        {"tag": True, "style": "print"},
    ),
    ("mpi2_segfault_r1_tag", "segfault", 1, 6, "process_crash", [1], "restart", {"tag": True}),
    ("mpi2_divisible_4r", "divisible", 0, 0, "configuration", [], "stop", {}),
    ("mpi2_import_3r", "import", 0, 0, "configuration", [], "stop", {"nproc": 3, "style": "print"}),
    ("mpi2_healthy_3r_print_tag", "none", 0, 0, "none", [], "none", {"tag": True, "nproc": 3, "style": "print"}),
    ("mpi2_nan_all", "nan_all", 0, 5, "numerical", [], "stop", {}),
    ("mpi2_dl_worker_exc_r2", "dl_worker_exc", 2, 4, "application_error", [2], "stop", {}),
]

# A third set, written 2026-12-07 with torchrun sets 13 and 14 and scored once before any rule of
# its own: their families under mpirun's console (with and without --tag-output).
CASES_3: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mpi3_thread_exc_healthy", "thread_exc", 2, 4, "none", [], "none", {}),
    ("mpi3_stack_dump_healthy_tag", "stack_dump", 1, 5, "none", [], "none", {"tag": True}),
    ("mpi3_git_noise_healthy_print", "git_noise", 0, 0, "none", [], "none", {"style": "print"}),
    ("mpi3_logged_exit_r3_tag", "logged_exit", 3, 5, "application_error", [3], "stop", {"tag": True}),
    ("mpi3_unicode_r1", "unicode", 1, 4, "application_error", [1], "stop", {}),
    ("mpi3_backward_hang_r2_tag", "backward_hang", 2, 5, "hang", [2], "restart", {"tag": True}),
]

# A fourth set, written 2026-12-07 with torchrun set 15, scored once before any rule of its own: its
# families under mpirun's console.
CASES_4: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mpi4_clip_nonfinite_r1_tag", "clip_nonfinite", 1, 5, "numerical", [], "stop", {"tag": True}),
    ("mpi4_ckpt_stall_r0", "ckpt_stall", 0, 4, "hang", [0], "restart", {}),
    ("mpi4_exit_message_r3_tag", "exit_message", 3, 5, "application_error", [3], "stop", {"tag": True}),
    ("mpi4_lr_order_healthy", "lr_order", 0, 0, "none", [], "none", {}),
]


def run_case(out: Path, case: tuple) -> Path:
    name, fault, rank, step, _cat, _culprits, _action, extra = case
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    nproc = int(extra.get("nproc", 4))
    args = fault_args(fault, rank, step, extra, d)
    mpirun = shutil.which("mpirun") or "mpirun"
    argv = [mpirun, "-np", str(nproc), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    if extra.get("tag"):
        argv.append("--tag-output")
    argv += ["-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "OMP_NUM_THREADS", "-x", "PYTHONUNBUFFERED"]
    argv += [sys.executable, str(HERE / "mpirun_train.py"), *args]
    env = job_env(extra)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    t0 = time.time()
    rc = run_job(argv, env, d / "console.log")
    truth = truth_record(case, nproc, rc, time.time() - t0, argv)
    return save_truth(d, truth, "make_mpirun_set.py", extra.get("env", {}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--set", choices=("1", "2", "3", "4"), default="1", help="2 to 4: a later set")
    a = p.parse_args()
    cases = [c for c in {"1": CASES, "2": CASES_2, "3": CASES_3, "4": CASES_4}[a.set] if not a.only or c[0] in a.only]
    run_cases(a.out, cases, run_case, a.jobs)


if __name__ == "__main__":
    main()
