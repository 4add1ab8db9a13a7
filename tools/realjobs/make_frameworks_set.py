"""Build a labelled set of real PyTorch Lightning, Accelerate and Transformers jobs (gloo on CPU).

    python tools/realjobs/make_frameworks_set.py OUT [--only CASE ...] [--python PY] [--set 2] [--jobs 2]

Each case is one real job of ``frameworks_train.py``: Lightning's own DDP launcher
(``Trainer(strategy="ddp")``, which starts the other ranks itself), ``accelerate launch`` (which
starts torchrun), or Hugging Face's ``Trainer`` under torchrun. The bundle is the console as a
terminal shows it (``console.log``), which is what people paste, plus ``truth.json``, labelled from
the injection and written before firstfault sees the bundle. Labels follow the torchrun set's
(``make_set.py``): a bare SIGKILL with no kernel log is a suspected host OOM; a rank that stops in
a collective is a hang on that rank. Kept outside the repository (bundles are not committed).
``--python``: an interpreter with torch, ``lightning``, ``accelerate`` and ``transformers`` (none
is one of firstfault's dependencies).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from make_set import fault_args, free_port, job_env, run_job, truth_record  # the sibling script (on sys.path)

HERE = Path(__file__).resolve().parent
Case = tuple[str, str, int, int, str, list[int], str, dict[str, object]]
# (name, fault, rank, step, expected category, culprit ranks, action, extra); extra["fw"] picks the framework
CASES: list[Case] = [
    ("pl_healthy_4r", "none", 0, 0, "none", [], "none", {"fw": "lightning"}),
    ("pl_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {"fw": "lightning"}),
    (
        "pl_exception_r0_print",
        "exception",
        0,
        4,
        "application_error",
        [0],
        "stop",
        {"fw": "lightning", "style": "print"},
    ),
    ("pl_missing_file_all", "missing_file_all", 0, 0, "configuration", [], "stop", {"fw": "lightning"}),
    ("pl_import_2r", "import", 0, 0, "configuration", [], "stop", {"fw": "lightning", "workers": 2}),
    ("pl_divisible", "divisible", 0, 0, "configuration", [], "stop", {"fw": "lightning"}),
    ("pl_sigkill_r1", "sigkill", 1, 5, "host_oom", [1], "stop", {"fw": "lightning"}),
    ("pl_segfault_r3", "segfault", 3, 4, "process_crash", [3], "restart", {"fw": "lightning", "style": "print"}),
    ("pl_exit_r1", "exit", 1, 6, "application_error", [1], "stop", {"fw": "lightning"}),
    ("pl_hang_r2", "hang", 2, 5, "hang", [2], "restart", {"fw": "lightning", "timeout": 20.0}),
    ("pl_size_mismatch_r3", "size_mismatch", 3, 4, "collective_mismatch", [3], "stop", {"fw": "lightning"}),
    ("pl_nan_r1", "nan_one", 1, 7, "numerical", [1], "stop", {"fw": "lightning", "style": "print"}),
    ("acc_healthy_4r", "none", 0, 0, "none", [], "none", {"fw": "accelerate"}),
    ("acc_exception_r1", "exception", 1, 5, "application_error", [1], "stop", {"fw": "accelerate"}),
    (
        "acc_exception_r3_print",
        "exception",
        3,
        3,
        "application_error",
        [3],
        "stop",
        {"fw": "accelerate", "style": "print"},
    ),
    ("acc_missing_file_all", "missing_file_all", 0, 0, "configuration", [], "stop", {"fw": "accelerate"}),
    ("acc_import", "import", 0, 0, "configuration", [], "stop", {"fw": "accelerate", "style": "print"}),
    ("acc_divisible", "divisible", 0, 0, "configuration", [], "stop", {"fw": "accelerate"}),
    ("acc_sigkill_r2", "sigkill", 2, 4, "host_oom", [2], "stop", {"fw": "accelerate"}),
    ("acc_segfault_r0", "segfault", 0, 5, "process_crash", [0], "restart", {"fw": "accelerate"}),
    ("acc_exit_r3", "exit", 3, 4, "application_error", [3], "stop", {"fw": "accelerate", "style": "print"}),
    ("acc_hang_r1", "hang", 1, 4, "hang", [1], "restart", {"fw": "accelerate", "timeout": 20.0}),
    ("acc_size_mismatch_r2", "size_mismatch", 2, 5, "collective_mismatch", [2], "stop", {"fw": "accelerate"}),
    ("acc_nan_all", "nan_all", 0, 6, "numerical", [], "stop", {"fw": "accelerate"}),
    ("hf_healthy_4r", "none", 0, 0, "none", [], "none", {"fw": "hf"}),
    ("hf_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {"fw": "hf"}),
    ("hf_exception_r0_print", "exception", 0, 3, "application_error", [0], "stop", {"fw": "hf", "style": "print"}),
    ("hf_missing_file_all", "missing_file_all", 0, 0, "configuration", [], "stop", {"fw": "hf"}),
    ("hf_import_2r", "import", 0, 0, "configuration", [], "stop", {"fw": "hf", "workers": 2}),
    ("hf_sigkill_r3", "sigkill", 3, 5, "host_oom", [3], "stop", {"fw": "hf"}),
    ("hf_segfault_r1", "segfault", 1, 4, "process_crash", [1], "restart", {"fw": "hf", "style": "print"}),
    ("hf_exit_r2", "exit", 2, 7, "application_error", [2], "stop", {"fw": "hf"}),
    ("hf_hang_r0", "hang", 0, 4, "hang", [0], "restart", {"fw": "hf", "timeout": 20.0}),
    ("hf_size_mismatch_r1", "size_mismatch", 1, 5, "collective_mismatch", [1], "stop", {"fw": "hf"}),
    ("hf_nan_r3", "nan_one", 3, 6, "numerical", [3], "stop", {"fw": "hf"}),
]

# A second set: the same fault families with other sizes, ranks, steps and styles, generated after
# the rules for the first were written, to measure them on runs they were not tuned on.
CASES_2: list[Case] = [
    ("plb_healthy_3r_print", "none", 0, 0, "none", [], "none", {"fw": "lightning", "workers": 3, "style": "print"}),
    ("plb_exception_r1_3r", "exception", 1, 7, "application_error", [1], "stop", {"fw": "lightning", "workers": 3}),
    ("plb_sigkill_r0_2r", "sigkill", 0, 3, "host_oom", [0], "stop", {"fw": "lightning", "workers": 2}),
    ("plb_hang_r3", "hang", 3, 3, "hang", [3], "restart", {"fw": "lightning", "timeout": 20.0, "style": "print"}),
    (
        "plb_size_mismatch_r1_3r",
        "size_mismatch",
        1,
        6,
        "collective_mismatch",
        [1],
        "stop",
        {"fw": "lightning", "workers": 3},
    ),
    (
        "plb_missing_file_3r",
        "missing_file_all",
        0,
        0,
        "configuration",
        [],
        "stop",
        {"fw": "lightning", "workers": 3, "style": "print"},
    ),
    ("accb_healthy_2r_print", "none", 0, 0, "none", [], "none", {"fw": "accelerate", "workers": 2, "style": "print"}),
    (
        "accb_exception_r2_3r",
        "exception",
        2,
        4,
        "application_error",
        [2],
        "stop",
        {"fw": "accelerate", "workers": 3, "style": "print"},
    ),
    ("accb_sigkill_r3", "sigkill", 3, 6, "host_oom", [3], "stop", {"fw": "accelerate"}),
    ("accb_segfault_r1_3r", "segfault", 1, 3, "process_crash", [1], "restart", {"fw": "accelerate", "workers": 3}),
    ("accb_nan_r2", "nan_one", 2, 5, "numerical", [2], "stop", {"fw": "accelerate"}),
    ("accb_divisible_2r", "divisible", 0, 0, "configuration", [], "stop", {"fw": "accelerate", "workers": 2}),
    ("hfb_healthy_3r_print", "none", 0, 0, "none", [], "none", {"fw": "hf", "workers": 3, "style": "print"}),
    ("hfb_exception_r1_3r", "exception", 1, 5, "application_error", [1], "stop", {"fw": "hf", "workers": 3}),
    ("hfb_sigkill_r0", "sigkill", 0, 4, "host_oom", [0], "stop", {"fw": "hf", "style": "print"}),
    ("hfb_hang_r2_3r", "hang", 2, 6, "hang", [2], "restart", {"fw": "hf", "workers": 3, "timeout": 20.0}),
    ("hfb_exit_r3", "exit", 3, 3, "application_error", [3], "stop", {"fw": "hf", "style": "print"}),
    ("hfb_divisible", "divisible", 0, 0, "configuration", [], "stop", {"fw": "hf"}),
]

# A third set, written after the torchrun set 7's Ctrl-C rule: a hang the user stops with Ctrl-C
# (SIGINT to the session, as a terminal sends it) under each framework's launcher, and a Ctrl-C
# while Lightning trains.
CASES_3: list[Case] = [
    (
        "plc_ctrlc_hang_r2",
        "hang",
        2,
        5,
        "hang",
        [2],
        "restart",
        {"fw": "lightning", "timeout": 300.0, "interrupt_after": 45.0},
    ),
    (
        "accc_ctrlc_hang_r3",
        "hang",
        3,
        4,
        "hang",
        [3],
        "restart",
        {"fw": "accelerate", "timeout": 300.0, "interrupt_after": 45.0},
    ),
    (
        "hfc_ctrlc_hang_r1",
        "hang",
        1,
        5,
        "hang",
        [1],
        "restart",
        {"fw": "hf", "timeout": 300.0, "interrupt_after": 45.0},
    ),
    (
        "plc_ctrlc_training",
        "none",
        0,
        0,
        "scheduler",
        [],
        "none",
        {"fw": "lightning", "steps": 5000, "interrupt_after": 30.0},
    ),
]

# A fourth set, written 2026-12-07 with torchrun sets 13 and 14 and scored once before any rule of
# its own: their families under each framework's console (a thread's exception and a faulthandler
# dump in healthy runs, a logged exit, a non-UTF-8 shard).
CASES_4: list[Case] = [
    ("pld_thread_exc_healthy", "thread_exc", 1, 4, "none", [], "none", {"fw": "lightning"}),
    ("pld_stack_dump_healthy", "stack_dump", 2, 5, "none", [], "none", {"fw": "lightning"}),
    ("pld_logged_exit_r3", "logged_exit", 3, 5, "application_error", [3], "stop", {"fw": "lightning"}),
    ("accd_thread_exc_healthy", "thread_exc", 0, 4, "none", [], "none", {"fw": "accelerate"}),
    ("accd_unicode_r2", "unicode", 2, 4, "application_error", [2], "stop", {"fw": "accelerate"}),
    ("hfd_stack_dump_healthy", "stack_dump", 1, 5, "none", [], "none", {"fw": "hf"}),
    ("hfd_logged_exit_r1", "logged_exit", 1, 4, "application_error", [1], "stop", {"fw": "hf", "style": "print"}),
]

# A fifth set, written 2026-12-07 with torchrun set 15 and scored once before any rule of its own:
# rank 0's checkpoint write stuck while its peers wait at the barrier, and sys.exit with a message,
# under each framework's console.
CASES_5: list[Case] = [
    ("ple_ckpt_stall_r0", "ckpt_stall", 0, 5, "hang", [0], "restart", {"fw": "lightning", "timeout": 20.0}),
    ("ple_exit_message_r2", "exit_message", 2, 4, "application_error", [2], "stop", {"fw": "lightning"}),
    ("acce_ckpt_stall_r0", "ckpt_stall", 0, 4, "hang", [0], "restart", {"fw": "accelerate", "timeout": 20.0}),
    (
        "acce_exit_message_r1_print",
        "exit_message",
        1,
        5,
        "application_error",
        [1],
        "stop",
        {"fw": "accelerate", "style": "print"},
    ),
    ("hfe_ckpt_stall_r0", "ckpt_stall", 0, 4, "hang", [0], "restart", {"fw": "hf", "timeout": 20.0}),
    ("hfe_exit_message_r3", "exit_message", 3, 5, "application_error", [3], "stop", {"fw": "hf"}),
]


def command(case: Case, python: str, d: Path) -> list[str]:
    _name, fault, rank, step, _cat, _culprits, _action, extra = case
    # A loaded machine takes longer than torch's 15 s to start four framework processes (rank 0's
    # store is not up in time): a minute, except where the hang cases set their own.
    extra = {"timeout": 60.0, **extra}
    workers = str(extra.get("workers", 4))
    script = [
        str(HERE / "frameworks_train.py"),
        "--framework",
        str(extra["fw"]),
        *fault_args(fault, rank, step, extra, d),
    ]
    script += ["--root", str(d / ".root")]
    if extra["fw"] == "lightning":
        return [python, *script, "--workers", workers]
    if extra["fw"] == "hf":
        torchrun = [python, "-m", "torch.distributed.run", "--nproc-per-node", workers]
        return [*torchrun, "--master-port", str(free_port()), *script]
    accelerate = [python, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", workers]
    accelerate += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    return [*accelerate, "--main_process_port", str(free_port()), *script]


def run_case(out: Path, case: Case, python: str) -> Path:
    d = out / case[0]
    d.mkdir(parents=True, exist_ok=True)
    argv = command(case, python, d)
    env = dict(job_env(case[7]), MASTER_PORT=str(free_port()))
    t0 = time.monotonic()
    interrupt = case[7].get("interrupt_after")  # a Ctrl-C after that many seconds (make_set.run_job)
    rc = run_job(argv, env, d / "console.log", interrupt_after=float(interrupt) if interrupt is not None else None)
    truth = truth_record(case, int(case[7].get("workers", 4)), rc, time.monotonic() - t0, argv)
    truth["framework"] = case[7]["fw"]
    truth["generator"] = (
        "tools/realjobs/make_frameworks_set.py (real Lightning / Accelerate jobs; independent of firstfault_sim)"
    )
    (d / "truth.json").write_text(json.dumps(truth, indent=1))
    subprocess.run(["rm", "-rf", str(d / ".root")], check=False)
    return d


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--set", choices=("1", "2", "3", "4", "5"), default="1", help="2 to 5: a later set")
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args()
    cases = [
        c
        for c in {"1": CASES, "2": CASES_2, "3": CASES_3, "4": CASES_4, "5": CASES_5}[a.set]
        if not a.only or c[0] in a.only
    ]
    with ThreadPoolExecutor(a.jobs) as ex:
        for d in ex.map(lambda c: run_case(a.out, c, a.python), cases):
            print(d.name, json.loads((d / "truth.json").read_text())["exit_code"], flush=True)


if __name__ == "__main__":
    main()
