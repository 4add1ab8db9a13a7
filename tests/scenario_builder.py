"""Acceptance scenarios for host evidence: a real bundle plus real-wording host logs on the culprit's host.

Each scenario starts from a bundle real software wrote (a torchrun job from
``firstfault_sim.torch_sim.simulate_torch`` or a captured real-SLURM job under
``tests/fixtures/slurm/``), places its ranks on two hosts with a ``topology.json``
(``gpu-a``: ranks 0, 1; ``gpu-b``: ranks 2, 3; two GPUs each), and adds the host evidence a real
fault of that kind leaves: kernel-log lines copied verbatim from public logs
(``tests/fixtures/scenarios/``, sources in its README). Only times, host names, PCI ids, pids
(and, for the OOM kill, the victim's command name) are rewritten, so that the evidence sits on the
culprit's host and GPU at the moment its process died.

Why the times are chosen as they are: a GPU that falls off the bus fails the process's next
CUDA call within milliseconds, so the kernel line is placed just after the culprit's last logged
training step (``ANCHOR_AFTER_STEP_S``) and before torchrun noticed the death. torchrun's failure
record keeps only whole seconds, so the record can read a fraction of a second *earlier* than the
kernel line; that is how real bundles look, and the pipeline has to cope.

``scenario_table()`` builds and analyses every scenario and prints a Markdown table; the test
module ``tests/test_scenarios_host.py`` asserts the same expectations one scenario at a time.
Run the table by hand with ``.venv/bin/python tests/scenario_builder.py``.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIX = TESTS / "fixtures"
SCN = FIX / "scenarios"
HOST_FIX = FIX / "host"
SLURM_FIX = FIX / "slurm"

# Two hosts x two GPUs. The PCI bus ids and IP addresses are those of the real 2-host x 2-GPU
# NCCL job in NVIDIA/nccl#2397 (busId 69000 / b1000; 10.153.235.11 / .13), whose NCCL lines the
# network scenario uses verbatim.
HOSTS = ("gpu-a", "gpu-b")
GPUS = ("0000:69:00.0", "0000:b1:00.0")
IPS = {"gpu-a": "10.153.235.11", "gpu-b": "10.153.235.13"}
NCCL_HOSTS = {"ubuntu2": "gpu-a", "ubuntu4": "gpu-b"}  # host names in NVIDIA/nccl#2397
NPROC = 4

# The torch bundles the scenarios start from: at most these three simulations per session.
BASES: dict[str, dict[str, Any]] = {
    # torchrun tears the survivors down 3 s (not 0.1 s) after the kill, as the agents of other hosts
    # would: every survivor prints its own gloo error even on a loaded machine, and the clock-skew
    # scenarios need a survivor's reading on both hosts.
    "sigkill": {"fault": "sigkill", "rank": 3, "step": 5, "nproc": NPROC, "timeout": 6.0, "monitor_interval": 3.0},
    "exception": {"fault": "exception", "rank": 1, "step": 4, "nproc": NPROC, "timeout": 6.0},
    "hang": {"fault": "hang", "rank": 2, "step": 4, "nproc": NPROC, "timeout": 6.0},
}
ANCHOR_AFTER_STEP_S = 0.005
SKEW_S = 30.0


def place(rank: int) -> tuple[str, str, int]:
    """(host, GPU PCI id, local rank) of a global rank in the 2 x 2 layout."""
    return HOSTS[rank // 2], GPUS[rank % 2], rank % 2


def host_ranks(host: str) -> list[int]:
    return [r for r in range(NPROC) if place(r)[0] == host]


def write_topology(bundle: Path, nranks: int = NPROC) -> None:
    rows = [{"rank": r, "host": place(r)[0], "gpu": place(r)[1], "local_rank": place(r)[2]} for r in range(nranks)]
    hosts = {h: {"ips": [IPS[h]]} for h in HOSTS}
    (bundle / "topology.json").write_text(json.dumps({"ranks": rows, "hosts": hosts}, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------
# What the real torch bundle says about each rank (read here, independently of firstfault)

_ASCTIME = re.compile(r"^(?P<d>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(?P<ms>\d{3}) ")
_GLOG = re.compile(r"(?P<pre>(?:^|[\[\s:]))(?P<sev>[IWEF])(?P<md>\d{4}) (?P<t>\d{2}:\d{2}:\d{2})\.(?P<us>\d{6})")
_FAILURE = re.compile(
    r"time\s*:\s*(?P<d>\d{4}-\d{2}-\d{2})_(?P<t>\d{2}:\d{2}:\d{2})\s*\n\s*host\s*:[^\n]*\n"
    r"\s*rank\s*:\s*(?P<rank>\d+) \(local_rank: \d+\)\s*\n"
    r"\s*exitcode\s*:\s*(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)"
)


def _epoch(text: str) -> float:
    """A naive ``YYYY-MM-DD HH:MM:SS`` read as UTC, as the bundle's own loggers wrote it."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


