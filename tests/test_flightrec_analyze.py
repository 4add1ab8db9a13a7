"""Analysis rules on small hand-built dumps (NCCL- and gloo-shaped), one rule per test."""

from __future__ import annotations

import json
from typing import Any

from firstfault.flightrec.analyze import analyze_fr, compress_ranks
from firstfault.flightrec.normalize import parse_dump_object
from firstfault.flightrec.records import FRDump

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def entry(
    pg: str,
    seq: int,
    op: str = "all_reduce",
    *,
    desc: str = "undefined",
    state: str = "scheduled",
    t: int = 0,
    size: int = 8,
    dtype: str = "Float",
    backend: str = "nccl",
    p2p: bool = False,
    retired: bool = False,
    rid: int = 0,
    uid: int = 0,
    frames: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "record_id": rid,
        "pg_id": uid,
        "process_group": (pg, desc),
        "collective_seq_id": 0 if p2p else seq,
        "p2p_seq_id": seq if p2p else 0,
        "op_id": seq,
        "profiling_name": f"{backend}:{op}",
        "time_created_ns": T0 + t * MS,
        "input_sizes": [[size]],
        "input_dtypes": [dtype],
        "output_sizes": [[size]],
        "output_dtypes": [dtype],
        "state": state,
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": T0 + t * MS + 1 if state == "completed" else None,
        "retired": retired,
        "timeout_ms": 600000,
        "is_p2p": p2p,
        "frames": frames or [],
    }


def dump(
    rank: int,
    entries: list[dict[str, Any]],
    *,
    groups: dict[str, tuple[str, list[int]]] | None = None,
    status: dict[str, tuple[int, int]] | None = None,
    version: str = "2.9",
) -> FRDump:
    for i, e in enumerate(entries):
        e["record_id"] = e["record_id"] or i
    raw: dict[str, Any] = {
        "version": version,
        "pg_config": {n: {"name": n, "desc": d, "ranks": str(r)} for n, (d, r) in (groups or {}).items()},
        "pg_status": {
            u: {"last_enqueued_collective": a, "last_started_collective": -1, "last_completed_collective": b}
            for u, (a, b) in (status or {}).items()
        },
        "entries": entries,
    }
    if not groups:
        raw["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[]"}}
    return parse_dump_object(raw, path=f"mem/{rank}", rank=rank, fmt="pickle")


WORLD4 = {"0": ("default_pg", [0, 1, 2, 3])}


def test_missing_rank_nccl_only_active() -> None:
    """Ranks 0-2 wait in all_reduce #5; rank 3 completed #4 and has nothing in flight."""
    dumps = [dump(r, [entry("0", 5, desc="default_pg", t=r)], groups=WORLD4, status={"0": (5, 4)}) for r in range(3)]
    dumps.append(dump(3, [], groups=WORLD4, status={"0": (4, 4)}))
    a = analyze_fr(dumps)
    assert [c.rank for c in a.culprits] == [3]
    c = a.culprits[0]
    assert c.kind == "missing" and c.pg == "0" and c.seq == 5 and c.op == "all_reduce"
    assert "never entered all_reduce #5" in c.reason and "0,1,2" in c.reason
    assert c.victims == 3 and 0 < c.score <= 1
    g = a.groups[0]
    assert g.state == "waiting" and g.missing == [3] and g.waiting == [0, 1, 2] and g.origin
    json.dumps(a.to_dict())


def test_stalled_rank_peers_completed_what_it_did_not() -> None:
    """Rank 1 entered #10..#12 but saw none complete; rank 0 completed them (GPU fault)."""
    tp = {"5": ("TENSOR_MODEL_PARALLEL_GROUP", [0, 1])}
    d0 = dump(0, [entry("5", 13, desc="TENSOR_MODEL_PARALLEL_GROUP", t=30)], groups=tp, status={"0": (13, 12)})
    d1 = dump(
        1,
        [entry("5", s, desc="TENSOR_MODEL_PARALLEL_GROUP", t=s) for s in (10, 11, 12)],
        groups=tp,
        status={"0": (12, 9)},
    )
    a = analyze_fr([d0, d1])
    assert [c.rank for c in a.culprits] == [1]
    c = a.culprits[0]
    assert c.kind == "stalled" and c.seq == 10
    assert "completed it" in c.reason and "device" in c.reason
    assert a.groups[0].stalled == [1]


