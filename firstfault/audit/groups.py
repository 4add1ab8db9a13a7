"""Rank -> process groups, laid out the way Megatron-LM lays them out.

Megatron-LM's ``parallel_state.RankGenerator`` takes an order such as ``tp-cp-ep-dp-pp`` (its
default) and numbers ranks with the *first* name varying fastest: with that order
``rank = tp + TP*(cp + CP*(dp + DP*pp))``, so a TP group is TP consecutive ranks (one host's
NVLink domain when TP <= GPUs per host), DP peers are TP*CP apart and pipeline stages TP*CP*DP
apart (``generate_masked_orthogonal_rank_groups``: a group of one kind is the ranks that differ
only in that coordinate). Expert parallelism splits each DP group into blocks of EP
consecutive members (expert-DP: the members with the same place in their block), as Megatron's
expert generator gives with expert TP = TP and CP = 1.

Everything is arithmetic on coordinates, so 16,384 ranks cost nothing to audit.
"""

from __future__ import annotations

from dataclasses import dataclass

from firstfault.audit.layout import Layout

KINDS = ("tp", "cp", "dp", "pp", "ep", "edp")


@dataclass(frozen=True, slots=True)
class Grid:
    """The rank grid of one layout: sizes and strides of tp, cp, dp, pp."""

    world: int
    sizes: dict[str, int]
    strides: dict[str, int]
    ep: int

    @classmethod
    def of(cls, lay: Layout) -> Grid:
        p = lay.parallel
        sizes = {"tp": p.tp, "cp": p.cp, "dp": lay.dp(), "pp": p.pp}
        strides: dict[str, int] = {}
        s = 1
        for dim in lay.order():
            strides[dim] = s
            s *= sizes[dim]
        return cls(lay.world, sizes, strides, p.ep)

    def coord(self, rank: int, dim: str) -> int:
        return (rank // self.strides[dim]) % self.sizes[dim]

    def kinds(self) -> tuple[str, ...]:
        """The group kinds with traffic (size > 1)."""
        out = [k for k in ("tp", "cp", "dp", "pp") if self.sizes[k] > 1]
        if self.ep > 1:
            out.append("ep")
            if self.sizes["dp"] // self.ep > 1:
                out.append("edp")
        return tuple(out)

    def members(self, rank: int, kind: str) -> list[int]:
        """The ranks of ``rank``'s group of ``kind`` (group order: by that coordinate)."""
        if kind in ("tp", "cp", "dp", "pp"):
            st = self.strides[kind]
            base = rank - self.coord(rank, kind) * st
            return [base + i * st for i in range(self.sizes[kind])]
        st = self.strides["dp"]
        d = self.coord(rank, "dp")
        base = rank - d * st
        if kind == "ep":
            b = d // self.ep
            return [base + (b * self.ep + e) * st for e in range(self.ep)]
        if kind == "edp":
            e = d % self.ep
            return [base + (b * self.ep + e) * st for b in range(self.sizes["dp"] // self.ep)]
        raise ValueError(kind)

    def group_key(self, rank: int, kind: str) -> int:
        """One number per group of ``kind``: its lowest member (arithmetic, no member list)."""
        if kind in ("tp", "cp", "dp", "pp"):
            return rank - self.coord(rank, kind) * self.strides[kind]
        st = self.strides["dp"]
        d = self.coord(rank, "dp")
        base = rank - d * st
        if kind == "ep":
            return base + (d // self.ep) * self.ep * st
        return base + (d % self.ep) * st

    def replica(self, rank: int) -> int:
        """Which data-parallel replica (model copy) ``rank`` holds a piece of."""
        return self.coord(rank, "dp")

    def shard(self, rank: int) -> int:
        """Which piece of the model ``rank`` holds (the same in every replica): its DP group."""
        return self.group_key(rank, "dp")