@dataclass
class RankFacts:
    rank: int
    pid: int | None = None
    last_step_ts: float | None = None
    failure_ts: float | None = None
    exitcode: int | None = None


def rank_dirs(bundle: Path) -> dict[int, Path]:
    """Per-rank torchrun directories of attempt 0 (single-node job: directory = global rank)."""
    return {int(p.name): p for p in sorted(bundle.glob("logs/*/attempt_0/*")) if p.name.isdigit()}


def torch_facts(bundle: Path) -> dict[int, RankFacts]:
    """pid, last step time and torchrun's failure record of every rank of a simulated bundle."""
    facts: dict[int, RankFacts] = {}
    for r, d in rank_dirs(bundle).items():
        f = facts.setdefault(r, RankFacts(r))
        out = d / "stdout.log"
        for line in out.read_text(errors="replace").splitlines() if out.exists() else []:
            m = _ASCTIME.match(line)
            if not m:
                continue
            if f" [rank{r}] start " in line:
                pm = re.search(r"\bpid=(\d+)", line)
                f.pid = int(pm[1]) if pm else f.pid
            elif re.search(rf" \[rank{r}\] step \d+ loss ", line):
                f.last_step_ts = _epoch(m["d"]) + int(m["ms"]) / 1000
    launcher = bundle / "launcher.log"
    if launcher.exists():
        for m in _FAILURE.finditer(launcher.read_text(errors="replace")):
            f = facts.setdefault(int(m["rank"]), RankFacts(int(m["rank"])))
            f.failure_ts = _epoch(f"{m['d']} {m['t']}")
            f.exitcode = int(m["code"])
            f.pid = f.pid or int(m["pid"])
    return facts


def anchor_time(facts: dict[int, RankFacts], culprit: int) -> float:
    """When the culprit's fault happened: just after its last logged step."""
    f = facts[culprit]
    if f.last_step_ts is not None:
        return f.last_step_ts + ANCHOR_AFTER_STEP_S
    if f.failure_ts is not None:
        return f.failure_ts
    raise ValueError(f"rank {culprit}: no step line and no failure record to place host evidence at")


