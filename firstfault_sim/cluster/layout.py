"""The parallel layout: TP/CP/DP/PP (and EP) mapped to process groups the Megatron way.

Megatron-LM's ``RankGenerator`` lays ranks out with tensor parallel innermost
(order ``tp-cp-ep-dp-pp``): ``rank = tp + TP*(cp + CP*(dp + DP*pp))``, so a TP group is
``TP`` consecutive ranks on one host (one NVLink domain), data-parallel peers are ``TP*CP``
apart, and pipeline stages are ``TP*CP*DP`` apart, across hosts. Expert parallel splits each
data-parallel group into blocks of ``EP`` consecutive members (what Megatron's expert
generator gives with expert TP = TP and CP = 1).

Every rank calls ``new_group`` for every group, in the same order, so a group's global name
(torch's ``PG GUID``) is its creation index; each process numbers only the groups it belongs
to (``PG ID``). The group descriptions are Megatron's, as they appear in the ``pg_config`` of
real flight-recorder dumps (nvidia-resiliency-ext test data: ``TENSOR_MODEL_PARALLEL_GROUP``,
``PIPELINE_MODEL_PARALLEL_GROUP``, ``DATA_PARALLEL_GROUP_WITH_CP``, ``CONTEXT_PARALLEL_GROUP``,
``EXPERT_MODEL_PARALLEL_GROUP``, ``EXPERT_DATA_PARALLEL_GROUP``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# group kind -> Megatron group_desc; the creation order Megatron's initialize_model_parallel uses
KIND_DESC = {
    "dp": "DATA_PARALLEL_GROUP",
    "cp": "CONTEXT_PARALLEL_GROUP",
    "tp": "TENSOR_MODEL_PARALLEL_GROUP",
    "pp": "PIPELINE_MODEL_PARALLEL_GROUP",
    "ep": "EXPERT_MODEL_PARALLEL_GROUP",
    "edp": "EXPERT_DATA_PARALLEL_GROUP",
}
CREATION_ORDER = ("dp", "cp", "tp", "pp", "ep", "edp")


@dataclass(frozen=True, slots=True)
class Layout:
    """Parallel degrees; ``dp`` is derived from the world size when 0."""

    tp: int = 8
    pp: int = 1
    dp: int = 0
    cp: int = 1
    ep: int = 1

    def resolve(self, world: int) -> Layout:
        """A copy with ``dp`` filled in and every degree checked against ``world``."""
        for name in ("tp", "pp", "cp", "ep"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        model = self.tp * self.pp * self.cp
        if world % model:
            raise ValueError(f"world size {world} is not divisible by tp*pp*cp = {model}")
        dp = self.dp or world // model
        if dp * model != world:
            raise ValueError(f"tp*pp*cp*dp = {dp * model} != world size {world}")
        if dp % self.ep:
            raise ValueError(f"ep={self.ep} must divide dp={dp}")
        return Layout(self.tp, self.pp, dp, self.cp, self.ep)

    def coords(self, rank: int) -> tuple[int, int, int, int]:
        """(tp, cp, dp, pp) index of ``rank``."""
        t = rank % self.tp
        rest = rank // self.tp
        c = rest % self.cp
        rest //= self.cp
        d = rest % self.dp
        return t, c, d, rest // self.dp

    def rank_of(self, t: int, c: int, d: int, p: int) -> int:
        return t + self.tp * (c + self.cp * (d + self.dp * p))

    def describe(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "cp": self.cp, "ep": self.ep}


@dataclass(slots=True)
class Group:
    kind: str
    index: int
    guid: str
    ranks: tuple[int, ...]

    @property
    def desc(self) -> str:
        return KIND_DESC[self.kind]

    @property
    def size(self) -> int:
        return len(self.ranks)


@dataclass
class ProcessGroups:
    """All groups of a layout, and for each rank: its group of each kind, PG ID and group rank."""

    layout: Layout
    world: int
    groups: dict[str, list[Group]] = field(default_factory=dict)
    # rank -> kind -> group index
    member: list[dict[str, int]] = field(default_factory=list)
    kinds: tuple[str, ...] = ()

    @classmethod
    def build(cls, layout: Layout, world: int) -> ProcessGroups:
        lay = layout.resolve(world)
        pg = cls(lay, world)
        pg.member = [{} for _ in range(world)]
        guid = 1  # "0" is the default (world) group
        kinds = []
        for kind in CREATION_ORDER:
            lists = _group_lists(lay, kind)
            if not lists or len(lists[0]) < 2:
                continue  # size-1 groups carry no traffic: left out of the model
            kinds.append(kind)
            out = []
            for gi, ranks in enumerate(lists):
                out.append(Group(kind, gi, str(guid), tuple(ranks)))
                guid += 1
                for r in ranks:
                    pg.member[r][kind] = gi
            pg.groups[kind] = out
        pg.kinds = tuple(kinds)
        return pg

    def group_of(self, rank: int, kind: str) -> Group | None:
        gi = self.member[rank].get(kind)
        return None if gi is None else self.groups[kind][gi]

    def pg_id(self, rank: int, kind: str) -> int:
        """The rank-local ``PG ID``: 0 is the default group, then member groups in creation order.

        Every rank belongs to one group of each kind in the model, so the id is the kind's index."""
        if kind not in self.member[rank]:
            return 0
        return self.kinds.index(kind) + 1

    def group_rank(self, rank: int, kind: str) -> int:
        """Rank within its group of ``kind`` (computed from coordinates: no list search)."""
        if kind not in self.member[rank]:
            return rank
        t, c, d, p = self.layout.coords(rank)
        ep = self.layout.ep
        return {"tp": t, "cp": c, "dp": d, "pp": p, "ep": d % ep, "edp": d // ep}[kind]

    def stage(self, rank: int) -> int:
        lay = self.layout
        return rank // (lay.tp * lay.cp * lay.dp)


def _group_lists(lay: Layout, kind: str) -> list[list[int]]:
    tp, cp, dp, pp = lay.tp, lay.cp, lay.dp, lay.pp
    r = lay.rank_of
    if kind == "tp":
        return [[r(t, c, d, p) for t in range(tp)] for p in range(pp) for d in range(dp) for c in range(cp)]
    if kind == "cp":
        return [[r(t, c, d, p) for c in range(cp)] for p in range(pp) for d in range(dp) for t in range(tp)]
    if kind == "dp":
        return [[r(t, c, d, p) for d in range(dp)] for p in range(pp) for c in range(cp) for t in range(tp)]
    if kind == "pp":
        return [[r(t, c, d, p) for p in range(pp)] for d in range(dp) for c in range(cp) for t in range(tp)]
    ep = lay.ep
    if kind == "ep":
        if ep < 2:
            return []
        return [
            [r(t, c, b * ep + e, p) for e in range(ep)]
            for p in range(pp)
            for c in range(cp)
            for t in range(tp)
            for b in range(dp // ep)
        ]
    if kind == "edp":
        if ep < 2:
            return []
        return [
            [r(t, c, b * ep + e, p) for b in range(dp // ep)]
            for p in range(pp)
            for c in range(cp)
            for t in range(tp)
            for e in range(ep)
        ]
    raise ValueError(kind)
