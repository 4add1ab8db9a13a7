"""Per-component failure rates, from a published count (never invented).

Source: Meta, *The Llama 3 Herd of Models* (arXiv:2407.21783, 2024), section 3.3.4 and Table 5
("Root-cause categorization of unexpected interruptions during a 54-day period of Llama 3 405B
pre-training"): 419 unexpected interruptions in 54 days on 16,384 H100 GPUs. The counts below
are Table 5's; they sum to 419. (The percentage the table prints beside Faulty GPU, 30.1 %, is
not 148/419; we use the counts only.)

Assumptions, stated where they are used: failures are independent and their rate grows with
the number of GPUs (a rate per GPU-hour, scaled to the audited job); Table 5's "Faulty GPU"
includes NVLink failures, so NVLink has no rate of its own; "Network Switch/Cable" counts
switches and cables together, used as the leaf-switch rate (an upper bound for switches alone).
"""

from __future__ import annotations

from firstfault.audit.model import ComponentClass

LLAMA3_GPUS = 16384
LLAMA3_HOURS = 54 * 24
LLAMA3_TABLE5: dict[str, int] = {
    "Faulty GPU": 148,
    "GPU HBM3 Memory": 72,
    "Software Bug": 54,
    "Network Switch/Cable": 35,
    "Host Maintenance": 32,
    "GPU SRAM Memory": 19,
    "GPU System Processor": 17,
    "NIC": 7,
    "NCCL Watchdog Timeouts": 7,
    "Silent Data Corruption": 6,
    "GPU Thermal Interface + Sensor": 6,
    "SSD": 3,
    "Power Supply": 3,
    "Server Chassis": 2,
    "IO Expansion Board": 2,
    "Dependency": 2,
    "CPU": 2,
    "System Memory": 2,
}
# component class -> the Table 5 rows it stands for; "other" is what no component class models
CLASS_ROWS: dict[str, tuple[str, ...]] = {
    ComponentClass.GPU: ("Faulty GPU", "GPU HBM3 Memory", "GPU SRAM Memory"),
    ComponentClass.GPU_HANG: ("GPU System Processor",),
    ComponentClass.NIC: ("NIC",),
    ComponentClass.HOST: (
        "Host Maintenance",
        "SSD",
        "Power Supply",
        "Server Chassis",
        "IO Expansion Board",
        "CPU",
        "System Memory",
    ),
    ComponentClass.LEAF: ("Network Switch/Cable",),
    "other": (
        "Software Bug",
        "NCCL Watchdog Timeouts",
        "Silent Data Corruption",
        "GPU Thermal Interface + Sensor",
        "Dependency",
    ),
}
SOURCE = "Llama 3 Herd of Models (arXiv:2407.21783), Table 5: 419 unexpected interruptions, 54 days, 16,384 GPUs"


def per_gpu_hour(cls: str) -> float | None:
    """Failures per GPU-hour for a class; None where the source gives no separate figure."""
    rows = CLASS_ROWS.get(cls)
    if rows is None:
        return None
    return sum(LLAMA3_TABLE5[r] for r in rows) / (LLAMA3_GPUS * LLAMA3_HOURS)


def job_rates_per_hour(world: int) -> dict[str, float]:
    """Failures per hour of the audited job, by class (and 'other'), scaled by GPU count."""
    out: dict[str, float] = {}
    for cls in CLASS_ROWS:
        r = per_gpu_hour(cls)
        assert r is not None
        out[str(cls)] = r * world
    return out