def test_mismatch_op_size_dtype_first_divergence() -> None:
    for kw, word in (
        ({"op": "broadcast"}, "broadcast"),
        ({"size": 16}, "16"),
        ({"dtype": "Double"}, "Double"),
    ):
        dumps = []
        for r in range(4):
            es = [entry("0", 1, desc="default_pg", t=0, state="completed")]
            es.append(entry("0", 2, desc="default_pg", t=5, **(kw if r == 2 else {})))
            es.append(entry("0", 3, desc="default_pg", t=6, **(kw if r == 2 else {})))
            dumps.append(dump(r, es, groups=WORLD4))
        a = analyze_fr(dumps)
        assert a.culprits[0].rank == 2, kw
        c = a.culprits[0]
        assert c.kind == "mismatched" and c.seq == 2, "the first divergence is reported"
        assert word in c.reason and "0,1,3" in c.reason
        assert a.groups[0].state == "mismatch"


def test_all_to_all_sizes_may_differ() -> None:
    dumps = [dump(r, [entry("0", 1, "all_to_all", desc="default_pg", size=100 + r)], groups=WORLD4) for r in range(4)]
    a = analyze_fr(dumps)
    assert not [c for c in a.culprits if c.kind == "mismatched"]


def test_victim_in_one_group_is_explained_by_its_wait_elsewhere() -> None:
    """Rank 3 hangs before group B={2,3}; rank 2 waits there, 0 and 1 wait in the world group.

    Rank 2 is 'missing' in the world group too, but it is explained by its wait in B,
    so only 3 is blamed, and B (where the hang started) is listed first.
    """
    groups = {"0": ("default_pg", [0, 1, 2, 3]), "1": ("A", [0, 1]), "2": ("B", [2, 3])}
    st_done = {"0": (3, 3), "1": (1, 1), "2": (1, 1)}
    d = [
        dump(0, [entry("0", 4, desc="default_pg", t=10, uid=0)], groups=groups, status={**st_done, "0": (4, 3)}),
        dump(1, [entry("0", 4, desc="default_pg", t=11, uid=0)], groups=groups, status={**st_done, "0": (4, 3)}),
        dump(2, [entry("2", 2, desc="B", t=5, uid=2)], groups=groups, status={**st_done, "2": (2, 1)}),
        dump(3, [], groups=groups, status=st_done),
    ]
    a = analyze_fr(d)
    assert [c.rank for c in a.culprits] == [3]
    assert a.culprits[0].pg == "2"
    assert a.groups[0].pg == "2" and a.groups[0].origin
    world = next(g for g in a.groups if g.pg == "0")
    assert world.missing == [2, 3] and 2 in world.explained and "B" in world.explained[2]


def test_no_dump_rank_needs_world_size() -> None:
    """gloo: ranks 0-2 wait in #4; rank 3 wrote no dump."""
    dumps = [
        dump(
            r,
            [entry("0", s, desc="default_pg", backend="gloo", retired=s < 4, t=s) for s in (1, 2, 3, 4)],
        )
        for r in range(3)
    ]
    assert not [c for c in analyze_fr(dumps).culprits if c.rank == 3]
    a = analyze_fr(dumps, expected_world_size=4)
    c = a.culprits[0]
    assert c.rank == 3 and c.kind == "missing" and "wrote no flight-recorder dump" in c.reason
    assert a.missing_dumps == [3]


def test_group_hints_fill_gloo_membership() -> None:
    """Subgroup '1' = {0,1}: rank 1 never issued anything in it, so entries alone miss it."""
    d0 = dump(
        0,
        [
            entry("0", 1, desc="default_pg", backend="gloo", retired=True, t=0),
            entry("1", 1, backend="gloo", retired=False, t=1),
        ],
    )
    d1 = dump(1, [entry("0", 1, desc="default_pg", backend="gloo", retired=True, t=0)])
    plain = analyze_fr([d0, d1])
    assert not [c for c in plain.culprits if c.rank == 1 and c.kind == "missing"]
    hinted = analyze_fr([d0, d1], group_hints={"1": [0, 1]})
    assert hinted.culprits and hinted.culprits[0].rank == 1 and hinted.culprits[0].pg == "1"


