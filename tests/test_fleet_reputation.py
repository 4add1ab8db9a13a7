"""Reputation: the Poisson tail, the lemon test, "seen before", noise from healthy runs, the report."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from firstfault.fleet.incident import incident_from_verdict
from firstfault.fleet.poisson import bonferroni, poisson_sf
from firstfault.fleet.report import render_html
from firstfault.fleet.reputation import DAY, Policy, fleet, lemon_test, seen_before
from firstfault.fleet.store import Store

pytest.importorskip("duckdb")


@pytest.mark.parametrize(("k", "mean"), [(0, 1.0), (1, 1.0), (3, 0.34), (6, 0.34), (10, 5.0), (25, 3.0)])
def test_poisson_tail_equals_the_direct_sum(k: int, mean: float) -> None:
    direct = sum(math.exp(-mean + i * math.log(mean) - math.lgamma(i + 1)) for i in range(k, k + 200))
    assert poisson_sf(k, mean) == pytest.approx(direct, rel=1e-9)


def test_bonferroni_caps_at_one() -> None:
    assert bonferroni(0.2, 10) == 1.0
    assert bonferroni(1e-6, 1000) == pytest.approx(1e-3)


def test_lemon_test_flags_the_improbable_node_only() -> None:
    # 1,000 nodes at about 0.1 failed jobs each, one node with 8: under Poisson(0.1) that is p ~ 2e-12
    jobs = {f"n{i}": 1 for i in range(100)} | {"n500": 2, "n501": 2, "bad": 8}
    flagged, lam = lemon_test(jobs, 1000, Policy())
    assert flagged == {"bad"}
    assert lam == pytest.approx((100 + 4) / 999)  # re-estimated without the lemon


def test_min_jobs_keeps_a_tiny_fleet_calm() -> None:
    flagged, _ = lemon_test({"a": 2}, 10_000, Policy(min_jobs=3))
    assert flagged == set()


def _v(
    job: str, host: str, ts: float, category: str = "gpu_hardware", sig: str = "kernel.xid.exclude"
) -> dict[str, object]:
    culprit = {"ranks": [], "hosts": [host] if host else [], "gpus": ["0000:18:00.0"] if host else [], "links": []}
    context = [{"signature": "kernel.mce_corrected"}]
    return {
        "tool": "firstfault",
        "verdict": {
            "category": category,
            "culprit": culprit,
            "action": "exclude_and_restart",
            "confidence": 0.9,
            "summary": "",
        },
        "root_event": {"signature": sig, "timestamp": ts, "host": host} if category != "none" else None,
        "context": context,
        "inputs": {"job": job, "job_window": {"end": ts}},
    }


def test_seen_before_counts_earlier_jobs_on_the_same_gpu(tmp_path: Path) -> None:
    t0 = 1_767_225_600.0
    rows = [_v(f"j{i}", "gpu0007", t0 + i * 3 * DAY) for i in range(4)] + [_v("k", "gpu0001", t0)]
    rows.append(_v("app", "gpu0007", t0 + 20 * DAY, category="application_error", sig="python.exception"))
    with Store(tmp_path / "s.duckdb") as store:
        incs = [incident_from_verdict(v, job="?", source="t", added_at=0.0) for v in rows]
        store.add(incs)
        last = seen_before(store, incs[3])
        first = seen_before(store, incs[0])
        app = seen_before(store, incs[-1])
    assert last[0] == "seen before: 3 times on this GPU (gpu0007/0000:18:00.0) in 9 days"
    assert last[1] == "seen before: 3 times on this host (gpu0007) in 9 days"
    assert "signature kernel.xid.exclude: seen in 4 earlier job(s)" in last  # j0..j2 and k, on another host
    assert first[0] == "first time on this GPU (gpu0007/0000:18:00.0)"
    # a job's own exception says nothing about the machine: only the signature's novelty
    assert app == ["signature python.exception: new to this fleet"]


def test_noise_is_learnt_from_healthy_runs_and_the_report_renders(tmp_path: Path) -> None:
    t0 = 1_767_225_600.0
    rows = [_v(f"ok{i}", "", t0 + i * DAY, category="none") for i in range(6)]
    rows += [_v(f"f{i}", "gpu<1>" if i < 4 else f"h{i}", t0 + i * DAY) for i in range(8)]
    with Store(tmp_path / "s.duckdb") as store:
        store.add(incident_from_verdict(v, job="?", source="t", added_at=0.0) for v in rows)
        rep = fleet(store, Policy(hosts=200))
        timeline = store.timeline()
    noise = {s.signature: s.noise for s in rep.signatures}
    assert noise == {"kernel.mce_corrected": True, "kernel.xid.exclude": False}
    assert rep.lemon_hosts() == ["gpu<1>"]
    assert (rep.failed, rep.healthy) == (8, 6)
    page = render_html(rep, timeline)
    assert page.count("<svg") == 3 and "gpu&lt;1&gt;" in page and "gpu<1>" not in page
    assert "noise: healthy runs print it too" in page


def test_a_busy_host_is_not_a_lemon_for_being_busy() -> None:
    """Exposure: 'busy' ran 40 times the jobs of the others and was blamed about 40 times as often.
    Assumed uniform, that is a lemon; counted per job it ran, it fails at the fleet's rate. 'bad'
    ran as few jobs as the rest and was blamed in most: a lemon either way."""
    from firstfault.fleet.reputation import lemon_test_exposed

    exposure = {f"n{i}": 10 for i in range(200)} | {"busy": 400, "bad": 10}
    jobs = {f"n{i}": 1 for i in range(0, 200, 2)} | {"busy": 22, "bad": 8}
    uniform, _ = lemon_test(jobs, 202, Policy())
    exposed, lam = lemon_test_exposed(jobs, exposure, 202, Policy())
    assert uniform == {"busy", "bad"}
    assert exposed == {"bad"}
    assert lam == pytest.approx((100 + 22) / (2000 + 400))


def test_the_store_counts_the_jobs_each_host_ran(tmp_path: Path) -> None:
    """Verdicts that list the hosts their job ran on give the store each host's exposure; one
    verdict that does not makes it unknown (a partial count would make busy hosts look bad)."""
    with Store(tmp_path / "s.duckdb") as store:
        v1 = _v("j1", "h1", 100.0) | {"inputs": {"job": "j1", "hosts": ["h1", "h2"]}}
        v2 = _v("j2", "", 200.0, category="none") | {"inputs": {"job": "j2", "hosts": ["h2", "h3"]}}
        store.add([incident_from_verdict(v, job="?", source="t", added_at=0.0) for v in (v1, v2)])
        assert store.exposure() == {"h1": 1, "h2": 2, "h3": 1}
        assert [h.place for h in store.machine_hits() if h.kind == "host"] == ["h1"]
        store.add([incident_from_verdict(_v("j3", "h4", 300.0), job="j3", source="t", added_at=0.0)])
        assert store.exposure() is None
