"""Blast radius of one component's failure: who stops, when it is noticed, what evidence is left.

For each component class (a GPU that errors, a GPU that hangs, an NVLink, a NIC, a host, a
leaf switch, a rack) the audit takes one instance in the middle of the job and predicts, from
the layout alone:

* the ranks the fault stops *directly* (its own ranks), the peers that block on them first
  (every member of their groups), the groups and data-parallel replicas it touches, and the
  ranks that stop in the end (training is synchronous: every rank joined to the others by a
  group waits);
* when the job notices (a window ``[lo, hi]`` seconds after the fault), by which mechanism:
  the rank's own CUDA error (the NCCL watchdog polls its work every 100 ms:
  ``kWatchdogThreadSleepMillis`` in torch's ProcessGroupNCCL), NCCL's InfiniBand retries
  running out (``4.096 us x 2^NCCL_IB_TIMEOUT`` per try, ``NCCL_IB_RETRY_CNT + 1`` tries), or
  the collective timeout; ``hi`` adds one step because a peer meets the fault only at its next
  operation on the broken path;
* whether watchdog timeouts fire at all (``srun --kill-on-bad-exit`` ends the step first),
  what evidence exists and where, whether the fault can be attributed, and what isolation
  applies.

The model is the one firstfault's attribution reasons with; ``firstfault_bench.audit`` checks
each prediction against the cluster simulator.
"""

from __future__ import annotations

from collections import Counter

from firstfault.audit.evidence import attribution, evidence_for, isolation_for
from firstfault.audit.groups import Grid
from firstfault.audit.layout import Layout
from firstfault.audit.model import Blast, ComponentClass, Detection, Mechanism

ABORT_S = 1.0  # from the error to the rank's abort: the CUDA/NCCL error is raised, the process aborts
PEER_JITTER_S = 3.0  # peers' retries run out over a few seconds (their sends started at different times)
# after SlurmdTimeout, up to this long until slurmctld's next node check marks the node DOWN:
# an allowance we assume, not a documented figure
SCHED_CHECK_S = 20.0


def direct_ranks(lay: Layout, cls: ComponentClass, host: int, local: int) -> list[int]:
    """The ranks a fault of ``cls`` at (host, local GPU/NIC) stops by itself."""
    g = lay.gpus_per_host
    if cls in (ComponentClass.GPU, ComponentClass.GPU_HANG, ComponentClass.NVLINK, ComponentClass.NIC):
        return [host * g + local]
    if cls == ComponentClass.HOST:
        return list(range(host * g, (host + 1) * g))
    if cls == ComponentClass.LEAF:
        pod = host // lay.hosts_per_leaf
        hs = range(pod * lay.hosts_per_leaf, min(lay.hosts, (pod + 1) * lay.hosts_per_leaf))
        return [h * g + local for h in hs]
    rack = max(1, lay.hosts_per_rack)
    r0 = host // rack * rack
    return [r for h in range(r0, min(lay.hosts, r0 + rack)) for r in range(h * g, (h + 1) * g)]


def classes(lay: Layout) -> tuple[ComponentClass, ...]:
    out: list[ComponentClass] = [c for c in ComponentClass if c != ComponentClass.RACK]
    if lay.hosts_per_rack:
        out.append(ComponentClass.RACK)
    return tuple(out)


def representative(lay: Layout) -> tuple[int, int]:
    """The instance audited for every class: a host in the middle of the job, its GPU/NIC 1."""
    return lay.hosts // 2, 1 % lay.gpus_per_host


def component_name(lay: Layout, cls: ComponentClass, host: int, local: int) -> str:
    h = lay.host(host)
    if cls in (ComponentClass.GPU, ComponentClass.GPU_HANG):
        return f"GPU {h}/{local} (rank {host * lay.gpus_per_host + local})"
    if cls == ComponentClass.NVLINK:
        return f"NVLink of GPU {h}/{local}"
    if cls == ComponentClass.NIC:
        return f"NIC {h}/mlx5_{local} (rail {local})"
    if cls == ComponentClass.HOST:
        return f"host {h}"
    if cls == ComponentClass.LEAF:
        return f"leaf switch leaf-p{host // lay.hosts_per_leaf:03d}-r{local} (rail {local})"
    return f"rack {host // max(1, lay.hosts_per_rack)}"


