#!/usr/bin/env python3
"""Generate ``firstfault/data/xid_catalog.toml`` from NVIDIA's Xid catalog plus firstfault's judgement.

Why a generator: NVIDIA's catalog (172 rows: number, mnemonic, description, immediate and
investigatory resolution) is a fact table that changes with each driver branch, while
firstfault's judgement (which layer an Xid belongs to, whether it can be a root cause, what an
operator should do with a training job) is ours. Keeping the two apart means a new catalog
snapshot is a re-run, and every judgement that departs from NVIDIA's resolution column is an
explicit, commented override below rather than an edit lost in a 172-row file.

The generated TOML is committed: the package never needs ``shared/`` at run time.

Usage::

    python tools/gen_xid_catalog.py [--csv ../shared/peer-data/xid-catalog/xid_catalog.csv]
                                    [--out firstfault/data/xid_catalog.toml] [--check]

``--check`` exits non-zero when the committed file differs from what the CSV would generate.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CSV = ROOT.parent / "shared" / "peer-data" / "xid-catalog" / "xid_catalog.csv"
DEFAULT_OUT = ROOT / "firstfault" / "data" / "xid_catalog.toml"
DEFAULT_SIGNATURES = ROOT / "firstfault" / "signatures" / "kernel.toml"
# kernel.toml signature id -> judgement group whose Xid numbers its pattern alternates over
GROUP_SIGNATURES = {
    "kernel.xid.exclude": "exclude",
    "kernel.xid.restart": "restart",
    "kernel.xid.application": "application",
    "kernel.xid.consequence": "consequence",
    "kernel.xid.info": "info",
}

CATALOG_SOURCE = (
    "NVIDIA Xid catalog, docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html "
    "(as mirrored by leptonai/gpud, generated 2025-10-29; shared/peer-data/xid-catalog/xid_catalog.csv)"
)
RULE_SOURCE = "firstfault rule from NVIDIA's immediate resolution column"


@dataclass(frozen=True)
class Judgement:
    """firstfault's reading of one Xid for a failed training job.

    ``role``: ``root`` (a fault in its own right), ``consequence`` (reported because of another
    fault; never the root when that other fault is present) or ``informational`` (recorded by
    the driver, does not by itself stop a job). ``action`` is for the *job*: a GPU that needs a
    reset or a reboot means the job restarts without that node (``exclude_and_restart``).
    """

    layer: str
    role: str
    action: str
    category: str
    note: str
    source: str = RULE_SOURCE


def J(layer: str, role: str, action: str, category: str, note: str, source: str = "") -> Judgement:
    return Judgement(layer, role, action, category, note, source or "firstfault judgement; " + CATALOG_SOURCE)


# Explicit judgements. Each one either departs from the generic rule below or is important
# enough to carry its own reasoning. Sources: NVIDIA's catalog and its per-Xid workflows
# (WORKFLOW_XID_13/31/45/48, WORKFLOW_NVLINK_ERR), NVIDIA's A100/H100 memory error management
# guide (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt) for 63/64/94/95, and NVIDIA's
# open-gpu-kernel-modules source for the wording of 94/95.
OVERRIDES: dict[int, Judgement] = {
    8: J(
        "driver",
        "root",
        "restart",
        "gpu_hardware",
        "GPU stopped processing (idle timeout); NVIDIA: restart the application, contact support if it recurs.",
    ),
    13: J(
        "application",
        "root",
        "restart",
        "application_error",
        "Graphics engine exception: almost always the application's kernel (illegal address, "
        "assert, bad instruction). Restart; if it recurs on the same GPU with different code, run DCGM diag "
        "(NVIDIA WORKFLOW_XID_13).",
    ),
    14: J("driver", "informational", "none", "gpu_hardware", "Fake error (test); NVIDIA: ignore."),
    31: J(
        "application",
        "root",
        "restart",
        "application_error",
        "GPU memory page fault (MMU fault): usually the application dereferenced a bad device address. "
        "Restart; hardware only if it follows the GPU across applications (NVIDIA WORKFLOW_XID_31).",
    ),
    43: J(
        "application",
        "root",
        "restart",
        "application_error",
        "GPU stopped processing the application's channel after a user-level fault; NVIDIA: ignore "
        "(driver recovered). Usually follows Xid 13/31 on the same GPU: the earliest of them is the root; "
        "the application is the suspect.",
    ),
    45: J(
        "driver",
        "consequence",
        "none",
        "gpu_hardware",
        "Preemptive cleanup: the driver tearing down channels after a previous error (another Xid, a "
        "killed process). Never the root when another Xid precedes it; alone, restart "
        "(NVIDIA WORKFLOW_XID_45: 'Not Solo: IGNORE (follow other Xid)').",
    ),
    48: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "Double-bit (uncorrectable) ECC error in GPU memory. The page is retired or the row remapped only "
        "after a GPU reset: exclude the node and restart (NVIDIA WORKFLOW_XID_48).",
    ),
    54: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "Auxiliary power not connected; NVIDIA: check mechanicals.",
    ),
    63: J(
        "hardware",
        "informational",
        "none",
        "gpu_hardware",
        "ECC page retirement / row remapping recorded. The GPU keeps working; the remap takes effect at the "
        "next GPU reset. On its own not a job-killer; with 48/94/95 follow those.",
    ),
    64: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "Page retirement / row remapping failed: the bad memory stays in use. NVIDIA: reset GPU, contact support.",
    ),
    74: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "NVLink error (fatal link error detected on a link). NVIDIA WORKFLOW_NVLINK_ERR: reset the GPU / "
        "node; the job cannot run on that NVLink domain until then.",
    ),
    78: J("driver", "root", "stop", "configuration", "vGPU start error; NVIDIA: update software/firmware."),
    79: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "GPU has fallen off the bus (PCIe): the driver can no longer talk to the GPU. NVIDIA: reboot the "
        "machine (RESTART_BM); a GPU reset does not help.",
    ),
    92: J(
        "hardware",
        "informational",
        "none",
        "gpu_hardware",
        "High single-bit (corrected) ECC error rate. Not fatal; recurring 92 on one GPU is a reason to inspect it.",
    ),
    94: J(
        "hardware",
        "root",
        "restart",
        "gpu_hardware",
        "Contained uncorrectable memory error: only the application that touched the memory is affected "
        "and must restart; the GPU stays usable (row remap pending reset). Repeated 94 on one GPU: exclude.",
    ),
    95: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "Uncontained uncorrectable memory error: every application on the GPU is affected; the GPU must be "
        "reset (NVIDIA: RESET_GPU).",
    ),
    106: J("driver", "informational", "none", "gpu_hardware", "SMBPBI test message; NVIDIA: ignore."),
    107: J("driver", "informational", "none", "gpu_hardware", "SMBPBI test message (silent); NVIDIA: ignore."),
    108: J(
        "driver",
        "informational",
        "none",
        "gpu_hardware",
        "Unused (NVLink remote translation); NVIDIA: ignore.",
    ),
    109: J("driver", "root", "exclude_and_restart", "gpu_hardware", "Context switch timeout; NVIDIA: reset GPU."),
    110: J("driver", "root", "exclude_and_restart", "gpu_hardware", "Security fault; NVIDIA: reset GPU."),
    119: J(
        "driver",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "GSP RPC timeout: the GPU System Processor firmware stopped answering the driver. NVIDIA: reset "
        "GPU; the driver itself prints 'The GPU likely needs to be reset'.",
    ),
    120: J("driver", "root", "exclude_and_restart", "gpu_hardware", "GSP error; NVIDIA: reset GPU."),
    137: J(
        "driver",
        "informational",
        "none",
        "gpu_hardware",
        "NVLink privilege error (a process touched memory it had no right to over NVLink); NVIDIA: ignore.",
    ),
    154: J(
        "driver",
        "consequence",
        "none",
        "gpu_hardware",
        "Recovery action changed: informational, about another Xid. Its text names the action the driver "
        "now requires (GPU Reset Required, Node Reboot Required, Drain and Reset); read recovery_action.",
    ),
    155: J(
        "driver",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "NVLink software-defined error; NVIDIA: reset GPU.",
    ),
    156: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "Resource retirement event; NVIDIA: reset GPU to activate it.",
    ),
    157: J(
        "hardware",
        "informational",
        "none",
        "gpu_hardware",
        "Resource retirement failure; NVIDIA: ignore, contact support if it recurs.",
    ),
    159: J(
        "driver",
        "consequence",
        "restart",
        "gpu_hardware",
        "CHI non-data error; NVIDIA: check UVM, reported in sympathy with another fault.",
    ),
    162: J("hardware", "informational", "none", "gpu_hardware", "Power smoothing circuitry re-engaged."),
    163: J("hardware", "informational", "none", "gpu_hardware", "Power smoothing circuitry disengaged."),
    164: J("hardware", "informational", "none", "gpu_hardware", "Power smoothing circuitry low lifetime reached."),
    165: J("hardware", "informational", "none", "gpu_hardware", "Power smoothing circuitry lifetime exhausted."),
    166: J(
        "driver",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "Confidential-computing traffic before the link was configured for encryption; no resolution in "
        "this catalog snapshot, conservative.",
    ),
    167: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "PCIe fatal timeout; no resolution in this catalog snapshot, treated like Xid 79.",
    ),
    168: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "Reduced GPU memory capacity (errors in the write-protected region); conservative.",
    ),
    169: J(
        "hardware",
        "root",
        "exclude_and_restart",
        "gpu_hardware",
        "SEC2 micro-controller halt; treated like Xid 62 (NVIDIA: reset GPU).",
    ),
    170: J("driver", "informational", "none", "gpu_hardware", "Interrupt seen in confidential-computing mode."),
    171: J(
        "hardware",
        "consequence",
        "exclude_and_restart",
        "gpu_hardware",
        "Details of an Xid 48 (DRAM): the same fault as the accompanying 48, not a second one.",
    ),
    172: J(
        "hardware",
        "consequence",
        "exclude_and_restart",
        "gpu_hardware",
        "Details of an Xid 48 (SRAM): the same fault as the accompanying 48, not a second one.",
    ),
}


def rule(xid: int, description: str, immediate: str, investigatory: str) -> Judgement:
    """Generic judgement from NVIDIA's resolution columns, for rows without an override."""
    imm = immediate.strip().upper()
    inv = investigatory.strip().upper()
    if description.strip().lower() == "unused":
        return Judgement(
            "driver",
            "root",
            "exclude_and_restart",
            "gpu_hardware",
            "Unused by current drivers; NVIDIA: contact support. Unknown GPU state: exclude.",
        )
    if imm == "RESTART_APP":
        if inv.startswith("CHECK_APP") or inv.startswith("WORKFLOW_XID_13") or inv.startswith("WORKFLOW_XID_31"):
            return Judgement(
                "application",
                "root",
                "restart",
                "application_error",
                "NVIDIA: restart the application and check the application/CUDA code.",
            )
        return Judgement(
            "driver",
            "root",
            "restart",
            "gpu_hardware",
            "Engine exception; NVIDIA: restart the application, contact support if it recurs.",
        )
    if imm == "IGNORE":
        return Judgement("driver", "informational", "none", "gpu_hardware", "NVIDIA: ignore.")
    if imm in (
        "RESET_GPU",
        "RESTART_BM",
        "WORKFLOW_XID_48",
        "WORKFLOW_NVLINK_ERR",
        "WORKFLOW_NVLINK5_ERR",
        "CHECK_MECHANICALS",
    ):
        return Judgement(
            "hardware",
            "root",
            "exclude_and_restart",
            "gpu_hardware",
            f"NVIDIA: {immediate}; the GPU needs a reset or service before it can run the job.",
        )
    if imm == "RESTART_VM":
        return Judgement("driver", "root", "exclude_and_restart", "gpu_hardware", "NVIDIA: restart the VM.")
    if imm == "CONTACT_SUPPORT":
        return Judgement(
            "driver",
            "root",
            "exclude_and_restart",
            "gpu_hardware",
            "NVIDIA: contact support. Unknown GPU state: exclude.",
        )
    raise SystemExit(f"Xid {xid}: no override and no rule for immediate resolution {immediate!r}")


