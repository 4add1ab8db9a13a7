"""A loss that climbs away at the end of a log reads as a divergence (``reason.divergence``), and
only then: not a single spike, not a noisy loss, not a log that shows its end.

The lines are the trainers' own: Megatron-LM's training_log() as BigScience's 104B chronicles
logged it (``corpus/threads/bigscience-tr8-104b-chronicles-experiment-2``), fairseq's progress
bar, the Trainer's log dict and tools/realjobs/train.py's print.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.parse.losses import Series, fold, loss_value
from firstfault.pipeline import analyze
from firstfault.reason.divergence import diverged

THREADS = Path(__file__).resolve().parent.parent / "corpus" / "threads"

MEGATRON = (
    " iteration {it:>8d}/  159576 | consumed samples:       251312 | elapsed time per iteration (ms): 18495.6 |"
    " learning rate: 6.000E-05 | global batch size:    96 | lm loss: {loss:E} | loss scale: 4096.0 |"
    " grad norm: 953.542 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |"
)


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (MEGATRON.format(it=6900, loss=6.365808), (None, 6.365808)),
        ("| epoch 027 | loss 6.343 | nll_loss 4.984 | ppl 31.65 | wps 164346 | loss_scale 0.500 |", (None, 6.343)),
        ("{'loss': 0.8512, 'grad_norm': 1.93, 'learning_rate': 4.9e-05, 'epoch': 0.01}", (None, 0.8512)),
        ("[rank 2] step 3/20 loss 2.2762 step_time 16.0ms", (2, 2.2762)),
        ("iter 3/20 | loss 2.4200 | 15.0 ms/it", (None, 2.42)),
    ],
)
def test_a_training_loss_is_read_with_its_rank(line: str, want: tuple[int | None, float]) -> None:
    assert loss_value(line) == want


@pytest.mark.parametrize(
    "line",
    [
        " validation loss at iteration 7000 | lm loss value: 7.174200E+00 | lm loss PPL: 1.305315E+03 |",
        "| epoch 027 | valid on 'valid' subset | valid_loss 8.30118 | valid_nll_loss 7.15366 | valid_ppl 142.39",
        "{'eval_loss': 1.25, 'eval_runtime': 3.1}",
        "| WARNING: overflow detected, setting loss scale to: 0.25",
    ],
)
def test_validation_losses_and_loss_scales_are_no_training_loss(line: str) -> None:
    assert loss_value(line) is None


def _series(values: list[float]) -> dict[str, Series]:
    series: Series = {}
    for i, v in enumerate(values, 1):
        fold(series, None, i, v)
    return {"log.txt": series}


def test_three_rises_to_half_again_its_lowest_are_a_divergence() -> None:
    d = diverged(_series([6.9, 6.5, 6.37, 6.60, 7.31, 9.12, 10.24]))
    assert d is not None
    assert (d.start, d.end, d.values, d.first_line) == (6.37, 10.24, 5, 3)


@pytest.mark.parametrize(
    "values",
    [
        [2.31, 2.29, 2.30, 7.5],  # one spike, then the paste ends
        [2.2, 2.25, 2.3, 2.35, 2.4],  # a slow drift, well under half again its lowest
        [2.0, 1.8, 1.6, 1.5, 1.4],  # falling
        [-0.5, -0.2, 0.1, 0.4, 0.9],  # an RL objective that crosses zero
        [3.0, 4.0, 5.0],  # too few values
    ],
)
def test_a_spike_a_drift_or_a_signed_objective_is_no_divergence(values: list[float]) -> None:
    assert diverged(_series(values)) is None


def test_a_value_printed_twice_in_a_row_is_one_value() -> None:
    series: Series = {}
    for line, v in enumerate([2.0, 2.0, 2.0, 2.0], 1):
        fold(series, 1, line, v)
    assert series[1] == [(1, 2.0, None)]


def test_bigscience_104b_divergence_reads_numerical_not_healthy() -> None:
    """BigScience tr8-104B, experiment 2 (the chronicles): the last five logged iterations, lm loss
    6.37, 6.60, 7.31, 9.12, 10.24, with no error line. It read "no failure found"."""
    v = analyze(THREADS / "bigscience-tr8-104b-chronicles-experiment-2" / "log.txt")
    assert str(v.category) == "numerical"
    assert "diverged" in v.summary and "6.366 to 10.24" in v.summary


def test_the_same_climb_in_a_log_that_shows_its_end_is_not_read(tmp_path: Path) -> None:
    """Megatron's counter at its total ("iteration 50/50") is training's end: the run ended."""
    losses = [6.37, 6.60, 7.31, 9.12, 10.24]
    lines = [MEGATRON.format(it=46 + i, loss=x).replace("/  159576", "/      50") for i, x in enumerate(losses)]
    (tmp_path / "log.txt").write_text("\n".join(lines) + "\n")
    assert str(analyze(tmp_path / "log.txt").category) == "none"
    (tmp_path / "log.txt").write_text("\n".join(lines[:-1]).replace("/      50", "/     500") + "\n")
    assert str(analyze(tmp_path / "log.txt").category) == "none"  # 9.12 / 6.37 < 1.5: not yet


def test_a_rank_tagged_climb_names_its_rank(tmp_path: Path) -> None:
    losses = [2.30, 2.28, 2.4, 3.1, 4.2, 5.6]
    lines = [f"[rank 3] step {i}/100 loss {x:.4f} step_time 16.0ms" for i, x in enumerate(losses, 1)]
    lines += [f"[rank 1] step {i}/100 loss 2.{30 - i:02d}00 step_time 16.0ms" for i in range(1, 7)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    v = analyze(tmp_path / "console.log")
    assert str(v.category) == "numerical"
    assert v.culprit.ranks == [3]


def test_a_climb_on_every_rank_is_the_runs_not_one_ranks(tmp_path: Path) -> None:
    losses = [2.30, 2.28, 2.4, 3.1, 4.2, 5.6]
    lines = [
        f"[rank {r}] step {i}/100 loss {x + r / 100:.4f} step_time 16.0ms"
        for i, x in enumerate(losses, 1)
        for r in (0, 1)
    ]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    v = analyze(tmp_path / "console.log")
    assert str(v.category) == "numerical"
    assert v.culprit.ranks == []


def test_a_series_keeps_only_its_trailing_climb() -> None:
    """A falling or flat loss keeps one value: a bundle of thousands of ranks keeps a few thousand
    numbers, not a history each."""
    series: Series = {}
    for line, v in enumerate([3.0, 2.5, 2.4, 2.6, 2.2, 2.1], 1):
        fold(series, None, line, v)
    assert series[None] == [(6, 2.1, None)]
    for line, v in enumerate([float(x) for x in range(3, 43)], 7):
        fold(series, None, line, v)
    assert len(series[None]) == 32 and series[None][0] == (6, 2.1, None) and series[None][-1] == (46, 42.0, None)


def test_loss_lines_built_to_backtrack_cost_no_more_than_a_signature_may() -> None:
    """The loss regex runs on every tail line that holds "oss", as signatures run on flagged lines:
    the same hostile lines and the same bound as ``signatures --check`` (match.check), where a
    catastrophic pattern takes seconds and a linear one milliseconds."""
    import time

    from firstfault.match.check import _FILLS, PROBE_CHARS, WORST_CASE_S

    for lit in ("loss", "lm loss:", "'loss': ", "val_loss "):
        for fill in (*_FILLS, "\t"):
            line = (lit + fill * (PROBE_CHARS // len(fill)))[:PROBE_CHARS]
            start = time.perf_counter()
            loss_value(line)
            assert time.perf_counter() - start < WORST_CASE_S, (lit, fill)


def test_a_climb_is_over_steps_not_over_ranks_printing_one_step(tmp_path: Path) -> None:
    """A console whose ranks print untagged lines ("iter 4/20 | loss ..." once per rank, as
    tools/realjobs/train.py's print style does) interleaves ranks in one series: four ranks whose
    losses at one step happen to rise in print order are no climb. The same values over four steps
    are."""
    series: Series = {}
    for line, v in enumerate([2.0, 2.5, 3.1, 3.6], 1):
        fold(series, None, line, v, step=4)
    assert diverged({"console.log": series}) is None
    series = {}
    for line, v in enumerate([2.0, 2.5, 3.1, 3.6], 1):
        fold(series, None, line, v, step=line)
    assert diverged({"console.log": series}) is not None
    lines = [f"iter {step}/20 | loss {x:.4f} | 15.0 ms/it" for step in (3, 4) for x in (2.3, 2.9, 3.1, 3.6)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    assert str(analyze(tmp_path / "console.log").category) == "none"
