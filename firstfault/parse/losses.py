"""The training loss a log's last lines print, per series: what a divergence is read from.

Why: a run whose loss climbs away prints no error. Trainers go on stepping while the loss
rises from 6 to 10 (BigScience's 104B chronicles, "experiment 2"), and the log a user pastes
ends there; without the values, "no error in the log" would read as a healthy job. Only a
file's tail is read (the same bytes the progress facts read), back from its end until
``SCAN_VALUES`` values are found, so a tail of thousands of step lines costs a few dozen regex
searches; and only each series' trailing climb is kept (the values since the last one that did
not rise), so a falling loss keeps one number.

A series is one file's training loss, apart per rank where the lines name it ("[rank3]", a
Ray worker's prefix after ``strip_prefixes``). Validation and evaluation losses are another
series that this module does not keep: they rise and fall with what is evaluated.
"""

from __future__ import annotations

import math
import re

KEEP = 32  # values a climb keeps: enough for a sustained one, never a whole run
SCAN_LINES = 400  # lines read back from a file's end
SCAN_VALUES = 2 * KEEP  # values read back, of every series together

# A training loss and its value, as trainers print it: Megatron-LM's training_log()
# " lm loss: 6.365808E+00 |", a print's "loss 2.2931" or "loss=2.31", transformers' Trainer log
# dict "{'loss': 0.85, ...}", torchtitan's "loss: 2.3", "train/loss: 1.2"; the same names as the
# NaN signature (signatures/training_metrics.toml, metrics.nan_loss_or_grad). A name with a
# validation prefix ("valid loss", "val_loss", "eval_loss", "test loss") is not training's. The
# separator's spaces are bounded: a line of "loss" and thousands of blanks costs no backtracking.
_LOSS = re.compile(
    r"(?i)(?<![\w.])(?P<pre>(?:valid(?:ation)?|val|eval|test|dev)[ _/])?"
    r"['\"]?(?:(?:lm|train(?:ing)?)[ _/])?loss['\"]?(?:\s{0,16}[:=|]\s{0,16}|\s{1,16})['\"]?(?:tensor\()?"
    r"(?P<value>[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\b"
)
_RANK = re.compile(r"\[rank(?P<a>\d+)\]|\brank[ =:](?P<b>\d+)\b")
# one value of a series: (its line, the loss, the step the line names or None)
Point = tuple[int, float, int | None]
# a file's series: rank (None where the lines name none) -> its trailing climb
Series = dict[int | None, list[Point]]


def loss_value(text: str) -> tuple[int | None, float] | None:
    """(the rank the line names, or None; its training loss) when ``text`` prints one."""
    if "oss" not in text:
        return None
    for m in _LOSS.finditer(text):
        if m["pre"]:
            continue
        value = float(m["value"])
        if not math.isfinite(value):
            return None
        r = _RANK.search(text)
        return (int(r["a"] or r["b"]) if r else None), value
    return None


def fold(series: Series, rank: int | None, line: int, value: float, step: int | None = None) -> None:
    """Add one value to its series, which holds only its trailing climb: the values since the last
    one that did not rise. A value printed twice in a row (a Ray worker's line echoed by the driver)
    is one value. A value at a step no later than the one before it is another rank's print of the
    same step (a console whose ranks print untagged lines): a climb is over steps, not over ranks,
    so it starts again there. A falling or flat loss keeps one value per series, so a bundle of
    thousands of ranks keeps a few thousand numbers. A climb longer than ``KEEP`` keeps its first
    value (where it began) and its last ones."""
    got = series.setdefault(rank, [])
    prev = got[-1] if got else None
    if prev is not None and prev[1] == value and (step is None or prev[2] in (None, step)):
        return
    same_step = prev is not None and step is not None and prev[2] is not None and step <= prev[2]
    if prev is not None and (value < prev[1] or same_step):
        got.clear()
    got.append((line, value, step))
    if len(got) > KEEP:
        del got[1]
