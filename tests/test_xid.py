"""The Xid catalog as data: every NVIDIA Xid present, firstfault's judgement for the key ones,
and the kernel signatures routing each Xid to the signature of its judgement group.

Facts come from NVIDIA's catalog (shared/peer-data/xid-catalog/xid_catalog.csv, transcribed from
docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html); the tests that read the CSV skip
when shared/ is absent, the rest run on the committed firstfault/data/xid_catalog.toml.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from firstfault.match import xid
from firstfault.match.registry import load_registry
from firstfault.vocab import Action, Role

REPO = Path(__file__).resolve().parent.parent
CSV = REPO.parent / "shared" / "peer-data" / "xid-catalog" / "xid_catalog.csv"

# A real Xid line (leptonai/gpud testdata accelerator_nvidia_xid_dmesg-with-xid-119.log); the
# routing test substitutes the number to see which signature each Xid lands in.
REAL_LINE = (
    "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, "
    "Timeout after 6s of waiting for RPC response from GPU4 GSP! "
    "Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
)
GROUP_SIGNATURE = {
    "exclude": "kernel.xid.exclude",
    "restart": "kernel.xid.restart",
    "application": "kernel.xid.application",
    "consequence": "kernel.xid.consequence",
    "info": "kernel.xid.info",
    "other": "kernel.xid",
}


def test_every_catalog_xid_present() -> None:
    table = xid.all_xids()
    assert len(table) == 172
    assert sorted(table) == list(range(1, 173))
    for info in table.values():
        assert info.known and info.mnemonic and info.description
        assert info.layer in ("hardware", "driver", "application")
        assert info.role in ("root", "consequence", "informational")
        assert info.action in ("exclude_and_restart", "restart", "stop", "none")
        assert info.signature_group in GROUP_SIGNATURE
        assert info.judgement_source and info.note


@pytest.mark.skipif(not CSV.is_file(), reason="shared/peer-data/xid-catalog absent")
def test_catalog_facts_match_nvidia_csv() -> None:
    with open(CSV, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 172
    for row in rows:
        info = xid.lookup(int(row["xid"]))
        assert info.mnemonic == row["mnemonic"].strip()
        assert info.nvidia_immediate == row["immediate_resolution"].strip()
        assert info.nvidia_investigatory == row["investigatory_resolution"].strip()
        assert row["description"].split()[0] in info.description


@pytest.mark.skipif(not CSV.is_file(), reason="shared/peer-data/xid-catalog absent")
def test_committed_catalog_is_what_the_generator_writes() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_xid_catalog.py"), "--csv", str(CSV), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("n", [13, 31, 43])
def test_application_class_xids_restart_with_the_app_as_suspect(n: int) -> None:
    info = xid.lookup(n)
    assert (info.layer, info.role, info.action, info.category) == (
        "application",
        "root",
        "restart",
        "application_error",
    )


def test_xid45_is_never_a_root() -> None:
    info = xid.lookup(45)
    assert info.role == "consequence" and not info.can_be_root
    assert info.event_role is Role.CASCADE
    assert "WORKFLOW_XID_45" in info.nvidia_immediate


@pytest.mark.parametrize("n", [48, 64, 74, 79, 95, 119, 120, 136, 140, 144, 149, 150])
def test_hardware_xids_exclude_the_node(n: int) -> None:
    info = xid.lookup(n)
    assert info.role == "root" and info.action == "exclude_and_restart" and info.category == "gpu_hardware"
    assert info.event_action is Action.EXCLUDE_AND_RESTART


def test_checked_against_nvidia_resolution_column() -> None:
    # 94: NVIDIA says RESTART_APP (contained error) -> restart, not exclude
    assert xid.lookup(94).action == "restart" and xid.lookup(94).nvidia_immediate == "RESTART_APP"
    # 63 (remap recorded) and 92 (SBE rate) are IGNORE in NVIDIA's column
    for n in (63, 92):
        assert xid.lookup(n).role == "informational" and xid.lookup(n).nvidia_immediate == "IGNORE"
    assert xid.lookup(154).role == "consequence"
    assert xid.lookup(171).role == xid.lookup(172).role == "consequence"
    assert xid.lookup(78).action == "stop"


def test_unknown_xid_is_conservative() -> None:
    info = xid.lookup(999)
    assert not info.known and info.action == "exclude_and_restart"
    assert xid.lookup("not a number").known is False
    assert xid.lookup("79").xid == 79


def test_every_xid_routes_to_its_group_signature() -> None:
    reg = load_registry()
    for n, info in xid.all_xids().items():
        line = REAL_LINE.replace("): 119,", f"): {n},")
        sig = reg.match(line, "kernel_log")
        assert sig is not None, n
        # (154 with its own 'GPU recovery action changed' text goes to kernel.xid.recovery_action)
        expected = GROUP_SIGNATURE[info.signature_group]
        assert sig.id == expected, (n, sig.id, info.signature_group)
        m = sig.pattern.search(line)
        assert m is not None and m["xid"] == str(n) and m["pci"] == "0000:9b:00"
        assert sig.role == info.event_role, n


def test_xid154_recovery_action_signature() -> None:
    # NVIDIA/NVSentinel health-monitors/syslog-health-monitor/pkg/xid/parser/csv_test.go
    line = "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    sig = load_registry().match(line, "kernel_log")
    assert sig is not None and sig.id == "kernel.xid.recovery_action"
    m = sig.pattern.search(line)
    assert m is not None and m["recovery_action"] == "GPU Reset Required" and m["xid"] == "154"
