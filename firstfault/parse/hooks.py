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
from firstfault.vocab import Event, TsQuality
from firstfault.vocab.identity import strip_prefixes

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
    above = hit.before(8)
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
    """A launcher's "exited on signal N": the exit record of a process killed by signal N.

    Written as torchrun writes a signal death (``exitcode = -N``, ``signame = SIGxxx``), so every
    stage reads one kind of exit record whichever launcher printed it.
    """
    num = ev.fields.get("signum", "")
    if not num.isdigit() or "exitcode" in ev.fields:
        return
    ev.fields["exitcode"] = f"-{num}"
    with contextlib.suppress(ValueError):
        ev.fields["signame"] = signal.Signals(int(num)).name


def command_local_rank(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    """The local rank in a dead child's command list ("'--local_rank=1'"), on its line or, when a
    terminal wrapped the list, on the lines above back to where the list starts."""
    m = _CMD_LOCAL_RANK.search(hit.text)
    if m is None and _CMD_START not in hit.text:
        for line in reversed(hit.before(CMD_LINES)):
            m = _CMD_LOCAL_RANK.search(line)
            if m is not None or _CMD_START in line:
                break
    if m is not None and "local_rank" not in ev.fields:
        ev.fields["local_rank"] = m["local_rank"]


def _local_rank_field(ev: Event, hit: Hit, ctx: ParseContext) -> None:
    if ev.rank is None and "local_rank" in ev.fields:
        ev.local_rank = int(ev.fields["local_rank"])
        ev.rank = ev.local_rank


HOOKS: dict[str, Callable[[Event, Hit, ParseContext], None]] = {
    "torchelastic_failure_record": torchelastic_failure_record,
    "faulthandler_stack": faulthandler_stack,
    "signal_exit": signal_exit,
    "command_local_rank": command_local_rank,
}


def apply(name: str | None, ev: Event, hit: Hit, ctx: ParseContext) -> None:
    if name:
        fn = HOOKS.get(name)
        if fn is None:
            ctx.warn(f"signature {ev.signature}: unknown hook {name!r}")
        else:
            fn(ev, hit, ctx)
    _local_rank_field(ev, hit, ctx)
