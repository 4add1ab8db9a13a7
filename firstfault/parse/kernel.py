"""Kernel logs: dmesg in every time format, journalctl -k, syslog, raw /dev/kmsg, pstore.

The hardware evidence of a failed job (an ``NVRM: Xid``, the OOM killer's line, a port going
down) is in the faulty host's kernel log, written in whichever format the collector used:

* ``dmesg``                 ``[ 1843.308145] msg`` (seconds since boot, needs the boot time)
* ``dmesg -r``              ``<6>[    2.608284] msg``
* ``dmesg -T``              ``[Sun Feb 23 16:24:18 2025] msg``
* ``dmesg --time-format iso``  ``2025-01-21T04:41:44,285060+00:00 msg``
* ``dmesg -x`` (decode)     ``kern  :warn  : <any of the above> msg``
* raw ``/dev/kmsg``         ``6,3973,227996636,-;msg`` (microseconds since boot)
* ``journalctl -k``         ``Feb 14 05:03:41 host kernel: msg`` (short), ``-o short-precise``
  (``.123456``), ``-o short-iso`` / ``short-iso-precise`` (``2025-02-14T05:03:41.1+00:00 host``),
  ``-o short-full`` (``Fri 2025-02-14 05:03:41 UTC host``), ``-o short-unix``, ``-o short-monotonic``
* syslog (``/var/log/kern.log``, ``messages``): the journal's short format, often carrying the
  kernel's own ``[12345.678901]`` stamp after ``kernel:`` -- a line that is its own anchor
* NVIDIA fabric manager's log: ``[Feb 25 2025 13:59:45] [INFO] [tid 1803] msg``

Monotonic stamps only become wall times with the boot time. It comes from, in order: a
``# boot_time=<epoch|ISO>`` header, a ``btime <epoch>`` line (``/proc/stat``), a line carrying both
clocks (syslog with the kernel stamp, an ``audit(<epoch>.<ms>:<n>)`` record under a monotonic
stamp), all found in the file's head. A monotonic-only log without any of these keeps
``ts=None`` (the monotonic value is kept in ``fields["monotonic"]`` by the parser's text) and the
bundle gets a warning: guessing would misorder the evidence.

The host is, in order: a ``# host=`` header, the journal/syslog host field of the line, the
``node*/host*`` directory discover found, a ``dmesg-<host>.log`` / ``<host>.dmesg`` file name,
the nearest non-generic parent directory (``<host>/dmesg.log``, ``<host>/var/log/kern.log``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

from firstfault.discover import SourceFile
from firstfault.parse.base import LineInfo, ParseContext, SourceParser, register_parser
from firstfault.parse.stream import Hit
from firstfault.parse.timestamps import parse_timestamp
from firstfault.vocab import FileKind, TsQuality
from firstfault.vocab.topology import normalize_pci

HEAD_BYTES = 256 * 1024

_MONTHS = {
    m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)
}

# kmsg: "PRI,SEQ,USEC,FLAGS[,...];MESSAGE"
_KMSG = re.compile(r"^(?P<pri>\d{1,4}),(?P<seq>\d+),(?P<usec>\d+),[^;]*;(?P<msg>.*)$")
# dmesg -x: "kern  :warn  : "
_DECODE = re.compile(r"^(?P<fac>[a-z0-9]+)\s*:(?P<lvl>[a-z]+)\s*:\s?")
# dmesg -r / pstore: "<6>"
_PRI = re.compile(r"^<(?P<pri>\d{1,3})>")
# "[ 1843.308145]" (also journalctl -o short-monotonic)
_MONO = re.compile(r"^\[\s*(?P<mono>\d+\.\d+)\]\s?")
# dmesg -T / --ctime: "[Sun Feb 23 16:24:18 2025]"
_CTIME = re.compile(
    r"^\[(?:[A-Z][a-z]{2}\s+)?(?P<mon>[A-Z][a-z]{2})\s+(?P<d>\d{1,2})\s+(?P<h>\d{1,2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?:\.(?P<frac>\d+))?\s+(?P<y>\d{4})\]\s?"
)
# fabric manager: "[Feb 25 2025 13:59:45] "
_FMTIME = re.compile(
    r"^\[(?P<mon>[A-Z][a-z]{2})\s+(?P<d>\d{1,2})\s+(?P<y>\d{4})\s+(?P<h>\d{1,2}):(?P<mi>\d{2}):(?P<s>\d{2})\]\s?"
)
# ISO 8601 (dmesg --time-format iso uses a comma before the microseconds; journald short-iso)
_ISO = re.compile(r"^(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)\s")
# journalctl -o short-full: "Fri 2025-02-14 05:03:41 UTC "
_FULL = re.compile(
    r"^[A-Z][a-z]{2} (?P<iso>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?) "
    r"(?P<tz>[A-Z]{2,5}|[+-]\d{4})\s"
)
# journalctl -o short-unix: "1739509421.123456 "
_UNIX = re.compile(r"^(?P<unix>1\d{9}(?:\.\d{1,9})?)\s")
# syslog / journalctl short: "Dec  2 10:43:35" / "Feb 14 05:03:41.123456"
_SYSLOG = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2})\s+(?P<d>\d{1,2})\s+(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?:\.(?P<frac>\d{1,9}))?\s"
)
# after a syslog-style time: "host ident[pid]: " (ident "kernel" for kernel lines)
_HOST_IDENT = re.compile(r"^(?P<host>[A-Za-z0-9_][\w.-]*)\s+(?P<ident>[\w./@-]+?)(?:\[(?P<ipid>\d+)\])?:\s")
# audit record under a monotonic stamp: "audit: type=1400 audit(1753325017.308:2): ..."
_AUDIT = re.compile(r"audit\((?P<epoch>1\d{9}\.\d{1,6}):\d+\)")
_BOOT_HEADER = re.compile(r"^#\s*boot_time\s*[=:]\s*(?P<v>\S+)", re.I)
_HOST_HEADER = re.compile(r"^#\s*host(?:name)?\s*[=:]\s*(?P<v>[\w.-]+)", re.I)
_BTIME = re.compile(r"^btime\s+(?P<v>\d{9,11})\s*$")

# PCI ids of GPUs in NVRM lines: "(PCI:0000:9b:00)", "GPU 0000:09:00.0:", "GPU at PCI:0000:00:05"
_NVRM_PCI = re.compile(
    r"NVRM: (?:Xid \((?:PCI:)?|GPU (?:at )?(?:PCI:)?|The NVIDIA GPU |.*?for GPU at PCI:)"
    r"(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
)

_GENERIC_DIRS = frozenset(
    {
        "",
        ".",
        "log",
        "logs",
        "var",
        "kernel",
        "kern",
        "dmesg",
        "journal",
        "journald",
        "syslog",
        "system",
        "sys",
        "host",
        "hosts",
        "node",
        "nodes",
        "bundle",
        "evidence",
        "host-logs",
        "hostlogs",
        "os",
        "kmsg",
        "pstore",
        "tmp",
        "data",
        "run",
        "collect",
        "collected",
        "diag",
        "diagnostics",
        "sosreport",
        "class",
        "sysfs",
        "infiniband",
        "counters",
        "hw_counters",
        "ports",
        "before",
        "after",
        "ib",
        "rdma",
        "net",
        "network",
    }
)
_NAME_HOST = (
    re.compile(
        r"^(?:dmesg|kern|kernel|kmsg|journal|journalctl|syslog|messages|ibstat|ibv_devinfo|rdma-link|rdma_link)"
        r"[-_](?P<host>[A-Za-z0-9][\w.-]*?)"
        r"(?:\.(?:log|txt|out))?$"
    ),
    re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*?)[-_.](?:dmesg|kern|kernel|kmsg|journal|syslog)(?:\.(?:log|txt|out))?$"),
)


@dataclass(slots=True)
class KernelLine:
    """One kernel-log line taken apart: message, clocks, host, and which format it was."""

    msg: str
    wall: float | None = None
    mono: float | None = None
    host: str | None = None
    ident: str | None = None
    fmt: str = "bare"
    naive: bool = False  # the wall time had no zone (read as UTC)


def _frac(frac: str | None) -> float:
    return int(frac) / 10 ** len(frac) if frac else 0.0


def _dt(y: int, mon: str, d: int, h: int, mi: int, s: int) -> float | None:
    mo = _MONTHS.get(mon.lower())
    if mo is None:
        return None
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _iso(text: str) -> float | None:
    return parse_timestamp(text.replace(",", ".", 1) if "," in text[:30] else text)


def parse_line(text: str, year: int | None = None) -> KernelLine:
    """Peel every prefix any kernel-log format puts before the message (pure; never raises).

    ``year`` is used for syslog times, which carry none. Formats with only a monotonic stamp
    (kmsg, raw dmesg) are tried first, then the fixed wall-clock ones (``dmesg -T``, the fabric
    manager's), then those a host and process may follow (ISO, journald, syslog).
    """
    rest = text.rstrip("\r\n")
    kl = KernelLine(msg=rest)
    m = _KMSG.match(rest)
    if m:
        kl.mono = int(m["usec"]) / 1e6
        kl.msg = m["msg"]
        kl.fmt = "kmsg"
        return kl
    m = _DECODE.match(rest)
    if m and m["lvl"] in ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"):
        rest = rest[m.end() :]
    m = _PRI.match(rest)
    if m:
        rest = rest[m.end() :]
    if _monotonic(rest, kl) or _fixed_wall(rest, kl):
        return kl
    matched = _wall_with_host(rest, kl, year)
    if matched is None:
        kl.msg = rest
        return kl
    rest = rest[matched.end() :]
    h = _HOST_IDENT.match(rest)
    if h and (kl.fmt != "iso" or h["ident"] == "kernel"):
        kl.host, kl.ident = h["host"], h["ident"]
        rest = rest[h.end() :]
        if kl.fmt == "iso":
            kl.fmt = "journal-iso"
    elif kl.fmt == "iso":
        kl.fmt = "dmesg-iso"
    mm = _MONO.match(rest)  # syslog carrying the kernel's own stamp: an anchor line
    if mm:
        kl.mono = float(mm["mono"])
        rest = rest[mm.end() :]
    kl.msg = rest
    return kl


def _monotonic(rest: str, kl: KernelLine) -> bool:
    """``[12345.678901] msg`` (raw dmesg), or journalctl's short-monotonic with its host."""
    m = _MONO.match(rest)
    if not m:
        return False
    kl.mono = float(m["mono"])
    kl.fmt = "mono"
    rest = rest[m.end() :]
    h = _HOST_IDENT.match(rest)
    if h and h["ident"] == "kernel":  # journalctl -o short-monotonic
        kl.host, kl.ident = h["host"], "kernel"
        kl.fmt = "journal-monotonic"
        rest = rest[h.end() :]
    kl.msg = rest
    return True


def _fixed_wall(rest: str, kl: KernelLine) -> bool:
    """``dmesg -T``'s ctime stamp, or NVIDIA's fabric manager's: a wall clock, no host."""
    m = _CTIME.match(rest)
    if m:
        kl.wall = _dt(int(m["y"]), m["mon"], int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]))
        if kl.wall is not None:
            kl.wall += _frac(m["frac"])
        kl.fmt, kl.naive = "ctime", True
        kl.msg = rest[m.end() :]
        return True
    m = _FMTIME.match(rest)
    if m:
        kl.wall = _dt(int(m["y"]), m["mon"], int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]))
        kl.fmt, kl.naive = "fabricmanager", True
        kl.msg = rest[m.end() :]
        return True
    return False