def copy_bundle(src: Path, dst: Path, drop: Sequence[str] = ()) -> Path:
    """A private copy of a (cached, shared) bundle; ``drop`` names top-level entries left out."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=lambda d, names: [n for n in names if Path(d) == src and n in drop])
    return dst


# ---------------------------------------------------------------------------------------------
# Kernel-log fixtures: real lines, re-timed and re-placed

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_K_CTIME = re.compile(r"^\[(?:\w{3} )?(?P<mon>\w{3}) +(?P<d>\d+) (?P<t>\d\d:\d\d:\d\d) (?P<y>\d{4})\] (?P<msg>.*)$")
_K_MONO = re.compile(r"^(?P<stamp>\[\s*(?P<mono>\d+\.\d+)\] )(?P<msg>.*)$")
_K_SYSLOG = re.compile(
    r"^(?P<mon>\w{3}) +(?P<d>\d+) (?P<t>\d\d:\d\d:\d\d)(?:\.\d+)? (?P<host>\S+) kernel: "
    r"(?P<stamp>\[\s*(?P<mono>\d+\.\d+)\] )?(?P<msg>.*)$"
)
_K_ISO = re.compile(
    r"^(?P<dec>kern +:\w+ *: )?(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(?P<us>\d{6})\+00:00 (?P<msg>.*)$"
)
_K_CONT = re.compile(r"^\s{8,}\S")
_PCI_IN_XID = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")
_PCI_GPU_AT = re.compile(r"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")


@dataclass
class SrcLine:
    """One line of a fixture as published: its message and whatever clock its prefix carried."""

    raw: str
    msg: str
    wall: float | None = None
    mono: float | None = None
    stamp: str = ""  # the kernel's own "[  219.470994] " stamp, kept verbatim
    decode: str = ""  # dmesg -x "kern  :warn  : " prefix, kept verbatim
    cont: bool = False  # a continuation line of a multi-line NVRM message


def read_fixture(path: Path) -> list[SrcLine]:
    out: list[SrcLine] = []
    for raw in path.read_text().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        if m := _K_CTIME.match(raw):
            dt = datetime.strptime(f"{m['y']} {m['mon']} {m['d']} {m['t']}", "%Y %b %d %H:%M:%S")
            out.append(SrcLine(raw, m["msg"], wall=dt.replace(tzinfo=UTC).timestamp()))
        elif m := _K_SYSLOG.match(raw):
            mono = float(m["mono"]) if m["mono"] else None
            out.append(SrcLine(raw, m["msg"], mono=mono, stamp=m["stamp"] or ""))
        elif m := _K_MONO.match(raw):
            out.append(SrcLine(raw, m["msg"], mono=float(m["mono"]), stamp=m["stamp"]))
        elif m := _K_ISO.match(raw):
            wall = datetime.fromisoformat(m["iso"]).replace(tzinfo=UTC).timestamp() + int(m["us"]) / 1e6
            out.append(SrcLine(raw, m["msg"], wall=wall, decode=m["dec"] or ""))
        elif _K_CONT.match(raw) and out:
            out.append(SrcLine(raw, raw, cont=True))
        else:
            out.append(SrcLine(raw, raw))
    return out


def _key_index(lines: Sequence[SrcLine], key: str) -> int:
    for i, ln in enumerate(lines):
        if key in ln.msg:
            return i
    raise ValueError(f"no line contains {key!r}")


@dataclass
class Part:
    """Lines of one fixture file placed at ``offset`` seconds from the anchor (its key line)."""

    fixture: str
    key: str
    offset: float = 0.0
    pid: int | None = None  # rewrite "pid=N" (the process the driver names)
    victim: tuple[int, str] | None = None  # OOM: (pid, command name) of the killed process
    base: Path = SCN


def _retarget(msg: str, pci_from: Iterable[str], pci_to: str | None, part: Part) -> str:
    if pci_to:
        short = pci_to[:10]
        for p in pci_from:
            msg = re.sub(re.escape(p), short, msg, flags=re.I)
    if part.pid is not None:
        msg = re.sub(r"\bpid=\d+", f"pid={part.pid}", msg)
    if part.victim is not None:
        pid, comm = part.victim
        msg = re.sub(r"Killed process \d+ \([^)]*\)", f"Killed process {pid} ({comm})", msg)
    return msg


def _iso(t: float) -> tuple[str, int]:
    dt = datetime.fromtimestamp(t, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S"), dt.microsecond


def render_kernel_log(parts: Sequence[Part], fmt: str, anchor: float, host: str, gpu: str | None) -> str:
    """The parts' lines in one kernel-log format, the key line of each at ``anchor + offset``.

    Formats: ``ctime`` (``dmesg -T``), ``mono`` (raw ``dmesg`` with the collector's
    ``# boot_time=`` header; the lines' own monotonic stamps kept), ``syslog`` (``/var/log/kern.log``
    with the kernel stamp kept), ``iso`` (``dmesg --time-format iso``, ``-x`` prefix kept when the
    source had it) and ``journal`` (``journalctl -k -o short-precise``).
    """
    out: list[str] = []
    if fmt == "mono":
        if len(parts) != 1:
            raise ValueError("a monotonic log has one clock: one fixture per file")
        lines = read_fixture(parts[0].base / parts[0].fixture)
        key = lines[_key_index(lines, parts[0].key)]
        assert key.mono is not None, f"{parts[0].fixture}: no monotonic stamp on the key line"
        out.append(f"# boot_time={anchor + parts[0].offset - key.mono:.6f}")
    for part in parts:
        lines = read_fixture(part.base / part.fixture)
        k = _key_index(lines, part.key)
        key = lines[k]
        pcis = {m["pci"] for ln in lines for pat in (_PCI_IN_XID, _PCI_GPU_AT) for m in pat.finditer(ln.msg)}
        last = anchor + part.offset
        for ln in lines:
            if ln.cont:
                out.append(ln.raw)
                continue
            if ln.mono is not None and key.mono is not None:
                t = anchor + part.offset + (ln.mono - key.mono)
            elif ln.wall is not None and key.wall is not None:
                t = anchor + part.offset + (ln.wall - key.wall)
            else:
                t = last
            last = t
            msg = _retarget(ln.msg, pcis, gpu, part)
            dt = datetime.fromtimestamp(t, UTC)
            if fmt == "ctime":
                out.append(f"[{dt.strftime('%a %b')} {dt.day:>2} {dt.strftime('%H:%M:%S %Y')}] {msg}")
            elif fmt == "mono":
                out.append(f"{ln.stamp}{msg}")
            elif fmt == "syslog":
                stamp = f"{_MONTHS[dt.month - 1]} {dt.day:>2} {dt.strftime('%H:%M:%S')}"
                out.append(f"{stamp} {host} kernel: {ln.stamp}{msg}")
            elif fmt == "iso":
                s, us = _iso(t)
                out.append(f"{ln.decode}{s},{us:06d}+00:00 {msg}")
            elif fmt == "journal":
                out.append(f"{dt.strftime('%b %d %H:%M:%S')}.{dt.microsecond:06d} {host} kernel: {msg}")
            else:
                raise ValueError(f"unknown kernel-log format {fmt!r}")
    return "\n".join(out) + "\n"


def add_kernel_log(bundle: Path, host: str, name: str, text: str) -> Path:
    p = bundle / "hosts" / host / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------------------------
# Scenario builders


@dataclass
class Built:
    """A built scenario bundle and what was placed in it (for the table and failure messages)."""

    path: Path
    culprit: int | None
    host: str | None
    gpu: str | None
    anchor: float | None = None
    notes: list[str] = field(default_factory=list)


def build_kernel_scenario(
    base: Path,
    out: Path,
    parts_of: PartsOf,
    fmt: str,
    name: str,
    culprit: int,
    shift: float = 0.0,
    drop: Sequence[str] = (),
) -> Built:
    """Copy a torch bundle, place its ranks on hosts, add a kernel log on the culprit's host."""
    bundle = copy_bundle(base, out, drop)
    write_topology(bundle)
    facts = torch_facts(base)
    host, gpu, _ = place(culprit)
    anchor = anchor_time(facts, culprit)
    text = render_kernel_log(parts_of(facts, culprit), fmt, anchor + shift, host, gpu)
    add_kernel_log(bundle, host, name, text)
    return Built(bundle, culprit, host, gpu, anchor, [f"kernel log {name} ({fmt}) on {host}"])


