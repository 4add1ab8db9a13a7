"""Error lines no signature knows: so that a failed job is never answered "no failure".

Signatures cover the wording firstfault was taught. Real jobs print more: a library's own
``ERROR`` line, an ``nvidia-smi`` that "has failed", an NCCL ``WARN`` of a kind not yet in the
registry. Such a line must not vanish: ``none`` means the job ended well, never that no
signature fitted. This module decides, for a line that matched no signature, whether it reads
as an error: it carries an error word (``error``, ``failed``, ``fatal``, ``killed``, ``cannot``,
...) or an error level (``ERROR``, ``FATAL``, ``CRITICAL``), and it is not a warning or an
informational line (``UserWarning``, ``[W ...]``, ``NCCL INFO``, ``- INFO -``), nor a counter
that says there were none (``0 errors``), nor a check that reports it passed. Such lines become
*unrecognised* events; reasoning mines their templates (``reason.unrecognised``) when nothing
better explains the failure.

The words are deliberately broad and the exclusions conservative: an unrecognised line only
ever decides a verdict when no signature, exit record or silent rank does, and then the
verdict says ``unknown`` with the line itself as evidence, never a confident category.
"""

from __future__ import annotations

import re

UNRECOGNISED = "unrecognised"

# Byte literals for the prefilter: a line with none of them is never looked at.
ERROR_LITERALS: tuple[str, ...] = (
    "error",
    "Error",
    "ERROR",
    "fail",
    "Fail",
    "FAIL",
    "fatal",
    "Fatal",
    "FATAL",
    "CRITICAL",
    "xception",
    "Killed",
    "killed",
    "abort",
    "Abort",
    "ABORT",
    "Segmentation fault",
    "core dumped",
    "panic",
    "nable to",
    "annot ",
    "ould not",
    "ouldn't",
    "timed out",
    "Timed out",
    "No such file",
    "denied",
    "refused",
    "NCCL WARN",
)

_ERROR_WORD = re.compile(
    r"(?<![A-Za-z_])(?:errors?|ERRORS?|Errors?|fail(?:s|ed|ure|ing)?|Fail(?:s|ed|ure|ing)?|FAIL(?:ED|URE)?"
    r"|fatal|Fatal|FATAL|CRITICAL|[A-Za-z]*[Ee]xception|[A-Za-z]+Error|[Kk]illed|[Aa]bort(?:ed|ing)?|ABORT(?:ED)?"
    r"|Segmentation fault|core dumped|panic|[Uu]nable to|[Cc]annot|[Cc]ould not|[Cc]ouldn't|[Tt]imed out"
    r"|No such file|denied|refused|NCCL WARN)(?![A-Za-z_])"
)
# Lines that announce themselves as warnings or information, whatever words they carry.
_NOT_AN_ERROR = re.compile(
    r"(?:\b[A-Z][a-z]*Warning\b|\bwarnings\.warn\b|^\s*\[?W\d{4} |^\[W |\bWARN(?:ING)?\b(?!.*\b(?:ERROR|FATAL)\b)"
    r"|^\s*[Ww]arning: "  # gdb's, gcc's, a shell tool's own warning ("warning: Cuda API error detected: ...")
    # CPython's headers over an exception it printed and did not raise (parse.run.IGNORED), and over
    # one that ended a thread (parse.run.THREAD): the exception's own line below is the error
    r"|^\s*Exception ignored |^\s*Exception in thread "
    r"|\bNCCL INFO\b|(?:^|[\s|\]\[-])INFO(?:[\s:|\]-]|$)|^\s*\[?I\d{4} |^\[I |\bDEBUG\b"
    # NeMo's logger ("[NeMo W 2025-03-02 11:59:58 exp_manager:123] ...", nemo/utils/formatters/base.py:
    # "[NeMo %(levelname)1.1s %(asctime)s %(module)s:%(lineno)d]"): its I, W and D levels
    r"|\[NeMo [IWD] "
    # TensorFlow's C++ log prefix (tensorflow/core/platform/default/logging.cc: time to the
    # microsecond, then the severity letter of "IWEF"), "2019-11-13 21:28:58.423118: W tensorflow/...":
    # at any column, since Keras prints it into its progress bar's line (paths are blanked by then).
    # A failing op is logged at W too ("OP_REQUIRES failed at conv_ops.cc:539 : Resource exhausted"):
    # that one is an error
    r"|\d\d:\d\d:\d\d\.\d{6}: [IW] (?!.*\bOP_REQUIRES failed)"
    r"|\b(?:no|0|zero|without) (?:errors?|failures?)\b|\b(?:errors?|failures?|failed)\s*[=:]\s*0\b"
    r"|\b0 failed\b|\bif (?:it |this )?fails\b)"
)
# A measurement named "error": "Top1 error: 100.0000", "val_error=0.231", "error rate 12.5%", "mean squared
# error: 0.0042". A number with a fractional part after the word is a metric a training loop logs
# (an error code is an integer: "error 4", "Error: 2"), so the span is blanked before the words are
# looked for; the rest of the line still counts ("ValueError: ... error 1.5" stays an error line).
_METRIC = re.compile(
    r"(?<![A-Za-z])(?:[Ee]rr(?:or)?s?|ERR(?:OR)?)(?: rate)?\s*[:=]?\s*[-+]?\d*\.\d+(?:[eE][-+]?\d+)?%?"
)
# A check that reports it passed (a node health check's "SUCCESS: nhc: Health check passed:
# check_gpu_xid: GPU XID error check passed.", a test runner's "PASSED") says an error was looked for
# and not found; a line that says something failed as well stays an error line.
_PASSED = re.compile(r"(?i)\b(?:checks?|tests?) passed\b|^\s*(?:SUCCESS|PASS(?:ED)?)\b")
_FAILED = re.compile(r"(?i)fail")
_NCCL_WARN = "NCCL WARN"
# A stack frame, or the source line a traceback prints under one ("    raise CalledProcessError(...)"):
# its words are code, not a message.
_FRAME = re.compile(r'\s*(?:File "|frame #\d+:|#\d+ 0x|at [\w.$<>]+\()|\s+raise\s')
_PATH = re.compile(r"[^\s'\"():,\[\]]*/[^\s'\"():,\[\]]*")
MAX_UNRECOGNISED_LEN = 4000


def is_error_line(text: str) -> bool:
    """True when ``text`` (prefixes removed) reads as an error that no signature recognised."""
    if len(text) > MAX_UNRECOGNISED_LEN:
        text = text[:MAX_UNRECOGNISED_LEN]
    if _NCCL_WARN in text:
        return True  # NCCL prints WARN only when something went wrong
    if _FRAME.match(text):
        return False  # a stack frame: the words are in a path or a function name
    bare = _METRIC.sub(
        " ", _PATH.sub(" ", text)
    )  # "errors/__init__.py", "/data/failed_runs/", "error: 0.25": not words of the message
    if _ERROR_WORD.search(bare) is None:
        return False
    if _PASSED.search(bare) is not None and _FAILED.search(bare) is None:
        return False
    return _NOT_AN_ERROR.search(bare) is None