def _wall_with_host(rest: str, kl: KernelLine, year: int | None) -> re.Match[str] | None:
    """ISO, journald (full or unix) and syslog stamps; sets the wall time and format, returns the match."""
    m = _ISO.match(rest)
    if m:
        kl.wall = _iso(m["iso"])
        kl.naive = not re.search(r"(?:Z|[+-]\d{2}:?\d{2})$", m["iso"])
        kl.fmt = "iso"
        return m
    m = _FULL.match(rest)
    if m:
        wall = parse_timestamp(m["iso"])
        tz = m["tz"]
        if wall is not None and tz not in ("UTC", "GMT", "Z"):
            if tz[0] in "+-":
                off = int(tz[1:3]) * 3600 + int(tz[3:5]) * 60
                wall -= off if tz[0] == "+" else -off
            else:
                kl.naive = True  # a zone abbreviation (CET, PST): read as UTC
        kl.wall, kl.fmt = wall, "journal-full"
        return m
    m = _UNIX.match(rest)
    if m:
        kl.wall, kl.fmt = float(m["unix"]), "journal-unix"
        return m
    m = _SYSLOG.match(rest)
    if m:
        y = year or datetime.now(UTC).year
        wall = _dt(y, m["mon"], int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]))
        if wall is not None:
            wall += _frac(m["frac"])
        kl.wall, kl.naive, kl.fmt = wall, True, "syslog"
        return m
    return None


