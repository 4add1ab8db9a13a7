"""The audited job's layout: machines, parallelism, timeouts, evidence settings, checkpoints, spares.

An audit answers "what happens when X breaks" *before* the job runs, so its whole input is a
description a person can write or a scheduler can produce: a YAML or JSON document with the
sections below. Every field has the default of the software it stands for (torch, NCCL, SLURM),
so an omitted field means "left as shipped" and the findings judge that. Unknown keys, wrong
types and impossible shapes are refused with one line naming the key (an audit built on a
misread layout would be worse than none).

Sections (all optional except ``hosts``)::

    hosts: 2048              gpus_per_host: 8         nics_per_host: 8 (rail-optimised: NIC k serves GPU k)
    hosts_per_leaf: 32       hosts_per_rack: 0 (0: not given)   host_prefix: gpu   name: ...
    parallel:   {tp, pp, cp, ep, dp (0: what is left), order: "tp-cp-ep-dp-pp"}
    timeouts:   {nccl_timeout_s: 600, heartbeat: true, heartbeat_timeout_s: 480,
                 ib_timeout: 20, ib_retry_cnt: 7, slurmd_timeout_s: 300}
    evidence:   {flight_recorder_entries: 0, dump_on_timeout: false, nccl_debug: "",
                 kernel_logs: false, scheduler_logs: false}
    launcher:   {kill_on_bad_exit: true, max_restarts: 0}
    checkpoint: {interval_s: 3600, write_s: 60, restart_s: 600}
    spares:     {nodes: 0, repair_s: 14400}
    step_time_s: 2.0
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from firstfault.vocab.errors import InputError

DIMS = ("tp", "cp", "dp", "pp")  # the four orthogonal degrees; EP splits DP (Megatron's expert generator)
DEFAULT_ORDER = "tp-cp-ep-dp-pp"  # Megatron-LM's default ``--parallel-order`` (parallel_state.RankGenerator)
MAX_WORLD = 1 << 20


@dataclass(frozen=True, slots=True)
class Parallel:
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int = 0
    order: str = DEFAULT_ORDER


@dataclass(frozen=True, slots=True)
class Timeouts:
    # torch ProcessGroupNCCL's default timeout (c10d kProcessGroupNCCLDefaultTimeout, 10 min)
    nccl_timeout_s: float = 600.0
    # TORCH_NCCL_ENABLE_MONITORING (default on) and TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (default 480)
    heartbeat: bool = True
    heartbeat_timeout_s: float = 480.0
    # NCCL_IB_TIMEOUT (default 20: 4.096 us * 2^20 = 4.3 s a try) and NCCL_IB_RETRY_CNT (default 7)
    ib_timeout: int = 20
    ib_retry_cnt: int = 7
    # slurm.conf SlurmdTimeout (default 300 s): when slurmctld sets a silent node DOWN
    slurmd_timeout_s: float = 300.0


@dataclass(frozen=True, slots=True)
class Evidence:
    # TORCH_NCCL_TRACE_BUFFER_SIZE (0, the default, leaves the flight recorder off)
    flight_recorder_entries: int = 0
    # TORCH_NCCL_DUMP_ON_TIMEOUT (off unless set)
    dump_on_timeout: bool = False
    # NCCL_DEBUG ("" = unset: NCCL prints nothing, not even its WARN lines)
    nccl_debug: str = ""
    kernel_logs: bool = False  # dmesg / journal of every host collected with the job's logs
    scheduler_logs: bool = False  # slurmctld log and sacct collected


@dataclass(frozen=True, slots=True)
class Launcher:
    kill_on_bad_exit: bool = True  # srun --kill-on-bad-exit=1
    max_restarts: int = 0  # torchrun --max-restarts


@dataclass(frozen=True, slots=True)
class Checkpoint:
    interval_s: float = 3600.0
    write_s: float = 60.0  # time the job stops to write one checkpoint (delta in Young/Daly)
    restart_s: float = 600.0  # requeue + start-up + load, with a healthy replacement at hand


@dataclass(frozen=True, slots=True)
class Spares:
    nodes: int = 0
    repair_s: float = 4 * 3600.0  # without a spare: time until the bad host is replaced (an assumption)


@dataclass(frozen=True, slots=True)
class Layout:
    hosts: int
    gpus_per_host: int = 8
    nics_per_host: int = 0  # 0: one per GPU
    hosts_per_leaf: int = 32
    hosts_per_rack: int = 0
    step_time_s: float = 2.0
    name: str = ""
    host_prefix: str = "gpu"  # host names: prefix + index from 1, zero-padded to 4 digits (gpu0001)
    parallel: Parallel = Parallel()
    timeouts: Timeouts = Timeouts()
    evidence: Evidence = Evidence()
    launcher: Launcher = Launcher()
    checkpoint: Checkpoint = Checkpoint()
    spares: Spares = Spares()

    @property
    def world(self) -> int:
        return self.hosts * self.gpus_per_host

    @property
    def ib_retry_s(self) -> float:
        """How long NCCL keeps retrying an IB send before the completion error: 4.096 us x
        2^NCCL_IB_TIMEOUT per try, NCCL_IB_RETRY_CNT + 1 tries (NCCL environment docs)."""
        t = self.timeouts
        return 4.096e-6 * (1 << t.ib_timeout) * (t.ib_retry_cnt + 1)

    def host(self, i: int) -> str:
        return f"{self.host_prefix}{i + 1:0{max(4, len(str(self.hosts)))}d}"

    def order(self) -> tuple[str, ...]:
        return tuple(d for d in self.parallel.order.split("-") if d != "ep")

    def dp(self) -> int:
        p = self.parallel
        return p.dp or self.world // (p.tp * p.pp * p.cp)


_SECTIONS: dict[str, type] = {
    "parallel": Parallel,
    "timeouts": Timeouts,
    "evidence": Evidence,
    "launcher": Launcher,
    "checkpoint": Checkpoint,
    "spares": Spares,
}


def _value(where: str, raw: Any, default: Any) -> Any:
    """``raw`` checked against the type of ``default`` (bool is not an int, an int is a float)."""
    if isinstance(default, bool):
        if not isinstance(raw, bool):
            raise InputError(f"layout: {where} must be true or false, not {raw!r}")
        return raw
    if isinstance(default, int):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise InputError(f"layout: {where} must be an integer, not {raw!r}")
        if raw < 0:
            raise InputError(f"layout: {where} must be >= 0")
        return raw
    if isinstance(default, float):
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            raise InputError(f"layout: {where} must be a number, not {raw!r}")
        if raw < 0:
            raise InputError(f"layout: {where} must be >= 0")
        return float(raw)
    if not isinstance(raw, str):
        raise InputError(f"layout: {where} must be a string, not {raw!r}")
    return raw


def _section(name: str, cls: type, raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise InputError(f"layout: {name} must be a mapping")
    defaults = cls()
    known = {f.name for f in fields(cls)}
    kw: dict[str, Any] = {}
    for key, val in raw.items():
        if key not in known:
            raise InputError(f"layout: unknown key {name}.{key} (known: {', '.join(sorted(known))})")
        kw[key] = _value(f"{name}.{key}", val, getattr(defaults, key))
    return cls(**kw)


def layout_from_dict(doc: Any) -> Layout:
    """A checked :class:`Layout` from a parsed document; :class:`InputError` on anything wrong."""
    if not isinstance(doc, dict):
        raise InputError("layout: the document must be a mapping (hosts: ..., parallel: ...)")
    if "hosts" not in doc:
        raise InputError("layout: 'hosts' is required")
    top = {f.name: f for f in fields(Layout)}
    probe = Layout(hosts=1)
    kw: dict[str, Any] = {}
    for key, val in doc.items():
        if key in _SECTIONS:
            kw[key] = _section(key, _SECTIONS[key], val)
        elif key in top:
            kw[key] = _value(key, val, getattr(probe, key))
        else:
            raise InputError(f"layout: unknown key {key!r} (known: {', '.join(sorted(top))})")
    lay = Layout(**kw)
    check(lay)
    return lay


def check(lay: Layout) -> None:
    """Refuse shapes no job could have (the message names what does not fit)."""
    p = lay.parallel
    if lay.hosts < 1 or lay.gpus_per_host < 1:
        raise InputError("layout: hosts and gpus_per_host must be >= 1")
    if lay.world > MAX_WORLD:
        raise InputError(f"layout: {lay.world} ranks is more than the {MAX_WORLD} an audit models")
    if lay.hosts_per_leaf < 1:
        raise InputError("layout: hosts_per_leaf must be >= 1")
    for name in ("tp", "pp", "cp", "ep"):
        if getattr(p, name) < 1:
            raise InputError(f"layout: parallel.{name} must be >= 1")
    order = p.order.split("-")
    if sorted(d for d in order if d != "ep") != sorted(DIMS) or len(order) != len(set(order)):
        raise InputError(f"layout: parallel.order {p.order!r} must name tp, cp, dp, pp once each (and ep)")
    model = p.tp * p.pp * p.cp
    if lay.world % model:
        raise InputError(f"layout: {lay.world} ranks is not divisible by tp*pp*cp = {model}")
    dp = lay.dp()
    if dp * model != lay.world:
        raise InputError(f"layout: tp*pp*cp*dp = {dp * model} is not the {lay.world} ranks of the hosts")
    if dp % p.ep:
        raise InputError(f"layout: parallel.ep={p.ep} must divide dp={dp}")
    if lay.nics_per_host and lay.nics_per_host != lay.gpus_per_host:
        raise InputError("layout: only rail-optimised hosts (one NIC per GPU) are modelled; leave nics_per_host out")
    if lay.timeouts.ib_timeout > 31:
        raise InputError("layout: timeouts.ib_timeout must be <= 31 (NCCL_IB_TIMEOUT)")


SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm", ".bash")


def _read(p: Path) -> str:
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"layout: cannot read {p}: {exc}") from None
    if len(text) > 1 << 20:
        raise InputError(f"layout: {p} is over 1 MiB; a layout is a few lines")
    return text


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_layout(path: Path | str, overlay: Path | str | None = None) -> Layout:
    """Read a YAML or JSON layout, or a launch script (sbatch/srun/torchrun, see ``launch``);
    ``overlay`` (YAML/JSON) adds or overrides keys. One :class:`InputError` line on anything unusable."""
    p = Path(path)
    text = _read(p)
    if p.suffix.lower() in SCRIPT_SUFFIXES or text.startswith("#!"):
        from firstfault.audit.launch import layout_doc_from_script

        doc: Any = layout_doc_from_script(text)
    else:
        doc = _parse(p, text)
    if overlay is not None:
        extra = _parse(Path(overlay), _read(Path(overlay)))
        if not isinstance(doc, dict) or not isinstance(extra, dict):
            raise InputError("layout: the layout and the overlay must both be mappings")
        doc = _merge(doc, extra)
    if isinstance(doc, dict) and "hosts" not in doc and (p.suffix.lower() in SCRIPT_SUFFIXES or text.startswith("#!")):
        raise InputError(f"layout: {p} has no '#SBATCH --nodes'; give hosts in an overlay (--with)")
    return layout_from_dict(doc)


def _parse(p: Path, text: str) -> Any:
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InputError(f"layout: {p} is not valid JSON: {exc}") from None
        return doc
    return _yaml(p, text)


def _yaml(p: Path, text: str) -> Any:
    try:
        import yaml  # the optional 'audit' extra; JSON layouts need nothing
    except ImportError:
        raise InputError(f"layout: {p} is YAML; install 'firstfault[audit]' (PyYAML) or give JSON") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"layout: {p} is not valid YAML: {first}") from None
