"""``firstfault bench fr`` pieces: synthetic scale sets and running both tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.flightrec.analyze import analyze_fr
from firstfault.flightrec.load import load_dumps
from firstfault_bench.fr import DEFAULT_NVRX, bench_fr, make_synthetic, run_firstfault, run_fr_trace

FIX = Path(__file__).parent / "fixtures" / "fr"
needs_nvrx = pytest.mark.skipif(not (DEFAULT_NVRX / "lock_gil_2nd").is_dir(), reason="nvrx traces absent")


@needs_nvrx
def test_synthetic_set_has_one_findable_culprit(tmp_path: Path) -> None:
    culprit, nbytes = make_synthetic(tmp_path, 128, culprit=77)
    assert culprit == 77 and nbytes > 0
    loaded = load_dumps(tmp_path)
    assert len(loaded.dumps) == 128 and not loaded.issues
    a = analyze_fr(loaded.dumps)
    assert [c.rank for c in a.culprits] == [77]
    assert a.culprits[0].kind == "missing" and a.culprits[0].victims == 127


@needs_nvrx
def test_both_tools_on_a_small_synthetic_set(tmp_path: Path) -> None:
    make_synthetic(tmp_path, 64, culprit=5)
    ff = run_firstfault(str(tmp_path), timeout=300)
    assert ff.rc == 0 and ff.first == [5]
    ft = run_fr_trace(str(tmp_path), timeout=300)
    assert ft.rc == 0 and 5 in ft.first


def test_fr_trace_crash_is_its_result() -> None:
    ft = run_fr_trace(str(FIX / "gloo_hang"), timeout=300)
    assert ft.rc != 0 and ft.note.startswith("crashed") and "KeyError" in ft.note
    ff = run_firstfault(str(FIX / "gloo_hang"), timeout=300)
    assert ff.first == [3]


def test_bench_fr_on_a_case_dir(tmp_path: Path) -> None:
    res = bench_fr([str(FIX / "gloo_hang")], synthetic=[])
    (case,) = res["cases"]
    assert case["firstfault"]["first"] == [3] and case["fr_trace"]["rc"] != 0
