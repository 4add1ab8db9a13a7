"""Build firstfault's development set of real torchrun jobs from ``train.py`` (not the simulator).

    python tools/realjobs/make_set.py OUT [--set 1..14] [--only CASE ...] [--jobs 2]

Each case is one real ``torchrun`` job (4 ranks, gloo on CPU) with a fault of ``train.py``;
the bundle is what the job left (``console.log``: torchrun's console as a terminal shows it;
with ``--log-dir`` cases also torchrun's per-rank tree) plus ``truth.json``, labelled from the
injection, written before firstfault sees the bundle. Half the cases keep only the console, as
people paste it. Kept outside the repository when generated (bundles are not committed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
# (name, fault, rank, step, expected category, culprit ranks, action, extra)
CASES: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("healthy_logging", "none", 0, 0, "none", [], "none", {}),
    ("healthy_print_2r", "none", 0, 0, "none", [], "none", {"nproc": 2, "style": "print", "steps": 50}),
    ("healthy_warnings", "warnings", 0, 0, "none", [], "none", {"style": "rankfmt"}),
    ("healthy_6r_long", "none", 0, 0, "none", [], "none", {"nproc": 6, "steps": 150}),
    ("healthy_8r_rankfmt", "none", 0, 0, "none", [], "none", {"nproc": 8, "steps": 60, "style": "rankfmt"}),
    ("healthy_3r_warn", "warnings", 0, 0, "none", [], "none", {"nproc": 3, "steps": 100}),
    ("exception_r2", "exception", 2, 6, "application_error", [2], "stop", {}),
    ("missing_file_all", "missing_file_all", 0, 0, "configuration", [], "stop", {}),
    ("missing_file_r1", "missing_file_one", 1, 0, "configuration", [1], "stop", {}),
    ("divisible", "divisible", 0, 0, "configuration", [], "stop", {}),
    ("import_error", "import", 0, 0, "configuration", [], "stop", {"style": "print"}),
    ("version_check", "version", 0, 0, "configuration", [], "stop", {}),
    ("sigkill_r3", "sigkill", 3, 7, "host_oom", [3], "stop", {}),  # no kernel log: a suspected OOM kill
    ("sigkill_peer_exc_r1", "sigkill_then_peer_exc", 1, 4, "host_oom", [1], "stop", {"style": "rankfmt"}),
    ("segfault_r0", "segfault", 0, 5, "process_crash", [0], "restart", {}),
    ("abort_r2", "abort", 2, 3, "process_crash", [2], "restart", {"style": "print"}),
    ("exit_r1", "exit", 1, 6, "application_error", [1], "stop", {}),
    ("hang_r2", "hang", 2, 5, "hang", [2], "restart", {}),
    ("hang_r0_print", "hang", 0, 4, "hang", [0], "restart", {"style": "print"}),
    ("size_mismatch_r1", "size_mismatch", 1, 4, "collective_mismatch", [1], "stop", {}),
    ("size_mismatch_r3", "size_mismatch", 3, 6, "collective_mismatch", [3], "stop", {"style": "print"}),
    ("size_mismatch_r0", "size_mismatch", 0, 3, "collective_mismatch", [0], "stop", {"style": "rankfmt"}),
    (
        "detail_mismatch_r3",
        "detail_mismatch",
        3,
        4,
        "collective_mismatch",
        [3],
        "stop",
        {"env": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}},
    ),
    (
        "detail_ddp_segv_all",
        "detail_ddp",
        0,
        0,
        "process_crash",
        [],
        "restart",
        {"env": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}},
    ),
    ("nan_r2", "nan_one", 2, 5, "numerical", [2], "stop", {}),
    ("nan_all", "nan_all", 0, 5, "numerical", [], "stop", {"style": "rankfmt"}),
    ("memory_r1", "memory", 1, 3, "host_oom", [1], "stop", {}),
    ("diskfull_r0", "diskfull", 0, 6, "storage_io", [0], "restart", {}),
    # a DataLoader worker's bare SIGKILL reads as a rank's does (sigkill_r3): no kernel log, a suspected OOM kill
    ("dl_worker_kill_r3", "dl_worker_kill", 3, 4, "host_oom", [3], "stop", {}),
    ("dl_worker_exc_r1", "dl_worker_exc", 1, 5, "application_error", [1], "stop", {"style": "print"}),
    ("init_late_r2", "init_late", 2, 0, "hang", [2], "restart", {"timeout": 10.0}),
    ("exception_restart_r1", "exception", 1, 4, "application_error", [1], "stop", {"max_restarts": 1}),
]


# A second set: the same fault families with other sizes, ranks, steps and log styles, generated after
# the rules were written, to measure them on runs they were not tuned on.
CASES_2: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("b_exception_r3_6r", "exception", 3, 9, "application_error", [3], "stop", {"nproc": 6, "style": "print"}),
    ("b_sigkill_r0_2r", "sigkill", 0, 3, "host_oom", [0], "stop", {"nproc": 2}),
    ("b_hang_r3_6r", "hang", 3, 6, "hang", [3], "restart", {"nproc": 6, "style": "rankfmt"}),
    ("b_missing_file_r0_3r", "missing_file_one", 0, 0, "configuration", [0], "stop", {"nproc": 3}),
    ("b_nan_r5_6r", "nan_one", 5, 7, "numerical", [5], "stop", {"nproc": 6}),
    ("b_memory_r2_3r", "memory", 2, 4, "host_oom", [2], "stop", {"nproc": 3, "style": "print"}),
    ("b_size_mismatch_r2_6r", "size_mismatch", 2, 5, "collective_mismatch", [2], "stop", {"nproc": 6}),
    ("b_abort_r0_6r", "abort", 0, 4, "process_crash", [0], "restart", {"nproc": 6, "style": "rankfmt"}),
    ("b_segfault_r5_6r", "segfault", 5, 8, "process_crash", [5], "restart", {"nproc": 6, "style": "print"}),
    ("b_exit_r2_3r", "exit", 2, 5, "application_error", [2], "stop", {"nproc": 3}),
    ("b_import_2r", "import", 0, 0, "configuration", [], "stop", {"nproc": 2}),
    ("b_divisible_4r", "divisible", 0, 0, "configuration", [], "stop", {"nproc": 4, "style": "print"}),  # 4 % 3 != 0
    (
        "b_dl_worker_kill_r0_2r",
        "dl_worker_kill",
        0,
        6,
        "host_oom",
        [0],
        "stop",
        {"nproc": 2, "style": "rankfmt"},
    ),
    ("b_dl_worker_exc_r4_6r", "dl_worker_exc", 4, 3, "application_error", [4], "stop", {"nproc": 6}),
    ("b_healthy_5r", "none", 0, 0, "none", [], "none", {"nproc": 5, "steps": 80, "style": "print"}),
    ("b_init_late_r5_6r", "init_late", 5, 0, "hang", [5], "restart", {"nproc": 6, "timeout": 10.0}),
    ("b_nan_all_3r", "nan_all", 0, 6, "numerical", [], "stop", {"nproc": 3, "style": "print"}),
    ("b_version_3r", "version", 0, 0, "configuration", [], "stop", {"nproc": 3, "style": "rankfmt"}),
]


# A third set: mistakes of DDP use and of launching that users meet on their first runs (a model that
# differs across ranks, unused parameters, a GPU-only call on a CPU build, a busy port, a world size
# from another config, a checkpoint of another shape, a rank that runs out of data, a collective only
# rank 0 calls, no launcher at all). Labelled from the injection before firstfault saw a bundle.
CASES_3: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("c_unused_param_all", "unused_param", 0, 0, "configuration", [], "stop", {}),
    ("c_model_mismatch_r1", "model_mismatch", 1, 0, "configuration", [1], "stop", {"style": "rankfmt"}),
    ("c_nccl_backend_cpu", "nccl_backend", 0, 0, "configuration", [], "stop", {"style": "print"}),
    ("c_cuda_device_cpu", "cuda_device", 0, 0, "configuration", [], "stop", {"nproc": 2}),
    ("c_world_size_arg", "world_size_arg", 0, 0, "configuration", [], "stop", {"timeout": 10.0}),
    ("c_resume_mismatch", "resume_mismatch", 0, 0, "configuration", [], "stop", {"resume": True, "style": "print"}),
    ("c_dl_timeout_r2", "dl_timeout", 2, 4, "hang", [2], "restart", {"timeout": 30.0}),
    ("c_no_launcher", "no_launcher", 0, 0, "configuration", [], "stop", {"launch": "python"}),
    ("c_port_busy", "none", 0, 0, "configuration", [], "stop", {"port_busy": True}),
    ("c_rank0_barrier", "rank0_barrier", 0, 3, "collective_mismatch", [0], "stop", {"style": "rankfmt"}),
    ("c_uneven_data_r3", "uneven_data", 3, 4, "collective_mismatch", [3], "stop", {}),
    ("c_healthy_3r", "none", 0, 0, "none", [], "none", {"nproc": 3, "style": "rankfmt"}),
]


# The same families as CASES_3 with other sizes, ranks and log styles, generated after the rules that
# set 3 gave were written, to measure them once on runs they were not tuned on.
CASES_4: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("d_rank0_barrier_6r", "rank0_barrier", 0, 5, "collective_mismatch", [0], "stop", {"nproc": 6, "style": "print"}),
    ("d_uneven_data_r1_3r", "uneven_data", 1, 6, "collective_mismatch", [1], "stop", {"nproc": 3, "style": "rankfmt"}),
    ("d_model_mismatch_r2_6r", "model_mismatch", 2, 0, "configuration", [2], "stop", {"nproc": 6}),
    ("d_model_mismatch_r1_2r", "model_mismatch", 1, 0, "configuration", [1], "stop", {"nproc": 2, "style": "print"}),
    ("d_world_size_arg_2r", "world_size_arg", 0, 0, "configuration", [], "stop", {"nproc": 2, "timeout": 10.0}),
    ("d_dl_timeout_r0_3r", "dl_timeout", 0, 3, "hang", [0], "restart", {"nproc": 3, "timeout": 30.0, "style": "print"}),
    ("d_cuda_device_4r", "cuda_device", 0, 0, "configuration", [], "stop", {"style": "rankfmt"}),
    ("d_nccl_backend_2r", "nccl_backend", 0, 0, "configuration", [], "stop", {"nproc": 2}),
    ("d_unused_param_6r", "unused_param", 0, 0, "configuration", [], "stop", {"nproc": 6, "style": "print"}),
    ("d_port_busy_2r", "none", 0, 0, "configuration", [], "stop", {"nproc": 2, "port_busy": True}),
    ("d_resume_mismatch_3r", "resume_mismatch", 0, 0, "configuration", [], "stop", {"nproc": 3, "resume": True}),
    ("d_healthy_6r", "none", 0, 0, "none", [], "none", {"nproc": 6, "style": "print"}),
]


# A fifth set: sharded checkpoints with torch.distributed.checkpoint, which gathers every rank's
# exception and raises the same CheckpointException on every rank (needs numpy beside torch).
CASES_5: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("e_dcp_full_r2", "dcp_full", 2, 4, "storage_io", [2], "restart", {}),
    ("e_dcp_full_r0_print", "dcp_full", 0, 3, "storage_io", [0], "restart", {"style": "print"}),
    ("e_dcp_full_r1_3r", "dcp_full", 1, 5, "storage_io", [1], "restart", {"nproc": 3, "style": "rankfmt"}),
    ("e_dcp_full_all", "dcp_full_all", 0, 4, "storage_io", [], "restart", {}),
    ("e_dcp_blocked_r3", "dcp_blocked", 3, 4, "storage_io", [3], "restart", {"style": "rankfmt"}),
    ("e_dcp_healthy", "dcp_ok", 0, 4, "none", [], "none", {}),
]


# A sixth set: FSDP2 (``fully_shard`` on a device mesh, as torchtitan applies it), device meshes
# that do not fit the world, a launcher preempted by SIGTERM, and a rendezvous host that does not
# resolve; written after the first five sets' rules, scored once before any rule of its own.
CASES_6: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("f_fsdp_mismatch_r1", "model_mismatch", 1, 0, "configuration", [1], "stop", {"wrap": "fsdp"}),
    ("f_fsdp_mismatch_r0_3r", "model_mismatch", 0, 0, "configuration", [0], "stop", {"wrap": "fsdp", "nproc": 3}),
    ("f_fsdp_sigkill_r2", "sigkill", 2, 5, "host_oom", [2], "stop", {"wrap": "fsdp", "style": "rankfmt"}),
    ("f_fsdp_hang_r1", "hang", 1, 4, "hang", [1], "restart", {"wrap": "fsdp"}),
    ("f_fsdp_exception_r3", "exception", 3, 6, "application_error", [3], "stop", {"wrap": "fsdp", "style": "print"}),
    ("f_fsdp_nan_r2", "nan_one", 2, 5, "numerical", [2], "stop", {"wrap": "fsdp"}),
    ("f_mesh_too_big", "none", 0, 0, "configuration", [], "stop", {"wrap": "fsdp", "mesh": "3,2"}),
    ("f_mesh_too_small", "none", 0, 0, "configuration", [], "stop", {"wrap": "fsdp", "mesh": "2", "style": "print"}),
    ("f_preempted", "none", 0, 0, "scheduler", [], "restart", {"steps": 100000, "preempt_after": 15.0}),
    ("f_rdzv_bad_host", "none", 0, 0, "configuration", [], "stop", {"nproc": 2, "rdzv": "nosuchhost.invalid:29400"}),
    ("f_fsdp_healthy", "none", 0, 0, "none", [], "none", {"wrap": "fsdp", "style": "rankfmt"}),
    ("f_hsdp_healthy", "none", 0, 0, "none", [], "none", {"wrap": "fsdp", "mesh": "2,2"}),
]
# Made after set 6 was scored, for the rule it gave (not counted in its score): without DataLoader
# worker processes the peers print their tracebacks, which show the collective was an all-gather.
CASES_6_DEV: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("f_fsdp_mismatch_r1_w0", "model_mismatch", 1, 0, "configuration", [1], "stop", {"wrap": "fsdp", "workers": 0}),
]

# A seventh set, written after set 6's rules and scored once before any rule of its own: a
# monitored barrier that names the rank it waited for, checkpoints torch.load's weights_only
# default refuses, autograd's anomaly mode catching a NaN, a hang the user stopped with Ctrl-C,
# an object broadcast that cannot be pickled, and a metric all-reduced on one rank only.
CASES_7: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("g_mbarrier_r2", "monitored_barrier", 2, 5, "hang", [2], "restart", {}),
    ("g_mbarrier_all_r1_3r", "monitored_barrier_all", 1, 4, "hang", [1], "restart", {"nproc": 3, "style": "print"}),
    ("g_weights_only_args", "none", 0, 0, "configuration", [], "stop", {"resume": "namespace"}),
    (
        "g_weights_only_numpy_6r",
        "none",
        0,
        0,
        "configuration",
        [],
        "stop",
        {"resume": "numpy", "nproc": 6, "style": "rankfmt"},
    ),
    ("g_anomaly_nan_r1", "anomaly_nan", 1, 5, "numerical", [1], "stop", {}),
    ("g_anomaly_nan_r3_print", "anomaly_nan", 3, 4, "numerical", [3], "stop", {"style": "print"}),
    ("g_ctrlc_hang_r2", "hang", 2, 5, "hang", [2], "restart", {"timeout": 120.0, "interrupt_after": 25.0}),
    (
        "g_ctrlc_hang_r0_3r",
        "hang",
        0,
        4,
        "hang",
        [0],
        "restart",
        {"nproc": 3, "style": "rankfmt", "timeout": 120.0, "interrupt_after": 25.0, "workers": 0},
    ),
    ("g_pickle_bcast_r0", "pickle_broadcast", 0, 0, "application_error", [0], "stop", {}),
    ("g_extra_allreduce_r2", "extra_allreduce", 2, 5, "collective_mismatch", [2], "stop", {}),
    (
        "g_extra_allreduce_r0_detail",
        "extra_allreduce",
        0,
        4,
        "collective_mismatch",
        [0],
        "stop",
        {"style": "print", "env": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}},
    ),
    ("g_healthy_anomaly", "anomaly_ok", 0, 0, "none", [], "none", {}),
]

# An eighth set, written after set 7's rules and scored once before any rule of its own: rank 0's
# checkpoint folder it may not create, one read slower than the process-group timeout, rank 0's
# evaluation on an empty split, a batch with every label masked out, and consoles where rank 0
# alone draws a tqdm progress bar (no step lines of any rank).
CASES_8: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("h_perm_ckpt_r0", "perm_ckpt", 0, 5, "configuration", [0], "stop", {"ckpt": "/sys/ff-realjobs-ckpt"}),
    ("h_slow_once_r2", "slow_once", 2, 5, "hang", [2], "restart", {}),
    ("h_slow_once_r1_3r", "slow_once", 1, 4, "hang", [1], "restart", {"nproc": 3, "style": "print"}),
    ("h_eval_exc_r0", "eval_exc", 0, 6, "application_error", [0], "stop", {"style": "rankfmt"}),
    ("h_no_grad_r1", "no_grad", 1, 5, "application_error", [1], "stop", {}),
    ("h_no_grad_r2_6r", "no_grad", 2, 4, "application_error", [2], "stop", {"nproc": 6, "style": "rankfmt"}),
    ("h_tqdm_healthy", "none", 0, 0, "none", [], "none", {"style": "tqdm"}),
    ("h_tqdm_exception_r3", "exception", 3, 6, "application_error", [3], "stop", {"style": "tqdm"}),
    ("h_tqdm_hang_r2", "hang", 2, 5, "hang", [2], "restart", {"style": "tqdm"}),
    ("h_tqdm_sigkill_r1", "sigkill", 1, 5, "host_oom", [1], "stop", {"style": "tqdm"}),
]

# A ninth set, written after set 8's rules and scored once before any rule of its own: errors a
# trainer catches, logs with their traceback and goes on from (rank 0's metrics upload, every rank's
# missing index file), in healthy runs and before a real fault; and one rank leaving cleanly
# (exit status 0) on an early-stopping decision its peers never made.
CASES_9: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("i_healthy_noise_upload", "none", 0, 0, "none", [], "none", {"noise": "upload"}),
    ("i_healthy_noise_io_print", "none", 0, 0, "none", [], "none", {"noise": "io", "style": "print"}),
    ("i_healthy_noise_io_3r", "none", 0, 0, "none", [], "none", {"noise": "io", "nproc": 3, "style": "rankfmt"}),
    ("i_noise_then_sigkill_r2", "sigkill", 2, 8, "host_oom", [2], "stop", {"noise": "upload"}),
    ("i_noise_then_exception_r1", "exception", 1, 8, "application_error", [1], "stop", {"noise": "io"}),
    ("i_noise_then_hang_r3_print", "hang", 3, 8, "hang", [3], "restart", {"noise": "io", "style": "print"}),
    ("i_exit0_r0", "exit0", 0, 6, "application_error", [0], "stop", {}),
    ("i_exit0_r2_3r", "exit0", 2, 5, "application_error", [2], "stop", {"nproc": 3, "style": "print"}),
    ("i_ctrlc_training", "none", 0, 0, "scheduler", [], "none", {"steps": 100000, "interrupt_after": 20.0}),
    ("i_ctrlc_hang_r1_long", "hang", 1, 5, "hang", [1], "restart", {"timeout": 300.0, "interrupt_after": 70.0}),
]

# A tenth set, written after set 9's rules and scored once before any rule of its own: checkpoints
# that do not load (truncated; saved from a DDP-wrapped model), a gloo interface that does not exist,
# a batch of the wrong width, a DataLoader worker's segfault, the recipe's own assert, faults
# torchrun restarted the workers after, and a trainer logging JSON lines.
CASES_10: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("j_corrupt_ckpt_all", "none", 0, 0, "configuration", [], "stop", {"resume": "truncated", "style": "print"}),
    (
        "j_ddp_prefix_keys_3r",
        "none",
        0,
        0,
        "configuration",
        [],
        "stop",
        {"resume": "ddp_prefix", "nproc": 3, "style": "rankfmt"},
    ),
    ("j_gloo_iface", "none", 0, 0, "configuration", [], "stop", {"env": {"GLOO_SOCKET_IFNAME": "eth9"}}),
    ("j_shape_r1", "shape", 1, 5, "application_error", [1], "stop", {}),
    ("j_shape_r7_8r", "shape", 7, 4, "application_error", [7], "stop", {"nproc": 8, "style": "print"}),
    ("j_dl_worker_segv_r2", "dl_worker_segv", 2, 5, "process_crash", [2], "restart", {}),
    ("j_assert_r3", "assert", 3, 6, "application_error", [3], "stop", {"style": "rankfmt"}),
    # torchrun restarts the workers once; in torch 2.13 (gloo, static or c10d rendezvous) the restarted
    # rank 0 is refused by a peer address left from the first attempt, so the job still fails: the
    # first fault is the injected one (labelled so after generation showed it, before any scoring)
    ("j_restart_fails_exc_r2", "exception_once", 2, 5, "application_error", [2], "stop", {"max_restarts": 1}),
    (
        "j_restart_fails_kill_r1",
        "sigkill_once",
        1,
        4,
        "host_oom",
        [1],
        "stop",
        {"max_restarts": 1, "style": "print"},
    ),
    ("j_json_healthy", "none", 0, 0, "none", [], "none", {"style": "json"}),
    ("j_json_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {"style": "json"}),
    ("j_json_hang_r1", "hang", 1, 5, "hang", [1], "restart", {"style": "json"}),
]

# An eleventh set, written after set 10's rule and scored once before any rule of its own: jobs run
# with the debug output people turn on when something is wrong (TORCH_DISTRIBUTED_DEBUG=INFO,
# TORCH_CPP_LOG_LEVEL=INFO, torchrun's LOGLEVEL=INFO/DEBUG, PYTHONWARNINGS=always, more DataLoader
# workers than cores): mostly healthy runs, which must read as such, and three failures in the noise.
_CPP_INFO = {"TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "INFO"}
CASES_11: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("k_healthy_debug_info", "none", 0, 0, "none", [], "none", {"env": _CPP_INFO}),
    ("k_healthy_loglevel_info", "none", 0, 0, "none", [], "none", {"env": {"LOGLEVEL": "INFO"}, "style": "print"}),
    (
        "k_healthy_loglevel_debug_3r",
        "none",
        0,
        0,
        "none",
        [],
        "none",
        {"env": {"LOGLEVEL": "DEBUG"}, "nproc": 3, "style": "rankfmt"},
    ),
    ("k_healthy_many_workers", "none", 0, 0, "none", [], "none", {"workers": 6, "style": "json"}),
    (
        "k_healthy_cpp_info_restarts",
        "none",
        0,
        0,
        "none",
        [],
        "none",
        {"env": {"TORCH_CPP_LOG_LEVEL": "INFO"}, "max_restarts": 2, "style": "tqdm"},
    ),
    ("k_healthy_fsdp_debug_info", "none", 0, 0, "none", [], "none", {"env": _CPP_INFO, "wrap": "fsdp"}),
    ("k_healthy_pywarn_always", "warnings", 0, 0, "none", [], "none", {"env": {"PYTHONWARNINGS": "always"}}),
    (
        "k_healthy_8r_debug_info",
        "none",
        0,
        0,
        "none",
        [],
        "none",
        {"env": _CPP_INFO, "nproc": 8, "style": "print", "steps": 40},
    ),
    ("k_debug_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {"env": _CPP_INFO}),
    ("k_loglevel_info_hang_r1", "hang", 1, 5, "hang", [1], "restart", {"env": {"LOGLEVEL": "INFO"}}),
    (
        "k_debug_sigkill_r3",
        "sigkill",
        3,
        7,
        "host_oom",
        [3],
        "stop",
        {"env": {"TORCH_CPP_LOG_LEVEL": "INFO"}, "style": "print"},
    ),
]

# A twelfth set, written after set 11 and scored once before any rule of its own: a job script's
# own commands before the launcher, with the errors real scripts print there and go on from (no
# nvidia-smi on the node, a locale the node lacks, a folder mkdir cannot make, an optional pip
# install that finds nothing, a GPU check that raises on a CPU node), in healthy runs and before a
# fault. ``extra["preamble"]`` names them (PREAMBLES): run by bash in the job's console.
CASES_12: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("l_healthy_shell_noise", "none", 0, 0, "none", [], "none", {"preamble": "shell"}),
    ("l_healthy_pip_error", "none", 0, 0, "none", [], "none", {"preamble": "pip", "style": "print"}),
    ("l_healthy_gpu_check", "none", 0, 0, "none", [], "none", {"preamble": "gpu_check", "style": "rankfmt"}),
    ("l_healthy_all_3r", "none", 0, 0, "none", [], "none", {"preamble": "all", "nproc": 3, "style": "json"}),
    (
        "l_healthy_gpu_check_2r",
        "none",
        0,
        0,
        "none",
        [],
        "none",
        {"preamble": "gpu_check", "nproc": 2, "style": "print"},
    ),
    ("l_gpu_check_then_exception_r2", "exception", 2, 6, "application_error", [2], "stop", {"preamble": "gpu_check"}),
    ("l_pip_error_then_hang_r1", "hang", 1, 5, "hang", [1], "restart", {"preamble": "pip", "style": "rankfmt"}),
    (
        "l_shell_noise_then_sigkill_r3",
        "sigkill",
        3,
        6,
        "host_oom",
        [3],
        "stop",
        {"preamble": "shell", "style": "print"},
    ),
]
_PY = shlex.quote(sys.executable)
PREAMBLES = {
    "shell": 'nvidia-smi; export LC_ALL=xx_XX.UTF-8; mkdir /proc/ff-ckpt; echo "starting training on $(hostname)"',
    "pip": f"{_PY} -m pip install --no-index --quiet --disable-pip-version-check apex-fused-adam-nonexistent",
    "gpu_check": f"{_PY} -c 'import torch; print(torch.cuda.get_device_name(0))'",
}
PREAMBLES["all"] = "; ".join(PREAMBLES.values())

# What a resumed run loads (``extra["resume"]``): the same recipe with another hidden size, or the
# right model saved beside the run's arguments or its numpy RNG state (both refused by weights_only).
RESUME = {
    True: "torch.save(nn.Sequential(nn.Linear(64, 384), nn.ReLU(), nn.Linear(384, 10)).state_dict(), sys.argv[1])",
    "namespace": (
        "import argparse; torch.manual_seed(0); "
        "m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)); "
        "torch.save({'model': m.state_dict(), 'args': argparse.Namespace(lr=0.05, steps=20)}, sys.argv[1])"
    ),
    "numpy": (
        "import numpy as np; "
        "m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)); "
        "torch.save({'model': m.state_dict(), 'rng': np.random.get_state()}, sys.argv[1])"
    ),
    "truncated": (  # the save a killed job left half written
        "import os; m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)); "
        "torch.save(m.state_dict(), sys.argv[1]); os.truncate(sys.argv[1], os.path.getsize(sys.argv[1]) // 2)"
    ),
    "ddp_prefix": (  # saved from the DDP wrapper: every key starts with 'module.'
        "m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)); "
        "torch.save({'module.' + k: v for k, v in m.state_dict().items()}, sys.argv[1])"
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fault_args(fault: str, rank: int, step: int, extra: dict[str, object], d: Path) -> list[str]:
    """The arguments every job script here takes: the fault, where and when it hits, the run's
    length, its process-group timeout, its logging style and a data folder that does not exist."""
    return [
        "--fault",
        fault,
        "--rank",
        str(rank),
        "--step",
        str(step),
        "--steps",
        str(extra.get("steps", 20)),
        "--timeout",
        str(extra.get("timeout", 15.0)),
        "--style",
        str(extra.get("style", "logging")),
        "--data",
        str(d / "no-such-data"),
        *(["--wrap", str(extra["wrap"])] if "wrap" in extra else []),  # train.py's own (DDP by default)
        *(["--mesh", str(extra["mesh"])] if "mesh" in extra else []),
        *(["--workers", str(extra["workers"])] if "workers" in extra else []),
        *(["--noise", str(extra["noise"])] if "noise" in extra else []),
    ]


def job_env(extra: dict[str, object]) -> dict[str, str]:
    """The environment every job here runs in: one thread per rank, unbuffered output (a killed
    rank's last lines reach the console), and the case's own variables (``extra["env"]``)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra.get("env", {}))  # type: ignore[call-overload]
    return env


