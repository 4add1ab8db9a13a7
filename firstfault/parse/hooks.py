"""Named enrichment hooks a signature may ask for (``hook = "..."`` in its TOML).

Some evidence spans lines: torchrun's failure record puts rank, host and time on the lines
*above* the ``exitcode`` line. A hook reads those lines from the block in memory and fills
the event's fields. Hooks stay few and generic; the wording they match is still data.
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
from collections.abc import Callable

from firstfault.parse.base import ParseContext
from firstfault.parse.stream import Hit
from firstfault.parse.timestamps import parse_timestamp
from firstfault.vocab import Event, TsQuality, settings
from firstfault.vocab.identity import rank_numbers, strip_prefixes

_REC_RANK = re.compile(r"^\s*rank\s*: (?P<rank>\d+) \(local_rank: (?P<local_rank>\d+)\)")
_REC_HOST = re.compile(r"^\s*host\s*: (?P<host>\S+)")
_REC_TIME = re.compile(r"^\s*time\s*: (?P<time>\S+)")
_REC_INDEX = re.compile(r"^\s*\[(?P<idx>\d+)\]:\s*$")
# DeepSpeed's launcher passes each child "--local_rank=N" and prints the child's command list when
# it dies (deepspeed/launcher/launch.py sigkill_handler: f"{cmd} exits with return code = ...")
_CMD_LOCAL_RANK = re.compile(r"'--local_rank=(?P<local_rank>\d+)'")
_CMD_START = "sigkill_handler] ["
CMD_LINES = 12  # a terminal wraps a long command list over a few lines


def torchelastic_failure_record(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """Fill rank/host/time of one ChildFailedError failure entry from the lines above it."""
    # the lines as printed may carry a launcher's label ("1:   rank      : 3 (local_rank: 1)" under srun)
    above = [strip_prefixes(line)[0] for line in hit.before(8)]
    for i, line in enumerate(reversed(above)):
        if m := _REC_RANK.match(line):
            ev.rank, ev.local_rank = int(m["rank"]), int(m["local_rank"])
        elif m := _REC_HOST.match(line):
            if m["host"] not in ("localhost", "<N/A>"):
                ev.host = m["host"]
        elif m := _REC_TIME.match(line):
            ts = parse_timestamp(m["time"].replace("_", "T"))
            if ts is not None:
                ev.ts, ev.ts_quality = ts, TsQuality.COARSE
        elif _REC_INDEX.match(line):
            nxt = above[-i - 2] if i + 2 <= len(above) else ""
            ev.fields["torchrun_root"] = "1" if "Root Cause (first observed failure)" in nxt else "0"
            break


_FH_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def faulthandler_stack(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """The frames below a faulthandler dump header: where the thread was when signalled."""
    frames: list[str] = []
    for raw in hit.after(24):
        line = strip_prefixes(raw)[0]
        m = _FH_FRAME.match(line)
        if not m:
            if frames or line.strip():
                break
            continue
        frames.append(sys.intern(f"{m['file']}:{m['line']} in {m['func']}"))  # 16k ranks, one stack
    if frames:
        ev.context = tuple(frames)
        ev.fields["top_frame"] = frames[0]


def signal_exit(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """A launcher's "exited on signal N" (or "with signal SIGKILL"): the exit record of a process
    killed by that signal.

    Written as torchrun writes a signal death (``exitcode = -N``, ``signame = SIGxxx``), so every
    stage reads one kind of exit record whichever launcher printed it.
    """
    num = ev.fields.get("signum", "")
    name = ev.fields.get("signame", "")
    if not num and name in signal.Signals.__members__:  # "terminated with signal SIGKILL"
        num = str(signal.Signals[name].value)
    if not num.isdigit() or "exitcode" in ev.fields:
        return
    ev.fields["exitcode"] = f"-{num}"
    with contextlib.suppress(ValueError):
        ev.fields["signame"] = signal.Signals(int(num)).name


# strsignal()'s words for the fatal signals srun names ("srun: error: node01: task 1: Aborted")
_STRSIGNAL = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}


def strsignal_exit(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """srun's "task N: Aborted" (strsignal of the task's fatal signal) as an exit record."""
    name = _STRSIGNAL.get(ev.fields.get("signal", ""))
    if name is not None:
        ev.fields["signame"] = name
        signal_exit(ev, hit, ctx)


_MPI_EXIT_CODE = re.compile(r"^\s*Exit code:\s+(?P<code>-?\d+)\s*$")


def mpirun_exit_code(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """mpirun's "Process name: [[J,S],R]" and, on the line below, "Exit code: N": the exit record
    of MPI rank R, written as torchrun writes one (``exitcode``), so every stage reads one kind."""
    for raw in hit.after(2):
        m = _MPI_EXIT_CODE.match(strip_prefixes(raw)[0])
        if m is not None:
            ev.fields["exitcode"] = m["code"]
            return


def command_local_rank(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """The local rank in the command list of DeepSpeed's "... exits with return code = N"
    ("'--local_rank=3'"), on its line or, when a terminal wrapped the list, on the lines above back
    to where the list starts: the exit's process only when that rank is 0.

    Why: deepspeed/launcher/launch.py's ``sigkill_handler`` logs ``f"{cmd} exits with return code
    = {last_return_code}"`` with ``cmd`` the variable its spawn loop left behind, the command of the
    *last* process it started (local rank ``num_local_procs - 1``), whichever process failed
    (DeepSpeed 0.9 to 0.19; a real run of tools/realjobs/make_deepspeed_set.py: rank 1 SIGKILLed,
    the line names "--local_rank=3"). So the list names the failed process only where it names
    local rank 0, the one process of its node; otherwise it says how many the node ran
    (``local_procs``), not which one died."""
    m = _CMD_LOCAL_RANK.search(hit.text)
    if m is None and _CMD_START not in hit.text:
        for line in reversed(hit.before(CMD_LINES)):
            m = _CMD_LOCAL_RANK.search(line)
            if m is not None or _CMD_START in line:
                break
    if m is None or "local_rank" in ev.fields:
        return
    if int(m["local_rank"]) == 0:
        ev.fields["local_rank"] = "0"
    else:
        ev.fields["local_procs"] = str(int(m["local_rank"]) + 1)


def _local_rank_field(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    if ev.rank is None and "local_rank" in ev.fields:
        ev.local_rank = int(ev.fields["local_rank"])
        ev.rank = ev.local_rank


# Horovod's stall report, in each version's words: "[missing ranks: 2, 5]" (0.14-0.19), "[ready
# ranks: 0, 1, 3]" (<= 0.13), or a "Missing ranks:"/"Stalled ranks:" header and one "N: [...]" (a
# "!" when it will shut down) line per missing rank below the warning (0.20+).
_HVD_MISSING = re.compile(r"\[missing ranks: ?(?P<ranks>[\d, ]+)\]")
_HVD_READY = re.compile(r"\[ready ranks: ?(?P<ranks>[\d, ]+)\]")
_HVD_HEADER = re.compile(r"(?:Missing|Stalled) ranks:\s*$")
_HVD_RANK_LINE = re.compile(r"^\s*(?P<rank>\d{1,7})!?: \[")
HVD_LINES = 64  # the per-rank lines below a 0.20+ warning (one per missing rank)


def _ranks(text: str) -> set[int]:
    """A Horovod list's ranks (see ``rank_numbers``: a huge number is a claim, not a rank)."""
    return set(rank_numbers(text, settings.current().limits.max_world))