PartsOf = Callable[[dict[int, RankFacts], int], list[Part]]


def _xid_parts(fixture: str, key: str, pid: bool = False) -> PartsOf:
    def parts(facts: dict[int, RankFacts], culprit: int) -> list[Part]:
        return [Part(fixture, key, pid=facts[culprit].pid if pid else None)]

    return parts


def _xid79_45(facts: dict[int, RankFacts], culprit: int) -> list[Part]:
    # The driver tears the dead process's channels down after the loss: Xid 45 a moment later.
    return [Part("xid79_akash209.dmesg", "): 79,"), Part("xid45_chia301.dmesg", "): 45,", offset=0.3)]


def _oom(facts: dict[int, RankFacts], culprit: int) -> list[Part]:
    pid = facts[culprit].pid
    assert pid is not None, "the sigkill bundle names the culprit's pid"
    return [Part("oom_lkml.dmesg", "Killed process", victim=(pid, "python"))]


def shift_host_files(bundle: Path, host: str, seconds: float) -> list[str]:
    """Move every timestamp in ``host``'s rank files by ``seconds``, wording untouched.

    Python logging and glog stamps in the ranks' stdout/stderr, torchelastic's ``error.json``
    timestamp, and the flight-recorder entries' ``*_ns`` times. Returns the files changed.
    """
    changed: list[str] = []
    dirs = rank_dirs(bundle)

    def asctime(m: re.Match[str]) -> str:
        t = _epoch(m["d"]) + int(m["ms"]) / 1000 + seconds
        dt = datetime.fromtimestamp(t, UTC)
        return f"{dt.strftime('%Y-%m-%d %H:%M:%S')},{dt.microsecond // 1000:03d} "

    def glog(m: re.Match[str]) -> str:
        year = datetime.now(UTC).year
        base = datetime.strptime(f"{year}{m['md']} {m['t']}", "%Y%m%d %H:%M:%S").replace(tzinfo=UTC)
        t = base.timestamp() + int(m["us"]) / 1e6 + seconds
        dt = datetime.fromtimestamp(t, UTC)
        return f"{m['pre']}{m['sev']}{dt.strftime('%m%d %H:%M:%S')}.{dt.microsecond:06d}"

    for r in host_ranks(host):
        d = dirs.get(r)
        if d is None:
            continue
        for name in ("stdout.log", "stderr.log"):
            p = d / name
            if not p.exists():
                continue
            old = p.read_text(errors="surrogateescape")
            new = "\n".join(_GLOG.sub(glog, _ASCTIME.sub(asctime, ln)) for ln in old.split("\n"))
            if new != old:
                p.write_text(new, errors="surrogateescape")
                changed.append(str(p.relative_to(bundle)))
        ej = d / "error.json"
        if ej.exists():
            data = json.loads(ej.read_text())
            msg = data.get("message")
            info = msg.get("extraInfo", {}) if isinstance(msg, dict) else {}
            if "timestamp" in info:
                info["timestamp"] = str(int(int(info["timestamp"]) + seconds))
                ej.write_text(json.dumps(data))
                changed.append(str(ej.relative_to(bundle)))
        for fr in bundle.glob(f"fr/*_{r}"):
            with open(fr, "rb") as rfh:
                dump = pickle.load(rfh)  # the simulator's own dump, written in this session
            for e in dump.get("entries", []):
                for k, v in list(e.items()):
                    if k.endswith("_ns") and k.startswith("time") and isinstance(v, int):
                        e[k] = v + int(seconds * 1e9)
            with open(fr, "wb") as wfh:
                pickle.dump(dump, wfh)
            changed.append(str(fr.relative_to(bundle)))
    return changed


