"""Build a labelled set of real Ray Train jobs from ``ray_train.py`` (a local Ray cluster, gloo on CPU).

    python tools/realjobs/make_ray_set.py OUT [--only CASE ...] [--python PY] [--set 2]

Each case is one real ``TorchTrainer.fit()`` on a fresh local Ray cluster; the bundle is the
driver's console as a terminal shows it (``console.log``: Ray prints every worker's output there
behind ``(RayTrainWorker pid=N)``), which is what people paste, plus ``truth.json``, labelled from
the injection and written before firstfault sees the bundle. The labels follow the torchrun set's
(``make_set.py``): a bare SIGKILL with no kernel log is a suspected host OOM; a rank that stops in a
collective is a hang on that rank. Kept outside the repository (bundles are not committed).
``--python``: an interpreter with ``ray[train]`` and torch (Ray Train is not one of firstfault's
dependencies).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from make_set import fault_args, truth_record  # the sibling script (tools/realjobs/ is on sys.path when run)

HERE = Path(__file__).resolve().parent
# (name, fault, rank, step, expected category, culprit ranks, action, extra)
CASES: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("ray_healthy_4w", "none", 0, 0, "none", [], "none", {}),
    ("ray_healthy_2w_print", "none", 0, 0, "none", [], "none", {"workers": 2, "style": "print", "steps": 40}),
    ("ray_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {}),
    ("ray_exception_r0_print", "exception", 0, 4, "application_error", [0], "stop", {"style": "print"}),
    ("ray_missing_file_all", "missing_file_all", 0, 0, "configuration", [], "stop", {}),
    ("ray_import_all", "import", 0, 0, "configuration", [], "stop", {"workers": 2}),
    ("ray_divisible", "divisible", 0, 0, "configuration", [], "stop", {}),
    ("ray_sigkill_r1", "sigkill", 1, 5, "host_oom", [1], "stop", {}),
    ("ray_sigkill_r3_print", "sigkill", 3, 3, "host_oom", [3], "stop", {"style": "print"}),
    ("ray_segfault_r2", "segfault", 2, 4, "process_crash", [2], "restart", {}),
    ("ray_exit_r1", "exit", 1, 6, "application_error", [1], "stop", {}),
    ("ray_hang_r1", "hang", 1, 5, "hang", [1], "restart", {"timeout": 10.0}),
    ("ray_size_mismatch_r3", "size_mismatch", 3, 4, "collective_mismatch", [3], "stop", {}),
    ("ray_nan_all", "nan_all", 0, 5, "numerical", [], "stop", {"style": "print"}),
    ("ray_nan_r2", "nan_one", 2, 7, "numerical", [2], "stop", {}),
]

# A second set: the same fault families with other sizes, ranks, steps and styles, generated after
# the rules for the first were written, to measure them on runs they were not tuned on.
CASES_2: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("rb_healthy_3w_print", "none", 0, 0, "none", [], "none", {"workers": 3, "style": "print", "steps": 25}),
    ("rb_exception_r1_2w", "exception", 1, 3, "application_error", [1], "stop", {"workers": 2}),
    ("rb_exception_r3_print", "exception", 3, 8, "application_error", [3], "stop", {"style": "print"}),
    ("rb_sigkill_r0", "sigkill", 0, 4, "host_oom", [0], "stop", {}),
    ("rb_segfault_r1_3w", "segfault", 1, 6, "process_crash", [1], "restart", {"workers": 3, "style": "print"}),
    ("rb_exit_r2_3w", "exit", 2, 4, "application_error", [2], "stop", {"workers": 3}),
    ("rb_size_mismatch_r1", "size_mismatch", 1, 5, "collective_mismatch", [1], "stop", {"style": "print"}),
    ("rb_nan_r0_2w", "nan_one", 0, 6, "numerical", [0], "stop", {"workers": 2, "style": "print"}),
    ("rb_missing_file_3w", "missing_file_all", 0, 0, "configuration", [], "stop", {"workers": 3, "style": "print"}),
    ("rb_hang_r2_3w", "hang", 2, 4, "hang", [2], "restart", {"workers": 3, "timeout": 10.0}),
]

# A third set, written 2026-12-07 with torchrun sets 13 and 14 and scored once before any rule of
# its own: their families behind Ray's worker prefixes.
CASES_3: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("rc_thread_exc_healthy", "thread_exc", 1, 4, "none", [], "none", {}),
    ("rc_stack_dump_healthy_print", "stack_dump", 2, 5, "none", [], "none", {"style": "print"}),
    ("rc_logged_exit_r3", "logged_exit", 3, 5, "application_error", [3], "stop", {}),
    ("rc_unicode_r0_3w", "unicode", 0, 4, "application_error", [0], "stop", {"workers": 3}),
]

# A fourth set, written 2026-12-07 with torchrun set 15 and scored once before any rule of its own.
CASES_4: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("rd_ckpt_stall_r0", "ckpt_stall", 0, 4, "hang", [0], "restart", {"timeout": 10.0}),
    ("rd_exit_message_r2", "exit_message", 2, 4, "application_error", [2], "stop", {}),
    (
        "rd_exit_message_r1_print_3w",
        "exit_message",
        1,
        5,
        "application_error",
        [1],
        "stop",
        {"style": "print", "workers": 3},
    ),
]


def run_case(out: Path, case: tuple, python: str) -> Path:
    name, fault, rank, step, _cat, _culprits, _action, extra = case
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    workers = int(extra.get("workers", 4))
    argv = [
        python,
        str(HERE / "ray_train.py"),
        *fault_args(fault, rank, step, extra, d),
        "--workers",
        str(workers),
        "--storage",
        str(d / ".results"),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"}
    t0 = time.monotonic()
    with (d / "console.log").open("wb") as fh:
        try:
            rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=300).returncode
        except subprocess.TimeoutExpired:
            rc = -9
    truth = truth_record(case, workers, rc, time.monotonic() - t0, argv)
    truth["generator"] = "tools/realjobs/make_ray_set.py (a real local Ray cluster; independent of firstfault_sim)"
    (d / "truth.json").write_text(json.dumps(truth, indent=1))
    subprocess.run(["rm", "-rf", str(d / ".results")], check=False)
    return d


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--set", choices=("1", "2", "3", "4"), default="1", help="2 to 4: a later set (CASES_2 ...)")
    a = p.parse_args()
    for case in {"1": CASES, "2": CASES_2, "3": CASES_3, "4": CASES_4}[a.set]:
        if a.only and case[0] not in a.only:
            continue
        d = run_case(a.out, case, a.python)
        print(d.name, json.loads((d / "truth.json").read_text())["exit_code"], flush=True)


if __name__ == "__main__":
    main()
