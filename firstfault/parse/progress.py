"""Training progress lines: the last step each rank reached and how long its steps took.

A hang's culprit is often the rank whose progress stops first; a straggler is the rank whose
steps are consistently slower. Trainers word progress differently, so a few common shapes are
recognised: a generic ``step N ... step_time_ms X`` (firstfault's sample workload), Megatron's
``iteration N/ M | ... elapsed time per iteration (ms): X`` and torchtitan's ``step: N``.
Progress is folded into per-rank counters, never kept line by line.
"""

from __future__ import annotations

import re

LITERALS = ("step ", "step:", "iteration ", "iter ", "Iter ", "Iter(train)")


# A rank's own work per step (compute, excluding time spent waiting in collectives) tells a
# straggler apart: the wall time of a synchronous step is the same on every rank.
_OWN_MS = re.compile(r"\b(?:compute_ms|compute time \(ms\)|fwd_bwd_ms)[ =:]\s*(?P<ms>[\d.]+)")
_PATTERNS = [
    # not a command line's option ("--step 4 --steps 20" in the launcher's echo of its command)
    re.compile(r"(?<![-\w])step[ :=]\s*(?P<step>\d+)\b(?:.*?\bstep_time_ms[ =:]\s*(?P<ms>[\d.]+))?"),
    re.compile(r"\biteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*(?P<ms>[\d.]+)"),
    # an iteration counter with its total: a print's "iter 3/20 | loss 2.29 | 17.9 ms/it", mmcv's
    # "Iter [100/1000]", mmengine's "Iter(train) [  50/160000]"
    re.compile(r"(?<![-\w])[Ii]ter(?:\(train\))?\s*\[?\s*(?P<step>\d+)\s*/\s*\d+\]?(?:.*?\b(?P<ms>[\d.]+)\s*ms/it\b)?"),
]
# "[rank3]", "rank 3", "rank=3", and a structured log's field: JSON's "rank": 3, a dict's 'rank': 3
_RANK = re.compile(r"\[rank(?P<rank>\d+)\]|\brank(?:[ =:]|[\"']?:\s*)(?P<rank2>\d+)\b")
# A step counter that names its total ("step 150/150", Megatron's "iteration       50/      50 |"):
# when a rank's last progress line has step == total, training reached its last step.
STEP_OF_TOTAL = re.compile(r"(?<![-\w])(?:[Ss]tep|[Ii]ter(?:ation)?)\s*[:=]?\s*(?P<step>\d+)\s*/\s*(?P<total>\d+)\b")


# A line that shows training under way, whatever the trainer's format: a step or iteration counter
# ("step 5", "iter 5/100", "iteration 5/ 100 |", "global_step=5"; mmcv's "Epoch [1][20/1000]" and
# "Iter [100/1000]", mmengine's "Epoch(train) [1][ 50/500]", from their TextLoggerHook / LogProcessor;
# the MetricLogger of DETR, DeiT, MAE and their many descendants, util/misc.py log_every():
# header 'Epoch: [{}]' then '[{0}/{1}]' joined by two spaces, "Epoch: [8]  [ 200/2293]  eta: ..."),
# a loss with its value ("loss=2.31", "'loss': 0.85", "lm loss: 3.2E+00",
# "'train/loss': tensor(0.1785, device='cuda:0')"), or tqdm's rate
# ("12/620 [00:52<50:17, 4.95s/it]"), or a throughput ("images/sec: 47.9", "108.3 img/sec",
# "tokens/s: 5120": tf_cnn_benchmarks', Horovod's, Megatron's and torchtitan's). Used to tell a
# failure before training from one during it (``reason.configuration``), never to count steps.
# A count followed by "(" is not a step: nccl-tests' header (src/common.cu) prints its size
# increment as "step: 2(factor)" or "step: 1048576(bytes)" before any collective has run.
# Mined from the trainers' own printing (tests/fixtures/progress_lines.toml, each with its source):
# a training metric named for a loss ("train/CrossEntropyLoss=12.18", OLMo), fairseq's JSON
# '"epoch": 1', the Trainer's fractional epoch in its log dict ("'epoch': 0.01", TRL's PPO); tqdm's
# rate followed by its set_postfix pairs ("1.20s/it, avr_loss=nan]": sd-scripts, OpenRLHF,
# diffusers; a postfix with no "key=" pair, vLLM's "est. speed input: ...", is no training);
# Chainer's ProgressBar (chainer/training/extensions/progress_bar.py, ESPnet1's trainer) "100 iter, 0
# epoch / 100 epochs"; Composer's ConsoleLogger "[batch=10/100]:". A bare "<name>_loss=0.01" is not
# enough: argument dumps print "aux_loss=0.01", "z_loss=0.0001", "min_loss=inf" before any step.
TRAINING_MARKER = re.compile(
    r"(?:(?<![-\w])(?:global_)?(?:[Ss]tep|[Ii]ter(?:ation)?|[Ee]poch)\s*#?[:=]?\s*\d+(?![.\d(])\s*(?:/\s*\d+)?"
    r"|(?<![-\w])(?:Epoch|Iter)(?:\(train\))?\s*\[\s*\d+\s*(?:\]\[\s*\d+\s*)?/\s*\d+\]"
    r"|(?<![-\w])Epoch:\s*\[\d+\]\s+\[\s*\d+\s*/\s*\d+\]"
    r"|(?i:\b(?:lm |train(?:ing)?[ _/]\w{0,40}?)?loss['\"]?\s*[:=|]?\s*(?:tensor\()?"
    r"[-+]?(?:\d+\.\d+(?:e[-+]?\d+)?|nan|inf)\b)"
    r"|(?<!\d)\d+/\d+ \[\d+:\d\d<[\d:?]+,\s*[\d.?]+\s*(?:s/it|it/s)(?:,\s*\w[\w/.-]{0,60}=[^\]\n]{0,300})?\])"
)
# Rarer forms, apart: searched only on a line holding one of their words (a digit-led branch in the
# marker above is tried at every digit of every line, and most lines are timestamps and counters)
RARE_MARKER = re.compile(
    r"(?<![-\w])[Ee]poch(?:\"\s*:\s*\d+|'\s*:\s*\d+\.\d+)|(?<!\d)\d+ iter, \d+ epoch / \d+ epochs|\[batch=\d+/\d+\]"
)
RARE_LITERALS = ('poch"', "poch'", " iter, ", "[batch=")
# A throughput, apart: searched only on a line holding "/s" (most lines do not), so the marker
# above stays one cheap scan for the lines that hold a step or loss word
# (+ Chainer's "4.0445 iters/sec" and TF Estimator's StepCounterHook "global_step/sec: 0.80")
RATE_UNITS = ("images", "img", "samples", "tokens", "tok", "sequences", "seqs", "iters", "global_step")
_UNIT = "|".join(RATE_UNITS)
# DeepSpeed's ThroughputTimer (deepspeed/utils/timer.py), every steps_per_print steps of training:
# "0/2650, SamplesPerSec=13.19" (older releases), "RunningAvgSamplesPerSec=..., CurrSamplesPerSec=..."
PER_SEC = re.compile(r"SamplesPerSec=\d")
THROUGHPUT = re.compile(rf"\d\s*(?:{_UNIT})/s(?:ec)?\b|\b(?:{_UNIT})/s(?:ec)?\s*[:=]\s*\d")


