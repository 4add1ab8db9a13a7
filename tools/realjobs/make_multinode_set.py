"""Build a labelled set of real two-node ``torchrun`` jobs (two agents on this host) from ``train.py``.

    python tools/realjobs/make_multinode_set.py OUT [--only CASE ...] [--set 2|3]

Each case starts two torchrun agents, ``--nnodes 2 --node-rank 0|1 --nproc-per-node 2`` with a
static rendezvous on this host, as two nodes of a cluster would be started by hand or by a job
script; each agent's console is one file of the bundle (``node0.log``, ``node1.log``), which is
what a user gathers from two machines. Node 0 runs ranks 0-1, node 1 ranks 2-3. Faults are
``train.py``'s, plus one of the cluster: node 1's agent and workers killed at once mid-training
(a node lost: nothing on it says a word).
``truth.json`` is labelled from the injection and written before firstfault sees the bundle.
Kept outside the repository (bundles are not committed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from make_set import fault_args, free_port, job_env, truth_record  # the sibling script

HERE = Path(__file__).resolve().parent
NODES, PER_NODE = 2, 2
# (name, fault, rank, step, expected category, culprit ranks, action, extra); extra "cluster":
# "node_lost" (node 1's agent and workers SIGKILLed once it has printed step ``step``) or
# "node_missing" (node 1 never started). No case uses "node_missing": node 0's torchrun 2.13 waits in
# its static rendezvous without a word, so that bundle holds nothing to read (firstfault says so).
CASES: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mn_healthy", "none", 0, 0, "none", [], "none", {}),
    ("mn_exception_r3", "exception", 3, 5, "application_error", [3], "stop", {}),
    ("mn_sigkill_r2", "sigkill", 2, 4, "host_oom", [2], "stop", {}),
    ("mn_hang_r1", "hang", 1, 5, "hang", [1], "restart", {}),
    ("mn_size_mismatch_r2", "size_mismatch", 2, 4, "collective_mismatch", [2], "stop", {"style": "rankfmt"}),
    ("mn_missing_file_r2", "missing_file_one", 2, 0, "configuration", [2], "stop", {}),
    ("mn_node1_lost", "none", 2, 5, "process_crash", [2], "restart", {"cluster": "node_lost", "steps": 3000}),
]

# A second set, written with the first and generated after its rules: other ranks, steps, styles.
CASES_2: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mo_exception_r0_print", "exception", 0, 3, "application_error", [0], "stop", {"style": "print"}),
    ("mo_segfault_r3", "segfault", 3, 6, "process_crash", [3], "restart", {}),
    ("mo_hang_r2_rankfmt", "hang", 2, 4, "hang", [2], "restart", {"style": "rankfmt"}),
    ("mo_nan_r1", "nan_one", 1, 5, "numerical", [1], "stop", {}),
    (
        "mo_node1_lost_print",
        "none",
        2,
        4,
        "process_crash",
        [2],
        "restart",
        {"cluster": "node_lost", "steps": 3000, "style": "print"},
    ),
    ("mo_healthy_print", "none", 0, 0, "none", [], "none", {"style": "print", "steps": 30}),
]

# A third set, written after torchrun sets 10 and 11 and scored once before any rule of its own:
# their new faults (a batch of the wrong width, a DataLoader worker's segfault, the recipe's assert,
# one rank leaving with status 0) and their JSON-line logs and debug output, across two agents.
CASES_3: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mp_shape_r3_json", "shape", 3, 5, "application_error", [3], "stop", {"style": "json"}),
    ("mp_dl_worker_segv_r2", "dl_worker_segv", 2, 4, "process_crash", [2], "restart", {}),
    ("mp_assert_r1_print", "assert", 1, 6, "application_error", [1], "stop", {"style": "print"}),
    ("mp_json_healthy", "none", 0, 0, "none", [], "none", {"style": "json"}),
    ("mp_json_hang_r3", "hang", 3, 5, "hang", [3], "restart", {"style": "json"}),
    ("mp_exit0_r2", "exit0", 2, 5, "application_error", [2], "stop", {}),
    ("mp_sigkill_r1_print", "sigkill", 1, 6, "host_oom", [1], "stop", {"style": "print"}),
    (
        "mp_debug_exception_r2",
        "exception",
        2,
        5,
        "application_error",
        [2],
        "stop",
        {"env": {"TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "INFO"}, "style": "rankfmt"},
    ),
]

# A fourth set, written 2026-12-07 with torchrun sets 13 and 14 and scored once before any rule of
# its own: their new families across two agents (one console each).
CASES_4: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mq_thread_exc_healthy", "thread_exc", 3, 4, "none", [], "none", {}),
    ("mq_git_noise_healthy", "git_noise", 0, 0, "none", [], "none", {"style": "rankfmt"}),
    ("mq_stack_dump_healthy_print", "stack_dump", 2, 5, "none", [], "none", {"style": "print"}),
    ("mq_logged_exit_r3", "logged_exit", 3, 5, "application_error", [3], "stop", {}),
    ("mq_unicode_r2", "unicode", 2, 4, "application_error", [2], "stop", {"style": "json"}),
    ("mq_backward_hang_r1", "backward_hang", 1, 5, "hang", [1], "restart", {}),
]

# A fifth set, written 2026-12-07 with torchrun set 15, scored once before any rule of its own: its
# families on two agents, one console each (rank 0's stuck checkpoint write is on node 0).
CASES_5: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("mr_clip_nonfinite_r3", "clip_nonfinite", 3, 4, "numerical", [], "stop", {}),
    ("mr_ckpt_stall_r0", "ckpt_stall", 0, 5, "hang", [0], "restart", {}),
    ("mr_exit_message_r2_print", "exit_message", 2, 4, "application_error", [2], "stop", {"style": "print"}),
    ("mr_lr_order_healthy", "lr_order", 0, 0, "none", [], "none", {"style": "rankfmt"}),
]


def _agent(node: int, port: int, args: list[str], console: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(NODES), "--node-rank", str(node)]
    argv += ["--nproc-per-node", str(PER_NODE), "--master-addr", "127.0.0.1", "--master-port", str(port)]
    argv += ["--max-restarts", "0", str(HERE / "train.py"), *args]
    with open(console, "wb") as con:
        return subprocess.Popen(argv, stdout=con, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(p: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, sig)


def _descendants(pid: int) -> list[int]:
    """``pid``'s processes and theirs (torchrun starts each worker in a session of its own, so the
    agent's process group does not hold them)."""
    out, todo = [], [pid]
    while todo:
        ps = subprocess.run(["ps", "-o", "pid=", "--ppid", str(todo.pop())], capture_output=True, text=True)
        kids = [int(x) for x in ps.stdout.split()]
        out += kids
        todo += kids
    return out


