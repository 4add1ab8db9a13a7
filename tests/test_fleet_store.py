"""The incident store: a real DuckDB file in tmp_path, fed real verdicts of real bundles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import firstfault
from firstfault.fleet.incident import bundle_key, incident_from_verdict, verdict_key
from firstfault.fleet.store import Filter, Store
from firstfault.vocab import Category, InputError

pytest.importorskip("duckdb")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "bundles" / "hang_4rank"


@pytest.fixture(scope="module")
def example_verdict() -> dict[str, object]:
    return firstfault.analyze(EXAMPLE).to_dict()


def test_incident_from_a_real_verdict(example_verdict: dict[str, object]) -> None:
    inc = incident_from_verdict(example_verdict, job="hang_4rank", source=str(EXAMPLE), added_at=1.0)
    v = example_verdict["verdict"]
    assert isinstance(v, dict)
    assert inc.category == Category(v["category"])
    assert list(inc.hosts) == v["culprit"]["hosts"]
    assert all("/" in g for g in inc.gpus)  # a PCI address is only unique with its host
    assert inc.job == "hang_4rank" and inc.key.startswith("v:")
    assert json.loads(inc.verdict_json) == json.loads(json.dumps(example_verdict, default=str))


def test_not_a_verdict_is_refused() -> None:
    with pytest.raises(ValueError, match="not a firstfault verdict"):
        incident_from_verdict({"verdict": "x"}, job="j", source="s", added_at=0.0)


def test_same_bundle_twice_is_one_incident(tmp_path: Path, example_verdict: dict[str, object]) -> None:
    key = bundle_key(EXAMPLE)
    assert key == bundle_key(EXAMPLE) and key.startswith("b:")
    inc = incident_from_verdict(example_verdict, job="hang_4rank", source="a", added_at=1.0, key=key)
    again = incident_from_verdict(example_verdict, job="hang_4rank", source="b", added_at=2.0, key=key)
    path = tmp_path / "incidents.duckdb"
    with Store(path) as store:
        assert store.add([inc]) == [True]
        assert store.add([again, again]) == [False, False]
        assert store.count() == 1
    with Store(path, read_only=True) as store:  # it persisted
        assert store.count() == 1
        got = store.get(key)
        assert got is not None and got.hosts == inc.hosts and got.gpus == inc.gpus and got.signatures == inc.signatures


def test_verdict_key_ignores_run_statistics(example_verdict: dict[str, object]) -> None:
    inputs = example_verdict["inputs"]
    assert isinstance(inputs, dict)
    other = dict(example_verdict, stats={"total_s": 99.0}, inputs=dict(inputs, path="/elsewhere"))
    assert verdict_key(other) == verdict_key(example_verdict)
    assert verdict_key(dict(example_verdict, inputs=dict(inputs, job="another"))) != verdict_key(example_verdict)


def _verdict(host: str, category: str, ts: float, job: str) -> dict[str, object]:
    return {
        "schema_version": "1",
        "tool": "firstfault",
        "verdict": {
            "category": category,
            "culprit": {"ranks": [3], "hosts": [host], "gpus": ["0000:18:00.0"], "links": []},
            "action": "exclude_and_restart",
            "confidence": 0.9,
            "summary": f"{category} on {host}",
        },
        "root_event": {"signature": "kernel.xid.exclude", "timestamp": ts, "host": host, "gpu": "0000:18:00.0"},
        "inputs": {"job": job},
    }


def test_recent_filters_and_parquet_export(tmp_path: Path) -> None:
    import duckdb

    rows = [
        _verdict("gpu0001", "gpu_hardware", 1000.0, "a"),
        _verdict("gpu0002", "network", 2000.0, "b"),
        _verdict("gpu0001", "application_error", 3000.0, "c"),
    ]
    with Store(tmp_path / "s.duckdb") as store:
        store.add(incident_from_verdict(v, job="?", source="t", added_at=0.0) for v in rows)
        assert [i.job for i in store.recent(Filter())] == ["c", "b", "a"]  # newest failure first
        assert [i.job for i in store.recent(Filter(host="gpu0001"))] == ["c", "a"]
        assert [i.job for i in store.recent(Filter(gpu="gpu0002/0000:18:00.0"))] == ["b"]
        assert [i.job for i in store.recent(Filter(category=Category.NETWORK))] == ["b"]
        assert [i.job for i in store.recent(Filter(since=1500.0, limit=1))] == ["c"]
        assert store.recent(Filter(job="c"))[0].ranks == (3,)
        files = store.export_parquet(tmp_path / "pq")
    counts = {p.stem: duckdb.sql(f"SELECT count(*) FROM '{p}'").fetchall()[0] for p in files}
    assert counts == {"incidents": (3,), "places": (6,), "signatures": (3,)}


def test_a_file_that_is_not_a_store_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "not.duckdb"
    bad.write_text("hello")
    with pytest.raises(InputError):
        Store(bad)