def host_from_path(rel: str) -> str | None:
    """The host a kernel log belongs to, from its path inside the bundle (None if unclear)."""
    p = PurePosixPath(rel)
    name = p.name
    for pat in _NAME_HOST:
        m = pat.match(name)
        if m and m["host"].lower() not in _GENERIC_DIRS:
            return m["host"]
    for part in reversed(p.parts[:-1]):
        low = part.lower()
        if low in _GENERIC_DIRS or low.startswith(".") or low.endswith((".tar", ".tgz")):
            continue
        return part
    return None


def _parse_boot_value(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return _iso(v)


def find_anchor(lines: list[str]) -> tuple[float | None, str, str | None]:
    """(boot time, how it was found, declared host) from a log's first lines."""
    host: str | None = None
    boot: float | None = None
    how = ""
    for line in lines:
        if host is None:
            mh = _HOST_HEADER.match(line)
            if mh:
                host = mh["v"]
                continue
        if boot is not None:
            continue
        mb = _BOOT_HEADER.match(line) or _BTIME.match(line)
        if mb:
            boot = _parse_boot_value(mb["v"])
            how = "header" if line.startswith("#") else "btime"
            continue
        kl = parse_line(line)
        if kl.mono is not None and kl.wall is not None and kl.fmt not in ("kmsg",):
            if kl.naive and kl.fmt == "syslog":
                continue  # needs the year: the parser re-derives it per line
            boot, how = kl.wall - kl.mono, f"{kl.fmt} line with both clocks"
            continue
        if kl.mono is not None:
            ma = _AUDIT.search(kl.msg)
            if ma:
                boot, how = float(ma["epoch"]) - kl.mono, "audit record"
    return boot, how, host


@register_parser(FileKind.KERNEL_LOG)
class KernelLogParser(SourceParser):
    """Locate kernel-log lines: wall time (from any clock), host, and the GPU an NVRM line names."""

    inherit_lines = 0

    @property
    def job_output(self) -> bool:
        return False

    def __init__(self, sf: SourceFile, ctx: ParseContext):
        super().__init__(sf, ctx)
        head: list[str] = []
        try:
            with open(sf.path, "rb") as fh:
                raw = fh.read(HEAD_BYTES)
            head = raw.decode("utf-8", "replace").splitlines()
            if len(raw) == HEAD_BYTES:
                head = head[:-1]  # the last line may be cut
        except OSError:
            pass
        self.boot, self.boot_how, declared = find_anchor(head)
        self.file_host = declared or sf.host or host_from_path(sf.rel)
        self.year = ctx.year_hint
        self._last_wall: float | None = None
        self._warned: set[str] = set()

    def _warn_once(self, key: str, msg: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.ctx.warn(f"{self.sf.rel}: {msg}")

    def _roll_year(self, kl: KernelLine, text: str) -> KernelLine:
        """Syslog has no year: take the bundle's, and step it when the log crosses New Year."""
        if self.year is None:
            self.year = self.ctx.year_hint or datetime.now(UTC).year
            if self.ctx.year_hint is None:
                self._warn_once("year", f"syslog times carry no year; assumed {self.year}")
        if kl.wall is not None and self._last_wall is not None and kl.wall < self._last_wall - 180 * 86400:
            self.year += 1
            kl = parse_line(text, self.year)
        return kl

    def locate(self, hit: Hit) -> LineInfo:
        kl = parse_line(hit.text, self.year)
        if kl.fmt == "syslog":
            kl = self._roll_year(kl, hit.text)
        info = LineInfo(text=kl.msg)
        quality = TsQuality.EXACT
        if kl.wall is None and kl.mono is None and hit.text[:1].isspace():
            # a continuation line of a multi-line printk: it happened when the line above did
            for above in reversed(hit.before(4)):
                ka = parse_line(above, self.year)
                if ka.wall is not None or ka.mono is not None:
                    kl.wall, kl.mono, kl.host = ka.wall, ka.mono, kl.host or ka.host
                    quality = TsQuality.INHERITED
                    break
        info.host = kl.host or self.file_host or self.ctx.default_host
        if kl.wall is not None:
            info.ts, info.ts_quality = kl.wall, quality
            if kl.mono is not None and self.boot is None:
                self.boot, self.boot_how = kl.wall - kl.mono, f"{kl.fmt} line with both clocks"
            self._last_wall = kl.wall
        elif kl.mono is not None:
            if self.boot is not None:
                info.ts, info.ts_quality = self.boot + kl.mono, quality
                self._warn_once(
                    "mono",
                    f"kernel times derived from monotonic stamps and the boot time "
                    f"({self.boot_how}); they drift if the host suspended",
                )
            else:
                self._warn_once(
                    "noboot",
                    "kernel log has only monotonic (since-boot) stamps and no boot time "
                    "(add '# boot_time=<epoch>' or a /proc/stat 'btime' line); "
                    "its events are not placed on the timeline",
                )
        info.text = self._join_continuation(hit, kl.msg)
        m = _NVRM_PCI.search(info.text)
        if m:
            info.gpu = normalize_pci(m["pci"])
        if info.ts is not None:
            self.last_ts = info.ts
        return info

    def _join_continuation(self, hit: Hit, msg: str) -> str:
        """Re-join NVRM messages the driver printed over several lines (one printk, many lines).

        ``NVRM: The NVIDIA GPU 0000:b3:00.0`` / ``NVRM: (PCI ID: 10de:26b5) installed in this system has``
        / ``NVRM: fallen off the bus and is not responding to commands.`` names the GPU only on its
        first line; the signature needs all three.
        """
        if "fallen off the bus and is not responding" not in msg or "The NVIDIA GPU" in msg:
            return msg
        above = hit.before(3)
        parts: list[str] = []
        for line in reversed(above):
            part = parse_line(line, self.year).msg.strip()
            parts.append(part)
            if "The NVIDIA GPU" in part:
                parts.reverse()
                cont = [p[6:].strip() if p.startswith("NVRM: ") else p for p in [*parts[1:], msg.strip()]]
                return " ".join([parts[0], *cont])
        return msg
