"""Flight-recorder dumps as torch's ProcessGroupNCCL writes them: one pickle per rank.

The dict has the keys and value shapes of real NCCL dumps (FR schema 2.9/2.10: ``version``,
``pg_config``, ``nccl_version``/``comm_lib_version``, ``pg_status``, ``entries``; entry keys as
in the nvidia-resiliency-ext dumps under ``/work/shared/peer-data/nvrx-fr-traces`` and torch's
``flight_recorder/components/types.py``). Only plain dicts, lists, tuples, strings, ints,
floats, bools and None are pickled, so firstfault's restricted unpickler loads them.

An entry is one collective or p2p op of the rank's recent past: the ring buffer holds the last
``fr_entries`` ops up to the one it is stuck in (``retired`` False), plus whatever it had
already enqueued after it.
"""

from __future__ import annotations

import pickle
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from firstfault_sim.cluster import templates as T
from firstfault_sim.cluster.schedule import OP_FR

if TYPE_CHECKING:
    from firstfault_sim.cluster.outcome import Outcome

FR_VERSION = "2.9"  # what torch 2.7/2.8 + NCCL 2.27 wrote (the nvrx dumps); 2.10 renamed nccl_version


@lru_cache(maxsize=64)
def _ranks_str(ranks: tuple[int, ...]) -> str:
    return str(list(ranks))


@lru_cache(maxsize=16)
def _frames(optype: str) -> list[dict[str, Any]]:
    fn = {
        "ALLREDUCE": "all_reduce",
        "_ALLGATHER_BASE": "all_gather_into_tensor",
        "_REDUCE_SCATTER_BASE": "reduce_scatter_tensor",
        "ALLTOALL_BASE": "all_to_all_single",
        "ALLGATHER": "all_gather",
        "SEND": "send",
        "RECV": "recv",
    }.get(optype, "all_reduce")
    return [
        {"name": fn, "filename": T.PY + "/torch/distributed/distributed_c10d.py", "line": 3174},
        {"name": "wrapper", "filename": T.PY + "/torch/distributed/c10d_logger.py", "line": 83},
        {"name": "collective", "filename": T.APP + "/workload.py", "line": 259},
        {"name": "_train", "filename": T.APP + "/workload.py", "line": 510},
        {"name": "main", "filename": T.APP + "/workload.py", "line": 447},
    ]


