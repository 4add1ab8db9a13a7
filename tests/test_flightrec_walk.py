"""The FR fast path's shape check walks without escaping strings, and refuses what json.dumps refuses.

``FastLoader`` keeps a C-unpickled dump only when a JSON walk proves it plain data; the walk that
skips string escaping must accept and refuse exactly the inputs the full encode does.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firstfault.flightrec.fast_loader import _json_encode, _json_walk

LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.binary(max_size=4),
    st.builds(bytearray, st.binary(max_size=4)),
    st.frozensets(st.integers(), max_size=2),
)
KEY = st.one_of(st.text(max_size=5), st.integers(), st.tuples(st.integers()), st.none())
TREE = st.recursive(
    LEAF,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(KEY, kids, max_size=4)),
    max_leaves=20,
)


def _verdict(fn: Any, obj: Any) -> str:
    try:
        fn(obj)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__
    return "ok"


@settings(max_examples=300, deadline=None)
@given(obj=TREE)
def test_walk_judges_like_the_full_encode(obj: Any) -> None:
    assert _verdict(_json_walk, obj) == _verdict(_json_encode, obj)


@pytest.mark.parametrize("bad", [{"a": {1}}, {"a": bytearray(b"x")}, {"a": b"x"}, {(1, 2): 3}])
def test_walk_refuses_what_is_not_json(bad: Any) -> None:
    with pytest.raises(TypeError):
        _json_walk(bad)


def test_walk_refuses_a_cycle() -> None:
    c: dict[str, list[Any]] = {"a": []}
    c["a"].append(c)
    with pytest.raises(ValueError):
        _json_walk(c)
    _json_walk({"ranks": "[" + ", ".join(str(r) for r in range(16384)) + "]", "x": ["\ud800", 1.5]})


def test_fr_stage_beside_gives_the_inline_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The FR stage in its one-task worker (which exits once the analysis is sent) answers what
    the inline stage answers."""
    from pathlib import Path

    from firstfault.discover import discover
    from firstfault.flightrec import stage

    bundle = discover(Path(__file__).resolve().parent.parent / "examples" / "bundles" / "hang_4rank")
    try:
        inline_warns: list[str] = []
        inline = stage.FlightRecorderBeside(bundle).result([0, 1, 2, 3], inline_warns)
        monkeypatch.setattr(stage, "FR_BESIDE_MIN_DUMPS", 1)
        beside = stage.FlightRecorderBeside(bundle)
        assert beside.pool is not None
        beside_warns: list[str] = []
        got = beside.result([0, 1, 2, 3], beside_warns)
        assert beside.pool is None
    finally:
        bundle.close()
    assert inline is not None and got is not None
    assert got.to_dict() == inline.to_dict()
    assert beside_warns == inline_warns