def test_p2p_unmatched_send_waits_on_peer() -> None:
    pp = {"7": ("PIPELINE_MODEL_PARALLEL_GROUP", [0, 1])}
    d0 = dump(0, [entry("7", 11, "send 0->1", desc="PIPELINE_MODEL_PARALLEL_GROUP", p2p=True, t=3)], groups=pp)
    d1 = dump(1, [], groups=pp, status={"0": (20, 20)})
    a = analyze_fr([d0, d1])
    assert a.culprits and a.culprits[0].rank == 1
    assert "recv" in a.culprits[0].reason and "send->1" in a.culprits[0].reason
    # matched pending pair: both entered, nobody is blamed for p2p
    d1b = dump(1, [entry("7", 40, "recv 1<-0", desc="PIPELINE_MODEL_PARALLEL_GROUP", p2p=True, t=4)], groups=pp)
    b = analyze_fr([d0, d1b])
    assert not [c for c in b.culprits if c.kind == "missing"]


def test_order_inversion_cycle_is_broken_at_the_oldest_wait() -> None:
    """Rank 0 waits in A for 1 (since t=1); rank 1 waits in the world group for 0 (since t=5)."""
    g = {"0": ("default_pg", [0, 1]), "1": ("A", [0, 1])}
    d0 = dump(
        0,
        [entry("0", 1, desc="default_pg", backend="gloo", retired=True), entry("1", 1, t=1, backend="gloo")],
    )
    d1 = dump(
        1,
        [entry("0", 1, desc="default_pg", backend="gloo", retired=True), entry("0", 2, t=5, backend="gloo")],
    )
    a = analyze_fr([d0, d1], group_hints={"1": [0, 1], "0": [0, 1]})
    assert a.culprits and a.culprits[0].kind == "deadlock" and a.culprits[0].rank == 1
    assert "cycle" in a.culprits[0].reason
    assert g  # groups documented above


def test_straggler_without_hang() -> None:
    dumps = []
    for r in range(4):
        es = []
        for s in range(1, 7):
            t = s * 1000 + (180 if r == 2 else r)
            es.append(entry("0", s, desc="default_pg", backend="gloo", retired=True, t=t))
        dumps.append(dump(r, es))
    a = analyze_fr(dumps)
    assert a.culprits and a.culprits[0].rank == 2 and a.culprits[0].kind == "straggler"
    assert "ms" in a.culprits[0].reason


def test_frames_are_user_frames() -> None:
    frames = [
        {
            "name": "all_reduce",
            "filename": "/x/site-packages/torch/distributed/distributed_c10d.py",
            "line": 1,
        },
        {"name": "wrapper", "filename": "/x/site-packages/torch/distributed/c10d_logger.py", "line": 2},
        {"name": "train_step", "filename": "/job/train.py", "line": 42},
        {"name": "<module>", "filename": "/job/train.py", "line": 99},
    ]
    dumps = [
        dump(
            r,
            [entry("0", s, desc="default_pg", backend="gloo", retired=True, frames=frames) for s in (1, 2, 3)],
        )
        for r in range(4)
    ]
    for r in range(3):
        dumps[r].entries.append(
            dump(r, [entry("0", 4, desc="default_pg", backend="gloo", retired=True, rid=99)]).entries[0]
        )
    a = analyze_fr(dumps)
    c = a.culprits[0]
    assert c.rank == 3
    assert c.frames[0] == "train_step (/job/train.py:42)"
    assert not any("distributed_c10d" in f for f in c.frames)


def test_healthy_dumps_have_no_culprit() -> None:
    dumps = [
        dump(
            r,
            [entry("0", s, desc="default_pg", state="completed", t=s * 10) for s in (1, 2, 3)],
            groups=WORLD4,
        )
        for r in range(4)
    ]
    a = analyze_fr(dumps)
    assert a.culprits == []
    assert "no fault" in a.verdict


def test_empty_input_and_helpers() -> None:
    a = analyze_fr([])
    assert a.culprits == [] and a.warnings
    assert compress_ranks([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9-10"
    assert compress_ranks([]) == ""


def test_mismatch_without_majority_blames_the_rank_that_changed_its_shape() -> None:
    """Only two of four ranks dumped and they disagree: the one whose size differs from its own
    previous call at the same place diverged (seen in a real desync bundle: 29004 vs 19336)."""
    frame = [{"name": "_train", "filename": "train.py", "line": 480}]
    dumps = []
    for r, now in ((1, 29004), (3, 19336)):
        es = [
            entry("0", 8, desc="default_pg", t=0, size=19336, frames=frame, retired=True),
            entry("0", 9, desc="default_pg", t=5, size=now, frames=frame),
        ]
        dumps.append(dump(r, es))
    a = analyze_fr(dumps, expected_world_size=4)
    mism = [c for c in a.culprits if c.kind == "mismatched"]
    assert mism[0].rank == 1
    assert "changed what it sends" in mism[0].reason
    assert all(c.score < mism[0].score for c in a.culprits[1:])