def truth_record(case: tuple, nproc: int, rc: int, took_s: float, argv: list[str]) -> dict[str, object]:
    """The label of a case, from its injection, written before firstfault sees the bundle.

    A stop from outside planned for a job with no fault of its own (a Ctrl-C, a preemption) may
    miss: the job finishes first, or a framework takes the signal and trains on. A job that then
    exits 0 ended well, whatever was planned, and is labelled healthy from its own exit status
    (``note`` says so); so does a job whose fault did not fail it (a stall a framework's
    process group outwaited), but for a straggler, which is a slow rank of a job that finishes."""
    _name, fault, _rank, step, cat, culprits, action, extra = case
    record: dict[str, object] = {
        "schema": "firstfault.truth/v1",
        "fault": fault,
        "culprit_ranks": culprits,
        "step": step,
        "expected_category": cat,
        "expected_action": action,
        "nproc": nproc,
        "exit_code": rc,
        "duration_s": round(took_s, 1),
        "command": argv,
    }
    planned = extra.get("interrupt_after") or extra.get("preempt_after")
    if fault == "none" and planned is not None and rc == 0:
        record["expected_category"], record["expected_action"] = "none", "none"
        record["note"] = f"the stop planned at {planned} s did not end the job: it exited 0 after {took_s:.0f} s"
    elif rc == 0 and cat not in ("none", "straggler"):
        # a fault that did not fail the job (a framework's process group that outwaited a stall):
        # the job ended well, and a label of the plan would call a healthy run failed
        record["expected_category"], record["expected_action"], record["culprit_ranks"] = "none", "none", []
        record["note"] = f"the planned {fault} did not fail the job: it exited 0 after {took_s:.0f} s"
    return record