def signature_group(j: Judgement) -> str:
    """Which kernel.toml Xid signature routes this Xid (kept in sync by tests/test_xid.py)."""
    if j.role == "informational":
        return "info"
    if j.role == "consequence":
        return "consequence"
    if j.category == "application_error":
        return "application"
    if j.action == "exclude_and_restart":
        return "exclude"
    if j.action == "restart":
        return "restart"
    return "other"


def _q(s: str) -> str:
    """A TOML basic string."""
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ").replace("\t", " ")
    return f'"{out}"'


def short(description: str, limit: int = 120) -> str:
    d = " ".join(description.split())
    return d if len(d) <= limit else d[: limit - 1].rstrip() + "…"


def alternation(xids: list[int]) -> str:
    """Regex alternation of Xid numbers, longest first (the pattern ends in a (?![0-9]) guard)."""
    return "|".join(str(x) for x in sorted(xids, key=lambda n: (-len(str(n)), n)))


def update_signatures(text: str, groups: dict[str, list[int]]) -> str:
    """kernel.toml with each group signature's ``(?P<xid>...)`` alternation set from ``groups``."""
    out: list[str] = []
    current: str | None = None
    for line in text.splitlines(keepends=True):
        m = re.match(r'^id = "([^"]+)"', line)
        if m:
            current = m.group(1)
        grp = GROUP_SIGNATURES.get(current or "")
        if grp and line.startswith("pattern = "):
            repl = f"(?P<xid>{alternation(groups.get(grp, []))})"
            head, sep, tail = line.partition("(?P<xid>")
            if sep:
                line = head + repl + tail[tail.index(")") + 1 :]
        out.append(line)
    return "".join(out)


