"""A layout read from the job's own launch script (sbatch + srun + torchrun + trainer flags).

The audit's layout is usually written by hand; but the settings that matter are already in the
script that launches the job, so ``firstfault audit job.sbatch`` reads them from there:

* ``#SBATCH --nodes`` / ``-N`` (hosts), ``--gpus-per-node`` / ``--ntasks-per-node`` and
  torchrun's ``--nproc-per-node`` (GPUs per host; torchrun's wins);
* ``srun --kill-on-bad-exit`` / ``-K`` (srun's own default is off), ``torchrun --max-restarts``;
* ``export``ed variables: ``TORCH_NCCL_TRACE_BUFFER_SIZE`` (or ``TORCH_FR_BUFFER_SIZE``),
  ``TORCH_NCCL_DUMP_ON_TIMEOUT``, ``NCCL_DEBUG``, ``TORCH_NCCL_ENABLE_MONITORING``,
  ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``, ``NCCL_IB_TIMEOUT``, ``NCCL_IB_RETRY_CNT``;
* Megatron-LM's flags (``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``,
  ``--context-parallel-size``, ``--expert-model-parallel-size``,
  ``--distributed-timeout-minutes``) and firstfault's own workload's (``--tp --pp --cp --ep
  --pg-timeout``).

What the script does not say keeps its default; a key the script cannot hold (leaf size, spares,
checkpoint cost) can be added with a YAML file given beside it (``--with``), which wins.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

_SBATCH = re.compile(r"^#SBATCH\s+(.*)$")
_EXPORT = re.compile(r"\b([A-Z][A-Z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;'\"]+)")
_ENV_BOOL = {"1": True, "true": True, "0": False, "false": False}
# (flag spellings) -> (section, key, kind): kind "int", "minutes" (to seconds) or "seconds"
_FLAGS: dict[tuple[str, ...], tuple[str, str, str]] = {
    ("--tensor-model-parallel-size", "--tp"): ("parallel", "tp", "int"),
    ("--pipeline-model-parallel-size", "--pp"): ("parallel", "pp", "int"),
    ("--context-parallel-size", "--cp"): ("parallel", "cp", "int"),
    ("--expert-model-parallel-size", "--ep"): ("parallel", "ep", "int"),
    ("--distributed-timeout-minutes",): ("timeouts", "nccl_timeout_s", "minutes"),
    ("--pg-timeout",): ("timeouts", "nccl_timeout_s", "seconds"),
    ("--max-restarts", "--max_restarts"): ("launcher", "max_restarts", "int"),
}


def _tokens(text: str) -> list[str]:
    """Shell words of the script's command lines (continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n", " ", text)
    out: list[str] = []
    for line in joined.splitlines():
        if line.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        for w in words:  # `bash -c '...'` holds the real command line: split it again
            try:
                out.extend(shlex.split(w) if " " in w else [w])
            except ValueError:
                out.extend(w.split())
    return out


def _flag_values(tokens: list[str]) -> dict[str, str]:
    vals: dict[str, str] = {}
    for i, t in enumerate(tokens):
        if not t.startswith("-"):
            continue
        name, eq, val = t.partition("=")
        if not eq and i + 1 < len(tokens):
            val = tokens[i + 1]
        vals[name] = val  # the last one wins, as in an argument parser
    return vals


def _sbatch(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _SBATCH.match(line.strip())
        if m:
            out.update(_flag_values(m[1].split()))
    return out


def _env(text: str, doc: dict[str, Any]) -> None:
    env = {k: v.strip("'\"") for k, v in _EXPORT.findall(text)}
    ev = doc.setdefault("evidence", {})
    to = doc.setdefault("timeouts", {})
    fr = env.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or env.get("TORCH_FR_BUFFER_SIZE")
    if fr is not None and fr.isdigit():
        ev["flight_recorder_entries"] = int(fr)
    if env.get("TORCH_NCCL_DUMP_ON_TIMEOUT", "").lower() in _ENV_BOOL:
        ev["dump_on_timeout"] = _ENV_BOOL[env["TORCH_NCCL_DUMP_ON_TIMEOUT"].lower()]
    if "NCCL_DEBUG" in env:
        ev["nccl_debug"] = env["NCCL_DEBUG"]
    if env.get("TORCH_NCCL_ENABLE_MONITORING", "").lower() in _ENV_BOOL:
        to["heartbeat"] = _ENV_BOOL[env["TORCH_NCCL_ENABLE_MONITORING"].lower()]
    for var, key in (
        ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "heartbeat_timeout_s"),
        ("NCCL_IB_TIMEOUT", "ib_timeout"),
        ("NCCL_IB_RETRY_CNT", "ib_retry_cnt"),
    ):
        if env.get(var, "").isdigit():
            to[key] = int(env[var]) if key != "heartbeat_timeout_s" else float(env[var])


def _num(val: str, kind: str) -> int | float | None:
    try:
        x = float(val)
    except ValueError:
        return None
    if kind == "minutes":
        return x * 60.0
    if kind == "seconds":
        return x
    return int(x) if x.is_integer() else None


def layout_doc_from_script(text: str) -> dict[str, Any]:
    """A layout document (for ``layout_from_dict``) from a launch script's text."""
    sb = _sbatch(text)
    tokens = _tokens(text)
    flags = _flag_values(tokens)
    doc: dict[str, Any] = {}
    nodes = sb.get("--nodes") or sb.get("-N")
    if nodes and nodes.split("-")[0].isdigit():
        doc["hosts"] = int(nodes.split("-")[0])
    per = flags.get("--nproc-per-node") or flags.get("--nproc_per_node") or sb.get("--gpus-per-node")
    per = per or sb.get("--ntasks-per-node")
    if per and per.split(":")[-1].isdigit():
        doc["gpus_per_host"] = int(per.split(":")[-1])
    for names, (section, key, kind) in _FLAGS.items():
        val = next((flags[n] for n in names if n in flags), None)
        x = None if val is None else _num(val, kind)
        if x is not None:
            doc.setdefault(section, {})[key] = x
    if "srun" in tokens:
        doc.setdefault("launcher", {})["kill_on_bad_exit"] = any(
            t in ("-K", "--kill-on-bad-exit") or t.startswith(("--kill-on-bad-exit=1", "-K1")) for t in tokens
        )
    _env(text, doc)
    return {k: v for k, v in doc.items() if v != {}}