def case_args(sets: dict[str, list[tuple]], later: str) -> tuple[argparse.Namespace, list[tuple]]:
    """The command line the sets' scripts share: OUT, ``--only CASE ...``, ``--python PY`` (the
    interpreter that runs the jobs), ``--jobs N`` and ``--set`` (a key of ``sets``; ``later`` says
    what the later ones are); the arguments and the chosen cases."""
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--set", choices=tuple(sets), default=next(iter(sets)), help=later)
    a = p.parse_args()
    return a, [c for c in sets[a.set] if not a.only or c[0] in a.only]


def save_truth(d: Path, truth: dict[str, object], script: str, env: object) -> Path:
    """Write a case's label beside its bundle (``truth.json``), naming the script that made it."""
    truth["env"] = env
    truth["generator"] = f"tools/realjobs/{script} (independent of firstfault_sim)"
    (d / "truth.json").write_text(json.dumps(truth, indent=1))
    return d


# A thirteenth set, written 2026-12-07 and scored once before any rule of its own: failure families
# no earlier set has: a launch script passing a flag the script no longer takes (argparse exits 2 on
# every rank), a background thread's exception the job trains on through (healthy, exit 0), one
# node's open-files limit (EMFILE on one rank), and a RecursionError in one rank's own code.
CASES_13: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("m_argparse_all", "argparse_all", 0, 0, "configuration", [], "stop", {}),
    ("m_argparse_all_print_2r", "argparse_all", 0, 0, "configuration", [], "stop", {"nproc": 2, "style": "print"}),
    ("m_thread_exc_healthy", "thread_exc", 1, 3, "none", [], "none", {}),
    ("m_thread_exc_healthy_3r", "thread_exc", 0, 5, "none", [], "none", {"nproc": 3, "style": "rankfmt"}),
    ("m_emfile_r2", "emfile", 2, 4, "configuration", [2], "stop", {}),
    ("m_emfile_r1_print", "emfile", 1, 6, "configuration", [1], "stop", {"style": "print"}),
    ("m_recursion_r3", "recursion", 3, 5, "application_error", [3], "stop", {}),
    ("m_recursion_r1_json", "recursion", 1, 4, "application_error", [1], "stop", {"style": "json"}),
]