def build_skew(base: Path, out: Path, seconds: float) -> Built:
    """Scenario 1 (Xid 79 on the culprit's host) with ``gpu-b``'s clock ``seconds`` off.

    torchrun's single console is left out: in a two-host job each host has its own, and a console
    holding both hosts' lines has no one clock to skew. What stays is what a per-host collection
    has: every rank's torchrun log directory, the flight-recorder dumps and the kernel log.
    """
    culprit = BASES["sigkill"]["rank"]
    built = build_kernel_scenario(
        base,
        out,
        _xid_parts("xid79_akash209.dmesg", "): 79,"),
        "ctime",
        "dmesg.log",
        culprit,
        shift=seconds,
        drop=("launcher.log",),
    )
    changed = shift_host_files(built.path, "gpu-b", seconds)
    built.notes.append(f"gpu-b clock {seconds:+.0f} s: {len(changed)} rank files and its kernel log shifted")
    return built


# The NCCL lines of NVIDIA/nccl#2397 (NCCL 2.30.4, 2 hosts x 2 GPUs, RoCE mlx5_0/mlx5_1).
_NCCL_LINE = re.compile(
    r"^(?P<ts>\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] )?"
    r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?P<rest>.*)$"
)


def _nccl_lines(fixture: Path) -> list[tuple[float | None, str, int, str]]:
    """(source time, host, local rank, line) of each NCCL line of a fixture."""
    out = []
    for raw in fixture.read_text().splitlines():
        m = _NCCL_LINE.match(raw)
        if not m:
            continue
        ts = _epoch(m["ts"].strip("[] ")) if m["ts"] else None
        out.append((ts, NCCL_HOSTS[m["host"]], int(m["dev"]), raw))
    return out


def _nccl_rewrite(raw: str, host: str, pid: int, t: float | None) -> str:
    m = _NCCL_LINE.match(raw)
    assert m is not None
    tid = pid if m["tid"] == m["pid"] else int(m["tid"])  # the main thread's tid is its pid
    stamp = ""
    if m["ts"]:
        assert t is not None
        stamp = f"[{datetime.fromtimestamp(t, UTC).strftime('%Y-%m-%d %H:%M:%S')}] "
    return f"{stamp}{host}:{pid}:{tid} [{m['dev']}] {m['rest']}"


def _insert_by_time(path: Path, new: Sequence[tuple[float, str]]) -> None:
    """Insert lines into a rank's stdout where their time falls among its timestamped lines.

    Lines of equal time keep their order in ``new`` (the source's order).
    """
    lines = path.read_text(errors="surrogateescape").split("\n")
    trailing = bool(lines) and lines[-1] == ""
    if trailing:
        lines = lines[:-1]
    pos = 0
    for t, text in sorted(new, key=lambda x: x[0]):
        while pos < len(lines):
            m = _ASCTIME.match(lines[pos])
            if m and _epoch(m["d"]) + int(m["ms"]) / 1000 > t:
                break
            pos += 1
        lines.insert(pos, text)
        pos += 1
    path.write_text("\n".join(lines) + ("\n" if trailing else ""), errors="surrogateescape")


