"""The audit's predictions against the cluster simulator on a small layout (deliverable 3).

Every component class of a 32-rank layout (4 hosts, TP 8, PP 2, 2 hosts a leaf and a rack) is
simulated with ``simulate cluster`` and the bundle analysed: the ranks the fault hits, the
ranks that stop, the detection time and whether watchdog timeouts fire must be what the audit
predicted, and ``analyze`` must name the faulted component exactly where the audit says the fault
is attributable: here every class is (a lost host too, with NCCL_DEBUG=WARN: slurmctld names it
within the window's margin and its peers' errors name an address no other host owns; docs/audit.md).
The 512- and 16,384-rank layouts run in ``firstfault bench audit`` (minutes, not a test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.audit import load_layout
from firstfault_bench.audit import Row, check_layout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return check_layout(load_layout(ROOT / "examples" / "audit" / "check-32.json"))


def test_every_class_simulated(rows: list[Row]) -> None:
    assert [r.cls for r in rows] == ["gpu", "gpu_hang", "nvlink", "nic", "host", "leaf_switch", "rack"]


@pytest.mark.parametrize("cls", ["gpu", "gpu_hang", "nvlink", "nic", "host", "leaf_switch", "rack"])
def test_prediction_equals_simulation(rows: list[Row], cls: str) -> None:
    (r,) = [x for x in rows if x.cls == cls]
    assert r.direct_equal, r
    assert r.pred_stopped == r.sim_stopped, r
    assert r.detect_ok, r
    assert r.timeouts_ok, r
    assert r.verdict_ok is r.pred_attributable, r
    assert r.pred_attributable, r
