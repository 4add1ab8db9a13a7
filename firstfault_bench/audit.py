"""The audit's predictions checked against the cluster simulator, class by class, layout by layout.

For every component class the audit predicts on a layout, the matching fault is simulated on
the same layout (``simulate cluster``: same hosts, GPUs, parallel sizes, timeouts, leaf size)
and the bundle is analysed with ``firstfault.analyze``. Compared:

* **direct ranks**: the ranks the audit says the fault stops by itself, against the ranks the
  simulator's truth names as hit (``culprit_ranks``);
* **ranks stopped**: the audit's count of ranks that stop in the end, against the simulator's
  (ranks blocked by ``schedule.propagate`` plus ranks that exited);
* **detection**: the first abort or watchdog timeout in the simulated job minus the fault's true
  time, inside the audit's ``[lo, hi]`` window, and the mechanism;
* **timeouts fire** (and so flight-recorder dumps exist) as predicted;
* **verdict**: what ``analyze`` names, against the faulted component (rank, host, switch, rack).

Any mismatch is a bug in one of them. The simulator has no leaf-switch or rack fault: a leaf
switch is played as every port it serves going down at once (``nic_down`` on rail *k* of each
host under it), a rack as every host in it failing at once (``node_failure``); the simulator
models only Megatron's default order (``tp-cp-ep-dp-pp``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import firstfault
from firstfault.audit import Layout, audit
from firstfault.audit.blast import representative
from firstfault.audit.model import Blast, ComponentClass
from firstfault.vocab.records import Culprit
from firstfault_sim.cluster import Layout as SimLayout
from firstfault_sim.cluster import SimConfig, parse_fault
from firstfault_sim.cluster.emit import truth_of, write_bundle
from firstfault_sim.cluster.outcome import Outcome
from firstfault_sim.cluster.scenario import simulate

FAULT_STEP = 20.3  # the fault lands a third into a 60-step run, mid-step
STEPS = 60
DETECT_SLACK_S = 0.05  # the simulator's timers carry a few ms of jitter past the window


@dataclass(frozen=True, slots=True)
class Row:
    layout: str
    world: int
    cls: str
    faults: str
    pred_direct: int
    sim_direct: int
    direct_equal: bool
    pred_stopped: int
    sim_stopped: int
    pred_detect: str
    sim_detect_s: float | None
    detect_ok: bool
    pred_timeouts: bool
    sim_timeouts: int
    timeouts_ok: bool
    pred_attributable: bool
    verdict: str
    verdict_ok: bool | None  # None: analyze not run (--no-analyze)
    seconds: float

    @property
    def blast_ok(self) -> bool:
        """The audit's prediction equals the simulation (direct ranks, ranks stopped, detection, timeouts)."""
        return self.direct_equal and self.pred_stopped == self.sim_stopped and self.detect_ok and self.timeouts_ok

    @property
    def attribution_ok(self) -> bool:
        """``analyze`` names the component exactly where the audit said the fault is attributable."""
        return self.verdict_ok is None or self.verdict_ok == self.pred_attributable

    @property
    def ok(self) -> bool:
        return self.blast_ok and self.attribution_ok


def sim_faults(lay: Layout, b: Blast) -> list[str]:
    """The simulator's ``--fault`` specs that play this component's failure."""
    at = f"@{FAULT_STEP * lay.step_time_s:.1f}"
    host, local = representative(lay)
    hosts = list(dict.fromkeys(b.hosts))
    if b.cls == ComponentClass.GPU:
        return [f"xid79{at}:rank={b.direct_ranks[0]}"]
    if b.cls == ComponentClass.GPU_HANG:
        return [f"xid119{at}:rank={b.direct_ranks[0]}"]
    if b.cls == ComponentClass.NVLINK:
        return [f"xid74{at}:rank={b.direct_ranks[0]}"]
    if b.cls == ComponentClass.NIC:
        return [f"nic_down{at}:link={lay.host(host)}/{local}"]
    if b.cls == ComponentClass.LEAF:
        return [f"nic_down{at}:link={h}/{local}" for h in hosts]
    return [f"node_failure{at}:host={h}" for h in hosts]


def sim_config(lay: Layout, faults: list[str], seed: int) -> SimConfig:
    p = lay.parallel
    ev = lay.evidence
    return SimConfig(
        hosts=lay.hosts,
        gpus_per_host=lay.gpus_per_host,
        layout=SimLayout(tp=p.tp, pp=p.pp, cp=p.cp, ep=p.ep),
        nccl_timeout_s=lay.timeouts.nccl_timeout_s,
        seed=seed,
        noise=0,
        steps=STEPS,
        step_time_s=lay.step_time_s,
        faults=tuple(parse_fault(f) for f in faults),
        kill_on_bad_exit=lay.launcher.kill_on_bad_exit,
        fr_dumps=ev.flight_recorder_entries > 0 and ev.dump_on_timeout,
        hosts_per_leaf=lay.hosts_per_leaf,
        slurmd_timeout_s=lay.timeouts.slurmd_timeout_s,
    )


