"""``firstfault fr``: exit codes, JSON, tables, and never a traceback."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from firstfault.cli import fr as fr_cli

FIX = Path(__file__).parent / "fixtures" / "fr"
runner = CliRunner()


def _app() -> typer.Typer:
    """Mounted the way the main CLI mounts it: its command added to the app's commands."""
    app = typer.Typer()
    app.registered_commands.extend(fr_cli.app.registered_commands)

    @app.command()
    def other() -> None:  # a second command so "fr" is a real sub-command
        pass

    return app


def test_table_output_and_exit_0() -> None:
    res = runner.invoke(_app(), ["fr", str(FIX / "gloo_hang_sub"), "--top", "5"], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "Culprit ranks" in res.output and "missing" in res.output
    assert "Traceback" not in res.output


def test_json_output() -> None:
    res = runner.invoke(_app(), ["fr", "--json", str(FIX / "gloo_desync")])
    assert res.exit_code == 0
    d = json.loads(res.stdout)
    assert d["culprits"][0]["rank"] == 2 and d["culprits"][0]["kind"] == "mismatched"
    assert d["load"]["ranks"] == [0, 1, 2, 3]


def test_options_after_path_and_world_size(tmp_path: Path) -> None:
    for r in range(3):
        shutil.copy(FIX / "gloo_hang" / f"fr_trace_{r}", tmp_path / f"fr_trace_{r}")
    res = runner.invoke(_app(), ["fr", str(tmp_path), "--json", "--world-size", "4"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["culprits"][0]["rank"] == 3


def test_group_hint_option() -> None:
    res = runner.invoke(_app(), ["fr", str(FIX / "gloo_hang"), "--json", "--group", "1=0,1", "--group", "2=2-3"])
    assert res.exit_code == 0
    d = json.loads(res.stdout)
    assert {g["pg"]: g["membership"] for g in d["groups"]}["1"] == "hint"
    bad = runner.invoke(_app(), ["fr", str(FIX / "gloo_hang"), "--group", "nonsense"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


@pytest.mark.parametrize("as_json", [False, True])
def test_unusable_input_exits_2(tmp_path: Path, as_json: bool) -> None:
    args = ["--json"] if as_json else []
    empty = tmp_path / "empty"
    empty.mkdir()
    for path in (empty, tmp_path / "missing"):
        res = runner.invoke(_app(), ["fr", str(path), *args])
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "fr_trace_0").write_bytes(os.urandom(300))
    (junk / "fr_trace_1").write_bytes(b"")
    marker = tmp_path / "PWNED"
    (junk / "fr_trace_2").write_bytes(b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    res = runner.invoke(_app(), ["fr", str(junk), *args])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert not marker.exists()
    if as_json:
        d = json.loads(res.stdout)
        assert "error" in d and any(i["kind"] == "unsafe" for i in d["load"]["issues"])


def test_single_file_path() -> None:
    res = runner.invoke(_app(), ["fr", str(FIX / "gloo_hang" / "fr_trace_3"), "--json"])
    assert res.exit_code == 0
    assert json.loads(res.stdout)["ranks_with_dumps"] == 1


def test_main_cli_mounts_fr() -> None:
    from firstfault.cli import app

    res = runner.invoke(app, ["fr", str(FIX / "gloo_hang"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["culprits"][0]["rank"] == 3


def test_pickle_not_a_dump_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "fr_trace_0").write_bytes(pickle.dumps({"hello": 1}))
    res = runner.invoke(_app(), ["fr", str(tmp_path)])
    assert res.exit_code == 2 and "not a flight-recorder dump" in res.output


def test_several_dump_files_as_a_shell_glob_gives_them() -> None:
    files = sorted(str(p) for p in (FIX / "gloo_hang").glob("fr_trace_*"))
    res = runner.invoke(_app(), ["fr", *files, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["culprits"][0]["rank"] == 3


@pytest.mark.parametrize("protocol", [0, 1, 2])
def test_analyze_reads_dumps_of_any_protocol_and_a_dumps_only_bundle_is_a_hang(tmp_path: Path, protocol: int) -> None:
    """Issue 17 item 9: ``fr`` read protocol 0/1 dumps and ``analyze`` skipped them as text/binary.
    And a bundle of dumps alone, showing ranks waiting for one that never came, is a hang on that
    rank, never "no failure found"."""
    import firstfault
    from firstfault.flightrec.unpickler import restricted_loads

    fr = tmp_path / "fr"
    fr.mkdir()
    for f in sorted((FIX / "gloo_hang").iterdir()):
        (fr / f.name).write_bytes(pickle.dumps(restricted_loads(f.read_bytes()), protocol=protocol))
    v = firstfault.analyze(tmp_path)
    assert v.category == "hang" and v.culprit.ranks == [3], v.summary
    assert v.root_event is not None and v.root_event.source.startswith("fr/")