# A fourteenth set, written 2026-12-07 after set 13's rule, scored once before any rule of its own:
# healthy runs with what debugging and bookkeeping print (git's "fatal: not a git repository" from a
# script run outside a checkout, a faulthandler stack dump of every thread), a trainer that logs
# what it caught and exits 1, a text shard that is not UTF-8 on one rank, and a rank stuck in a
# gradient hook inside the backward pass.
CASES_14: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("n_git_noise_healthy", "git_noise", 0, 0, "none", [], "none", {}),
    ("n_git_noise_healthy_print_3r", "git_noise", 0, 0, "none", [], "none", {"nproc": 3, "style": "print"}),
    ("n_stack_dump_healthy", "stack_dump", 0, 5, "none", [], "none", {}),
    ("n_stack_dump_healthy_r2_rankfmt", "stack_dump", 2, 4, "none", [], "none", {"style": "rankfmt"}),
    ("n_logged_exit_r2", "logged_exit", 2, 6, "application_error", [2], "stop", {}),
    ("n_logged_exit_r0_json_3r", "logged_exit", 0, 4, "application_error", [0], "stop", {"nproc": 3, "style": "json"}),
    ("n_unicode_r1", "unicode", 1, 5, "application_error", [1], "stop", {}),
    ("n_unicode_r3_print", "unicode", 3, 3, "application_error", [3], "stop", {"style": "print"}),
    ("n_backward_hang_r3", "backward_hang", 3, 5, "hang", [3], "restart", {}),
    ("n_backward_hang_r1_rankfmt", "backward_hang", 1, 4, "hang", [1], "restart", {"style": "rankfmt"}),
]


