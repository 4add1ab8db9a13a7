"""Build a labelled set of real jobs started by ``torch.multiprocessing.spawn`` (and one by the legacy
``torch.distributed.launch``) from ``train.py``'s faults.

    python tools/realjobs/make_spawn_set.py OUT [--only CASE ...] [--set 2..4] [--jobs 2]

``spawn_train.py`` starts the ranks with ``mp.spawn``: one parent, no torchrun agent, no rank
prefixes on the console, and the parent reports only the first process it finds dead. The bundle is
the console (``console.log``), as people paste it, plus ``truth.json``, labelled from the injection
and written before firstfault sees the bundle (the labels follow ``make_set.py``'s: a bare SIGKILL
with no kernel log is a suspected host OOM; a rank that stops in a collective is a hang on it).
Kept outside the repository (bundles are not committed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from make_set import fault_args, free_port, job_env, run_cases, run_job, save_truth, truth_record  # the sibling script

HERE = Path(__file__).resolve().parent
# (name, fault, rank, step, expected category, culprit ranks, action, extra); extra "launcher":
# "spawn" (default) or "launch" (python -m torch.distributed.launch, which passes --local-rank)
CASES: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("sp_healthy_4r", "none", 0, 0, "none", [], "none", {}),
    ("sp_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {}),
    ("sp_sigkill_r1", "sigkill", 1, 4, "host_oom", [1], "stop", {}),
    ("sp_segfault_r3", "segfault", 3, 5, "process_crash", [3], "restart", {"style": "print"}),
    ("sp_abort_r0", "abort", 0, 3, "process_crash", [0], "restart", {}),
    ("sp_exit_r1", "exit", 1, 6, "application_error", [1], "stop", {"style": "print"}),
    ("sp_hang_r2", "hang", 2, 5, "hang", [2], "restart", {}),
    ("sp_size_mismatch_r1", "size_mismatch", 1, 4, "collective_mismatch", [1], "stop", {}),
    ("sp_missing_file_all", "missing_file_all", 0, 0, "configuration", [], "stop", {}),
    ("sp_import_all", "import", 0, 0, "configuration", [], "stop", {"style": "print"}),
    ("sp_nan_r3", "nan_one", 3, 5, "numerical", [3], "stop", {}),
    ("sp_dl_worker_exc_r1", "dl_worker_exc", 1, 4, "application_error", [1], "stop", {}),
    ("launch_local_rank_arg", "none", 0, 0, "configuration", [], "stop", {"launcher": "launch"}),
]

# A second set, written with the first and generated after its rules: other sizes, ranks, steps, styles.
CASES_2: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("sq_healthy_2r_print", "none", 0, 0, "none", [], "none", {"nproc": 2, "style": "print", "steps": 40}),
    ("sq_exception_r0_3r", "exception", 0, 4, "application_error", [0], "stop", {"nproc": 3, "style": "print"}),
    ("sq_sigkill_r2_3r", "sigkill", 2, 6, "host_oom", [2], "stop", {"nproc": 3, "style": "rankfmt"}),
    ("sq_segfault_r1_2r", "segfault", 1, 3, "process_crash", [1], "restart", {"nproc": 2}),
    ("sq_hang_r0_3r", "hang", 0, 4, "hang", [0], "restart", {"nproc": 3, "style": "print"}),
    ("sq_size_mismatch_r2_3r", "size_mismatch", 2, 5, "collective_mismatch", [2], "stop", {"nproc": 3}),
    ("sq_divisible_4r", "divisible", 0, 0, "configuration", [], "stop", {"style": "rankfmt"}),
    ("sq_exit_r3", "exit", 3, 4, "application_error", [3], "stop", {}),
    ("sq_nan_all_2r", "nan_all", 0, 5, "numerical", [], "stop", {"nproc": 2, "style": "print"}),
]

# A third set, written after the torchrun set 7's Ctrl-C rule: a hang the user stops with Ctrl-C
# (SIGINT to the session, as a terminal sends it) and a Ctrl-C while the job trains, under
# torch.multiprocessing.spawn, whose parent prints no launcher line about the signal.
CASES_3: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("sc_ctrlc_hang_r1", "hang", 1, 5, "hang", [1], "restart", {"timeout": 300.0, "interrupt_after": 40.0}),
    ("sc_ctrlc_training", "none", 0, 0, "scheduler", [], "none", {"steps": 100000, "interrupt_after": 20.0}),
]

# A fourth set, written after torchrun set 10 and scored once before any rule of its own: set 10's
# new faults (a batch of the wrong width, the recipe's assert, a DataLoader worker's segfault, a gloo
# interface that does not exist, JSON-line logs) and set 7's and 8's under mp.spawn, whose console
# has no rank prefixes.
CASES_4: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("sd_shape_r2", "shape", 2, 5, "application_error", [2], "stop", {}),
    ("sd_assert_r1_3r", "assert", 1, 4, "application_error", [1], "stop", {"nproc": 3, "style": "print"}),
    ("sd_dl_worker_segv_r3", "dl_worker_segv", 3, 5, "process_crash", [3], "restart", {}),
    ("sd_gloo_iface", "none", 0, 0, "configuration", [], "stop", {"env": {"GLOO_SOCKET_IFNAME": "eth9"}}),
    ("sd_json_healthy", "none", 0, 0, "none", [], "none", {"style": "json"}),
    ("sd_json_exception_r1", "exception", 1, 6, "application_error", [1], "stop", {"style": "json"}),
    ("sd_json_hang_r3", "hang", 3, 5, "hang", [3], "restart", {"style": "json"}),
    ("sd_eval_exc_r0_2r", "eval_exc", 0, 6, "application_error", [0], "stop", {"nproc": 2, "style": "rankfmt"}),
    ("sd_mbarrier_r2", "monitored_barrier", 2, 4, "hang", [2], "restart", {"style": "print"}),
    ("sd_pickle_bcast_r1_3r", "pickle_broadcast", 1, 0, "application_error", [1], "stop", {"nproc": 3}),
]

# A fifth set, written 2026-12-07 with torchrun sets 13 and 14 and scored once before any rule of its
# own: their new families under mp.spawn's console (one shared stream, no per-rank files): healthy runs
# with a background thread's exception, git's "fatal:" and a faulthandler dump, a logged exit, a
# non-UTF-8 shard, an argparse error on every rank, and a rank stuck in a gradient hook.
CASES_5: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("se_thread_exc_healthy", "thread_exc", 2, 4, "none", [], "none", {}),
    ("se_git_noise_healthy_print", "git_noise", 0, 0, "none", [], "none", {"style": "print"}),
    ("se_stack_dump_healthy_3r", "stack_dump", 1, 5, "none", [], "none", {"nproc": 3, "style": "rankfmt"}),
    ("se_logged_exit_r1", "logged_exit", 1, 5, "application_error", [1], "stop", {}),
    ("se_unicode_r2_json", "unicode", 2, 4, "application_error", [2], "stop", {"style": "json"}),
    ("se_argparse_all", "argparse_all", 0, 0, "configuration", [], "stop", {}),
    ("se_backward_hang_r3", "backward_hang", 3, 5, "hang", [3], "restart", {}),
]

# A sixth set, written 2026-12-07 with torchrun set 15, scored once before any rule of its own: its
# families under mp.spawn's one shared console.
CASES_6: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("sf_clip_nonfinite_r3", "clip_nonfinite", 3, 4, "numerical", [], "stop", {}),
    ("sf_ckpt_stall_r0", "ckpt_stall", 0, 5, "hang", [0], "restart", {}),
    ("sf_exit_message_r1_rankfmt", "exit_message", 1, 4, "application_error", [1], "stop", {"style": "rankfmt"}),
    ("sf_lr_order_healthy_3r", "lr_order", 0, 0, "none", [], "none", {"nproc": 3}),
]

# A seventh, written 2026-12-07 with torchrun set 17, scored once before any rule of its own: its
# families under mp.spawn's one shared console (a pipeline stage that skips one send, the ring
# healthy, a shared block under reentrant checkpointing in DDP).
CASES_7: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("sg_pp_skip_send_r2", "pp_skip_send", 2, 5, "collective_mismatch", [2], "stop", {}),
    ("sg_pp_ring_healthy_3r", "pp_ring", 0, 0, "none", [], "none", {"nproc": 3}),
    ("sg_reentrant_twice_all", "reentrant_twice", 0, 0, "configuration", [], "stop", {}),
    (
        "sg_reentrant_twice_all_print_2r",
        "reentrant_twice",
        0,
        0,
        "configuration",
        [],
        "stop",
        {"nproc": 2, "style": "print"},
    ),
]


def run_case(out: Path, case: tuple) -> Path:
    name, fault, rank, step, _cat, _culprits, _action, extra = case
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    nproc = int(extra.get("nproc", 4))
    args = fault_args(fault, rank, step, extra, d)
    if extra.get("launcher") == "launch":
        # the deprecated launcher passes --local-rank=N to a script that does not take it
        argv = [sys.executable, "-m", "torch.distributed.launch", "--nproc-per-node", str(nproc)]
        argv += ["--master-port", str(free_port()), str(HERE / "train.py"), *args]
    else:
        argv = [sys.executable, str(HERE / "spawn_train.py"), str(nproc), str(free_port()), *args]
    env = job_env(extra)
    t0 = time.time()
    interrupt = extra.get("interrupt_after")  # a Ctrl-C after that many seconds (make_set.run_job)
    rc = run_job(argv, env, d / "console.log", interrupt_after=float(interrupt) if interrupt is not None else None)
    truth = truth_record(case, nproc, rc, time.time() - t0, argv)
    return save_truth(d, truth, "make_spawn_set.py", extra.get("env", {}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--set", choices=("1", "2", "3", "4", "5", "6", "7"), default="1", help="2 to 7: a later set")
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args()
    chosen = {"1": CASES, "2": CASES_2, "3": CASES_3, "4": CASES_4, "5": CASES_5, "6": CASES_6, "7": CASES_7}[a.set]
    cases = [c for c in chosen if not a.only or c[0] in a.only]
    run_cases(a.out, cases, run_case, a.jobs)


if __name__ == "__main__":
    main()
