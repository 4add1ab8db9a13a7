"""Every tunable threshold in one object, each with the reason for its value.

Two kinds: :class:`Reasoning` knobs decide verdicts (how close two times must be to tie, how
long a silence makes a stall); :class:`Limits` bound what one input may cost (bytes, members,
lines, a claimed world size). Stages call :func:`current` at the moment they use a value, so a
caller (a service, a test, a study of a threshold) can run with other values inside
``with use(dataclasses.replace(current(), ...))``. docs/security.md lists the limits and the
warning each one gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reasoning:
    """Knobs that decide verdicts."""

    #: Two candidates closer than this (s) are a near-tie: confidence drops, lower layers win.
    #: One second is the resolution of torchrun's failure records and of syslog.
    near_tie_s: float = 1.0
    #: Copies of one line (``--tee``) with exact times this close (s) are one fact.
    dup_window_s: float = 2.0
    #: ... and with only inherited times (a lower bound, maybe from another host's clock).
    inherited_dup_window_s: float = 300.0
    #: A per-host clock "offset" beyond this (s) is a second wave of failures, not a clock.
    max_clock_shift_s: float = 120.0
    #: Host evidence this long (s) before a rank's failure on the same host can explain it
    #: (the OOM killer, an Xid that takes minutes to surface in a hung collective).
    host_explains_window_s: float = 300.0
    #: The job window's margins (s): host evidence a little before the first job line may still be
    #: the cause (a GPU lost while the container started); tear-down lines trail the last one.
    window_margin_before_s: float = 300.0
    window_margin_after_s: float = 300.0
    #: A benign-unless-followed host event needs an error on its host within this (s).
    consequence_window_s: float = 300.0
    #: With no progress line at all, a failure this soon (s) after a recorded start is a start-up one.
    pretrain_max_s: float = 600.0
    #: A rank's progress must stop this many steps behind its peers' to count as stalled first.
    stall_steps: int = 3
    #: Silence this long (s) before a time limit is a stall, not a job that ran out of time.
    stall_before_limit_s: float = 60.0
    #: A straggler's own step time is at least this many times its peers' after the change point...
    straggler_effect: float = 1.3
    #: ... with at least this share of those steps ``straggler_slow_step`` times slower ...
    straggler_sustained: float = 0.8
    straggler_slow_step: float = 1.15
    #: ... for at least this many steps, and this many times slower than any other rank.
    straggler_min_steps: int = 5
    straggler_alone: float = 1.2


@dataclass(frozen=True)
class Limits:
    """What one input may cost; past a limit the input is refused or cut, with a warning."""

    #: Bytes an archive may unpack to, members it may hold, and its unpacked/packed ratio.
    archive_bytes: int = 8 * 1024**3
    #: (a 16,384-rank job leaves ~35,000 files; each member costs ~0.2 ms of CPU to unpack and sniff,
    #: so the cap bounds a many-member archive to ~20 CPU seconds)
    archive_members: int = 100_000
    archive_ratio: int = 200
    #: A log line longer than this (bytes) is cut (a binary blob or a minified dump, not a message).
    max_line: int = 64 * 1024
    #: Bytes of a flight-recorder dump read before it is refused.
    fr_dump_bytes: int = 512 * 1024 * 1024
    #: Entries of one dump analysed (the most recent ones). torch keeps TORCH_NCCL_TRACE_BUFFER_SIZE
    #: entries (2,000 by default, rarely over 100,000); a pickle that repeats one entry by reference
    #: can claim millions in a few MB, and each analysed entry costs memory, not file size.
    fr_entries: int = 200_000
    #: Memory one dump may take while it is decoded, above what the process held before. File size
    #: alone bounds nothing: one byte of pickle (EMPTY_DICT, DUP) builds up to ~70 bytes of objects.
    fr_decode_bytes: int = 512 * 1024 * 1024
    #: A claimed world size above this is not believed (ranks are sparse facts, not a range).
    max_world: int = 262_144


@dataclass(frozen=True)
class Settings:
    reasoning: Reasoning = field(default_factory=Reasoning)
    limits: Limits = field(default_factory=Limits)


_current = Settings()


def current() -> Settings:
    """The settings in force."""
    return _current


@contextmanager
def use(settings: Settings) -> Iterator[Settings]:
    """Run a block with other settings (restored after it)."""
    global _current
    before, _current = _current, settings
    try:
        yield settings
    finally:
        _current = before