def training_line(text: str) -> bool:
    """Does this line show training under way (a step, a loss, a rate or a throughput)?"""
    return (
        TRAINING_MARKER.search(text) is not None
        or (any(lit in text for lit in RARE_LITERALS) and RARE_MARKER.search(text) is not None)
        or ("/s" in text and THROUGHPUT.search(text) is not None)
        or ("PerSec" in text and PER_SEC.search(text) is not None)
    )


# A tqdm bar of the set-up, not of training: Hugging Face's "Loading checkpoint shards", datasets'
# "Map", "Filter", "Generating train split", "Downloading"... (their tqdm descriptions), vLLM's and
# SGLang's weight loader ("Loading safetensors checkpoint shards:  25% Completed | 1/4", its own
# bar_format), YOLOv5's label cache ("train: Scanning '...' images and labels... 7 corrupted:  97%|"). Its rate
# says nothing about steps; a job that failed after it failed before training.
SETUP_BAR = re.compile(
    r"(?i)\b(?:load(?:ing)?|download(?:ing)?|fetch(?:ing)?|map|filter|tokeniz\w*|generating \w+ split|"
    r"extract(?:ing)?|resolv(?:e|ing)|preprocess\w*|convert(?:ing)?|prepar(?:e|ing)|scan(?:ning)?)\b[^|\n]{0,160}"
    r":\s*\d+%(?:\||\s+Completed \|)"
)
TRAINING_LITERALS = (
    "step",
    "Step",
    "iter",
    "Iter",
    "poch",
    "loss",
    "Loss",
    "LOSS",
    "it/s",
    "s/it",
    "SamplesPerSec",
    "[batch=",
    *(f"{unit}/s" for unit in RATE_UNITS),
)  # "STEP 9.0": SLURM's


def match_progress(text: str) -> tuple[int, float | None, int | None] | None:
    """(step, step_ms, rank-if-named) when ``text`` is a progress line.

    ``step_ms`` is the rank's own compute time when the line gives it, else the step time
    (:func:`own_ms` tells which).
    """
    got = match_progress_own(text)
    return None if got is None else got[:3]


def match_progress_own(text: str) -> tuple[int, float | None, int | None, float | None] | None:
    """:func:`match_progress` and :func:`own_ms` of one line, its own-work figure searched once
    (a log tail is thousands of progress lines)."""
    for pat in _PATTERNS:
        m = pat.search(text)
        if m:
            ms = m.groupdict().get("ms")
            own_m = _OWN_MS.search(text)
            own = float(own_m["ms"]) if own_m else None
            if own_m:
                ms = own_m["ms"]
            r = _RANK.search(text)
            rank = None
            if r:
                rank = int(r["rank"] or r["rank2"])
            return int(m["step"]), float(ms) if ms else None, rank, own
    return None


def own_ms(text: str) -> float | None:
    """The rank's own work in this step (``compute_ms`` and the like), if the line gives it."""
    m = _OWN_MS.search(text)
    return float(m["ms"]) if m else None
