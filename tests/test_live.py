"""``firstfault watch``: a directory written as a job would write it gives the batch verdict of the
finished directory, each byte read once; a rank whose progress stops while its peers go on is a
hang candidate before any timeout line; a real torchrun job watched live gets a right verdict.

No timing is asserted: the tests wait for what they expect with generous deadlines.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import firstfault
from firstfault.discover import discover
from firstfault.live import LiveState, SilenceSettings, Update, WatchOptions, watch
from firstfault.match.registry import load_registry
from firstfault.vocab import TEXT_KINDS, Category, FileKind

FIXTURES = Path(__file__).parent / "fixtures"
JOB = FIXTURES / "realjobs" / "diskfull_r0"  # a real torchrun job: console and per-rank logs
HOST_LOG = FIXTURES / "host" / "syslog_aer.log"


def _comparable(d: dict[str, Any]) -> dict[str, Any]:
    d = dict(d)
    for key in ("stats", "observed_at", "live"):
        d.pop(key, None)
    return d


def _text_bytes(root: Path) -> int:
    """Bytes of every text file of the finished directory, as discovery sees them."""
    bundle = discover(root)
    try:
        return sum(f.size for f in bundle.files if f.kind in TEXT_KINDS)
    finally:
        bundle.close()


def _chunks(data: bytes, n: int) -> list[bytes]:
    """``data`` cut in ``n`` pieces at byte positions that fall mid-line."""
    cuts = [len(data) * i // n for i in range(n + 1)]
    return [data[a:b] for a, b in itertools.pairwise(cuts)]


def _append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        fh.write(data)
        fh.flush()


class _Writer:
    """Writes the job's files in rounds: three chunks of every file (cut mid-line), a host log
    rotated between rounds (syslog -> syslog.1 and a new syslog; then both moved on one step), a
    restart's attempt_1 folder,
    and last the console's end, where torchrun prints its final report. ``rounds()`` yields after
    each round so a reader can run in between."""

    CONSOLE = Path("console.log")

    def __init__(self, out: Path):
        self.out = out
        self.files = sorted(p.relative_to(JOB) for p in JOB.rglob("*") if p.is_file() and p.name != "truth.json")
        lines = HOST_LOG.read_bytes().splitlines(keepends=True)
        self.host_old, self.host_new = b"".join(lines[: len(lines) // 2]), b"".join(lines[len(lines) // 2 :])

    def rounds(self) -> Iterator[int]:
        pieces = {rel: _chunks((JOB / rel).read_bytes(), 3) for rel in self.files}
        syslog = self.out / "host-node1" / "syslog"
        for i in range(3):
            for rel in self.files:
                if i < 2 or rel != self.CONSOLE:
                    _append(self.out / rel, pieces[rel][i])
            if i == 0:
                _append(syslog, self.host_old)
            if i == 1:  # logrotate: the file moves, a new one starts
                os.rename(syslog, syslog.with_name("syslog.1"))
                _append(syslog, self.host_new)
            if i == 2:  # and again, a chain in one go: syslog.1 -> syslog.2, syslog -> syslog.1
                os.rename(syslog.with_name("syslog.1"), syslog.with_name("syslog.2"))
                os.rename(syslog, syslog.with_name("syslog.1"))
            yield i
        for rel in self.files:  # torchrun restarted the workers: a new attempt folder
            if "attempt_0" in str(rel):
                for piece in _chunks((JOB / rel).read_bytes(), 2):
                    _append(self.out / str(rel).replace("attempt_0", "attempt_1"), piece)
        yield 3
        _append(self.out / self.CONSOLE, pieces[self.CONSOLE][2])  # torchrun's final report
        yield 4


def test_incremental_state_reads_each_byte_once_and_ends_at_the_batch_verdict(tmp_path: Path) -> None:
    out = tmp_path / "job"
    state = LiveState(out, load_registry([]), sniff_quiet_s=0)  # every file read from its first chunk
    assert not state.refresh()  # the directory does not exist yet: nothing, no error
    for _ in _Writer(out).rounds():
        state.refresh()
        state.analyze()  # the later stages run between reads; they must not disturb what is kept
    state.refresh()
    total = _text_bytes(out)
    assert state.bytes_read == total  # each byte read from disk once
    assert state.bytes_parsed == total  # and parsed once (every file ends with a newline)
    assert (out / "host-node1" / "syslog.2").exists() and not (out / "host-node1" / "syslog").exists()
    live = state.analyze().to_dict()
    batch = firstfault.analyze(out).to_dict()
    assert _comparable(live) == _comparable(batch)
    assert live["stats"]["bytes_read"] == total


def test_a_file_whose_content_tells_its_kind_waits_until_it_can(tmp_path: Path) -> None:
    """A console's first 100 bytes (a warning, no ``[default0]:`` yet) sniff as an application log;
    it is read once its bytes can tell, and gets the kind a batch read gives it."""
    out = tmp_path / "job"
    data = (JOB / "console.log").read_bytes()
    _append(out / "console.log", data[:100])
    state = LiveState(out, load_registry([]))
    state.refresh()
    assert "console.log" not in state.tails and state.bytes_read == 0
    _append(out / "console.log", data[100:])
    state.refresh(final=True)
    batch = discover(out)
    try:
        assert state.tails["console.log"].sf.kind == batch.files[0].kind == FileKind.LAUNCHER_CONSOLE
    finally:
        batch.close()
    assert state.bytes_read == len(data)


def test_a_file_truncated_in_place_is_read_again_and_keeps_what_it_said(tmp_path: Path) -> None:
    """copytruncate: the file shrinks under the same name; its new bytes are read from the start,
    the events of what it held before stay (what was logged happened)."""
    out = tmp_path / "job"
    src = (JOB / "console.log").read_bytes()
    first = src[: src.rfind(b"\n", 0, len(src) * 3 // 4) + 1]  # a rotation cuts at a line's end
    second = src[len(first) :]  # shorter than what was read: the shrink is seen
    _append(out / "console.log", first)
    state = LiveState(out, load_registry([]), sniff_quiet_s=0)
    state.refresh()
    before = len(state.events())
    (out / "console.log").write_bytes(second)  # truncated, then the job writes on
    state.refresh()
    assert state.bytes_read == len(first) + len(second)
    assert len(state.events()) >= before > 0
    assert any("truncated while watched" in w for w in state.ctx.warnings)
    state.analyze()  # the later stages take the two lives of the file without an error


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_watch_loop_follows_writes_and_stops_at_the_launchers_final_report(tmp_path: Path, poll: bool) -> None:
    """The real loop: writes land while it runs; torchrun's failure report ends it."""
    out = tmp_path / "job"
    got: list[Update] = []
    result: list[Update | None] = []
    opts = WatchOptions(poll=poll, until_exit=True, timeout_s=180, interval_s=0.1)
    t = threading.Thread(target=lambda: result.append(watch(out, load_registry([]), [got.append], opts)))
    t.start()
    try:
        for _ in _Writer(out).rounds():
            time.sleep(0.3)
    finally:
        t.join(timeout=240)
    assert not t.is_alive()
    last = result[0]
    assert last is not None and last.final
    batch = firstfault.analyze(out).to_dict()
    assert _comparable(last.to_dict()) == _comparable(batch)
    assert last.verdict.stats["bytes_read"] == _text_bytes(out)
    assert got and got[-1] is last
    keys = [u.key() for u in got[:-1]]
    assert all(a != b for a, b in itertools.pairwise(keys))  # an update only when the verdict changes


