"""Attribution on cluster-simulator bundles: the scale benchmark's former misses, one by one.

Each case is a scenario of ``firstfault bench scale-accuracy``'s plan (same count, seed and
sizes, so the same bytes), simulated at a small size, analysed and scored exactly as the
benchmark scores it. Each one failed before the fix named in its id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.match.registry import load_registry
from firstfault.parse.slurm import Facts
from firstfault.reason.transients import demote_recovered
from firstfault.vocab import Category, Event, Layer, Role
from firstfault_bench.scale import plan, run_one

SMALL = (8, 16, 32, 64, 128, 256, 512)

# (plan count, plan seed, scenario name prefix, what it exercises)
CASES = [
    (120, 0, "114_xid79_128", "a benign 1.2 s IB flap 12 s before an Xid 79 is no root"),
    (120, 0, "069_nccl_bug_128", "DistBackendError + ncclInternalError in one block: the rank is not a victim"),
    (120, 0, "027_host_oom_8", "a peer's completion error with an inherited time follows the OOM kill it names"),
    (120, 0, "028_node_failure_8", "SLURM's failed node, dated by its last line, explains its peers' IB errors"),
    (120, 0, "104_node_failure_8", "node failure on the host of rank 0"),
    (120, 0, "007_link_flap_8", "a port that came back after the job died is a flap: restart"),
    (120, 0, "118_xid119+host_oom_16", "an Xid on another GPU of the host does not corroborate an OOM kill"),
    (120, 0, "071_mismatch_16", "a plain CANCELLED after kill-on-bad-exit is tear-down; FR names the mismatch"),
    (120, 1, "108_dataloader_hang_32", "a console copy whose time is inherited folds into the rank's own line"),
    (120, 1, "048_thermal_256", "a GPU that throttles late shows in the last quarter of the run"),
    (120, 1, "089_dataloader_hang_512", "srun -l agent labels map to ranks without a [rankN] line"),
    (120, 0, "016_disk_full_8", "a full disk on one of two hosts is that host's, not every rank's (4 of 8)"),
    (120, 1, "111_disk_full_8", "the same on the other host: half the world failing alike on one host"),
]


@pytest.mark.parametrize(("count", "seed", "name", "why"), CASES, ids=[c[2] for c in CASES])
def test_former_scale_miss(tmp_path: Path, count: int, seed: int, name: str, why: str) -> None:
    scen = next(s for s in plan(count, seed, SMALL) if s.name == name)
    r = run_one(scen, str(tmp_path))
    assert not r.error, r.error
    got = (r.got_ranks[:1], r.got_hosts[:1], r.got_category, r.got_action)
    want = f"{r.key}: ranks {r.truth_ranks[:1]} hosts {r.truth_hosts[:1]} {r.truth_category}/{r.truth_action}"
    assert r.culprit_ok and r.category_ok and r.action_ok, f"{why}: got {got}, want {want}; root {r.root}"


@pytest.mark.slow
def test_small_scale_accuracy_stays_at_the_bar(tmp_path: Path) -> None:
    """60 planned scenarios of every kind at 8..128 ranks: culprit, category and action >= 95 %."""
    scen = plan(60, 5, (8, 16, 32, 64, 128))
    results = [run_one(s, str(tmp_path)) for s in scen]
    assert not [r.error for r in results if r.error]
    n = len(results)
    for what in ("culprit_ok", "category_ok", "action_ok"):
        ok = sum(bool(getattr(r, what)) for r in results)
        misses = [r.scenario for r in results if not getattr(r, what)]
        assert ok >= 0.95 * n, f"{what}: {ok}/{n}; misses {misses}"


def _event(line: str, host: str, ts: float, source: str, no: int) -> Event:
    reg = load_registry()
    sig = reg.match(line, "kernel_log")
    assert sig is not None, line
    m = sig.pattern.search(line)
    assert m is not None
    fields = {k: v for k, v in m.groupdict().items() if v is not None}
    fields.update(sig.sets)
    return Event(
        no,
        source,
        no,
        line,
        sig.id,
        sig.category,
        sig.layer,
        sig.role,
        sig.severity,
        ts,
        "exact",
        host=host,
        fields=fields,
    )


def test_port_that_comes_back_within_the_retry_window_is_a_transient() -> None:
    down = _event("mlx5_core 0000:0c:00.0 mlx5_0: Port: 1 Link DOWN", "gpu0002", 100.0, "dmesg", 1)
    init = _event("mlx5_core 0000:0c:00.0 mlx5_0: Port: 1 Link INIT", "gpu0002", 100.5, "dmesg", 2)
    up = _event("mlx5_core 0000:0c:00.0 mlx5_0: Port: 1 Link ACTIVE", "gpu0002", 101.2, "dmesg", 3)
    other = _event("mlx5_core 0000:0d:00.0 mlx5_1: Port: 1 Link ACTIVE", "gpu0002", 100.8, "dmesg", 4)
    rec = demote_recovered([down, init, other, up])
    assert [r.healed_by for r in rec] == [up]  # INIT is no recovery, another HCA's ACTIVE neither
    assert down.role == Role.NOISE and "after 1.2 s" in rec[0].describe()


def test_port_back_after_the_retry_window_stays_a_fault() -> None:
    down = _event("mlx5_core 0000:0c:00.0 mlx5_0: Port: 1 Link DOWN", "gpu0002", 100.0, "dmesg", 1)
    up = _event("mlx5_core 0000:0c:00.0 mlx5_0: Port: 1 Link ACTIVE", "gpu0002", 160.0, "dmesg", 2)
    other_host = _event("mlx5_core 0000:0c:00.0 mlx5_0: Port: 1 Link ACTIVE", "gpu0003", 101.0, "dmesg", 3)
    assert demote_recovered([down, up, other_host]) == []
    assert down.role == Role.ROOT and down.category == Category.NETWORK and down.layer == Layer.NETWORK


def test_nccl_port_error_healed_by_port_active_on_the_same_process() -> None:
    reg = load_registry()
    lines = [
        "gpu0002:827506:827529 [0] p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : port error",
        "gpu0002:827506:827529 [0] p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : client reregistration",
        "gpu0002:827506:827529 [0] p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : port active",
    ]
    evs = []
    for i, line in enumerate(lines):
        sig = reg.match(line, "elastic_rank_log")
        assert sig is not None
        m = sig.pattern.search(line)
        assert m is not None
        f = {k: v for k, v in m.groupdict().items() if v is not None} | sig.sets
        evs.append(
            Event(
                i,
                "r0/stdout.log",
                i + 1,
                line,
                sig.id,
                sig.category,
                sig.layer,
                sig.role,
                sig.severity,
                None,
                "none",
                host="gpu0002",
                fields=f,
            )
        )
    rec = demote_recovered(evs)
    assert len(rec) == 1 and rec[0].healed_by is evs[2]  # 'client reregistration' heals nothing


def test_agent_offsets_extrapolate_only_from_a_uniform_layout() -> None:
    f = Facts()
    for line in ("0: [default1]:[rank1]: x", "3: [default2]:[rank26]: x"):
        f.learn_line(line)
    assert f.offset_of(0) == 0 and f.offset_of(3) == 24 and f.offset_of(24) == 192
    g = Facts()
    for line in ("1: [default0]:[rank8]: x", "2: [default0]:[rank12]: x"):
        g.learn_line(line)
    assert g.offset_of(5) is None  # 8 per agent for one, 6 for the other: no single nproc


def test_streamed_json_is_the_verdict_dict(tmp_path: Path) -> None:
    """``analyze --json`` streams the chain; the bytes are json.dumps of the v1 dict either way."""
    import io
    import json

    from firstfault.pipeline import analyze
    from firstfault.report import json_out

    scen = next(s for s in plan(120, 0, SMALL) if s.name == "069_nccl_bug_128")
    run_one(scen, str(tmp_path), keep=True)
    v = analyze(tmp_path / scen.name)
    buf = io.StringIO()
    json_out.write_json(v, buf)
    assert buf.getvalue() == json.dumps(v.to_dict(), indent=2) + "\n"
    old = json_out.INDENT_MAX_LINKS
    try:
        json_out.INDENT_MAX_LINKS = 0
        buf = io.StringIO()
        json_out.write_json(v, buf)
        assert buf.getvalue() == json.dumps(v.to_dict(), separators=(",", ":")) + "\n"
    finally:
        json_out.INDENT_MAX_LINKS = old
    t = json_out.terminal_dict(v, keep=5)
    assert t["causal_chain_total"] == len(v.causal_chain) and len(t["causal_chain"]) <= 5 + 5
    assert sum(t["causal_chain_roles"].values()) == len(v.causal_chain)