def measured_detection(o: Outcome) -> float | None:
    """First abort (not a tear-down, not a vanished host) or watchdog timeout, after the fault."""
    t0 = min(f.t for f in o.faults)
    times = [t for t, _code, why in o.exits.values() if why not in ("sigterm", "vanished")]
    times += list(o.timeouts.values())
    times += [t for t, _seq, text in o.ctld if "not responding" in text]  # the scheduler gives the node up
    return min(times) - t0 if times else None


def verdict_matches(b: Blast, culprit: Culprit) -> bool:
    ranks, hosts = list(culprit.ranks), list(culprit.hosts)
    if b.culprit_key == "rank":
        if not ranks:  # a GPU named by its host and PCI id (the kernel's Xid), no rank
            return bool(hosts) and hosts[0] == b.hosts[0] and bool(culprit.gpus)
        return ranks[0] == b.direct_ranks[0]
    if b.culprit_key == "host":
        return bool(hosts) and hosts[0] == b.hosts[0]
    # a switch or a rack: firstfault names hosts and links, never the box above them; right when
    # the first host it names is one the switch or rack serves
    return bool(hosts) and hosts[0] in b.hosts


def check_blast(lay: Layout, b: Blast, *, seed: int = 1, keep: Path | None = None, analyze: bool = True) -> Row:
    """Simulate ``b``'s fault on ``lay`` and compare; ``analyze=False`` compares the blast radius
    from the simulated job alone (no bundle written, no verdict: minutes saved at 16,384 ranks)."""
    t0 = time.perf_counter()
    faults = sim_faults(lay, b)
    o = simulate(sim_config(lay, faults, seed))
    stopped = len(set(o.blocked) | set(o.exits))
    det = measured_detection(o)
    verdict, verdict_ok = "not run", None
    if analyze:
        root = Path(tempfile.mkdtemp(prefix="ff-audit-")) if keep is None else keep
        try:
            truth = write_bundle(o, root)
            v = firstfault.analyze(root)
        finally:
            if keep is None:
                shutil.rmtree(root, ignore_errors=True)
        named = ",".join(v.culprit.hosts[:2]) or ",".join(str(r) for r in v.culprit.ranks[:2])
        verdict, verdict_ok = f"{v.category}: {named}", verdict_matches(b, v.culprit)
    else:
        truth = truth_of(o)
    d = b.detection
    sim_direct = sorted(truth["culprit_ranks"])
    return Row(
        layout=lay.name or f"{lay.world} ranks",
        world=lay.world,
        cls=str(b.cls),
        faults=f"{faults[0].split('@')[0]} x{len(faults)}",
        pred_direct=len(b.direct_ranks),
        sim_direct=len(sim_direct),
        direct_equal=sim_direct == sorted(b.direct_ranks),
        pred_stopped=b.job_ranks_stopped,
        sim_stopped=stopped,
        pred_detect=f"{d.lo_s:.1f}-{d.hi_s:.1f} ({d.mechanism})",
        sim_detect_s=None if det is None else round(det, 2),
        detect_ok=det is not None and d.lo_s - DETECT_SLACK_S <= det <= d.hi_s + DETECT_SLACK_S,
        pred_timeouts=d.timeouts_fire,
        sim_timeouts=len(o.timeouts),
        timeouts_ok=d.timeouts_fire == bool(o.timeouts),
        pred_attributable=b.attributable,
        verdict=verdict,
        verdict_ok=verdict_ok,
        seconds=round(time.perf_counter() - t0, 1),
    )


def check_layout(lay: Layout, *, seed: int = 1, classes: tuple[str, ...] = (), analyze: bool = True) -> list[Row]:
    rep = audit(lay)
    return [check_blast(lay, b, seed=seed, analyze=analyze) for b in rep.blasts if not classes or str(b.cls) in classes]


HEADER = (
    "| layout | ranks | class | simulated as | direct ranks (pred / sim, equal) | ranks stopped (pred / sim) "
    "| detection s: predicted window | simulated | timeouts fire (pred / sim count) | prediction = simulation "
    "| attributable (audit) | analyze names | analyze right | s |"
)


def _yn(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "NO")


def markdown(rows: list[Row]) -> str:
    out = [HEADER, "|" + "---|" * 14]
    for r in rows:
        out.append(
            f"| {r.layout} | {r.world} | {r.cls} | {r.faults} | {r.pred_direct} / {r.sim_direct}, "
            f"{'yes' if r.direct_equal else 'NO'} | {r.pred_stopped} / {r.sim_stopped} | {r.pred_detect} | "
            f"{r.sim_detect_s} {'ok' if r.detect_ok else 'OUTSIDE'} | {'yes' if r.pred_timeouts else 'no'} / "
            f"{r.sim_timeouts} | {'yes' if r.blast_ok else 'NO'} | {'yes' if r.pred_attributable else 'no'} "
            f"| {r.verdict} | {_yn(r.verdict_ok)} "
            f"| {r.seconds} |"
        )
    return "\n".join(out)