def build_link_flap(base: Path, out: Path) -> Built:
    """An RoCE port on gpu-b goes down; NCCL on both hosts reports the failed completions.

    The hang bundle's peers time out waiting in their collective, which is what a dead link does
    to a collective. NCCL writes its debug lines to stdout: its start-up lines (Bootstrap, NET/IB,
    Init START) go after each rank's start line, the WARN lines (time-stamped by NCCL itself) a
    second after the port went down, on rank 1 (gpu-a) and ranks 3 and 2 (gpu-b) as in the source.
    """
    bundle = copy_bundle(base, out)
    write_topology(bundle)
    facts = torch_facts(base)
    culprit = BASES["hang"]["rank"]
    t_down = anchor_time(facts, culprit)
    dirs = rank_dirs(bundle)

    def rank_of(host: str, local: int) -> int:
        return HOSTS.index(host) * 2 + local

    def start_time(r: int) -> float:
        for ln in (dirs[r] / "stdout.log").read_text(errors="replace").splitlines():
            m = _ASCTIME.match(ln)
            if m and f"[rank{r}] start " in ln:
                return _epoch(m["d"]) + int(m["ms"]) / 1000
        raise ValueError(f"rank {r}: no start line")

    inserts: dict[int, list[tuple[float, str]]] = {r: [] for r in range(NPROC)}
    for _, host, local, raw in _nccl_lines(SCN / "nccl2397_init.log"):
        r = rank_of(host, local)
        pid = facts[r].pid
        assert pid is not None
        # start-up lines: printed by init_process_group, right after the rank's "start" line
        inserts[r].append((start_time(r) + 5e-4, _nccl_rewrite(raw, host, pid, None)))
    errs = _nccl_lines(SCN / "nccl2397_ib_errors.log")
    t0 = min(t for t, *_ in errs if t is not None)
    for ts, host, local, raw in errs:
        r = rank_of(host, local)
        pid = facts[r].pid
        assert pid is not None and ts is not None
        t = t_down + 1.0 + (ts - t0)
        inserts[r].append((t, _nccl_rewrite(raw, host, pid, t)))
    for r, new in inserts.items():
        if new:
            _insert_by_time(dirs[r] / "stdout.log", new)
    # gpu-b's kernel log: the ConnectX flap of tests/fixtures/host/link_flap (port DOWN at t_down)
    text = render_kernel_log(
        [Part("link_flap/gpu-b/dmesg.log", "Port: 1 Link DOWN", base=HOST_FIX)], "mono", t_down, "gpu-b", None
    )
    add_kernel_log(bundle, "gpu-b", "dmesg.log", text)
    note = "mlx5_0 port 1 down on gpu-b; NCCL WARN on ranks 1, 2, 3"
    return Built(bundle, culprit, "gpu-b", None, t_down, [note])


def build_slurm(name: str, out: Path) -> Built:
    bundle = copy_bundle(SLURM_FIX / name, out)
    truth = json.loads((bundle / "truth.json").read_text())
    hosts = truth.get("culprit_hosts") or [None]
    return Built(bundle, None, hosts[0], None, None, [f"real SLURM capture {name}"])


# ---------------------------------------------------------------------------------------------
# Scenarios and their expectations


@dataclass
class Expect:
    """What the verdict must say. ``None`` fields are not checked."""

    category: str
    action: str
    rank: int | None = None
    host: str | None = None
    gpu: str | None = None
    link: str | None = None
    root_xid: str | None = None  # the root event is this Xid
    consequence_xid: str | None = None  # this Xid is present but never the root
    not_category: str | None = None
    skew: float | None = None  # gpu-b's corrected offset relative to gpu-a's (seconds)


@dataclass
class Scenario:
    id: str
    title: str
    base: str  # a key of BASES, or "slurm"
    build: Callable[[Path | None, Path], Built]
    expect: Expect
    xfail: str | None = None


def _xid_action(x: int) -> str:
    from firstfault.match.xid import lookup

    return str(lookup(x).event_action)


def _kernel(
    fixture: str, key: str, fmt: str, name: str, base: str = "sigkill", pid: bool = False
) -> Callable[[Path | None, Path], Built]:
    def build(b: Path | None, out: Path) -> Built:
        assert b is not None
        return build_kernel_scenario(b, out, _xid_parts(fixture, key, pid), fmt, name, BASES[base]["rank"])

    return build


