"""Kernel logs in every format a collector writes, against real wording.

Sources of the wording are cited per test; tests/fixtures/host/README.md lists the fixture files.
The gpud test reads leptonai/gpud's real kernel-log excerpts from shared/peer-data (skips when
absent) and requires every file there to parse and every Xid line to become an event with host,
PCI id and time.
"""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firstfault.discover import SourceFile, discover
from firstfault.match.registry import load_registry
from firstfault.parse.base import ParseContext
from firstfault.parse.kernel import find_anchor, host_from_path, parse_line
from firstfault.parse.run import parse_bundle, parse_file
from firstfault.vocab import Category, Event, Role
from firstfault.vocab.topology import normalize_pci

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FIRSTFAULT_SHARED", REPO.parent / "shared"))
GPUD = SHARED / "peer-data" / "gpud-kernel-logs"
FIX = REPO / "tests" / "fixtures" / "host"

# Real message (leptonai/gpud testdata accelerator_nvidia_xid_dmesg-with-xid-119.log) rendered in
# each journalctl output mode; the prefixes follow journalctl(1) / systemd logs-show.c.
XID_MSG = "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting for RPC"
T0 = datetime(2025, 2, 23, 16, 24, 18, tzinfo=UTC).timestamp()


def _utc(y: int, mo: int, d: int, h: int, mi: int, sec: int) -> float:
    return datetime(y, mo, d, h, mi, sec, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("line", "fmt", "wall", "mono", "host"),
    [
        (f"[Sun Feb 23 16:24:18 2025] {XID_MSG}", "ctime", T0, None, None),  # dmesg -T (gpud testdata)
        (f"kern  :warn  : 2025-02-23T16:24:18,285060+00:00 {XID_MSG}", "dmesg-iso", T0 + 0.28506, None, None),
        (f"2025-02-23T16:24:18,285060+00:00 {XID_MSG}", "dmesg-iso", T0 + 0.28506, None, None),
        (f"[240314.528856] {XID_MSG}", "mono", None, 240314.528856, None),  # plain dmesg
        (f"<4>[    2.608284] {XID_MSG}", "mono", None, 2.608284, None),  # dmesg -r / pstore
        (f"4,3973,227996636,-;{XID_MSG}", "kmsg", None, 227.996636, None),  # /dev/kmsg
        (f"Feb 23 16:24:18 dgx01 kernel: {XID_MSG}", "syslog", T0, None, "dgx01"),  # journalctl -k (short)
        # journalctl -o short-precise, short-iso, short-iso-precise, short-full, short-unix, short-monotonic
        (f"Feb 23 16:24:18.285060 dgx01 kernel: {XID_MSG}", "syslog", T0 + 0.28506, None, "dgx01"),
        (f"2025-02-23T16:24:18+0000 dgx01 kernel: {XID_MSG}", "journal-iso", T0, None, "dgx01"),
        (
            f"2025-02-23T16:24:18.285060+00:00 dgx01 kernel: {XID_MSG}",
            "journal-iso",
            T0 + 0.28506,
            None,
            "dgx01",
        ),
        (f"Sun 2025-02-23 16:24:18 UTC dgx01 kernel: {XID_MSG}", "journal-full", T0, None, "dgx01"),
        (f"1740327858.285060 dgx01 kernel: {XID_MSG}", "journal-unix", T0 + 0.28506, None, "dgx01"),
        (f"[  123.456789] dgx01 kernel: {XID_MSG}", "journal-monotonic", None, 123.456789, "dgx01"),
        # syslog carrying the kernel's own stamp (NVIDIA/gpu-operator#1146): both clocks, an anchor
        (
            f"Feb 23 16:24:18 worker4 kernel: [240314.528856] {XID_MSG}",
            "syslog",
            T0,
            240314.528856,
            "worker4",
        ),
    ],
)
def test_every_kernel_log_format(line: str, fmt: str, wall: float | None, mono: float | None, host: str | None) -> None:
    kl = parse_line(line, 2025)
    assert kl.msg == XID_MSG
    assert kl.fmt == fmt
    assert kl.host == host
    assert (kl.wall is None) == (wall is None) and (kl.mono is None) == (mono is None)
    if wall is not None:
        assert kl.wall == pytest.approx(wall, abs=1e-4)
    if mono is not None:
        assert kl.mono == pytest.approx(mono)


def test_a_kernel_message_is_not_taken_for_a_host_field() -> None:
    # "usb 1-2: ..." (gpud pstore testdata) after a dmesg stamp is a message, not "host ident:"
    kl = parse_line("2025-01-21T04:41:44,285060+00:00 usb 1-2: New USB device found, idVendor=174c")
    assert kl.host is None and kl.msg.startswith("usb 1-2:")
    kl = parse_line("[    2.646272] usb 1-2: New USB device found, idVendor=174c, idProduct=2074")
    assert kl.host is None and kl.fmt == "mono"


