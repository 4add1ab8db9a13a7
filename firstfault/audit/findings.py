"""Configuration findings: settings and placements that widen a fault's cost or hide its culprit.

Each finding has a severity (``critical``: a class of faults will have no culprit or will cost
the whole job far more than it must; ``warning``: evidence or time lost; ``info``: a number
worth knowing), a stable code for programs and a sentence for people, with the figure that
makes it (seconds, ranks, GPU-hours).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from firstfault.audit.checkpoint import Goodput
from firstfault.audit.groups import Grid
from firstfault.audit.layout import Layout
from firstfault.audit.model import Blast, ComponentClass

LONG_TIMEOUT_S = 1800.0  # 3x torch's default: a hang then idles the whole job for half an hour
SHORT_TIMEOUT_S = 60.0  # below this, a slow checkpoint or a first compile step can time out


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    code: str
    message: str


def _evidence(lay: Layout, blasts: list[Blast]) -> list[Finding]:
    ev, out = lay.evidence, []
    if ev.flight_recorder_entries == 0:
        out.append(
            Finding(
                Severity.CRITICAL,
                "fr_off",
                "flight recorder off (TORCH_NCCL_TRACE_BUFFER_SIZE=0): "
                "a hang leaves no record of which rank never entered the collective",
            )
        )
    elif not ev.dump_on_timeout:
        out.append(
            Finding(
                Severity.CRITICAL,
                "no_dump_on_timeout",
                "TORCH_NCCL_DUMP_ON_TIMEOUT off: the flight "
                "recorder runs but nothing is written when a watchdog fires, so hangs have no culprit",
            )
        )
    for b in blasts:
        if not b.attributable:
            out.append(Finding(Severity.CRITICAL, f"unattributable_{b.cls}", f"{b.component}: {b.attribution}"))
    if not lay.timeouts.heartbeat:
        out.append(
            Finding(
                Severity.WARNING,
                "heartbeat_off",
                "TORCH_NCCL_ENABLE_MONITORING=0: a watchdog that "
                "itself hangs (a GPU that stops answering) is never killed; the job idles until the scheduler's limit",
            )
        )
    if ev.nccl_debug.upper() not in ("WARN", "INFO", "TRACE"):
        out.append(
            Finding(
                Severity.WARNING,
                "nccl_debug_unset",
                "NCCL_DEBUG unset: NCCL prints none of its "
                "warnings (port errors, remote errors naming the peer); set NCCL_DEBUG=WARN",
            )
        )
    if not ev.kernel_logs:
        out.append(
            Finding(
                Severity.WARNING,
                "no_kernel_logs",
                "host kernel logs not collected: Xid and link events are lost, a GPU fault reads as a software error",
            )
        )
    if not ev.scheduler_logs:
        out.append(
            Finding(
                Severity.INFO, "no_scheduler_logs", "slurmctld log not collected: a lost host shows only as silence"
            )
        )
    return out


def _timeouts(lay: Layout) -> list[Finding]:
    t, out = lay.timeouts.nccl_timeout_s, []
    cost = t * lay.world / 3600.0
    if t > LONG_TIMEOUT_S:
        out.append(
            Finding(
                Severity.WARNING,
                "timeout_long",
                f"NCCL timeout {t:.0f} s: every hang idles all "
                f"{lay.world} GPUs that long before anything is noticed ({cost:.0f} GPU-hours a hang)",
            )
        )
    elif t < SHORT_TIMEOUT_S:
        out.append(
            Finding(
                Severity.WARNING,
                "timeout_short",
                f"NCCL timeout {t:.0f} s: a slow checkpoint write or "
                "a first compiled step can exceed it and kill a healthy job",
            )
        )
    else:
        out.append(
            Finding(
                Severity.INFO,
                "timeout_cost",
                f"NCCL timeout {t:.0f} s: a hang costs {cost:.1f} GPU-hours before the watchdog fires",
            )
        )
    if not lay.launcher.kill_on_bad_exit and lay.hosts > 1:
        out.append(
            Finding(
                Severity.INFO,
                "no_kill_on_bad_exit",
                f"srun without --kill-on-bad-exit: after a crash "
                f"the other hosts wait the full NCCL timeout ({t:.0f} s) before they stop",
            )
        )
    return out


def _placement(lay: Layout, grid: Grid, blasts: list[Blast]) -> list[Finding]:
    out = []
    g = lay.gpus_per_host
    tp = grid.members(0, "tp") if grid.sizes["tp"] > 1 else [0]
    if len({r // g for r in tp}) > 1:
        out.append(
            Finding(
                Severity.WARNING,
                "tp_across_hosts",
                f"the TP group of rank 0 spans hosts "
                f"({len({r // g for r in tp})}): tensor-parallel traffic crosses the NICs; one NIC stops a TP group",
            )
        )
    for b in blasts:
        if b.shards_without_replica and b.cls in (ComponentClass.HOST, ComponentClass.LEAF, ComponentClass.RACK):
            out.append(
                Finding(
                    Severity.WARNING,
                    f"replica_set_{b.cls}",
                    f"{b.component} takes every data-parallel "
                    f"replica of {b.shards_without_replica} model shard(s): no copy survives for an in-memory restart",
                )
            )
    return out


def _checkpoint(lay: Layout, gp: Goodput) -> list[Finding]:
    out = []
    iv = lay.checkpoint.interval_s
    if gp.daly_s > 0 and (iv > 2 * gp.daly_s or iv < gp.daly_s / 2):
        out.append(
            Finding(
                Severity.WARNING,
                "checkpoint_interval",
                f"checkpoint every {iv:.0f} s; Daly's optimum for "
                f"MTBF {gp.mtbf_s / 3600:.1f} h and {lay.checkpoint.write_s:.0f} s writes is {gp.daly_s:.0f} s "
                f"(goodput {gp.goodput_with_spares:.1%} now, {gp.goodput_at_daly:.1%} at the optimum)",
            )
        )
    if lay.spares.nodes == 0:
        out.append(
            Finding(
                Severity.INFO,
                "no_spares",
                f"no spare nodes: expected goodput "
                f"{gp.goodput_without_spares:.1%} if each hardware failure waits for its repair "
                f"({lay.spares.repair_s / 3600:.1f} h, spares.repair_s), {gp.goodput_with_spares:.1%} with spares",
            )
        )
    return out


def findings(lay: Layout, blasts: list[Blast], gp: Goodput) -> list[Finding]:
    grid = Grid.of(lay)
    out = _evidence(lay, blasts) + _timeouts(lay) + _placement(lay, grid, blasts) + _checkpoint(lay, gp)
    order = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted(out, key=lambda f: order[f.severity])
