"""Live attribution: follow a running job's log directory and say what broke while it breaks.

The batch pipeline answers after the job is dead; at scale the first fault is followed by up to
ten minutes of silence before the NCCL watchdog times out and the cascade starts. ``watch``
reads each file's new bytes once as it grows (``tail``), keeps the parse's state between reads
(``state``), re-runs only the cheap later stages of the one pipeline
(``firstfault.pipeline.analyze_parsed``) over everything seen so far, and reads the silence of a
rank whose progress stopped (``silence``). It sits beside the pipeline and calls it.
"""

from __future__ import annotations

from firstfault.live.silence import SilenceSettings, SilentRanks
from firstfault.live.state import LiveState
from firstfault.live.watch import Update, WatchOptions, watch

__all__ = ["LiveState", "SilenceSettings", "SilentRanks", "Update", "WatchOptions", "watch"]
