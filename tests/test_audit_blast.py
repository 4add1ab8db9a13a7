"""Blast radius, detection windows, attribution, findings and the checkpoint arithmetic.

Young's and Daly's intervals are checked against values worked by hand; failure rates against
the Llama 3 paper's Table 5 (419 unexpected interruptions, 54 days, 16,384 GPUs).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from firstfault.audit import audit, layout_from_dict
from firstfault.audit.checkpoint import daly, young
from firstfault.audit.model import Blast, ComponentClass, Mechanism
from firstfault.audit.rates import LLAMA3_TABLE5, job_rates_per_hour

KEEP = {"flight_recorder_entries": 2000, "dump_on_timeout": True, "nccl_debug": "WARN", "kernel_logs": True}
SMALL = {"hosts": 4, "hosts_per_leaf": 2, "hosts_per_rack": 2, "parallel": {"tp": 8, "pp": 2}}


def by_class(doc: dict[str, Any]) -> dict[str, Blast]:
    rep = audit(layout_from_dict(doc))
    return {str(b.cls): b for b in rep.blasts}


def test_direct_ranks_and_groups_per_class() -> None:
    b = by_class(SMALL | {"evidence": KEEP})
    # the audited instance: host 2 (gpu0003), GPU / NIC 1 -> rank 17
    assert b["gpu"].direct_ranks == (17,) and b["nic"].direct_ranks == (17,)
    assert b["host"].direct_ranks == tuple(range(16, 24))
    assert b["leaf_switch"].direct_ranks == (17, 25)  # rail 1 of gpu0003, gpu0004
    assert b["rack"].direct_ranks == tuple(range(16, 32))
    g = b["gpu"]
    assert g.groups_hit == {"tp": 1, "dp": 1, "pp": 1}
    # peers blocked first: its TP group (7 others), its DP peer 25, its pipeline peer 1
    assert g.first_hop_ranks == 9
    assert all(x.job_ranks_stopped == 32 for x in b.values())
    # the rack is the whole second pipeline stage: both replicas of its shards
    assert b["rack"].shards_without_replica == 8


def test_detection_windows() -> None:
    b = by_class(SMALL | {"evidence": KEEP, "timeouts": {"nccl_timeout_s": 600}})
    d = {k: v.detection for k, v in b.items()}
    assert (d["gpu"].lo_s, d["gpu"].mechanism) == (0.0, Mechanism.OWN_ERROR)
    assert d["gpu_hang"].mechanism == Mechanism.WATCHDOG and d["gpu_hang"].lo_s == 598.0  # PP: a step early
    assert d["nic"].mechanism == Mechanism.IB_RETRY and abs(d["nic"].lo_s - 34.36) < 0.01
    assert d["host"].mechanism == Mechanism.IB_RETRY
    # the rack takes a whole stage: only pipeline receives reach it, the scheduler notices first
    assert d["rack"].mechanism == Mechanism.SCHEDULER and d["rack"].lo_s == 300.0
    assert not d["gpu"].timeouts_fire and d["gpu_hang"].timeouts_fire
    # a timeout shorter than the IB retries: the watchdog notices a NIC first
    short = by_class(SMALL | {"timeouts": {"nccl_timeout_s": 20}})
    assert short["nic"].detection.mechanism == Mechanism.WATCHDOG
    # without --kill-on-bad-exit the other hosts wait for their timeouts
    nokill = by_class(SMALL | {"launcher": {"kill_on_bad_exit": False}})
    assert nokill["gpu"].detection.timeouts_fire


def test_attribution_follows_the_evidence_kept() -> None:
    off = by_class(SMALL)
    assert not off["gpu_hang"].attributable and off["gpu"].attributable
    assert not off["nic"].attributable and not off["host"].attributable
    fr = by_class(SMALL | {"evidence": {"flight_recorder_entries": 2000, "dump_on_timeout": True}})
    assert fr["gpu_hang"].attributable
    on = by_class(SMALL | {"evidence": KEEP | {"scheduler_logs": True, "nccl_debug": "INFO"}})
    assert all(x.attributable for x in on.values())
    # NCCL_DEBUG=WARN: a lost host's peers name only its address; the scheduler names the node
    # after the job ended, within the margin a verdict reads past the end (SlurmdTimeout 300 s)
    warn = by_class(SMALL | {"evidence": KEEP | {"scheduler_logs": True}})
    assert warn["host"].attributable and warn["rack"].attributable
    assert warn["nic"].attributable and warn["leaf_switch"].attributable
    # a SlurmdTimeout past that margin: slurmctld's words land outside the window, the peer is blamed
    late = by_class(SMALL | {"evidence": KEEP | {"scheduler_logs": True}, "timeouts": {"slurmd_timeout_s": 900}})
    assert not late["host"].attributable


def test_findings() -> None:
    bad = audit(
        layout_from_dict({"hosts": 8, "parallel": {"tp": 16}, "timeouts": {"nccl_timeout_s": 3600, "heartbeat": False}})
    )
    codes = {f.code: str(f.severity) for f in bad.findings}
    assert codes["fr_off"] == "critical"
    assert codes["unattributable_gpu_hang"] == "critical"
    assert codes["timeout_long"] == "warning" and codes["heartbeat_off"] == "warning"
    assert codes["tp_across_hosts"] == "warning" and codes["nccl_debug_unset"] == "warning"
    nodump = audit(layout_from_dict({"hosts": 2, "evidence": {"flight_recorder_entries": 2000}}))
    assert "no_dump_on_timeout" in {f.code for f in nodump.findings}
    good = audit(
        layout_from_dict(
            SMALL | {"evidence": KEEP | {"scheduler_logs": True, "nccl_debug": "INFO"}, "spares": {"nodes": 1}}
        )
    )
    assert not [f for f in good.findings if str(f.severity) == "critical"]
    # one leaf switch per pipeline stage: a switch takes every replica of a shard
    rail = audit(layout_from_dict({"hosts": 4, "hosts_per_leaf": 2, "parallel": {"tp": 8, "pp": 2}}))
    assert "replica_set_leaf_switch" in {f.code for f in rail.findings}


def test_young_and_daly_by_hand() -> None:
    # delta = 60 s, M = 3600 s: Young sqrt(2*60*3600) = 657.267 s;
    # Daly 657.267 * (1 + sqrt(1/120)/3 + (1/120)/9) - 60 = 657.267 * 1.031355 - 60 = 617.876 s
    assert young(60, 3600) == pytest.approx(657.267, abs=0.01)
    assert daly(60, 3600) == pytest.approx(617.876, abs=0.01)
    assert daly(8000, 3600) == 3600  # delta >= 2M: checkpoint once per MTBF


def test_rates_are_table5() -> None:
    assert sum(LLAMA3_TABLE5.values()) == 419
    rates = job_rates_per_hour(16384)
    mtbf_h = 1 / sum(rates.values())
    assert mtbf_h == pytest.approx(54 * 24 / 419, rel=1e-9)  # 3.09 h, "one failure every three hours"
    assert rates["gpu"] == pytest.approx((148 + 72 + 19) / (54 * 24), rel=1e-9)


def test_goodput_with_and_without_spares() -> None:
    doc = {"hosts": 2048, "parallel": {"tp": 8, "pp": 16}, "checkpoint": {"interval_s": 1800, "write_s": 60}}
    nospare = audit(layout_from_dict(doc)).goodput
    spare = audit(layout_from_dict(doc | {"spares": {"nodes": 8}})).goodput
    assert nospare.goodput_without_spares < nospare.goodput_with_spares == pytest.approx(spare.goodput_with_spares)
    assert 0.5 < spare.goodput_with_spares < 1.0 and spare.goodput_at_daly >= spare.goodput_with_spares
    assert math.isclose(spare.mtbf_s, 54 * 24 * 3600 / 419, rel_tol=1e-9)


def test_no_traffic_no_blast() -> None:
    # one host, TP 8: a NIC carries nothing
    b = by_class({"hosts": 1, "parallel": {"tp": 8}})
    assert b["nic"].detection.mechanism == Mechanism.NONE
    assert ComponentClass.RACK not in b