# A fifteenth set, written 2026-12-07 before any run and scored once before any rule of its own:
# gradient clipping that refuses a non-finite norm (one rank's batch overflows, DDP's all-reduce
# gives every rank the same gradient, so every rank raises at once and no line shows whose batch it
# was: no rank named), rank 0's checkpoint write stuck on a slow filesystem while its peers wait at
# the barrier after it, ``sys.exit`` with a message on one rank, and healthy runs with what torch
# warns about and trains on: a schedule stepped before the optimizer, more DataLoader workers than
# the machine has cores ("might get DataLoader running slow or even freeze"), clipping that never fires.
CASES_15: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("o_clip_nonfinite_r1", "clip_nonfinite", 1, 5, "numerical", [], "stop", {}),
    ("o_clip_nonfinite_r2_print_3r", "clip_nonfinite", 2, 4, "numerical", [], "stop", {"nproc": 3, "style": "print"}),
    ("o_clip_ok_healthy", "clip_ok", 0, 0, "none", [], "none", {}),
    ("o_ckpt_stall_r0", "ckpt_stall", 0, 6, "hang", [0], "restart", {}),
    ("o_ckpt_stall_r0_rankfmt_3r", "ckpt_stall", 0, 4, "hang", [0], "restart", {"nproc": 3, "style": "rankfmt"}),
    ("o_exit_message_r2", "exit_message", 2, 5, "application_error", [2], "stop", {}),
    ("o_exit_message_r1_print", "exit_message", 1, 3, "application_error", [1], "stop", {"style": "print"}),
    ("o_lr_order_healthy", "lr_order", 0, 0, "none", [], "none", {}),
    ("o_many_workers_healthy_2r", "none", 0, 0, "none", [], "none", {"nproc": 2, "workers": 6}),
]