def test_fabric_manager_time_format() -> None:
    # leptonai/gpud testdata accelerator_nvidia_fabric-manager_fabricmanager.log
    kl = parse_line("[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028")
    assert kl.fmt == "fabricmanager" and kl.wall == _utc(2025, 2, 27, 15, 10, 2)


@pytest.mark.parametrize(
    ("raw", "canon"),
    [
        ("0000:9b:00", "0000:9b:00.0"),
        ("PCI:0000:10:1c", "0000:10:1c.0"),
        ("00000000:9B:00.0", "0000:9b:00.0"),
        ("9b000", "0000:9b:00.0"),
        ("18000", "0000:18:00.0"),
        ("0000:b3:00.0", "0000:b3:00.0"),
        ("10000:00:01.0", "10000:00:01.0"),
        ("", None),
        ("zz", None),
    ],
)
def test_normalize_pci(raw: str, canon: str | None) -> None:
    assert normalize_pci(raw) == canon


@pytest.mark.parametrize(
    ("rel", "host"),
    [
        ("dgx01/dmesg.log", "dgx01"),
        ("dmesg-dgx01.log", "dgx01"),
        ("dgx01.dmesg", "dgx01"),
        ("hosts/dgx01/var/log/kern.log", "dgx01"),
        ("dmesg.log", None),
        ("logs/kernel/dmesg.txt", None),
    ],
)
def test_host_from_path(rel: str, host: str | None) -> None:
    assert host_from_path(rel) == host


def test_boot_time_anchors() -> None:
    assert find_anchor(["# boot_time=1700000000", "[ 1.0] x"])[0] == 1700000000.0
    assert find_anchor(["btime 1753325000"])[0] == 1753325000.0
    assert find_anchor(["# host=dgx07"])[2] == "dgx07"
    # audit record under a monotonic stamp (gpud testdata pkg_pstore_7530486857247_dmesg.txt)
    boot, how, _ = find_anchor(['<5>[   13.715408] audit: type=1400 audit(1753325017.308:2): apparmor="STATUS"'])
    assert how == "audit record" and boot == pytest.approx(1753325017.308 - 13.715408)


def _parse(path: Path, kind: str = "kernel_log", host: str | None = None) -> tuple[list[Event], ParseContext]:
    sf = SourceFile(path, path.name, kind, path.stat().st_size, host=host)
    ctx = ParseContext(year_hint=2025)
    events, _ = parse_file(sf, load_registry(), ctx, 0)
    return events, ctx


def test_monotonic_with_boot_time_header() -> None:
    # Bumblebee-Project/Bumblebee#554 + NVIDIA/NVSentinel#155 wording, '# boot_time=' header
    events, ctx = _parse(FIX / "xid79_boot_time.dmesg", host="dgx01")
    by = {e.signature: e for e in events}
    off = by["kernel.gpu_fallen_off_bus"]
    assert off.ts == pytest.approx(1700000000 + 49.261458) and off.gpu == "0000:01:00.0"
    assert off.fields["xid_equivalent"] == "79" and off.category is Category.GPU_HARDWARE
    xid = by["kernel.xid.exclude"]
    assert xid.fields["xid"] == "79" and xid.gpu == "0000:44:00.0" and xid.host == "dgx01"
    assert any("boot time" in w for w in ctx.warnings)


def test_monotonic_without_anchor_warns_and_keeps_no_time() -> None:
    events, ctx = _parse(FIX / "gpu_fallen_multiline.dmesg", host="dgx02")
    assert events and all(e.ts is None for e in events)
    assert any("only monotonic" in w for w in ctx.warnings)


def test_gpu_fallen_off_bus_over_three_lines_keeps_the_pci() -> None:
    # NVIDIA/NVSentinel#155: the driver prints the GPU's PCI id only on the first of three lines
    events, _ = _parse(FIX / "gpu_fallen_multiline.dmesg", host="dgx02")
    ev = next(e for e in events if e.signature == "kernel.gpu_fallen_off_bus_probe")
    assert ev.fields["pci"] == "0000:b3:00.0" and ev.fields["pci_id"] == "10de:26b5"
    assert ev.gpu == "0000:b3:00.0" and ev.host == "dgx02" and ev.role is Role.ROOT


def test_syslog_host_field_and_year() -> None:
    # linux-pci list report (bd-cpu18) -- host from the line, year from the bundle
    events, _ = _parse(FIX / "syslog_aer.log")
    sigs = [e.signature for e in events]
    assert sigs[:2] == ["kernel.pcie_aer_fatal", "kernel.pcie_bus_error"]
    assert all(e.host == "bd-cpu18" for e in events)
    assert events[0].ts == _utc(2025, 12, 1, 2, 16, 37)


