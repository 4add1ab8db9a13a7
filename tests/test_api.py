"""The public Python API: ``firstfault.analyze(path) -> Verdict`` and friends, imported lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import firstfault

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "bundles" / "hang_4rank"


def test_every_exported_name_resolves() -> None:
    for name in firstfault.__all__:
        assert getattr(firstfault, name) is not None, name


def test_analyze_returns_a_verdict() -> None:
    v = firstfault.analyze(EXAMPLE)
    assert isinstance(v, firstfault.Verdict)
    assert v.category == firstfault.Category.HANG and v.culprit.ranks[:1] == [2]
    assert v.to_dict()["schema_version"] == firstfault.SCHEMA_VERSION


def test_the_pieces_compose() -> None:
    registry = firstfault.load_registry()
    bundle = firstfault.discover_bundle(EXAMPLE)
    try:
        v = firstfault.analyze_bundle(bundle, registry)
    finally:
        bundle.close()
    assert v.culprit.ranks[:1] == [2]
    fr = firstfault.analyze_fr(firstfault.load_dumps(str(EXAMPLE / "fr")).dumps)
    assert isinstance(fr, firstfault.FRAnalysis) and fr.culprits[0].rank == 2


def test_unusable_input_is_an_input_error(tmp_path: Path) -> None:
    try:
        firstfault.analyze(tmp_path / "missing")
    except firstfault.InputError as exc:
        assert "no such file" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("no error")


def test_import_is_lazy() -> None:
    code = "import sys, firstfault; print(sorted(m for m in sys.modules if m.startswith('firstfault.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