# A sixteenth set, written 2026-12-07 and scored once before any rule of its own: torch.compile,
# which 2025-26 training stacks turn on by default. A healthy run whose compiled helper recompiles
# past torch._dynamo's limit (a warning with a user stack trace, and training goes on in eager), and
# a model compiled with fullgraph=True whose forward branches on a tensor's value: every rank
# raises dynamo's UserError at the first forward.
COMPILING: dict[str, object] = {"timeout": 120.0}  # four ranks compiling on two cores: a first step of minutes
PRINT_2R: dict[str, object] = {"nproc": 2, "style": "print"}
RANKFMT_3R: dict[str, object] = {"nproc": 3, "style": "rankfmt"}
CASES_16: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("p_compile_recompile_healthy", "compile_recompile", 0, 0, "none", [], "none", COMPILING),
    ("p_compile_recompile_healthy_print_2r", "compile_recompile", 0, 0, "none", [], "none", {**PRINT_2R, **COMPILING}),
    ("p_compile_fullgraph_all", "compile_fullgraph", 0, 0, "configuration", [], "stop", COMPILING),
    (
        "p_compile_fullgraph_all_rankfmt_3r",
        "compile_fullgraph",
        0,
        0,
        "configuration",
        [],
        "stop",
        {**RANKFMT_3R, **COMPILING},
    ),
]


