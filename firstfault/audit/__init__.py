"""Resilience audit: a training job's blast radius per component, *before* the fault.

``audit(layout)`` takes a :class:`Layout` (or a YAML/JSON file) and returns an
:class:`AuditReport`: per component class, the ranks and groups a failure stops, how long
until the job notices with these timeouts, what evidence is left and whether the fault can be
attributed; configuration findings with severity; the failure rates (published, cited in
``rates``), Young's and Daly's checkpoint interval and the expected goodput with and without
spares. It reads no logs and runs nothing: the whole input is the layout. The cluster
simulator checks its predictions (``firstfault_bench.audit``); docs/audit.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from firstfault.audit.blast import blasts, criticality
from firstfault.audit.checkpoint import Goodput, goodput
from firstfault.audit.findings import Finding, findings
from firstfault.audit.layout import Layout, layout_from_dict, load_layout
from firstfault.audit.model import Blast, ComponentClass, Mechanism
from firstfault.audit.rates import SOURCE, job_rates_per_hour

__all__ = ["AuditReport", "Blast", "ComponentClass", "Layout", "audit", "layout_from_dict", "load_layout"]
SCHEMA = "firstfault.audit/v1"


@dataclass(frozen=True, slots=True)
class AuditReport:
    layout: Layout
    blasts: tuple[Blast, ...]
    findings: tuple[Finding, ...]
    rates_per_hour: dict[str, float]
    goodput: Goodput
    criticality: tuple[float, ...]  # per rank (see blast.criticality)

    def to_dict(self) -> dict[str, Any]:
        lay = self.layout
        return {
            "schema": SCHEMA,
            "layout": asdict(lay) | {"world": lay.world, "dp": lay.dp(), "ib_retry_s": round(lay.ib_retry_s, 2)},
            "blast": [_blast_dict(b) for b in self.blasts],
            "findings": [{"severity": str(f.severity), "code": f.code, "message": f.message} for f in self.findings],
            "failure_rates": {"per_hour": {k: round(v, 5) for k, v in self.rates_per_hour.items()}, "source": SOURCE},
            "checkpoint": _goodput_dict(self.goodput),
            "criticality_by_host": [
                [round(c, 3) for c in self.criticality[h * lay.gpus_per_host : (h + 1) * lay.gpus_per_host]]
                for h in range(lay.hosts)
            ],
        }


def _blast_dict(b: Blast) -> dict[str, Any]:
    d = b.detection
    ranks = list(b.direct_ranks)
    return {
        "class": str(b.cls),
        "component": b.component,
        "hosts": list(b.hosts),
        "direct_ranks": ranks if len(ranks) <= 64 else [*ranks[:64], f"... {len(ranks)} in all"],
        "direct_rank_count": len(ranks),
        "first_hop_ranks": b.first_hop_ranks,
        "groups_hit": b.groups_hit,
        "replicas_hit": b.replicas_hit,
        "dp": b.dp,
        "shards_without_replica": b.shards_without_replica,
        "job_ranks_stopped": b.job_ranks_stopped,
        "detection": {
            "lo_s": round(d.lo_s, 2),
            "hi_s": round(d.hi_s, 2),
            "mechanism": str(d.mechanism),
            "timeouts_fire": d.timeouts_fire,
        },
        "evidence": [{"where": e.where, "what": e.what, "collected": e.collected} for e in b.evidence],
        "attributable": b.attributable,
        "attribution": b.attribution,
        "isolation": b.isolation,
        "culprit_key": b.culprit_key,
    }


def _goodput_dict(g: Goodput) -> dict[str, Any]:
    return {
        "mtbf_h": round(g.mtbf_s / 3600.0, 3),
        "interval_s": g.interval_s,
        "young_s": round(g.young_s, 1),
        "daly_s": round(g.daly_s, 1),
        "lost_per_failure_s": round(g.lost_per_failure_s, 1),
        "goodput_with_spares": round(g.goodput_with_spares, 4),
        "goodput_without_spares": round(g.goodput_without_spares, 4),
        "goodput_at_daly": round(g.goodput_at_daly, 4),
        "per_class": [
            {
                "class": c.cls,
                "failures_per_hour": round(c.rate_per_hour, 5),
                "detect_s": round(c.detect_s, 1),
                "lost_s": round(c.lost_s, 1),
                "lost_gpu_hours": round(c.lost_gpu_hours, 1),
            }
            for c in g.classes
        ],
    }


def audit(layout: Layout | Path | str) -> AuditReport:
    """Audit a layout (a :class:`Layout` or a YAML/JSON file)."""
    lay = layout if isinstance(layout, Layout) else load_layout(layout)
    bl = blasts(lay)
    det = {str(b.cls): (b.detection.lo_s + b.detection.hi_s) / 2 for b in bl if b.detection.mechanism != Mechanism.NONE}
    rates = job_rates_per_hour(lay.world)
    ck = lay.checkpoint
    common = {
        "world": lay.world,
        "interval_s": ck.interval_s,
        "delta_s": ck.write_s,
        "restart_s": ck.restart_s,
        "repair_s": lay.spares.repair_s,
    }
    gp = goodput(rates, det, spares=lay.spares.nodes > 0, **common)  # type: ignore[arg-type]
    return AuditReport(lay, tuple(bl), tuple(findings(lay, bl, gp)), rates, gp, tuple(criticality(lay)))
