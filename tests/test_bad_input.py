"""Bad input never crashes and never lies: a verdict with warnings, or exit 2 with a message."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from firstfault.cli import app
from firstfault.discover import BundleError, discover
from firstfault.pipeline import analyze

runner = CliRunner()

GLOO_LINE = (
    "[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
    "Connection closed by peer [127.0.0.1]:55440. This is typically caused by a remote worker crashing."
)


def cli(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


def test_missing_path_exit_2(tmp_path: Path) -> None:
    code, out = cli("analyze", str(tmp_path / "nope"))
    assert code == 2 and "no such file" in out


def test_empty_directory_exit_2(tmp_path: Path) -> None:
    code, out = cli("analyze", str(tmp_path))
    assert code == 2 and "no readable files" in out


def test_only_binary_exit_2(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(os.urandom(4096) + b"\x00" * 100)
    code, out = cli("analyze", str(tmp_path))
    assert code == 2 and "no log" in out


def test_binary_beside_logs_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(b"\x00\x01\x02" * 1000)
    (tmp_path / "rank.log").write_text("2026-12-02 10:00:00,000 INFO x\n" + GLOO_LINE + "\n")
    v = analyze(tmp_path)
    assert any("binary" in w for w in v.warnings)


def test_non_utf8_and_truncated_line(tmp_path: Path) -> None:
    data = b"2026-12-02 10:00:00,000 caf\xe9 \xff\xfe\n" + b"RuntimeError: boom \xc3\x28 trailing"  # no final newline
    (tmp_path / "app.log").write_bytes(data)
    v = analyze(tmp_path)
    assert v.root_event is not None and "boom" in v.root_event.text
    assert "\ufffd" in v.root_event.text  # replaced, not dropped, not a crash


def test_huge_single_line(tmp_path: Path) -> None:
    """A 50 MB line is cut with a warning; the lines after it are still read."""
    p = tmp_path / "huge.log"
    with open(p, "wb") as fh:
        fh.write(b"2026-12-02 10:00:00,000 start\n")
        chunk = b"x" * (1 << 20)
        for _ in range(50):
            fh.write(chunk)
        fh.write(b"\nRuntimeError: after the huge line\n")
    v = analyze(tmp_path)  # its speed is benchmarked (firstfault bench speed), not timed here
    assert any("longer than" in w for w in v.warnings)
    assert v.root_event is not None and "after the huge line" in v.root_event.text
    assert v.root_event.line == 3


def test_truncated_error_json_is_a_warning(tmp_path: Path) -> None:
    d = tmp_path / "logs" / "run_x" / "attempt_0" / "0"
    d.mkdir(parents=True)
    (d / "error.json").write_text('{"message": {"message": "RuntimeError: bo')
    # a step first: an error of training (a lone rank failing at start-up would name no culprit)
    (d / "stderr.log").write_text("2026-12-02 10:00:00,000 INFO step 1 loss 2.0\nRuntimeError: boom\n")
    v = analyze(tmp_path)
    assert any("error file" in w for w in v.warnings)
    assert v.culprit.ranks == [0]


def test_some_ranks_without_logs(tmp_path: Path) -> None:
    for r in (0, 1, 3):
        d = tmp_path / "logs" / "run_x" / "attempt_0" / str(r)
        d.mkdir(parents=True)
        (d / "stderr.log").write_text(GLOO_LINE.replace("rank1", f"rank{r}") + "\n")
    v = analyze(tmp_path)
    assert any("no per-rank logs for rank(s) [2]" in w for w in v.warnings)


def test_fifo_is_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.log").write_text("RuntimeError: x\n")
    b = discover(tmp_path)
    assert [f.rel for f in b.files] == ["a.log"]


def _tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_archive_with_traversal_member(tmp_path: Path) -> None:
    arc = tmp_path / "b.tar.gz"
    _tar(arc, {"../../evil.log": b"RuntimeError: evil\n", "ok/rank.log": b"RuntimeError: fine\n"})
    v = analyze(arc)
    assert any("leaves the archive root" in w for w in v.warnings)
    assert not (tmp_path.parent / "evil.log").exists()
    assert v.root_event is not None and "fine" in v.root_event.text


def test_archive_bomb_refused(tmp_path: Path) -> None:
    arc = tmp_path / "bomb.tar.gz"
    zeros = b"\x00" * (80 * 1024 * 1024)
    _tar(arc, {"zeros.log": zeros})
    assert arc.stat().st_size < 1024 * 1024
    with pytest.raises(BundleError, match="archive bomb"):
        discover(arc)
    code, _ = cli("analyze", str(arc))
    assert code == 2


def test_truncated_archive_partial(tmp_path: Path) -> None:
    arc = tmp_path / "t.tar.gz"
    _tar(arc, {"a/rank.log": b"RuntimeError: first\n" + b"y" * 200000, "b/more.log": b"z" * 200000})
    data = arc.read_bytes()
    arc.write_bytes(data[: len(data) // 2])
    v = analyze(arc)
    assert any("damaged or truncated" in w for w in v.warnings)


def test_gzip_garbage_single_file(tmp_path: Path) -> None:
    p = tmp_path / "x.tar.gz"
    p.write_bytes(gzip.compress(b"not a tar at all"))
    code, _ = cli("analyze", str(p))
    assert code == 2


def test_symlink_outside_root_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.log"
    outside.write_text("RuntimeError: secret\n")
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "link.log").symlink_to(outside)
    (b / "rank.log").write_text("RuntimeError: inside\n")
    v = analyze(b)
    assert any("outside the bundle" in w for w in v.warnings)
    assert all("secret" not in c.event.text for c in v.causal_chain)


def test_json_output_is_one_object(tmp_path: Path) -> None:
    (tmp_path / "rank.log").write_text(GLOO_LINE + "\n")
    code, out = cli("analyze", str(tmp_path), "--json")
    assert code == 0
    assert json.loads(out)["schema_version"].startswith("1.")