# A seventeenth set, written 2026-12-07 before any run and scored once before any rule of its own:
# a pipeline whose stages hand activations to the next (isend/irecv in a ring, after each step), one
# stage skipping its send once (a schedule's off-by-one: the next stage waits in recv, every other
# rank in the next step's all-reduce; the culprit is the stage that skipped, which waits on no one
# first), the same ring healthy, and a block shared by two layers under reentrant activation
# checkpointing in a DDP model told to find unused parameters (torch's "Expected to mark a variable
# ready only once" on every rank: the set-up's, fixed by use_reentrant=False or static_graph).
PRINT_3R: dict[str, object] = {"nproc": 3, "style": "print"}
CASES_17: list[tuple[str, str, int, int, str, list[int], str, dict[str, object]]] = [
    ("q_pp_skip_send_r1", "pp_skip_send", 1, 5, "collective_mismatch", [1], "stop", {}),
    ("q_pp_skip_send_r2_print_3r", "pp_skip_send", 2, 4, "collective_mismatch", [2], "stop", PRINT_3R),
    ("q_pp_ring_healthy", "pp_ring", 0, 0, "none", [], "none", {}),
    ("q_pp_ring_healthy_print_2r", "pp_ring", 0, 0, "none", [], "none", PRINT_2R),
    ("q_reentrant_twice_all", "reentrant_twice", 0, 0, "configuration", [], "stop", {}),
    ("q_reentrant_twice_all_rankfmt_3r", "reentrant_twice", 0, 0, "configuration", [], "stop", RANKFMT_3R),
]


def run_cases(out: Path, cases: list[tuple], run: Callable[[Path, tuple], Path], jobs: int) -> None:
    """Run ``cases`` ``jobs`` at a time, printing each one's name and exit status as it is written."""
    with ThreadPoolExecutor(jobs) as ex:
        for d in ex.map(lambda c: run(out, c), cases):
            print(d.name, json.loads((d / "truth.json").read_text())["exit_code"], flush=True)


def run_job(
    argv: list[str],
    env: dict[str, str],
    console: Path,
    timeout: float = 240,
    preempt_after: float | None = None,
    interrupt_after: float | None = None,
) -> int:
    """Run one job in a session of its own, its output to ``console``; past ``timeout`` the session is
    sent SIGTERM (as a scheduler would), then SIGKILL. Returns the exit status.

    When the launcher has exited, whatever is left of its session is killed too, as a scheduler's
    cgroup clean-up does: a rank stuck in a sleep that ignored the launcher's SIGTERM (Lightning
    handles it) would otherwise wake an hour later and append to a bundle already scored.

    ``preempt_after``: the launcher alone is sent SIGTERM after that many seconds, as a scheduler
    preempting the job (or ``scancel``) signals the job step's processes.

    ``interrupt_after``: the whole session is sent SIGINT after that many seconds, as a terminal
    does to its foreground process group when the user, tired of waiting, presses Ctrl-C."""
    with open(console, "wb") as con:
        p = subprocess.Popen(argv, stdout=con, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            if preempt_after is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=preempt_after)
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            if interrupt_after is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=interrupt_after)
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGINT)
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            time.sleep(3)
            os.killpg(p.pid, signal.SIGKILL)
            return p.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        return rc


