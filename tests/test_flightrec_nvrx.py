"""NVIDIA's real 16-rank Megatron MoE dumps (FR 2.9, NCCL 2.27.3): every faulted rank, with a reason.

Ground truth is each case's ``fault_injection.log``.  NVIDIA's own analyzer misses rank
14 in gpu_error_1st; the device-stall rule (peers completed collectives that rank 14
entered but never saw complete) is what finds it.  Skips when ../shared is absent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from firstfault.flightrec.analyze import analyze_fr
from firstfault.flightrec.load import load_dumps

SHARED = Path(os.environ.get("FIRSTFAULT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
NVRX = SHARED / "peer-data" / "nvrx-fr-traces"

CASES = {
    "gpu_error_1st": ({12, 14}, "stalled"),
    "gpu_error_2nd": ({9, 14}, "stalled"),
    "lock_gil_1st": ({9, 14}, "missing"),
    "lock_gil_2nd": ({10, 15}, "missing"),
}

pytestmark = pytest.mark.skipif(not NVRX.is_dir(), reason=f"nvrx traces not present at {NVRX}")


def _truth(case: str) -> set[int]:
    text = (NVRX / case / "fault_injection.log").read_text()
    m = re.search(r"Fault ranks:\s*\[([\d,\s]*)\]", text)
    assert m
    return {int(x) for x in m.group(1).split(",") if x.strip()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_finds_every_faulted_rank_with_a_reason(case: str) -> None:
    expected, kind = CASES[case]
    assert _truth(case) == expected
    loaded = load_dumps(NVRX / case)
    assert len(loaded.dumps) == 16 and not loaded.issues
    a = analyze_fr(loaded.dumps, expected_world_size=16)
    culprits = {c.rank for c in a.culprits}
    assert culprits == expected, (case, [(c.rank, c.kind, c.score) for c in a.culprits])
    for c in a.culprits:
        assert c.kind == kind
        assert c.reason.startswith(f"rank {c.rank} ")
        assert c.pg and c.seq is not None and c.op
        assert c.time_ns and c.score >= 0.8
    # the first groups listed are the ones the culprits are blamed in
    assert a.groups[0].origin
    assert set(a.groups[0].missing + a.groups[0].stalled) & expected


def test_gpu_error_1st_rank_14_is_found_by_the_stall_rule() -> None:
    a = analyze_fr(load_dumps(NVRX / "gpu_error_1st").dumps)
    c14 = next(c for c in a.culprits if c.rank == 14)
    assert c14.kind == "stalled"
    assert "completed it" in c14.reason and "never saw it complete" in c14.reason
    # rank 12 also stopped issuing work (missing in pg 41/74), rank 14 did not: 12 ranks first
    assert a.culprits[0].rank == 12


def test_lock_gil_ranks_have_nothing_in_flight() -> None:
    a = analyze_fr(load_dumps(NVRX / "lock_gil_2nd").dumps)
    by = {c.rank: c for c in a.culprits}
    assert "no collective in flight" in by[10].reason
    assert by[10].pg == "73" and by[10].op == "all_to_all" and by[10].seq == 20947
    assert by[15].pg == "74"


def test_json_round_trip_of_the_analysis() -> None:
    import json

    a = analyze_fr(load_dumps(NVRX / "gpu_error_2nd").dumps)
    d = json.loads(json.dumps(a.to_dict()))
    assert {c["rank"] for c in d["culprits"]} == {9, 14}
    assert d["groups"][0]["state"] in ("waiting", "stalled")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_verdict_names_every_faulted_rank(case: str) -> None:
    # two ranks faulted in two tensor-parallel groups: the verdict's culprit is both, in the
    # recorder's order, not the first and a victim (reason.flightrec.fr_companions)
    from firstfault.pipeline import analyze

    v = analyze(NVRX / case)
    assert set(v.culprit.ranks) == CASES[case][0]
    assert any("blames rank(s)" in r and "from its own dump" in r for r in v.reasons)