def judge_all(csv_path: Path) -> tuple[list[dict[str, str]], dict[str, list[int]]]:
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    groups: dict[str, list[int]] = {}
    for row in rows:
        xid = int(row["xid"])
        j = OVERRIDES.get(xid) or rule(
            xid, row["description"], row["immediate_resolution"], row["investigatory_resolution"]
        )
        groups.setdefault(signature_group(j), []).append(xid)
    return rows, groups


def generate(csv_path: Path) -> str:
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    seen: set[int] = set()
    lines = [
        "# GENERATED by tools/gen_xid_catalog.py -- do not edit by hand; edit the generator and re-run.",
        f"# Facts (mnemonic, description, resolution): {CATALOG_SOURCE}.",
        "# Judgement (layer, role, action, category, note): firstfault; see docs/xid.md.",
        "",
        "[meta]",
        f"source = {_q(CATALOG_SOURCE)}",
        f"rows = {len(rows)}",
        "",
    ]
    groups: dict[str, list[int]] = {}
    for row in rows:
        xid = int(row["xid"])
        if xid in seen:
            raise SystemExit(f"duplicate Xid {xid} in {csv_path}")
        seen.add(xid)
        j = OVERRIDES.get(xid) or rule(
            xid, row["description"], row["immediate_resolution"], row["investigatory_resolution"]
        )
        grp = signature_group(j)
        groups.setdefault(grp, []).append(xid)
        lines += [
            "[[xid]]",
            f"xid = {xid}",
            f"mnemonic = {_q(row['mnemonic'].strip())}",
            f"description = {_q(short(row['description']))}",
            f"nvidia_immediate = {_q(row['immediate_resolution'].strip())}",
            f"nvidia_investigatory = {_q(row['investigatory_resolution'].strip())}",
            f"layer = {_q(j.layer)}",
            f"role = {_q(j.role)}",
            f"action = {_q(j.action)}",
            f"category = {_q(j.category)}",
            f"signature_group = {_q(grp)}",
            f"note = {_q(j.note)}",
            f"judgement_source = {_q(j.source)}",
            "",
        ]
    lines.append("[groups]")
    for grp in sorted(groups):
        lines.append(f"{grp} = [{', '.join(str(x) for x in groups[grp])}]")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--signatures",
        type=Path,
        default=DEFAULT_SIGNATURES,
        help="kernel.toml whose Xid group patterns are kept in sync with the judgement",
    )
    ap.add_argument("--check", action="store_true", help="fail if --out is not what --csv generates")
    args = ap.parse_args(argv)
    if not args.csv.is_file():
        print(f"{args.csv}: not found (the catalog lives in shared/peer-data/xid-catalog/)", file=sys.stderr)
        return 2
    text = generate(args.csv)
    _rows, groups = judge_all(args.csv)
    sig_old = args.signatures.read_text(encoding="utf-8") if args.signatures.is_file() else None
    sig_new = update_signatures(sig_old, groups) if sig_old is not None else None
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        stale = [str(args.out)] if current != text else []
        if sig_old is not None and sig_new != sig_old:
            stale.append(str(args.signatures))
        if stale:
            print(f"{', '.join(stale)} stale; re-run tools/gen_xid_catalog.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({text.count('[[xid]]')} Xids)")
    if sig_new is not None and sig_new != sig_old:
        args.signatures.write_text(sig_new, encoding="utf-8")
        print(f"updated the Xid groups in {args.signatures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