def scenarios() -> list[Scenario]:
    """Every acceptance scenario of issue 3, in the issue's order."""
    k = BASES["sigkill"]["rank"]
    kh, kg, _ = place(k)
    e = BASES["exception"]["rank"]
    eh = place(e)[0]

    def hw(x: int, fixture: str, fmt: str, name: str, pid: bool = False) -> Scenario:
        return Scenario(
            f"xid{x}",
            f"Xid {x} on the culprit's GPU ({fmt})",
            "sigkill",
            _kernel(fixture, f"): {x},", fmt, name, pid=pid),
            Expect("gpu_hardware", _xid_action(x), k, kh, kg, root_xid=str(x)),
        )

    def app(x: int, fixture: str, fmt: str, pid: bool) -> Scenario:
        return Scenario(
            f"xid{x}_app",
            f"Xid {x} with the rank's own exception",
            "exception",
            _kernel(fixture, f"): {x},", fmt, "dmesg.log", base="exception", pid=pid),
            Expect("application_error", "stop", e, eh, not_category="gpu_hardware"),
        )

    def flap(b: Path | None, out: Path) -> Built:
        assert b is not None
        return build_link_flap(b, out)

    def xid45(b: Path | None, out: Path) -> Built:
        assert b is not None
        return build_kernel_scenario(b, out, _xid79_45, "ctime", "dmesg.log", k)

    def oom(b: Path | None, out: Path) -> Built:
        assert b is not None
        return build_kernel_scenario(b, out, _oom, "mono", "dmesg.log", k)

    def slurm(name: str) -> Callable[[Path | None, Path], Built]:
        return lambda _b, out: build_slurm(name, out)

    def skew(sec: float) -> Callable[[Path | None, Path], Built]:
        def build(b: Path | None, out: Path) -> Built:
            assert b is not None
            return build_skew(b, out, sec)

        return build

    return [
        hw(79, "xid79_akash209.dmesg", "ctime", "dmesg.log"),
        hw(48, "xid48_gpu_operator1146.syslog", "syslog", "kern.log"),
        hw(74, "xid74_nvsentinel.dmesg", "mono", "dmesg.log"),
        hw(94, "xid94_nvidia_docs.txt", "journal", "journal.log", pid=True),
        hw(95, "xid95_nvidia_ga100.txt", "iso", "dmesg.log", pid=True),
        hw(119, "xid119_gpud.dmesg", "ctime", "dmesg.log"),
        app(13, "xid13_gpud.dmesg", "iso", pid=False),
        app(31, "xid31_tinygrad6947.dmesg", "mono", pid=True),
        Scenario(
            "xid79_45",
            "Xid 79 then Xid 45 on the same GPU",
            "sigkill",
            xid45,
            Expect("gpu_hardware", _xid_action(79), k, kh, kg, root_xid="79", consequence_xid="45"),
        ),
        Scenario(
            "ib_flap",
            "RoCE port down on gpu-b, NCCL errors on both hosts",
            "hang",
            flap,
            Expect("network", "exclude_and_restart", host="gpu-b", link="gpu-a<->gpu-b:mlx5_0/1"),
        ),
        Scenario("host_oom", "OOM killer takes the culprit's pid", "sigkill", oom, Expect("host_oom", "stop", k, kh)),
        Scenario(
            "slurm_time_limit",
            "SLURM time limit (real capture)",
            "slurm",
            slurm("time_limit"),
            Expect("scheduler", "restart"),
        ),
        Scenario(
            "slurm_node_failure",
            "SLURM node failure (real capture)",
            "slurm",
            slurm("node_failure"),
            Expect("scheduler", "exclude_and_restart", host="node02"),
        ),
        Scenario(
            "skew_plus30",
            f"Xid 79, gpu-b clock +{SKEW_S:.0f} s",
            "sigkill",
            skew(SKEW_S),
            Expect("gpu_hardware", _xid_action(79), k, kh, kg, root_xid="79", skew=-SKEW_S),
        ),
        Scenario(
            "skew_minus30",
            f"Xid 79, gpu-b clock -{SKEW_S:.0f} s",
            "sigkill",
            skew(-SKEW_S),
            Expect("gpu_hardware", _xid_action(79), k, kh, kg, root_xid="79", skew=SKEW_S),
        ),
    ]


SKEW_TOLERANCE_S = 2.5