def run_case(out: Path, case: tuple, keep_logdir: bool) -> Path:
    name, fault, rank, step, _cat, _culprits, _action, extra = case
    d = out / name
    shutil.rmtree(d, ignore_errors=True)  # a case made again: torchrun's --log-dir would keep the old run's tree
    d.mkdir(parents=True)
    nproc = int(extra.get("nproc", 4))
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    argv = [
        *torchrun,
        "--nproc-per-node",
        str(nproc),
        "--master-port",
        str(free_port()),
        "--max-restarts",
        str(extra.get("max_restarts", 0)),
    ]
    if "rdzv" in extra:  # a c10d rendezvous at a host name that does not resolve
        at = argv.index("--master-port")
        argv[at : at + 2] = ["--rdzv-backend", "c10d", "--rdzv-endpoint", str(extra["rdzv"])]
    if keep_logdir:
        argv += ["--log-dir", str(d / "logs"), "--tee", "3"]
    argv += [str(HERE / "train.py"), *fault_args(fault, rank, step, extra, d)]
    if "preamble" in extra:  # the job script's own commands first, then the launcher, in one console
        argv = ["bash", "-c", f"{PREAMBLES[str(extra['preamble'])]}; exec {shlex.join(argv)}"]
    if extra.get("launch") == "python":  # the script run as a plain program, without a launcher
        argv = [sys.executable, str(HERE / "train.py"), *fault_args(fault, rank, step, extra, d)]
    if fault.startswith("dcp_"):  # a checkpoint folder of the case's own, outside its bundle
        ckdir = Path("/tmp/ff-realjobs-ckpt") / name
        shutil.rmtree(ckdir, ignore_errors=True)
        argv += ["--ckpt", str(ckdir)]
    if "ckpt" in extra:  # a checkpoint folder of the case's own choosing
        argv += ["--ckpt", str(extra["ckpt"])]
    if extra.get("resume"):  # a checkpoint to resume from (see RESUME)
        ckpt = d / "resume.pt"
        make = "import sys, torch, torch.nn as nn; " + RESUME[extra["resume"]]  # type: ignore[index]
        subprocess.run([sys.executable, "-c", make, str(ckpt)], check=True)
        argv += ["--resume", str(ckpt)]
    env = job_env(extra)
    busy = None
    if extra.get("port_busy"):  # another job's store already listens on the port this job was given
        busy = socket.socket()
        busy.bind(("127.0.0.1", int(argv[argv.index("--master-port") + 1])))
        busy.listen()
    t0 = time.time()
    preempt, interrupt = extra.get("preempt_after"), extra.get("interrupt_after")
    rc = run_job(
        argv,
        env,
        d / "console.log",
        preempt_after=float(preempt) if preempt is not None else None,  # type: ignore[arg-type]
        interrupt_after=float(interrupt) if interrupt is not None else None,  # type: ignore[arg-type]
    )
    if busy is not None:
        busy.close()
    truth = truth_record(case, nproc, rc, time.time() - t0, argv)
    return save_truth(d, truth, "make_set.py", extra.get("env", {}))


def missing_modules(cases: list[tuple]) -> list[str]:
    """The modules ``train.py`` imports for these cases that this Python lacks: ``tqdm`` for the
    tqdm log style, ``numpy`` for torch.distributed.checkpoint's cases.

    Why: a job whose import fails ends at start-up on every rank, and its label (written from the
    plan) would call a set-up failure "healthy" or a fault it never reached: a set made on a machine
    without them measured the machine, not firstfault (set 8 and 11, made again 2026-12-07)."""
    import importlib.util

    need = set()
    for c in cases:
        if c[7].get("style") == "tqdm":
            need.add("tqdm")
        if str(c[1]).startswith("dcp"):
            need.add("numpy")
    return sorted(m for m in need if importlib.util.find_spec(m) is None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--set",
        type=int,
        default=1,
        choices=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 60),
        help="1 to 17 (2 and 4 held out); 60: set 6's development case",
    )
    a = ap.parse_args()
    sets = {
        1: CASES,
        2: CASES_2,
        3: CASES_3,
        4: CASES_4,
        5: CASES_5,
        6: CASES_6,
        7: CASES_7,
        8: CASES_8,
        9: CASES_9,
        10: CASES_10,
        11: CASES_11,
        12: CASES_12,
        13: CASES_13,
        14: CASES_14,
        15: CASES_15,
        16: CASES_16,
        17: CASES_17,
    }
    chosen = {**sets, 60: CASES_6_DEV}[a.set]
    cases = [c for c in chosen if not a.only or c[0] in a.only]
    missing = missing_modules(cases)
    if missing:
        raise SystemExit(
            f"make_set.py: {sys.executable} lacks {', '.join(missing)}, which these cases' workload imports: "
            "every job would fail at start-up and be labelled as planned; run with a Python that has them"
        )
    with ThreadPoolExecutor(a.jobs) as ex:
        # every other case of the set keeps torchrun's per-rank tree, by its place in the whole set
        futs = [ex.submit(run_case, a.out, c, chosen.index(c) % 2 == 0) for c in cases]
        for f in futs:
            print("wrote", f.result(), flush=True)


if __name__ == "__main__":
    main()