def build_dump(o: Outcome, rank: int, t_dump: float, n_entries: int) -> dict[str, Any]:
    """The dict rank ``rank``'s flight recorder holds at ``t_dump``."""
    sched, groups, cl = o.sched, o.groups, o.cluster
    tmpl = sched.template(rank)
    kinds = [k for k in groups.kinds if k in groups.member[rank]]
    pg_config: dict[str, dict[str, str]] = {
        "0": {"name": "0", "desc": "default_pg", "ranks": _ranks_str(tuple(range(groups.world)))}
    }
    for k in kinds:
        g = groups.group_of(rank, k)
        assert g is not None
        pg_config[g.guid] = {"name": g.guid, "desc": g.desc, "ranks": _ranks_str(g.ranks)}
    # where the rank is: blocked op (step, index) or the op it would issue at t_dump
    b = o.blocked.get(rank)
    if b is not None:
        step, idx, inside = b.step, b.index, b.inside
    else:
        step = max(0, int((t_dump - o.t_train) // o.step_s))
        idx, inside = 0, False
    # walk back n_entries ops from the frontier
    ops: list[tuple[int, int, bool]] = []  # (step, index, retired)
    s, i = step, idx
    if inside:
        ops.append((s, i, False))
    while len(ops) < n_entries:
        i -= 1
        if i < 0:
            s -= 1
            if s < 0:
                break
            i = len(tmpl) - 1
        ops.append((s, i, True))
    ops.reverse()
    pid = o.pid[rank]
    tid = str(140000000000000 + pid * 4096)
    mism = any(f.kind == "mismatch" and f.host * cl.gph + f.local == rank for f in o.faults)
    entries: list[dict[str, Any]] = []
    last_seq: dict[str, tuple[int, int]] = {}
    stage = groups.stage(rank)
    jitter_ns = int(o.t_train * 0) + (pid % 4093) * 1000
    for s, i, retired in ops:
        op = tmpl[i]
        kind = op.kind
        g = groups.group_of(rank, kind)
        guid, desc = (g.guid, g.desc) if g is not None else ("0", "default_pg")
        pg_id = groups.pg_id(rank, kind)
        seq = sched.seq(rank, s, i) + 1
        static = _static_entry(o, stage, s, i, retired, mism and not retired)
        e = dict(static)
        e["pg_id"] = pg_id
        e["process_group"] = (guid, desc)
        e["thread_id"] = tid
        e["time_created_ns"] = static["time_created_ns"] + jitter_ns
        if op.is_p2p:
            me = groups.group_rank(rank, "pp")
            peer = me + (1 if op.slot == "pp_up" else -1)
            e["profiling_name"] = (
                f"{OP_FR[op.optype]} {me}->{peer}" if op.optype == "SEND" else f"{OP_FR[op.optype]} {me}<-{peer}"
            )
        entries.append(e)
        done = seq if retired else seq - 1
        prev = last_seq.get(str(pg_id), (0, 0))
        last_seq[str(pg_id)] = (max(prev[0], seq), max(prev[1], done))
    pg_status = {
        k: {"last_enqueued_collective": v[0], "last_started_collective": -1, "last_completed_collective": v[1]}
        for k, v in sorted(last_seq.items(), key=lambda kv: int(kv[0]))
    }
    return {
        "version": FR_VERSION,
        "pg_config": pg_config,
        "nccl_version": T.NCCL_VERSION,
        "pg_status": pg_status,
        "entries": entries,
    }


T_HIDDEN = 5120
_STATIC: dict[tuple[int, int, int, int, bool, bool], dict[str, Any]] = {}


def _static_entry(o: Outcome, stage: int, s: int, i: int, retired: bool, mism: bool) -> dict[str, Any]:
    """The parts of an entry every rank of a pipeline stage shares (cached per job)."""
    key = (id(o), stage, s, i, retired, mism)
    e = _STATIC.get(key)
    if e is not None:
        return e
    if len(_STATIC) > 200_000:
        _STATIC.clear()
    op = o.sched.templates[stage][i]
    rank0 = stage * o.groups.layout.tp * o.groups.layout.cp * o.groups.layout.dp
    seq = o.sched.seq(rank0, s, i) + 1
    per_step = len(o.sched.templates[stage])
    op_id = s * per_step + i + 10
    nin, nout = op.numel_in, op.numel_out
    if mism:
        nin, nout = nin + 4096, nout + 4096
    shape_in = [nin // T_HIDDEN, 1, T_HIDDEN] if nin % T_HIDDEN == 0 and nin >= T_HIDDEN else [nin]
    shape_out = [nout // T_HIDDEN, 1, T_HIDDEN] if nout % T_HIDDEN == 0 and nout >= T_HIDDEN else [nout]
    coll_seq, p2p_seq = (0, seq) if op.is_p2p else (seq, 0)
    e = {
        "record_id": op_id + 3,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "thread_name": "python3",
        "thread_id": "",
        "collective_seq_id": coll_seq,
        "p2p_seq_id": p2p_seq,
        "op_id": op_id,
        "profiling_name": OP_FR[op.optype],
        "time_created_ns": int((o.t_train + (s + op.frac) * o.step_s) * 1e9),
        "input_sizes": [shape_in],
        "input_dtypes": ["BFloat16"],
        "output_sizes": [shape_out],
        "output_dtypes": ["BFloat16"],
        "state": "scheduled",
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": retired,
        "timeout_ms": int(o.cfg.nccl_timeout_s * 1000),
        "is_p2p": op.is_p2p,
        "frames": _frames(op.optype),
    }
    _STATIC[key] = e
    return e


def dump_bytes(o: Outcome, rank: int, t_dump: float, n_entries: int) -> bytes:
    return pickle.dumps(build_dump(o, rank, t_dump, n_entries), protocol=2)
