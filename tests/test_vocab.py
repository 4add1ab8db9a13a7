"""Unit tests of the vocabulary (firstfault/vocab/): one time format, one error family, settings,
and enums that serialise as the verdict schema's closed sets."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from firstfault.flightrec import DumpLoadError, UnsafePickleError
from firstfault.vocab import (
    Action,
    BundleError,
    Category,
    FirstfaultError,
    InputError,
    Role,
    Severity,
    SignatureError,
    TsQuality,
    settings,
)
from firstfault.vocab.identity import strip_prefixes
from firstfault.vocab.timefmt import iso, iso_ns

SCHEMA = json.loads((Path(__file__).parent.parent / "firstfault/schema/verdict.v1.json").read_text())


def test_one_time_format_for_seconds_and_nanoseconds() -> None:
    assert iso(1_764_850_587.015) == "2025-12-04T12:16:27.015Z"
    assert iso_ns(1_764_850_587_015_000_000) == "2025-12-04T12:16:27.015Z"
    assert iso(None) == "-" and iso(1e20) == "-"  # out of range prints, never raises
    assert iso_ns(0) is None and iso_ns(10**30) is None


def test_every_deliberate_error_is_a_firstfault_error() -> None:
    assert BundleError is InputError
    for exc in (InputError, SignatureError, DumpLoadError, UnsafePickleError):
        assert issubclass(exc, FirstfaultError), exc
    assert issubclass(DumpLoadError, InputError)  # a bad dump is bad input: exit 2, one line


def test_settings_are_swapped_for_a_block_and_restored() -> None:
    before = settings.current()
    tighter = dataclasses.replace(before, reasoning=dataclasses.replace(before.reasoning, max_clock_shift_s=5.0))
    with settings.use(tighter):
        assert settings.current().reasoning.max_clock_shift_s == 5.0
    assert settings.current() is before


def test_closed_sets_are_the_published_schemas() -> None:
    assert {m.value for m in Category} == set(SCHEMA["$defs"]["category"]["enum"])
    assert {m.value for m in Action} == set(SCHEMA["properties"]["verdict"]["properties"]["action"]["enum"])


def test_enums_are_plain_strings_in_json() -> None:
    assert json.dumps([Role.ROOT, Severity.ERROR, TsQuality.EXACT]) == '["root", "error", "exact"]'


def test_rank_prefixes_of_every_launcher_are_stripped() -> None:
    # (text, local rank, global rank): torch's [rankN]:, torchrun --tee's [defaultN]:, srun -l's "N: "
    assert strip_prefixes("[rank3]: RuntimeError: x") == ("RuntimeError: x", None, 3)
    assert strip_prefixes("[default1]:[rank5]: boom") == ("boom", 1, 5)
    assert strip_prefixes("2: Traceback (most recent call last):") == ("Traceback (most recent call last):", None, 2)
    assert strip_prefixes("2: x", srun=False) == ("2: x", None, None)
    # mpirun --tag-output (Horovod, nccl-tests): "[jobid,rank]<stream>:", a collector's time before it
    assert strip_prefixes("[1,3]<stdout>:Rank 3 is receiving data") == ("Rank 3 is receiving data", None, 3)
    stamped = "2019-06-02T16:13:44.884Z: [1,12]<stderr>:node:815:864 [0] NCCL WARN x"
    assert strip_prefixes(stamped) == ("node:815:864 [0] NCCL WARN x", None, 12)
    # a tqdm bar the next line was printed onto (its carriage returns lost in the capture)
    bar = "  0%|          | 0/60 [00:00<?, ?it/s][rank0]:[E ProcessGroupNCCL.cpp:563] boom"
    assert strip_prefixes(bar) == ("[E ProcessGroupNCCL.cpp:563] boom", None, 0)
    # pdsh's "host: " (DeepSpeed's / Accelerate's multi-node runs), before any of the others
    pdsh = "192.168.13.81: [rank19]:[E808 10:31:07.406255799 ProcessGroupNCCL.cpp:1895] boom"
    assert strip_prefixes(pdsh) == ("[E808 10:31:07.406255799 ProcessGroupNCCL.cpp:1895] boom", None, 19)
    timed = "trainer-2: [2024-02-24 04:37:51,021] [ERROR] [launch.py:321:sigkill_handler] x"
    assert strip_prefixes(timed)[0] == "[2024-02-24 04:37:51,021] [ERROR] [launch.py:321:sigkill_handler] x"
    # a log collector's own time before a rank's prefix (a wrapper's, kubectl logs --timestamps'):
    # real pastes (corpus qwen3coder-174 and ace-851)
    oom = "2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: CUDA out of memory."
    assert strip_prefixes(oom) == ("torch.OutOfMemoryError: CUDA out of memory.", None, 3)
    k8s = "2026-02-18T10:48:25.681Z [rank7]:[E218 10:48:25.033625188 ProcessGroupNCCL.cpp:632] x"
    assert strip_prefixes(k8s) == ("[E218 10:48:25.033625188 ProcessGroupNCCL.cpp:632] x", None, 7)
    assert strip_prefixes("2026-02-18T10:48:25Z [default2]:boom") == ("boom", 2, None)
    # ... and only there: a logger's own time before its message stays the line's
    logged = "2024-11-20 14:37:16 [INFO] step 3"
    assert strip_prefixes(logged) == (logged, None, None)
    # ... but an exception's name before a bracket is not a host (no digit, hyphen or address)
    gloo = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer"
    assert strip_prefixes(gloo) == (gloo, None, None)


def test_a_torchrun_agents_line_under_srun_labels_the_agent_whatever_its_path() -> None:
    """torch logs the module's path as it was imported: plain in a system install, behind a
    virtualenv's prefix in a real run under srun (``srun -l torchrun``). Either way the srun label
    is the node's torchrun agent, not a rank."""
    from firstfault.vocab.identity import srun_labels_agent

    venv = (
        "0: E1207 06:16:39.953000 25265 .venv/lib/python3.11/site-packages/torch/distributed/elastic/"
        "multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 25272) of binary: /x/python"
    )
    plain = "245: W1202 10:01:02.123000 245 torch/distributed/run.py:793] Setting OMP_NUM_THREADS"
    assert srun_labels_agent(venv) and srun_labels_agent(plain)
    assert not srun_labels_agent("1: step 4/20 loss 2.3")
