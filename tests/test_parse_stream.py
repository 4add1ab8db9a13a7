"""The streaming prefilter finds exactly the lines a naive split would, with bounded memory."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firstfault.match.prefilter import HAVE_HYPERSCAN, AhoCorasickFinder, HyperscanFinder
from firstfault.parse.stream import Finder, scan

WORDS = ["Error", "step ", "NCCL WARN", "Xid"]


FINDERS = ["aho-corasick", *(["hyperscan"] if HAVE_HYPERSCAN else [])]


def automaton(words: list[str] = WORDS, kind: str = "aho-corasick") -> Finder:
    return HyperscanFinder(words) if kind == "hyperscan" else AhoCorasickFinder(words)


def naive(data: bytes) -> list[tuple[int, str]]:
    out = []
    for i, raw in enumerate(data.split(b"\n"), 1):
        line = raw.decode("latin-1")
        if any(w in line for w in WORDS):
            out.append((i, raw.decode("utf-8", "replace").rstrip("\r")))
    return out


line = st.one_of(
    st.sampled_from(["x Error y", "step 3 loss 1.0", "NCCL WARN net", "ok", "", "Xid 79", "caf\xe9 Error"]),
    st.text(alphabet="abc Error\t", max_size=30),
)


@pytest.mark.parametrize("kind", FINDERS)
@settings(max_examples=200, deadline=None)
@given(lines=st.lists(line, max_size=60), block=st.integers(min_value=1, max_value=64))
def test_matches_naive_split(kind: str, lines: list[str], block: int) -> None:
    data = "\n".join(lines).encode("utf-8")
    got = [(h.line_no, h.text) for h in scan(io.BytesIO(data), automaton(kind=kind), block=block, max_line=10**6)]
    assert got == naive(data)


@pytest.mark.parametrize("kind", FINDERS)
@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=2000), block=st.integers(min_value=1, max_value=300))
def test_random_bytes_never_crash(kind: str, data: bytes, block: int) -> None:
    for h in scan(io.BytesIO(data), automaton(kind=kind), block=block, max_line=100, warn=lambda m: None):
        assert h.line_no >= 1
        h.before(3)


def test_long_line_cut_and_counted() -> None:
    data = b"a\n" + b"y" * 5000 + b" Error\nnext Error\n"
    warns: list[str] = []
    hits = list(scan(io.BytesIO(data), automaton(), block=256, max_line=1000, warn=warns.append))
    assert [h.line_no for h in hits] == [3]
    assert warns and "longer than 1000" in warns[0]


def test_before_gives_context() -> None:
    data = b'Traceback (most recent call last):\n  File "x.py", line 1, in f\nRuntimeError: boom\n'
    (hit,) = list(scan(io.BytesIO(data), automaton()))
    assert hit.before(2) == ["Traceback (most recent call last):", '  File "x.py", line 1, in f']


def test_parallel_parse_equals_serial(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Forked workers give the same events, in the same order, as one process."""
    from firstfault.discover import discover
    from firstfault.match.registry import load_registry
    from firstfault.parse.run import parse_bundle

    for r in range(6):
        d = tmp_path / "logs" / "run" / "attempt_0" / str(r)
        d.mkdir(parents=True)
        (d / "stderr.log").write_text(
            f"2026-12-02 10:00:0{r},000 INFO [rank{r}] step 3 loss 1.0\n"
            f"[rank{r}]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:{1000 + r}\n"
        )
    b = discover(tmp_path)
    reg = load_registry()
    one = parse_bundle(b, reg, jobs=1)
    two = parse_bundle(b, reg, jobs=2)
    key = [(e.source, e.line, e.rank, e.signature, e.ts) for e in one.events]
    assert key == [(e.source, e.line, e.rank, e.signature, e.ts) for e in two.events]
    assert [e.id for e in two.events] == list(range(len(two.events)))


def test_a_literal_set_compiles_once_per_process() -> None:
    """The hyperscan binding keeps every id it compiles with: a registry loaded per analysis (the
    service, a batch, the fuzz campaign) grew a process by ~28 KB an analysis until finders were
    kept per literal set. Two registries with the same signatures share one finder."""
    from firstfault.match.prefilter import make_finder
    from firstfault.match.registry import load_registry

    assert load_registry().finder is load_registry().finder
    assert make_finder(["NCCL WARN", "Xid"]) is make_finder(["Xid", "NCCL WARN", "Xid"])
    assert make_finder(["NCCL WARN"]) is not make_finder(["Xid"])