def _kill_when(p: subprocess.Popen[bytes], console: Path, marker: bytes, limit: float) -> None:
    """SIGKILL node 1's agent and all its workers at once once its console shows ``marker``: a node lost."""
    end = time.monotonic() + limit
    while time.monotonic() < end and p.poll() is None:
        if marker in console.read_bytes():
            for pid in [p.pid, *_descendants(p.pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.2)


def run_case(out: Path, case: tuple) -> Path:
    name, fault, rank, step, _cat, _culprits, _action, extra = case
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = fault_args(fault, rank, step, extra, d)
    env = job_env(extra)
    cluster = extra.get("cluster")
    t0 = time.time()
    procs = [_agent(0, port, args, d / "node0.log", env)]
    if cluster != "node_missing":
        time.sleep(1.0)
        procs.append(_agent(1, port, args, d / "node1.log", env))
    if cluster == "node_lost":
        word = "iter" if extra.get("style") == "print" else "step"  # train.py's progress line in that style
        _kill_when(procs[1], d / "node1.log", f"{word} {step}/".encode(), 120)
    deadline = time.monotonic() + 240
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # as a scheduler would: SIGTERM, then SIGKILL
            _stop(p, signal.SIGTERM)
            time.sleep(3)
            _stop(p, signal.SIGKILL)
            p.wait()
    rc = procs[0].returncode
    argv = [str(a) for a in procs[0].args]  # type: ignore[union-attr]
    truth = truth_record(case, NODES * PER_NODE, rc, time.time() - t0, argv)
    truth["nodes"] = {"node0.log": [0, 1], "node1.log": [2, 3]}
    truth["generator"] = "tools/realjobs/make_multinode_set.py (independent of firstfault_sim)"
    (d / "truth.json").write_text(json.dumps(truth, indent=1))
    return d


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--set", choices=("1", "2", "3", "4", "5"), default="1", help="2 to 5: a later set (CASES_2 ...)")
    a = p.parse_args()
    for case in {"1": CASES, "2": CASES_2, "3": CASES_3, "4": CASES_4, "5": CASES_5}[a.set]:
        if a.only and case[0] not in a.only:
            continue
        d = run_case(a.out, case)
        print(d.name, json.loads((d / "truth.json").read_text())["exit_code"], flush=True)


if __name__ == "__main__":
    main()
