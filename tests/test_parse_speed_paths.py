"""The hot paths made faster read what the plain loops read, and forked workers end quietly.

``training_marks`` skips a tail with no training word in one scan and looks a marker's time up
backwards; the reference below is the line-by-line loop it replaced, so any input where the two
differ is a verdict that moved.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firstfault.discover import discover
from firstfault.match.registry import load_registry
from firstfault.parse import progress as progress_mod
from firstfault.parse import run as run_mod
from firstfault.parse.base import ParseContext
from firstfault.parse.facts import training_marks
from firstfault.parse.result import ParseResult
from firstfault.parse.timestamps import parse_timestamp
from firstfault.vocab.identity import strip_prefixes


def _reference(lines: list[str], ctx: ParseContext) -> None:
    """The line-by-line loop (every line with a clock's colon parsed for a time)."""
    last_ts: float | None = None
    for raw in lines:
        if not any(lit in raw for lit in progress_mod.TRAINING_LITERALS):
            if ":" in raw:
                ts = parse_timestamp(strip_prefixes(raw)[0], ctx.year_hint)
                last_ts = ts if ts is not None else last_ts
            continue
        text = strip_prefixes(raw)[0]
        ts = parse_timestamp(text, ctx.year_hint)
        last_ts = ts if ts is not None else last_ts
        if not progress_mod.training_line(text):
            continue
        ctx.training_seen = True
        if last_ts is not None and (ctx.training_ts is None or last_ts < ctx.training_ts):
            ctx.training_ts = last_ts
        return


LINES = st.sampled_from(
    [
        "2026-12-02 10:00:01,000 INFO [rank0] step 3 loss 1.0 step_time_ms 2000.1",
        "[rank1]: 2026-12-02 10:00:02,500 WARNING something: else",
        "[default0]:Epoch 1: 12/620 [00:52<50:17, 4.95s/it]",
        "I1202 10:00:03.000000 123 train.py:10] iteration 5/ 100 | lm loss: 3.2E+00",
        "a line with a colon: and no time",
        "stepping stone",  # a training word but no marker
        "Traceback (most recent call last):",
        "[rank3]: RuntimeError: NCCL error",
        "2026-12-02 10:00:04 loss=nan",
        "",
    ]
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(LINES, max_size=25), prior=st.one_of(st.none(), st.floats(1.7e9, 1.9e9)))
def test_training_marks_reads_what_the_line_loop_read(lines: list[str], prior: float | None) -> None:
    fast, ref = ParseContext(year_hint=2026), ParseContext(year_hint=2026)
    fast.training_ts = ref.training_ts = prior
    training_marks(lines, fast, "\n".join(lines))
    _reference(lines, ref)
    assert (fast.training_seen, fast.training_ts) == (ref.training_seen, ref.training_ts)


def test_parse_workers_end_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI turns SIGTERM into KeyboardInterrupt; a pool's forked workers must not inherit that:
    the pool's end (SIGTERM to each worker) printed a worker's traceback, and a worker that took
    the exception while holding the task queue's lock left its pool's end waiting forever."""
    for r in range(6):
        d = tmp_path / "logs" / "run" / "attempt_0" / str(r)
        d.mkdir(parents=True)
        (d / "stderr.log").write_text(f"[rank{r}]: RuntimeError: [pair.cc:553] Connection closed by peer\n")
    real = run_mod._parse_files

    def noting(files, classifier, ctx):  # type: ignore[no-untyped-def]
        ctx.warn(f"worker SIGTERM: {signal.getsignal(signal.SIGTERM)!r}")
        return real(files, classifier, ctx)

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "_parse_files", noting)
    old = signal.signal(signal.SIGTERM, stop)
    try:
        pr = run_mod.parse_bundle(discover(tmp_path), load_registry(), jobs=2)
    finally:
        signal.signal(signal.SIGTERM, old)
    seen = {w for w in pr.ctx.warnings if w.startswith("worker SIGTERM")}
    assert seen == {f"worker SIGTERM: {signal.SIG_DFL!r}"}
    assert len(pr.events) >= 6


def _rank_logs(root: Path, ranks: int = 12) -> Path:
    for r in range(ranks):
        d = root / "logs" / "run" / "attempt_0" / str(r)
        d.mkdir(parents=True)
        steps = "".join(
            f"[rank{r}]:2024-05-01 10:00:{s:02d},000 - INFO - step: {s:3d}  loss:  7.{s:04d}  tps: 1,234\n"
            for s in range(1, 40)
        )
        (d / "stderr.log").write_text(steps + f"[rank{r}]: RuntimeError: [pair.cc:553] Connection closed by peer\n")
    return root


def _read(pr: ParseResult) -> tuple[object, ...]:
    events = [(e.id, e.source, e.line, e.signature, e.text, e.rank, e.ts, dict(e.fields)) for e in pr.events]
    progress = {
        att: {r: (p.first_step, p.last_step, p.steps_seen, list(p.step_ms)) for r, p in prog.items()}
        for att, prog in pr.ctx.progress_by_attempt.items()
    }
    return events, progress, pr.files_read, pr.bytes_read, pr.lines_flagged


@pytest.mark.parametrize("busy_for", [0, 1, 3, 100])
def test_the_parse_reads_the_same_whoever_parses_while_the_fr_stage_runs(tmp_path: Path, busy_for: int) -> None:
    """While the FR worker is busy one parse worker takes tasks one at a time, then a pool takes
    the rest; how many tasks went each way depends on timing, so the result must not."""
    bundle = discover(_rank_logs(tmp_path))
    reg = load_registry()
    alone = _read(run_mod.parse_bundle(bundle, reg, jobs=1))
    calls = iter(range(1_000))

    def busy() -> bool:
        return next(calls) < busy_for

    forked = _read(run_mod.parse_bundle(bundle, reg, jobs=2, while_busy=busy))
    assert forked == alone
