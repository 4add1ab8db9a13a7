"""Batch analysis: the process pool and Ray give the serial run's verdicts; bad bundles are results."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.fleet.batch import chunks, comparable, find_bundles, run_pool, run_ray, run_serial
from firstfault.vocab import InputError
from firstfault_sim.cluster import SimConfig, parse_fault, simulate_cluster


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for i, fault in enumerate(("xid79:host=gpu0002", "nic_down:host=gpu0001", "exception", "")):
        faults = (parse_fault(fault),) if fault else ()
        simulate_cluster(SimConfig(hosts=2, faults=faults, seed=i), root / f"job{i}")
    (root / "notabundle.log").write_text("hello\n")  # a log file with nothing of a job in it
    (root / "README.md").write_text("not a bundle: skipped by name\n")
    return root


def _same(a: list, b: list) -> bool:  # type: ignore[type-arg]
    return [(r.path, r.key, r.error, comparable(r.verdict)) for r in a] == [
        (r.path, r.key, r.error, comparable(r.verdict)) for r in b
    ]


def test_pool_equals_serial_and_bad_bundles_are_results(corpus: Path) -> None:
    paths = find_bundles(corpus)
    assert [p.name for p in paths] == ["job0", "job1", "job2", "job3", "notabundle.log"]
    serial = run_serial(paths)
    assert [r.error is None for r in serial] == [True, True, True, True, False]
    assert serial[-1].verdict is None and serial[-1].error
    cats = [r.verdict["verdict"]["category"] for r in serial[:4] if r.verdict]
    assert cats == ["gpu_hardware", "network", "application_error", "none"]
    assert _same(run_pool(paths, 2), serial)


def test_chunks_keep_order_and_cover_everything() -> None:
    items = [str(i) for i in range(11)]
    parts = chunks(items, 2)
    assert [x for p in parts for x in p] == items and len(parts) <= 8


def test_a_folder_without_bundles_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        find_bundles(tmp_path)
    with pytest.raises(InputError):
        find_bundles(tmp_path / "missing")


def test_batch_cli_writes_lines_and_stores(corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    import json

    from typer.testing import CliRunner

    from firstfault.cli import app

    out, store = tmp_path / "v.jsonl", tmp_path / "s.duckdb"
    res = CliRunner().invoke(app, ["batch", str(corpus), "--workers", "1", "--out", str(out), "--store", str(store)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 5 and sum(x["verdict"] is not None for x in lines) == 4
    assert "4 new incident(s)" in res.output
    again = CliRunner().invoke(app, ["history", "add", str(out), "--store", str(store)])
    assert again.exit_code == 0, again.output
    assert "0 new, 4 already stored" in again.output


@pytest.mark.slow
def test_ray_gives_the_serial_verdicts(corpus: Path) -> None:
    ray = pytest.importorskip("ray")
    paths = find_bundles(corpus)
    started: list[float] = []
    got = run_ray(paths, 2, started=started.append)
    assert not ray.is_initialized()  # the local cluster it started is shut down
    assert started and _same(got, run_serial(paths))


def test_unusable_input_is_one_line_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from firstfault.cli import app

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\ngarbage\n')
    r = CliRunner()
    for args in (
        ["history", "add", str(bad), "--store", str(tmp_path / "s.duckdb")],
        ["history", "--store", str(tmp_path / "none.duckdb")],
        ["fleet", "report", "--store", str(tmp_path / "none.duckdb")],
        ["batch", str(tmp_path / "missing")],
    ):
        res = r.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert "Traceback" not in res.output
