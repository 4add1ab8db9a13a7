"""The per-step collective schedule and who ends up waiting on whom when one rank stops.

One training step, per pipeline stage (GPipe order, ``M`` micro-batches): forward —
receive activations from the stage below, TP all-gather / reduce-scatter (sequence
parallel), EP all-to-all dispatch and combine, CP all-gather, send to the stage above;
backward in reverse; then the distributed optimizer's DP reduce-scatter of gradients, the
grad-norm all-reduce and the DP all-gather of parameters. Op types and flight-recorder
names are torch's (``_ALLGATHER_BASE`` / ``nccl:_all_gather_base``, ``ALLTOALL_BASE`` /
``nccl:all_to_all``, ``SEND`` / ``nccl:send 2->3`` with group ranks, as in real dumps).

A collective completes only when every member has entered it; a p2p send/recv only when
both ends have. :func:`propagate` computes, from the ranks that stop (a hung data loader, a
dead process, a GPU that never finishes its kernel), the first operation every other rank
cannot get past: the op its watchdog will time out on. It works channel by channel (a
channel is one group, or one pipeline boundary), so a 16,384-rank job is solved in well
under a second.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from firstfault_sim.cluster.layout import ProcessGroups

# torch's OpType names (c10d opTypeToString) and the FR profiling names of the same ops
OP_FR = {
    "_ALLGATHER_BASE": "nccl:_all_gather_base",
    "_REDUCE_SCATTER_BASE": "nccl:_reduce_scatter_base",
    "ALLTOALL_BASE": "nccl:all_to_all",
    "ALLREDUCE": "nccl:all_reduce",
    "ALLGATHER": "nccl:all_gather",
    "BROADCAST": "nccl:broadcast",
    "SEND": "nccl:send",
    "RECV": "nccl:recv",
}
HIDDEN = 5120
SEQ = 4096


@dataclass(frozen=True, slots=True)
class Op:
    """One op of a stage's step template. ``slot`` is the group kind, or ``pp_up``/``pp_down``
    for the pipeline boundary above / below this stage."""

    slot: str
    optype: str
    numel_in: int
    numel_out: int
    frac: float  # where in the step the op is issued (0..1)
    what: str  # the trainer's name for it (frames, docs)

    @property
    def kind(self) -> str:
        return "pp" if self.slot.startswith("pp_") else self.slot

    @property
    def is_p2p(self) -> bool:
        return self.optype in ("SEND", "RECV")


class Schedule:
    """Step templates per pipeline stage, op counts per group kind, and sequence numbers."""

    def __init__(self, groups: ProcessGroups, microbatches: int = 0):
        self.groups = groups
        lay = groups.layout
        self.microbatches = microbatches or (2 if lay.pp > 1 else 1)
        self.templates = [self._template(s) for s in range(lay.pp)]
        # per stage: slot -> list of template indices of that slot, in order
        self.slot_pos: list[dict[str, list[int]]] = []
        # per stage: kind -> ops per step; per op index: ops of the same kind before it
        self.kind_count: list[dict[str, int]] = []
        self.kind_before: list[list[int]] = []
        for tmpl in self.templates:
            d: dict[str, list[int]] = {}
            cnt: dict[str, int] = {}
            before: list[int] = []
            for i, op in enumerate(tmpl):
                d.setdefault(op.slot, []).append(i)
                before.append(cnt.get(op.kind, 0))
                cnt[op.kind] = cnt.get(op.kind, 0) + 1
            self.slot_pos.append(d)
            self.kind_count.append(cnt)
            self.kind_before.append(before)

    # ------------------------------------------------------------------ templates
    def _template(self, stage: int) -> list[Op]:  # noqa: C901  (one branch per parallelism layout)
        lay = self.groups.layout
        kinds = set(self.groups.kinds)
        ops: list[tuple[str, str, int, int, str]] = []
        act = SEQ * HIDDEN
        m = self.microbatches
        first, last = stage == 0, stage == lay.pp - 1
        for _ in range(m):
            if "pp" in kinds and not first:
                ops.append(("pp_down", "RECV", act, act, "recv forward activations"))
            if "tp" in kinds:
                ops.append(("tp", "_ALLGATHER_BASE", act // lay.tp, act, "sequence-parallel all-gather"))
            if "ep" in kinds:
                ops.append(("ep", "ALLTOALL_BASE", act // 2, act // 2, "MoE token dispatch"))
                ops.append(("ep", "ALLTOALL_BASE", act // 2, act // 2, "MoE token combine"))
            if "cp" in kinds:
                ops.append(("cp", "ALLGATHER", act // lay.cp, act, "context-parallel KV all-gather"))
            if "tp" in kinds:
                ops.append(("tp", "_REDUCE_SCATTER_BASE", act, act // lay.tp, "sequence-parallel reduce-scatter"))
            if "pp" in kinds and not last:
                ops.append(("pp_up", "SEND", act, act, "send forward activations"))
        for _ in range(m):
            if "pp" in kinds and not last:
                ops.append(("pp_up", "RECV", act, act, "recv backward gradients"))
            if "tp" in kinds:
                ops.append(("tp", "_ALLGATHER_BASE", act // lay.tp, act, "backward all-gather"))
            if "ep" in kinds:
                ops.append(("ep", "ALLTOALL_BASE", act // 2, act // 2, "MoE backward dispatch"))
            if "tp" in kinds:
                ops.append(("tp", "_REDUCE_SCATTER_BASE", act, act // lay.tp, "backward reduce-scatter"))
            if "pp" in kinds and not first:
                ops.append(("pp_down", "SEND", act, act, "send backward gradients"))
        if "dp" in kinds:
            bucket = lay.dp * 40960
            ops.append(("dp", "_REDUCE_SCATTER_BASE", bucket, bucket // lay.dp, "gradient reduce-scatter"))
            ops.append(("dp", "ALLREDUCE", 1, 1, "grad-norm all-reduce"))
            ops.append(("dp", "_ALLGATHER_BASE", bucket // lay.dp, bucket, "parameter all-gather"))
        if "edp" in kinds:
            ebucket = (lay.dp // lay.ep) * 20480
            ops.append(
                ("edp", "_REDUCE_SCATTER_BASE", ebucket, ebucket // (lay.dp // lay.ep), "expert grad reduce-scatter")
            )
        n = len(ops)
        out = []
        for i, (slot, optype, nin, nout, what) in enumerate(ops):
            # forward in the first third of the step, backward in the next half, optimizer last
            out.append(Op(slot, optype, nin, nout, 0.04 + 0.9 * (i + 0.5) / max(n, 1), what))
        return out

    def template(self, rank: int) -> list[Op]:
        return self.templates[self.groups.stage(rank)]

    def per_step(self, rank: int, kind: str) -> int:
        """How many ops of group kind ``kind`` (pp: both boundaries) a rank issues per step."""
        return self.kind_count[self.groups.stage(rank)].get(kind, 0)

    def seq(self, rank: int, step: int, index: int) -> int:
        """The ``SeqNum`` torch gives template op ``index`` of ``step`` (1-based, per group)."""
        st = self.groups.stage(rank)
        kind = self.templates[st][index].kind
        return step * self.kind_count[st][kind] + self.kind_before[st][index] + 1

    def pp_peer(self, rank: int, slot: str) -> int:
        lay = self.groups.layout
        stride = lay.tp * lay.cp * lay.dp
        return rank + stride if slot == "pp_up" else rank - stride

    # ------------------------------------------------------------------ channels
    def channel(self, rank: int, slot: str) -> tuple[str, int]:
        if slot == "pp_up":
            return ("pp", rank)  # a boundary is named by its lower rank
        if slot == "pp_down":
            return ("pp", self.pp_peer(rank, "pp_down"))
        gi = self.groups.member[rank][slot]
        return (slot, gi)

    def members(self, chan: tuple[str, int]) -> list[tuple[int, str]]:
        kind, idx = chan
        if kind == "pp":
            return [(idx, "pp_up"), (self.pp_peer(idx, "pp_up"), "pp_down")]
        return [(r, kind) for r in self.groups.groups[kind][idx].ranks]


@dataclass(frozen=True, slots=True)
class Stop:
    """A rank that stops at ``(step, index)``: before entering that op (``inside`` False: the
    CPU side hung or the process died) or inside it (the GPU never finishes it)."""

    rank: int
    step: int
    index: int
    inside: bool = False


@dataclass(frozen=True, slots=True)
class Blocked:
    """Where a rank ends up: stuck inside op ``index`` of ``step`` (``inside``), or stopped
    before it (the culprit of a hang)."""

    step: int
    index: int
    inside: bool


def propagate(sched: Schedule, stops: list[Stop], window: int = 3) -> dict[int, Blocked]:  # noqa: C901  (one case per fault kind)
    """Every rank's final position once ``stops`` happen (ranks never blocked are omitted).

    Positions are counted in a ``window`` of steps from the earliest stop: ``entered[q]`` is
    how many ops of that window rank ``q`` has entered. A channel's op ``k`` completes iff
    every member entered it and no stopped GPU is inside it; ``cmin[chan]`` is the first op
    of the channel that does not complete. Values only decrease, so a work list converges.
    """
    if not stops:
        return {}
    s0 = min(s.step for s in stops)
    world = sched.groups.world
    ntmpl = [len(t) for t in sched.templates]
    total = [n * window for n in ntmpl]
    stage = [sched.groups.stage(r) for r in range(world)]
    entered = [total[stage[r]] for r in range(world)]
    inside = [False] * world
    cmin: dict[tuple[str, int], int] = {}
    rank_q: deque[int] = deque()
    chan_q: deque[tuple[str, int]] = deque()

    def count(r: int, slot: str, n_entered: int) -> int:
        """ops of ``slot`` among the first ``n_entered`` ops of r's window."""
        pos = sched.slot_pos[stage[r]].get(slot, [])
        full, rem = divmod(n_entered, ntmpl[stage[r]])
        return full * len(pos) + sum(1 for i in pos if i < rem)

    def position(r: int, slot: str, k: int) -> int | None:
        pos = sched.slot_pos[stage[r]].get(slot, [])
        if not pos:
            return None
        rep, j = divmod(k, len(pos))
        if rep >= window:
            return None
        return rep * ntmpl[stage[r]] + pos[j]

    for s in stops:
        off = (s.step - s0) * ntmpl[stage[s.rank]] + s.index
        if s.inside:
            entered[s.rank] = min(entered[s.rank], off + 1)
            inside[s.rank] = True
            op = sched.templates[stage[s.rank]][s.index]
            chan = sched.channel(s.rank, op.slot)
            k = count(s.rank, op.slot, off)
            if k < cmin.get(chan, 1 << 30):
                cmin[chan] = k
                chan_q.append(chan)
        else:
            entered[s.rank] = min(entered[s.rank], off)
        rank_q.append(s.rank)
    stopped = {s.rank for s in stops}
    slots = [sorted({op.slot for op in t}) for t in sched.templates]

    while rank_q or chan_q:
        while rank_q:
            r = rank_q.popleft()
            for slot in slots[stage[r]]:
                chan = sched.channel(r, slot)
                n = count(r, slot, entered[r])
                if n < cmin.get(chan, 1 << 30):
                    cmin[chan] = n
                    chan_q.append(chan)
        while chan_q:
            chan = chan_q.popleft()
            k = cmin[chan]
            for m, slot in sched.members(chan):
                if m in stopped and not inside[m]:
                    continue  # a stopped CPU never enters anything more
                p = position(m, slot, k)
                if p is None or p + 1 >= entered[m]:
                    continue
                entered[m] = p + 1
                inside[m] = True
                rank_q.append(m)
    out: dict[int, Blocked] = {}
    for r in range(world):
        n = total[stage[r]]
        if entered[r] >= n and not inside[r]:
            continue
        e = entered[r]
        if inside[r]:
            idx = e - 1
            out[r] = Blocked(s0 + idx // ntmpl[stage[r]], idx % ntmpl[stage[r]], True)
        else:
            out[r] = Blocked(s0 + e // ntmpl[stage[r]], e % ntmpl[stage[r]], False)
    return out