def _step_line(rank: int, step: int) -> bytes:
    """The sample workload's own progress line (firstfault_sim.workload's logging format)."""
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%d %H:%M:%S") + f",{now.microsecond // 1000:03d}"
    return (
        f"{stamp} INFO [rank{rank}] step {step} loss 2.0226 step_time_ms 83.9 data_ms 4.6 "
        f"compute_ms 57.1 comm_ms 22.2\n"
    ).encode()


def test_a_rank_that_stops_while_its_peers_go_on_is_a_hang_candidate(tmp_path: Path) -> None:
    out = tmp_path / "job"
    got: list[Update] = []
    stop = threading.Event()

    def train() -> None:  # 4 ranks log their steps; rank 2 stops after step 5, the others go on
        step = 0
        while not stop.is_set() and step < 2000:
            for rank in range(4):
                if rank != 2 or step <= 5:
                    _append(out / "logs" / "none_x1" / "attempt_0" / str(rank) / "stdout.log", _step_line(rank, step))
            step += 1
            time.sleep(0.05)

    out.mkdir()
    writer = threading.Thread(target=train)
    opts = WatchOptions(timeout_s=120, interval_s=0.1, silence=SilenceSettings(k=5.0, floor_s=1.0))

    def sink(up: Update) -> None:
        got.append(up)
        if up.verdict.category == Category.HANG:
            stop.set()

    done = threading.Event()
    watcher = threading.Thread(target=lambda: watch(out, load_registry([]), [sink], opts, stop=done))
    writer.start()
    watcher.start()
    try:
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        writer.join(timeout=30)
    hangs = [u for u in got if u.verdict.category == Category.HANG]
    assert hangs, [u.key() for u in got]
    assert hangs[0].verdict.culprit.ranks == [2]
    assert hangs[0].trigger == "silence"
    # nothing the test wrote is a timeout line: the candidate came from the silence alone
    written = b"".join(p.read_bytes() for p in out.rglob("*.log"))
    assert b"imeout" not in written
    done.set()
    watcher.join(timeout=60)
    assert not watcher.is_alive()


@pytest.mark.slow
def test_a_real_torchrun_job_watched_live_gets_a_right_verdict(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from firstfault_bench.live import run_kind

    row = run_kind("exception", tmp_path, wall_limit=120)
    assert row.right, row
    assert row.first_right_s is not None
    assert (tmp_path / "exception.jsonl").read_text(encoding="utf-8").strip()


def test_webhook_receives_each_verdict_as_json(tmp_path: Path) -> None:
    """A real HTTP server on loopback gets the verdict the watch prints."""
    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from firstfault.live.emit import JsonlSink, WebhookSink

    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "job"
    shutil.copytree(JOB, out)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        sinks = [WebhookSink(url), JsonlSink(tmp_path / "v.jsonl")]
        last = watch(out, load_registry([]), sinks, WatchOptions(until_exit=True, timeout_s=120, poll=True))
    finally:
        server.shutdown()
        server.server_close()
    assert last is not None and bodies
    assert bodies[-1]["live"] == {"trigger": "final", "final": True}
    assert bodies[-1]["verdict"] == firstfault.analyze(out).to_dict()["verdict"]
    lines = (tmp_path / "v.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["observed_at"] for x in lines] == [b["observed_at"] for b in bodies]


def test_cli_refuses_a_file_and_a_jsonl_inside_the_watched_folder(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    log = tmp_path / "x.log"
    log.write_text("hello\n", encoding="utf-8")
    for args in (
        [str(log)],
        [str(tmp_path), "--jsonl", str(tmp_path / "v.jsonl")],
        [str(tmp_path), "--webhook", "file:///etc/passwd"],
        [str(tmp_path / "never"), "--timeout", "1"],  # a folder that never appears
        [str(tmp_path / "empty"), "--timeout", "1"],  # one that holds no job's log
    ):
        (tmp_path / "empty").mkdir(exist_ok=True)
        res = subprocess.run(
            [sys.executable, "-m", "firstfault.cli", "watch", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1


def test_the_slurm_monitor_reads_what_watch_writes(tmp_path: Path) -> None:
    """`firstfault slurm monitor`'s default follower is `watch --jsonl`: its reader takes the last line."""
    import subprocess
    import sys

    from firstfault.slurm.operator import read_verdicts

    out = tmp_path / "w.jsonl"
    bundle = Path(__file__).resolve().parents[1] / "examples" / "bundles" / "hang_4rank"
    cmd = [sys.executable, "-m", "firstfault.cli", "watch", str(bundle), "--jsonl", str(out), "--until-exit"]
    subprocess.run([*cmd, "--timeout", "60"], check=True, capture_output=True, timeout=120)
    (got,) = read_verdicts(out)
    assert got == json.loads(out.read_text().splitlines()[-1])
    assert got["verdict"]["category"] == "hang" and got["verdict"]["culprit"]["ranks"] == [2]