def crosses_hosts(lay: Layout, grid: Grid, ranks: list[int], *, collective_only: bool = False) -> bool:
    """Does a group of these ranks reach a *surviving* rank on another host (traffic over NICs)?

    ``collective_only`` leaves out pipeline boundaries: in a ring collective every member sends
    to the next, so a survivor's send to a lost host is certain; across a pipeline boundary the
    survivor may be the receiving side (the stage below waits for backward gradients), and only
    a sender sees NCCL's retries run out."""
    g = lay.gpus_per_host
    lost = set(ranks)
    kinds = [k for k in grid.kinds() if not (collective_only and k == "pp")]
    for r in ranks:
        for k in kinds:
            mem = grid.members(r, k)
            if any(m // g != r // g and m not in lost for m in mem):
                return True
    return False


def detection(lay: Layout, grid: Grid, cls: ComponentClass, direct: list[int]) -> Detection:
    """When the job notices the fault, and whether watchdog timeouts fire."""
    t, s, rr = lay.timeouts.nccl_timeout_s, lay.step_time_s, lay.ib_retry_s
    sd = lay.timeouts.slurmd_timeout_s
    killer = lay.launcher.kill_on_bad_exit
    if cls in (ComponentClass.GPU, ComponentClass.NVLINK):
        return Detection(0.0, ABORT_S, Mechanism.OWN_ERROR, lay.hosts > 1 and not killer)
    if cls == ComponentClass.GPU_HANG:
        # a pipeline neighbour may already be waiting for the hung rank (a receive it entered
        # before the hang): its timeout can fire up to a step less than the timeout after the fault
        lo = max(0.0, t - s) if lay.parallel.pp > 1 else t
        return Detection(lo, t + s + ABORT_S, Mechanism.WATCHDOG, True)
    if cls in (ComponentClass.NIC, ComponentClass.LEAF):
        if not crosses_hosts(lay, grid, direct):
            return Detection(0.0, 0.0, Mechanism.NONE, False)
    elif len(set(direct)) == lay.world:
        return Detection(sd, sd + SCHED_CHECK_S, Mechanism.SCHEDULER, False)
    elif not crosses_hosts(lay, grid, direct, collective_only=True):
        # only pipeline boundaries reach the survivors: the watchdog or the scheduler, first
        if t < sd:
            return Detection(t, t + s + ABORT_S, Mechanism.WATCHDOG, True)
        return Detection(sd, sd + SCHED_CHECK_S, Mechanism.SCHEDULER, False)
    lo, hi = rr, rr + s + PEER_JITTER_S + ABORT_S
    if t < lo:
        return Detection(t, t + s + ABORT_S, Mechanism.WATCHDOG, True)
    return Detection(lo, hi, Mechanism.IB_RETRY, lay.hosts > 1 and not killer)


def _job_component(lay: Layout, grid: Grid) -> int:
    """Ranks joined to rank 0 by groups (all of them, unless the layout has independent parts)."""
    parent = list(range(lay.world))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for kind in grid.kinds():
        for r in range(lay.world):
            a, b = find(r), find(grid.group_key(r, kind))
            if a != b:
                parent[a] = b
    root = find(0)
    return sum(1 for r in range(lay.world) if find(r) == root)


def blast_of(lay: Layout, grid: Grid, cls: ComponentClass, host: int, local: int, job_ranks: int) -> Blast:
    direct = direct_ranks(lay, cls, host, local)
    dset = set(direct)
    groups: dict[str, set[int]] = {}
    hop: set[int] = set()
    for r in direct:
        for k in grid.kinds():
            mem = grid.members(r, k)
            groups.setdefault(k, set()).add(mem[0])
            hop.update(mem)
    dp = grid.sizes["dp"]
    per_shard = Counter(grid.shard(r) for r in direct)
    det = detection(lay, grid, cls, direct)
    ev = evidence_for(lay, cls, det)
    ok, why = attribution(lay, cls, det, ev)
    hosts = tuple(dict.fromkeys(lay.host(r // lay.gpus_per_host) for r in direct))
    return Blast(
        cls=cls,
        component=component_name(lay, cls, host, local),
        hosts=hosts,
        direct_ranks=tuple(direct),
        first_hop_ranks=len(hop - dset),
        groups_hit={k: len(v) for k, v in groups.items()},
        replicas_hit=len({grid.replica(r) for r in direct}),
        dp=dp,
        shards_without_replica=sum(1 for n in per_shard.values() if n == dp) if dp > 1 else 0,
        job_ranks_stopped=job_ranks if det.mechanism != Mechanism.NONE else 0,
        detection=det,
        evidence=ev,
        attributable=ok,
        attribution=why,
        isolation=isolation_for(lay, cls, hosts, len(direct), job_ranks),
        culprit_key=CULPRIT_KEY[cls],
    )


CULPRIT_KEY = {
    ComponentClass.GPU: "rank",
    ComponentClass.GPU_HANG: "rank",
    ComponentClass.NVLINK: "rank",
    ComponentClass.NIC: "host",
    ComponentClass.HOST: "host",
    ComponentClass.LEAF: "switch",
    ComponentClass.RACK: "rack",
}


def blasts(lay: Layout) -> list[Blast]:
    grid = Grid.of(lay)
    job = _job_component(lay, grid)
    host, local = representative(lay)
    return [blast_of(lay, grid, c, host, local, job) for c in classes(lay)]


def criticality(lay: Layout) -> list[float]:
    """Per rank: the largest share of its shard's replicas one host, leaf switch or rack takes.

    1.0 means a single component failure leaves no copy of that rank's piece of the model (the
    data-parallel redundancy an in-memory restart would need is gone); 1/DP is the floor."""
    grid = Grid.of(lay)
    dp = grid.sizes["dp"]
    out = [0.0] * lay.world
    units: list[ComponentClass] = [ComponentClass.HOST, ComponentClass.LEAF]
    if lay.hosts_per_rack:
        units.append(ComponentClass.RACK)
    shard = [grid.shard(r) for r in range(lay.world)]
    for cls in units:
        seen: set[int] = set()
        for h in range(lay.hosts):
            for local in range(lay.gpus_per_host if cls == ComponentClass.LEAF else 1):
                ranks = direct_ranks(lay, cls, h, local)
                if ranks[0] in seen:
                    continue
                seen.update(ranks)
                cnt = Counter(shard[r] for r in ranks)
                for r in ranks:
                    out[r] = max(out[r], cnt[shard[r]] / dp)
    return out
