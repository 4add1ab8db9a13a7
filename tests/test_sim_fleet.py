"""The fleet simulator: published rates, determinism, the lemon bar, and the end-to-end path from
real bundles (simulate fleet --bundles -> batch -> store -> fleet report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import firstfault
from firstfault.fleet.incident import incident_from_verdict
from firstfault.fleet.reputation import Policy, fleet
from firstfault.fleet.store import Store
from firstfault_bench.fleet import score_lemons
from firstfault_sim.cluster import SimConfig, parse_fault, simulate_cluster
from firstfault_sim.fleet import (
    CAUSES,
    KIND_VERDICT,
    META_INTERRUPTIONS,
    NOISE_SIGNATURES,
    FleetConfig,
    simulate_fleet,
    truth,
    verdicts,
)

pytest.importorskip("duckdb")


def test_rates_are_table_5_of_the_llama3_paper() -> None:
    assert sum(c.count for c in CAUSES) == META_INTERRUPTIONS == 419
    assert {c.name: c.count for c in CAUSES}["Faulty GPU"] == 148


def test_signatures_named_are_the_registrys() -> None:
    ids = {s.id for s in firstfault.load_registry().signatures}
    named = {s for s in KIND_VERDICT.values() if s and not s.startswith("flightrec.")} | set(NOISE_SIGNATURES)
    assert named <= ids


@pytest.mark.parametrize("kind", ["xid79", "nic_down", "exception"])
def test_kind_verdicts_are_what_firstfault_answers(kind: str, tmp_path: Path) -> None:
    simulate_cluster(SimConfig(hosts=2, faults=(parse_fault(f"{kind}:host=gpu0002"),), seed=1), tmp_path / "b")
    v = firstfault.analyze(tmp_path / "b").to_dict()
    assert v["root_event"]["signature"] == KIND_VERDICT[kind]


def test_same_seed_same_fleet() -> None:
    cfg = FleetConfig(nodes=50, jobs=200, lemons=2, seed=4)
    assert list(verdicts(simulate_fleet(cfg))) == list(verdicts(simulate_fleet(cfg)))
    t = truth(simulate_fleet(cfg))
    assert t["jobs"] == 200 and len(t["lemons"]) == 2


def test_lemons_found_on_a_mid_size_fleet() -> None:
    score = score_lemons(FleetConfig(nodes=500, jobs=2500, lemons=10, seed=1), weekly=False)
    assert score.precision >= 0.9 and score.recall >= 0.9
    assert score.noise_precision == 1.0 and score.noise_recall == 1.0


def test_the_bar_2000_nodes_10000_jobs() -> None:
    score = score_lemons(FleetConfig(nodes=2000, jobs=10000, seed=0), weekly=False)
    assert score.precision >= 0.95 and score.recall >= 0.95


def test_real_bundles_end_to_end(tmp_path: Path) -> None:
    """A small fleet as real bundles: firstfault's own verdicts through the store find the lemon."""
    from typer.testing import CliRunner

    from firstfault.cli import app

    r = CliRunner()
    args = ["--nodes", "4", "--jobs", "16", "--lemons", "1", "--lemon-factor", "30", "--rate-scale", "40"]
    res = r.invoke(app, ["simulate", "fleet", "--out", str(tmp_path / "fleet"), "--bundles", "--seed", "3", *args])
    assert res.exit_code == 0, res.output
    lemon = json.loads((tmp_path / "fleet" / "truth.json").read_text())["lemons"][0]["host"]
    store = tmp_path / "s.duckdb"
    res = r.invoke(app, ["batch", str(tmp_path / "fleet"), "--workers", "2", "--store", str(store)])
    assert res.exit_code == 0, res.output
    res = r.invoke(app, ["history", "add", str(tmp_path / "fleet" / "job-000001"), "--store", str(store)])
    assert "already stored" in res.output
    res = r.invoke(app, ["fleet", "report", "--store", str(store), "--hosts", "4", "--html", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert f"lemon nodes (1): {lemon}" in res.output
    assert "<svg" in (tmp_path / "r.html").read_text()
    res = r.invoke(app, ["history", "--store", str(store), "--host", lemon, "--limit", "3"])
    assert res.exit_code == 0 and "3 of 16" in res.output


def test_simulated_verdicts_are_incidents() -> None:
    out = simulate_fleet(FleetConfig(nodes=20, jobs=100, lemons=1, seed=2))
    with Store(":memory:") as store:
        store.add(incident_from_verdict(v, job="?", source="sim", added_at=0.0) for v in verdicts(out))
        assert store.count() == 100
        rep = fleet(store, Policy(hosts=20))
    assert rep.failed == truth(out)["failed"]


def test_simulated_verdicts_keep_the_public_schema(tmp_path: Path) -> None:
    import jsonschema

    schema = json.loads((Path(firstfault.__file__).parent / "schema" / "verdict.v1.json").read_text())
    out = simulate_fleet(FleetConfig(nodes=50, jobs=300, lemons=2, seed=5))
    from firstfault_sim.fleet import write_verdicts

    path = write_verdicts(out, tmp_path)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 300
    for v in lines:
        jsonschema.validate(v, schema)