def test_syslog_crossing_new_year(tmp_path: Path) -> None:
    # messages: linux-rdma cover letter ('Port: 1 Link DOWN'), leptonai/gpud#1209 ('Link ACTIVE')
    p = tmp_path / "kern.log"
    p.write_text(
        "Dec 31 23:59:59 dgx01 kernel: mlx5_core 0000:08:00.0 mlx5_0: Port: 1 Link DOWN\n"
        "Jan  1 00:00:05 dgx01 kernel: mlx5_core 0000:08:00.0 mlx5_0: Port: 1 Link ACTIVE\n"
    )
    events, _ = _parse(p)
    assert [e.signature for e in events] == ["kernel.ib_port_down", "kernel.ib_port_state"]
    assert events[0].ts == _utc(2025, 12, 31, 23, 59, 59)
    assert events[1].ts == _utc(2026, 1, 1, 0, 0, 5)


def test_journal_short_real_lines() -> None:
    # leptonai/gpud#1209 (journalctl -k of an H100 node) and a fedora report of Xid 120
    events, _ = _parse(FIX / "journal_short.log")
    got = [(e.signature, e.host, e.fields.get("link_state") or e.fields.get("xid")) for e in events]
    assert got == [
        ("kernel.ib_port_state", "000-000-00000-1-gpu-1", "INIT"),
        ("kernel.ib_port_state", "000-000-00000-1-gpu-1", "ACTIVE"),
        ("kernel.xid.exclude", "fedora", "120"),
    ]


def test_bad_input_never_crashes(tmp_path: Path) -> None:
    p = tmp_path / "dmesg.log"
    p.write_bytes(
        b"\x00\xff\xfe[ 12.5 NVRM: Xid (PCI:0000:9b:00): \n"
        + b"["
        + b"9" * 70000
        + b"] NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.\n"
        + "[Sun Feb 30 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 79, caf\u00e9\n".encode()
        + b"Feb 30 25:61:61 h kernel: NVRM: Xid (PCI:zz): 79\n"
        + b"99999999999,1,2,-;NVRM: Xid (PCI:0000:9b:00): 48,\n"
    )
    events, _ = _parse(p)
    assert all(e.signature.startswith("kernel.") for e in events)
    for text in ("", "[", "<", "kern  :", "[Sun Feb 23", "Dec  1 02:16:37", "6,1,2,"):
        parse_line(text)


@pytest.mark.skipif(not GPUD.is_dir(), reason="shared/peer-data/gpud-kernel-logs absent")
def test_every_gpud_kernel_log(tmp_path: Path) -> None:
    """Each of leptonai/gpud's real excerpts parses; every Xid line is an event with host, PCI, time."""
    host_dir = tmp_path / "bundle" / "dgx-h100-07"
    host_dir.mkdir(parents=True)
    expected_xids: dict[str, int] = {}
    for f in sorted(GPUD.iterdir()):
        if f.name == "LICENSE" or not f.is_file():
            continue
        shutil.copy(f, host_dir / f.name)
        expected_xids[f.name] = sum(
            1 for line in f.read_text("utf-8", "replace").splitlines() if re.search(r"NVRM: Xid \(", line)
        )
    bundle = discover(tmp_path / "bundle")
    kinds = {sf.rel.rsplit("/", 1)[-1]: sf.kind for sf in bundle.files}
    assert all(k == "kernel_log" for k in kinds.values()), kinds
    result = parse_bundle(bundle, load_registry())
    per_file: dict[str, list[Event]] = {name: [] for name in expected_xids}
    for e in result.events:
        if "xid" in e.fields:
            per_file[e.source.rsplit("/", 1)[-1]].append(e)
    for name, n in expected_xids.items():
        xs = per_file[name]
        assert len(xs) == n, (name, len(xs), n)
        for e in xs:
            assert e.host == "dgx-h100-07", e
            assert e.fields["pci"] and e.gpu == normalize_pci(e.fields["pci"])
            assert e.ts is not None and e.ts_quality == "exact"
    assert expected_xids["accelerator_nvidia_xid_dmesg-with-xid-119.log"] == 5
    assert expected_xids["memory_dmesg.decode.iso.log"] == 17
    sigs = {e.signature for e in result.events}
    assert {
        "kernel.segfault",
        "kernel.oom_kill",
        "kernel.panic",
        "fabricmanager.nvswitch_error",
        "kernel.mlx5_module_event",
        "kernel.nvidia_peermem_invalid_context",
    } <= sigs
    seg = next(e for e in result.events if e.signature == "kernel.segfault")
    assert seg.fields["library"] == "libnccl.so.2" and seg.pid == 2536443
    panic = next(e for e in result.events if e.signature == "kernel.panic")
    assert panic.ts is not None  # monotonic stamps anchored by the pstore's audit() records


_PREFIXES = [
    "",
    "[ 12.5] ",
    "<6>",
    "kern  :warn  : ",
    "6,1,2,-;",
    "Dec  1 02:16:37 h kernel: ",
    "[Sun Feb 23 ",
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_PREFIXES), st.text(max_size=200))
def test_parse_line_never_raises(prefix: str, rest: str) -> None:
    kl = parse_line(prefix + rest, 2025)
    assert isinstance(kl.msg, str)
    normalize_pci(rest[:20])
    host_from_path(rest or "x")