def check(v: Any, exp: Expect) -> list[str]:
    """Mismatches between a verdict and the expectation (empty: the scenario passes)."""
    from firstfault.vocab.topology import normalize_pci

    bad: list[str] = []
    c = v.culprit
    if str(v.category) != exp.category:
        bad.append(f"category {v.category} != {exp.category}")
    if exp.not_category and str(v.category) == exp.not_category:
        bad.append(f"category must not be {exp.not_category}")
    if str(v.action) != exp.action:
        bad.append(f"action {v.action} != {exp.action}")
    if exp.rank is not None and c.ranks[:1] != [exp.rank]:
        bad.append(f"top rank {c.ranks[:1]} != [{exp.rank}]")
    network_rank_off_side = exp.category == "network" and (not c.ranks or place(c.ranks[0])[0] != exp.host)
    if exp.rank is None and exp.host is not None and network_rank_off_side:
        bad.append(f"top rank {c.ranks[:1]} is not on {exp.host}")
    if exp.host is not None and c.hosts[:1] != [exp.host]:
        bad.append(f"top host {c.hosts[:1]} != [{exp.host}]")
    if exp.gpu is not None and [normalize_pci(g) for g in c.gpus[:1]] != [normalize_pci(exp.gpu)]:
        bad.append(f"top GPU {c.gpus[:1]} != [{exp.gpu}]")
    if exp.link is not None and c.links[:1] != [exp.link]:
        bad.append(f"top link {c.links[:1]} != [{exp.link}]")
    root = v.root_event
    if exp.root_xid is not None and (root is None or root.fields.get("xid") != exp.root_xid):
        bad.append(
            f"root {root.signature if root else None} (xid {root.fields.get('xid') if root else None})"
            f" is not the Xid {exp.root_xid} line"
        )
    if exp.consequence_xid is not None:
        links = [lk for lk in v.causal_chain if lk.event.fields.get("xid") == exp.consequence_xid]
        if not links:
            bad.append(f"Xid {exp.consequence_xid} missing from the causal chain")
        elif any(str(lk.role) == "root" for lk in links):
            bad.append(f"Xid {exp.consequence_xid} given the root role")
    if exp.not_category == "gpu_hardware" and root is not None and root.signature.startswith("kernel."):
        bad.append(f"root is the kernel's {root.signature}, not the rank's own error")
    if exp.skew is not None:
        off = v.inputs.get("clock_offsets_s", {})
        rel = off.get("gpu-b", 0.0) - off.get("gpu-a", 0.0)
        if abs(rel - exp.skew) > SKEW_TOLERANCE_S:
            bad.append(f"gpu-b offset relative to gpu-a {rel:+.1f} s != {exp.skew:+.1f} s (offsets {off})")
        if not any("clock of host" in w for w in v.warnings):
            bad.append("no clock-correction warning")
    return bad


def describe_expect(exp: Expect) -> str:
    parts = [exp.category]
    if exp.rank is not None:
        parts.append(f"rank {exp.rank}")
    if exp.host:
        parts.append(exp.host)
    if exp.gpu:
        parts.append(exp.gpu)
    if exp.link:
        parts.append(exp.link)
    parts.append(exp.action)
    if exp.root_xid:
        parts.append(f"root Xid {exp.root_xid}")
    if exp.consequence_xid:
        parts.append(f"Xid {exp.consequence_xid} not root")
    if exp.skew is not None:
        parts.append(f"gpu-b {exp.skew:+.0f} s vs gpu-a")
    return ", ".join(parts)


def describe_verdict(v: Any) -> str:
    c = v.culprit
    parts = [str(v.category)]
    if c.ranks:
        parts.append(f"rank {c.ranks[0]}")
    if c.hosts:
        parts.append(c.hosts[0])
    if c.gpus:
        parts.append(c.gpus[0])
    if c.links:
        parts.append(c.links[0])
    parts.append(str(v.action))
    r = v.root_event
    if r is not None:
        parts.append(f"root {r.signature}" + (f" (Xid {r.fields['xid']})" if r.fields.get("xid") else ""))
    off = v.inputs.get("clock_offsets_s") or {}
    if off:
        parts.append("offsets " + " ".join(f"{h} {s:+.1f}s" for h, s in sorted(off.items())))
    return ", ".join(parts)


def simulate_bases(root: Path) -> dict[str, Path]:
    """The three torch bundles, simulated one after the other (2 shared cores)."""
    from firstfault_sim.torch_sim import simulate_torch

    return {k: simulate_torch(root / k, **kw) for k, kw in BASES.items()}


def scenario_table(bases: dict[str, Path] | None = None, workdir: Path | None = None) -> str:
    """Build and analyse every scenario; print and return a Markdown table of the results."""
    from firstfault.pipeline import analyze

    tmp = Path(workdir or tempfile.mkdtemp(prefix="ff-scenarios-"))
    t0 = time.perf_counter()
    bases = bases or simulate_bases(tmp / "bases")
    t_sim = time.perf_counter() - t0
    rows = ["| scenario | expected | got | ok |", "|---|---|---|---|"]
    for s in scenarios():
        built = s.build(bases.get(s.base), tmp / s.id)
        v = analyze(built.path)
        bad = check(v, s.expect)
        ok = "yes" if not bad else ("xfail: " if s.xfail else "NO: ") + "; ".join(bad)
        rows.append(f"| {s.id}: {s.title} | {describe_expect(s.expect)} | {describe_verdict(v)} | {ok} |")
    table = "\n".join(rows)
    print(table)
    print(f"\n(simulations {t_sim:.1f} s, scenarios {time.perf_counter() - t0 - t_sim:.1f} s)")
    return table


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    scenario_table(workdir=Path(sys.argv[1]) if len(sys.argv) > 1 else None)
