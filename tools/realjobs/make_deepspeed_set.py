"""Build a labelled set of real jobs under DeepSpeed's launcher (``deepspeed``, gloo on CPU).

    python tools/realjobs/make_deepspeed_set.py OUT --python PY [--set 1|2] [--only CASE ...] [--jobs 2]

Why it exists: DeepSpeed's launcher is how a great many fine-tuning jobs start, and it prints its
own words around the ranks' output: the runner's ``cmd = ...``, ``launch.py``'s ``WORLD INFO
DICT``, ``process N spawned with command``, and, when a rank fails, ``Killing subprocess N`` and
``[ERROR] [launch.py:...:sigkill_handler] [...] exits with return code = N``. It passes
``--local_rank=N`` to every rank, which a script that does not take it refuses (argparse's
"unrecognized arguments: --local_rank=0", a failure people meet on their first DeepSpeed run).

Each case runs ``train.py`` (DDP over gloo, as under torchrun: the launcher sets ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) through ``python -m
deepspeed.launcher.runner --num_gpus N`` (DeepSpeed 0.19 falls back to its CPU accelerator). The
bundle is the console (``console.log``) plus ``truth.json``, labelled from the injection and written
before firstfault sees the bundle; labels follow ``make_set.py``'s. ``--python``: an interpreter
with torch and ``deepspeed`` (not one of firstfault's dependencies). Kept outside the repository.
"""

from __future__ import annotations

import time
from pathlib import Path

from make_set import case_args, fault_args, free_port, job_env, run_cases, run_job, save_truth, truth_record

HERE = Path(__file__).resolve().parent
Case = tuple[str, str, int, int, str, list[int], str, dict[str, object]]
# (name, fault, rank, step, expected category, culprit ranks, action, extra)
CASES: list[Case] = [
    ("ds_healthy", "none", 0, 0, "none", [], "none", {}),
    ("ds_healthy_print_2r", "none", 0, 0, "none", [], "none", {"nproc": 2, "style": "print"}),
    ("ds_thread_exc_healthy", "thread_exc", 1, 4, "none", [], "none", {}),
    ("ds_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {}),
    ("ds_sigkill_r1", "sigkill", 1, 5, "host_oom", [1], "stop", {"style": "rankfmt"}),
    ("ds_segfault_r3_print", "segfault", 3, 4, "process_crash", [3], "restart", {"style": "print"}),
    ("ds_hang_r0", "hang", 0, 5, "hang", [0], "restart", {}),
    ("ds_no_local_rank", "no_local_rank", 0, 0, "configuration", [], "stop", {}),
    ("ds_unicode_r1_3r", "unicode", 1, 4, "application_error", [1], "stop", {"nproc": 3, "style": "json"}),
]

# A second set, written after the first's reading and scored once before any rule of its own: the
# launcher's --enable_each_rank_log DIR, which sends each rank's output to
# "<YYYYmmddHHMMSS>_rank<N>.log" in DIR (deepspeed/launcher/launch.py) and leaves the console
# with the launcher's own lines; the bundle holds both.
CASES_2: list[Case] = [
    ("dse_healthy", "none", 0, 0, "none", [], "none", {"rank_logs": True}),
    ("dse_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {"rank_logs": True}),
    ("dse_sigkill_r1_print", "sigkill", 1, 5, "host_oom", [1], "stop", {"rank_logs": True, "style": "print"}),
    ("dse_segfault_r0", "segfault", 0, 4, "process_crash", [0], "restart", {"rank_logs": True}),
    ("dse_hang_r3", "hang", 3, 5, "hang", [3], "restart", {"rank_logs": True}),
    (
        "dse_logged_exit_r1_print",
        "logged_exit",
        1,
        4,
        "application_error",
        [1],
        "stop",
        {"rank_logs": True, "style": "print"},
    ),
]


def run_case(out: Path, case: Case, python: str) -> Path:
    name, fault, rank, step, _cat, _culprits, _action, extra = case
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    nproc = int(extra.get("nproc", 4))
    runner = [python, "-m", "deepspeed.launcher.runner", "--num_gpus", str(nproc), "--master_port", str(free_port())]
    if extra.get("rank_logs"):
        runner.append(f"--enable_each_rank_log={d / 'rank_logs'}")
    argv = [*runner, str(HERE / "train.py"), *fault_args(fault, rank, step, extra, d)]
    t0 = time.monotonic()
    rc = run_job(argv, job_env(extra), d / "console.log")
    truth = truth_record(case, nproc, rc, time.monotonic() - t0, argv)
    return save_truth(d, truth, "make_deepspeed_set.py", extra.get("env", {}))


# A third set, written 2026-12-07 with torchrun set 15 and scored once before any rule of its own:
# its families under DeepSpeed's launcher, the console alone and with a file per rank.
CASES_3: list[Case] = [
    ("dsf_clip_nonfinite_r2", "clip_nonfinite", 2, 4, "numerical", [], "stop", {}),
    ("dsf_ckpt_stall_r0", "ckpt_stall", 0, 5, "hang", [0], "restart", {}),
    ("dsf_ckpt_stall_r0_ranklogs", "ckpt_stall", 0, 4, "hang", [0], "restart", {"rank_logs": True}),
    ("dsf_exit_message_r1", "exit_message", 1, 4, "application_error", [1], "stop", {}),
    ("dsf_exit_message_r2_ranklogs", "exit_message", 2, 5, "application_error", [2], "stop", {"rank_logs": True}),
    ("dsf_lr_order_healthy_3r", "lr_order", 0, 0, "none", [], "none", {"nproc": 3}),
]


def main() -> None:
    a, cases = case_args(
        {"1": CASES, "2": CASES_2, "3": CASES_3}, "2: each rank's output in a file of its own; 3: set 15's families"
    )
    run_cases(a.out, cases, lambda out, c: run_case(out, c, a.python), a.jobs)


if __name__ == "__main__":
    main()
