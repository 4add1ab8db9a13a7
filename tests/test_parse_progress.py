"""Unit tests of parse/progress.py: which lines say training ran, and each rank's step times.

"Training ran" decides whether a failure is a launch/configuration one (before any step) or one
in training; a false marker would turn a bad config into a mid-run fault, so the non-markers
matter as much as the markers.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from firstfault.parse.progress import (
    SETUP_BAR,
    TRAINING_LITERALS,
    TRAINING_MARKER,
    match_progress,
    own_ms,
    training_line,
)
from firstfault.vocab.identity import strip_prefixes

# Trainers' own progress lines, each with the source that prints it (tests/fixtures/progress_lines.toml)
MINED = tomllib.loads((Path(__file__).parent / "fixtures" / "progress_lines.toml").read_text(encoding="utf-8"))["line"]


@pytest.mark.parametrize(
    "line",
    [
        "[rank0]: step 12 loss 2.3412",
        "iteration      100/  500000 | consumed samples: 3200 | lm loss: 7.012E+00",  # Megatron
        "Epoch 3: 100%|##########| 250/250 [00:41<00:00,  6.02it/s, loss=0.213]",  # Lightning/tqdm
        "{'loss': 1.2345, 'grad_norm': 3.1, 'learning_rate': 5e-05, 'epoch': 0.5}",  # HF Trainer
        "train_loss=nan",
        "Iter 7/100",
        "epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=51.2",  # DeepSpeed ThroughputTimer
        "2021-06-15 10:12:01,123 - mmdet - INFO - Epoch [1][50/7330]\tlr: 1.000e-02, eta: 1 day, 2:03:04",  # mmcv
        "Iter [100/1000]\tlr: 1.000e-02, eta: 0:10:00, time: 0.512",  # mmcv, IterBasedRunner
        "Epoch(train)  [1][ 50/500]  lr: 1.0000e-02  eta: 0:10:00  time: 0.5000",  # mmengine
        "Iter(train) [  50/1000]  lr: 1.0000e-02  eta: 0:10:00",  # mmengine
        # DETR/DeiT/MAE's MetricLogger.log_every (util/misc.py), without a loss word ("closs")
        "[05:25:52.210291] Epoch: [2]  [10/1504]  lr: 0.000012  closs: 0.9249 (0.9352)  time: 4.7312  data: 0.1228",
        "Epoch: [8]  [ 200/2293]  eta: 1:52:52  lr: 0.000004  time: 3.0808  data: 0.0002  max mem: 32637",
    ],
)
def test_training_markers(line: str) -> None:
    assert TRAINING_MARKER.search(line), line


@pytest.mark.parametrize(
    "line",
    [
        "slurmstepd: error: *** STEP 9.0 ON node01 CANCELLED AT 2026-01-01T00:00:00 ***",  # SLURM's step id
        "usage: train.py [--steps STEPS] [--max-step 5]",  # an option, not progress
        "torch.distributed.elastic.multiprocessing.api: failed (exitcode: 1)",
        "max_steps=100, warmup_steps=10, gradient_accumulation_steps: 4",  # arguments, not progress
        "Epoch(val) [1][10/100]  eta: 0:00:01",  # mmengine's evaluation, not training
        "Test:  [ 10/157]  eta: 0:00:20  loss_x: 0.7  time: 0.1290  data: 0.0021",  # MetricLogger's evaluation
        # nccl-tests' header (NVIDIA/nccl#473): the size increment, before any collective ran
        "# nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1",
        # a configuration printed before any step: loss settings are not a loss's value
        "moe_aux_loss_coeff: 0.01, loss_weight=1.0, label_smoothing: 0.1",
        "Namespace(aux_loss=0.01, lr=0.1)",
        "z_loss=0.0001, router_z_loss: 0.001, reg_loss=0.0, ppo_loss: 0.0",
        "best_loss = inf, min_loss=inf",
        "{'epoch': 3, 'model': 'resnet50'}",  # a checkpoint's metadata: a whole epoch, not the Trainer's fraction
        # vLLM's generation bar: tqdm's rate, but its postfix holds no "key=value" pair
        "Processed prompts: 100%|██████████| 8/8 [00:03<00:00,  2.10it/s, est. speed input: 100.00 toks/s, output: 50.00 toks/s]",
    ],
)
def test_not_training_markers(line: str) -> None:
    assert not TRAINING_MARKER.search(line), line
    assert not training_line(line), line


@pytest.mark.parametrize("entry", MINED, ids=[f"{i}-{e['framework'][:40]}" for i, e in enumerate(MINED)])
def test_trainers_own_progress_lines_show_training(entry: dict[str, str]) -> None:
    """Every trainer's progress line in the mined table reads as training under way (and passes
    the byte prefilter that decides whether a line is looked at at all)."""
    line = entry["example"]
    assert entry["source"] and entry["example_origin"]
    text = strip_prefixes(line)[0]
    assert any(lit in line for lit in TRAINING_LITERALS), line
    assert training_line(text) and not SETUP_BAR.search(text), line


def test_own_compute_time_beats_the_step_time() -> None:
    assert own_ms("[rank3] step 5 step_ms=120.0 compute_ms=95.5") == 95.5
    got = match_progress("[rank3] step 5 step_ms=120.0 compute_ms=95.5")
    assert got == (5, 95.5, 3)


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        # a logging.Formatter writing JSON lines (tools/realjobs/train.py --style json)
        ('{"time": "2026-12-06 18:15:21,441", "level": "INFO", "rank": 3, "message": "step 5/20 loss=2.2758"}', 3),
        ("{'rank': 2, 'msg': 'step 7/20 loss=1.93'}", 2),  # a dict's repr
        ("rank: 1 step 4 loss 2.1", 1),
        ("step 5 local_rank: 3 loss 2.0", None),  # a local rank is not the rank
    ],
)
def test_a_structured_logs_rank_field_names_the_rank(line: str, rank: int | None) -> None:
    got = match_progress(line)
    assert got is not None and got[2] == rank


@pytest.mark.parametrize(
    "line",
    [
        "Loading checkpoint shards: 100%|██████████| 4/4 [00:14<00:00,  3.59s/it]",  # transformers
        "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03,  1.02s/it]",  # vLLM/SGLang
        "train: Scanning '../coco/labels/train' images and labels...43718 found, 110 missing, 0 empty, "
        "7 corrupted:  97%|██▉| 43830/45049 [01:07<00:18, 66.12it/s]",  # YOLOv5's label cache (ultralytics/yolov5#4400)
    ],
)
def test_set_up_bars_are_not_training(line: str) -> None:
    assert SETUP_BAR.search(line), line


def _printers_of(texts: list[str]) -> int:
    from firstfault.parse.base import ParseContext
    from firstfault.parse.facts import _printers

    ctx = ParseContext()
    steps = [_step_of(t) for t in texts]
    _printers([(t, s) for t, s in zip(texts, steps, strict=True) if s is not None], ctx)
    return ctx.topology.untagged_printers


def _step_of(text: str) -> int | None:
    from firstfault.parse.progress import match_progress_own

    got = match_progress_own(text)
    return got[0] if got is not None else None


def test_untagged_step_lines_bound_the_processes_that_printed_them() -> None:
    """Each step's line once per printing rank is a lower bound of the world size; a trainer's two
    lines of one step (another template), a restart's second count of the same steps, or too few
    steps to tell are no second process."""
    three = [f"iter {s}/20 | loss 2.{s}{r} | 7.{r} ms/it" for s in range(1, 6) for r in range(3)]
    assert _printers_of(three) == 3
    # a merged line or a cut tail costs one step's count, not the bound (the median over steps)
    assert _printers_of(three[:-2]) == 3
    one_rank_two_lines = [t for s in range(1, 6) for t in (f"step {s}/20 loss=2.3", f"{s}/20 [00:0{s}<00:10, 1.2it/s]")]
    assert _printers_of(one_rank_two_lines) <= 1
    restarted = [f"iter {s}/20 | loss 2.3 | 7.1 ms/it" for s in (*range(1, 6), *range(1, 6))]
    assert _printers_of(restarted) == 0
    assert _printers_of(three[:6]) == 0  # two steps: too few to tell
