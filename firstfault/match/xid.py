"""NVIDIA Xid numbers as data: NVIDIA's meaning plus firstfault's judgement for a training job.

It lives with matching because it is what the kernel signatures are made from: the ``NVRM: Xid``
signatures of ``signatures/kernel.toml`` are split into groups by this judgement (whether an Xid
can be a root cause: Xid 45 never is, it is the driver cleaning up after another fault; which
layer it belongs to: an Xid 13 or 31 points at the application, an Xid 79 at the hardware; and
what to do with the job), ``tools/gen_xid_catalog.py`` writes those groups, and ``tests/test_xid.py``
checks every Xid lands in its group. Attribution reads the matched event; it consults this table
only when a consequence names an Xid whose own line is missing ("caused by previous Xid 149").
The table is generated from NVIDIA's catalog and shipped in the package
(``firstfault/data/xid_catalog.toml``), loaded once on first use.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from firstfault.vocab import Action, Category, Layer, Role


@dataclass(frozen=True, slots=True)
class XidInfo:
    """One Xid: NVIDIA's facts and firstfault's judgement.

    ``role`` is ``root``, ``consequence`` or ``informational``; :attr:`event_role` maps it onto
    the shared :class:`~firstfault.vocab.Role` vocabulary. ``known`` is False for a number the
    catalog does not list (a newer driver); such an Xid gets a conservative judgement.
    """

    xid: int
    mnemonic: str
    description: str
    nvidia_immediate: str
    nvidia_investigatory: str
    layer: str
    role: str
    action: str
    category: str
    signature_group: str
    note: str
    judgement_source: str
    known: bool = True

    @property
    def event_role(self) -> Role:
        return {"root": Role.ROOT, "consequence": Role.CASCADE}.get(self.role, Role.NOISE)

    @property
    def event_layer(self) -> Layer:
        return Layer(self.layer)

    @property
    def event_action(self) -> Action:
        return Action(self.action)

    @property
    def event_category(self) -> Category:
        return Category(self.category)

    @property
    def can_be_root(self) -> bool:
        return self.role == "root"


def _unknown(xid: int) -> XidInfo:
    return XidInfo(
        xid=xid,
        mnemonic="UNKNOWN",
        description="not in NVIDIA's catalog snapshot",
        nvidia_immediate="",
        nvidia_investigatory="",
        layer="driver",
        role="root",
        action="exclude_and_restart",
        category="gpu_hardware",
        signature_group="other",
        note="Xid not in the catalog this firstfault ships (newer driver?); unknown GPU state: exclude.",
        judgement_source="firstfault default for unknown Xids",
        known=False,
    )


@lru_cache(maxsize=1)
def _table() -> dict[int, XidInfo]:
    text = resources.files("firstfault").joinpath("data/xid_catalog.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    out: dict[int, XidInfo] = {}
    for row in data.get("xid", []):
        info = XidInfo(
            xid=int(row["xid"]),
            mnemonic=str(row["mnemonic"]),
            description=str(row["description"]),
            nvidia_immediate=str(row["nvidia_immediate"]),
            nvidia_investigatory=str(row["nvidia_investigatory"]),
            layer=str(row["layer"]),
            role=str(row["role"]),
            action=str(row["action"]),
            category=str(row["category"]),
            signature_group=str(row["signature_group"]),
            note=str(row["note"]),
            judgement_source=str(row["judgement_source"]),
        )
        out[info.xid] = info
    return out


def lookup(xid: int | str) -> XidInfo:
    """The catalog entry for ``xid`` (an int or the ``fields["xid"]`` string); never raises."""
    try:
        n = int(str(xid).strip())
    except ValueError:
        n = -1
    return _table().get(n) or _unknown(n)


def all_xids() -> dict[int, XidInfo]:
    """Every Xid in the shipped catalog, by number."""
    return dict(_table())