def horovod_stall(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """The ranks Horovod's coordinator waits for, as ``awaited_rank`` (the victims' account).

    The coordinator is rank 0 (the stall inspector runs there only), so a line without a rank
    prefix is rank 0's. Ready lists name the ranks that *did* submit: the others below the world
    size are missing (with no world size known, those below the highest ready rank: ranks are
    numbered from 0). Each op of the warning has its own list; a rank missing from any is awaited."""
    text = hit.text
    missing: set[int] = set()
    for m in _HVD_MISSING.finditer(text):
        missing |= _ranks(m["ranks"])
    readies = [_ranks(m["ranks"]) for m in _HVD_READY.finditer(text)]
    if any(readies):
        world = ctx.topology.world_size or max(max(r) for r in readies if r) + 1
        for ready in readies:
            missing |= set(range(world)) - ready
    below = hit.after(HVD_LINES + 1)
    if _HVD_HEADER.search(text) is None:  # the header on a line of its own, right below the warning
        below = below[1:] if below and _HVD_HEADER.search(strip_prefixes(below[0])[0]) else []
    for line in below:
        listed = _HVD_RANK_LINE.match(strip_prefixes(line, srun=False)[0])
        if listed is None:
            break
        missing |= _ranks(listed["rank"])
    if missing:
        ev.fields["awaited_rank"] = ",".join(str(r) for r in sorted(missing))
    if ev.rank is None and 0 not in missing:
        ev.rank = 0  # (when rank 0 is itself missing, its checker thread is not its training: left unplaced)


HOOKS: dict[str, Callable[[Event, Hit, ParseContext], None]] = {
    "torchelastic_failure_record": torchelastic_failure_record,
    "faulthandler_stack": faulthandler_stack,
    "signal_exit": signal_exit,
    "strsignal_exit": strsignal_exit,
    "command_local_rank": command_local_rank,
    "mpirun_exit_code": mpirun_exit_code,
    "horovod_stall": horovod_stall,
}


def apply(name: str | None, ev: Event, hit: Hit, ctx: ParseContext) -> None:
    if name:
        fn = HOOKS.get(name)
        if fn is None:
            ctx.warn(f"signature {ev.signature}: unknown hook {name!r}")
        else:
            fn(ev, hit, ctx)
    _local_rank_field(ev, hit, ctx)
