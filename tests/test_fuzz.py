"""Property-based fuzzing (hypothesis) of every place bundle bytes enter: the timestamp reader, the
prefix peeler, the signature classifier, the restricted unpickler, the archive reader and the
whole pipeline. The property is the same everywhere: any input gives a result or the module's
own refusal (``InputError``), never another exception.

Bounded for CI by the ``ci`` profile; ``./dev fuzz`` runs the ``long`` profile (many more inputs,
no deadline). Inputs hypothesis finds failing are kept by it and replayed first next time.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstfault.discover import discover
from firstfault.flightrec.fast_loader import fast_restricted_loads
from firstfault.flightrec.pickle_errors import DumpLoadError
from firstfault.flightrec.unpickler import restricted_loads
from firstfault.match.registry import load_registry
from firstfault.parse.timestamps import parse_timestamp
from firstfault.pipeline import analyze
from firstfault.vocab import FileKind, InputError, Verdict
from firstfault.vocab.identity import strip_prefixes

settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.register_profile(
    "long", max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REGISTRY = load_registry()
FIX = Path(__file__).parent / "fixtures"
REAL_DUMP = (FIX / "slurm" / "torch_exception_torchrun" / "fr" / "fr_trace_rank_0").read_bytes()
# what real lines look like, so mutations reach the parsers' branches, not only their first check
SEEDS = [
    "[rank3]:[E1204 10:00:00.123456789 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for 600010 ms",
    "[Wed Dec  3 10:00:00 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "srun: error: node01: task 1: Exited with exit code 1",
    "2026-12-04 10:00:00,123 - trainer - INFO - step 12 loss 2.3",
    "node1:123:456 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53249> with error 12",
    "E1204 10:00:00.000000 123 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) local_rank: 0",
]
lines = st.one_of(
    st.text(max_size=300),
    st.sampled_from(SEEDS).flatmap(
        lambda s: st.tuples(st.integers(0, len(s)), st.integers(0, len(s)), st.text(max_size=20)).map(
            lambda t: s[: min(t[0], t[1])] + t[2] + s[max(t[0], t[1]) :]
        )
    ),
)


@given(lines, st.one_of(st.none(), st.integers(-10_000, 100_000)))
def test_timestamps_never_raise(text: str, year: int | None) -> None:
    ts = parse_timestamp(text, year)
    assert ts is None or isinstance(ts, float)


@given(lines)
def test_prefixes_never_raise(text: str) -> None:
    rest, _local, rank = strip_prefixes(text)
    assert isinstance(rest, str) and (rank is None or rank >= 0)


@given(lines, st.sampled_from(list(FileKind)))
def test_classifier_never_raises(text: str, kind: FileKind) -> None:
    REGISTRY.classify(text, kind, None, unrecognised=True)


def _mutate(data: bytes, cuts: list[tuple[int, int, bytes]]) -> bytes:
    out = bytearray(data)
    for pos, length, new in cuts:
        pos %= max(len(out), 1)
        out[pos : pos + length] = new
    return bytes(out)


mutations = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 8), st.binary(max_size=8)), max_size=6)


LOADERS = (restricted_loads, fast_restricted_loads)


def _quiet(capfd: pytest.CaptureFixture[str]) -> None:
    """Nothing may reach the terminal behind the caller's back (the interpreter prints some C-level
    failures, such as a failed bytearray allocation, straight to stderr)."""
    err = capfd.readouterr().err
    assert "Error" not in err and "Traceback" not in err, err[-500:]


@given(cuts=mutations)
def test_unpickler_refuses_or_loads_mutated_dumps(
    cuts: list[tuple[int, int, bytes]], capfd: pytest.CaptureFixture[str]
) -> None:
    data = _mutate(REAL_DUMP, cuts)
    for loader in LOADERS:
        with contextlib.suppress(DumpLoadError):
            loader(data, "fuzz")
    _quiet(capfd)


@given(data=st.binary(max_size=2048))
def test_unpickler_on_any_bytes(data: bytes, capfd: pytest.CaptureFixture[str]) -> None:
    for loader in LOADERS:
        with contextlib.suppress(DumpLoadError):
            loader(data, "fuzz")
    _quiet(capfd)


def _archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in (("c.log", "\n".join(SEEDS).encode()), ("fr/fr_trace_rank_0", REAL_DUMP)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


ARCHIVE = _archive()


@pytest.mark.slow
@given(cuts=mutations)
def test_archives_mutated_give_a_bundle_or_a_refusal(cuts: list[tuple[int, int, bytes]], tmp_path: Path) -> None:
    p = tmp_path / "b.tar.gz"
    p.write_bytes(_mutate(ARCHIVE, cuts))
    try:
        b = discover(p)
    except InputError:
        return
    b.close()


@pytest.mark.slow
@settings(max_examples=min(settings.default.max_examples, 4_000))  # ~0.1 s an analysis: the long run fits an hour
@given(body=st.lists(lines, min_size=1, max_size=30), noise=st.binary(max_size=64))
def test_the_pipeline_gives_a_verdict_or_a_refusal(
    body: list[str], noise: bytes, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "bundle"
    d.mkdir(exist_ok=True)
    (d / "console.log").write_text("\n".join(body), encoding="utf-8", errors="surrogateescape")
    (d / "fr").mkdir(exist_ok=True)
    (d / "fr" / "fr_trace_rank_0").write_bytes(REAL_DUMP[: len(REAL_DUMP) // 2] + noise)
    try:
        v = analyze(d)
    except InputError:
        v = None
    if v is not None:
        assert isinstance(v, Verdict)
        v.to_dict()
    _quiet(capfd)


def test_pickles_that_run_code_are_refused_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "RAN"

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    with pytest.raises(DumpLoadError):
        restricted_loads(pickle.dumps({"entries": [Evil()]}), "evil")
    assert not marker.exists()
