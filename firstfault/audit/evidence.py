"""What evidence a component's failure leaves, whether it can be attributed, and what isolates it.

The rule behind ``attributable``: a fault is attributable when at least one piece of evidence
that names the faulty component (its rank, its host, its GPU or its port) is both produced and
collected. A hang with the flight recorder off (``TORCH_NCCL_TRACE_BUFFER_SIZE`` 0) or without
``TORCH_NCCL_DUMP_ON_TIMEOUT``, and without the host's kernel log, leaves only every rank's
identical timeout: no culprit. The wording of each item is what the software prints (the Xid
lines of the NVIDIA driver, NCCL's WARN lines, torch's watchdog), quoted only as far as the
signatures in ``firstfault/signatures/`` know them.
"""

from __future__ import annotations

from firstfault.audit.layout import Layout
from firstfault.audit.model import ComponentClass, Detection, Evidence, Mechanism
from firstfault.vocab import settings

GPU_LIKE = (ComponentClass.GPU, ComponentClass.GPU_HANG, ComponentClass.NVLINK)
XID = {ComponentClass.GPU: "79/48/95", ComponentClass.GPU_HANG: "119", ComponentClass.NVLINK: "74"}


def _fr(lay: Layout, det: Detection) -> Evidence:
    ev = lay.evidence
    on = ev.flight_recorder_entries > 0 and ev.dump_on_timeout and det.timeouts_fire
    why = "written on the first timeout" if det.timeouts_fire else "no timeout fires, so no dump"
    return Evidence("flight-recorder dumps of every live rank", f"which rank never reached the collective ({why})", on)


def evidence_for(lay: Layout, cls: ComponentClass, det: Detection) -> tuple[Evidence, ...]:
    ev = lay.evidence
    nccl = ev.nccl_debug.upper() in ("WARN", "INFO", "TRACE")
    out: list[Evidence] = []
    if cls in GPU_LIKE:
        out.append(
            Evidence("kernel log of the GPU's host", f"NVRM: Xid {XID[cls]} with the GPU's PCI address", ev.kernel_logs)
        )
        if cls == ComponentClass.GPU_HANG:
            hb = lay.timeouts
            out.append(
                Evidence(
                    "the hung rank's stderr",
                    f"if the hang also blocks its watchdog thread: the heartbeat monitor's report and the "
                    f"process killed after {hb.heartbeat_timeout_s:.0f} s (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC)",
                    hb.heartbeat,
                )
            )
        else:
            out.append(Evidence("the rank's stderr", "the watchdog's CUDA error, then the abort", True))
            out.append(Evidence("torchrun on the host", "ChildFailedError naming the rank and its exit code", True))
    if cls in (ComponentClass.NIC, ComponentClass.LEAF):
        out.append(Evidence("kernel log of each host on the port", "mlx5_core: Port: 1 Link DOWN", ev.kernel_logs))
        out.append(Evidence("stdout of the rank on that NIC", "NCCL WARN: Got async event : port error", nccl))
    if det.mechanism == Mechanism.IB_RETRY:
        out.append(
            Evidence("stdout of the peers across the fault", "NCCL WARN: Got completion from peer ... status=12", nccl)
        )
        out.append(Evidence("stderr of those peers", "ncclRemoteError from the watchdog, then the abort", True))
    if cls in (ComponentClass.HOST, ComponentClass.RACK):
        out.append(Evidence("the host's own logs", "they stop: silence, no error line", True))
        out.append(
            Evidence(
                "slurmctld log",
                f"'not responding, setting DOWN' after SlurmdTimeout ({lay.timeouts.slurmd_timeout_s:.0f} s)",
                ev.scheduler_logs,
            )
        )
    if det.timeouts_fire:
        out.append(Evidence("stderr of every blocked rank", "Watchdog caught collective operation timeout", True))
    if det.mechanism != Mechanism.NONE:
        out.append(_fr(lay, det))
    return tuple(out)


def attribution(lay: Layout, cls: ComponentClass, det: Detection, ev: tuple[Evidence, ...]) -> tuple[bool, str]:
    """(attributable, why) from which naming evidence is collected."""
    if det.mechanism == Mechanism.NONE:
        return True, "nothing uses this component in this layout: no fault to attribute"
    got = {e.where for e in ev if e.collected}
    if cls in (ComponentClass.GPU, ComponentClass.NVLINK):
        if "kernel log of the GPU's host" in got:
            return True, "the rank's CUDA error names the rank, the kernel's Xid names the GPU"
        return True, "the rank's CUDA error names the rank; without the kernel log the hardware cause is a guess"
    if cls == ComponentClass.GPU_HANG:
        if "kernel log of the GPU's host" in got:
            return True, "the kernel's Xid 119 names the GPU; every rank's timeout alone would not"
        if "flight-recorder dumps of every live rank" in got:
            return True, "the flight-recorder dumps show the one rank that never finished the collective"
        return (
            False,
            "every rank times out alike; flight recorder off (or no dump on timeout) and no kernel log: no culprit",
        )
    if cls in (ComponentClass.NIC, ComponentClass.LEAF):
        if got & {"kernel log of each host on the port", "stdout of the rank on that NIC"}:
            return True, "the port's own event (kernel Link DOWN or NCCL's port error) names the host and NIC"
        if "stdout of the peers across the fault" in got:
            return (
                True,
                "only the peers' completion errors: they name both ends (a dead peer and a bad link read alike)",
            )
        return (
            False,
            "NCCL_DEBUG unset and no kernel log: the peers abort with ncclRemoteError and nothing names the port",
        )
    return _lost_host(lay, det, got)


def _lost_host(lay: Layout, det: Detection, got: set[str]) -> tuple[bool, str]:
    """A lost host prints nothing; what names it is the scheduler noticing while the job still
    runs, or its peers' completion errors, whose peer *address* maps to a host through NCCL's
    INFO init lines (``NCCL_DEBUG=INFO``: each rank prints its host and interfaces) or, with
    WARN only, through the scheduler naming the dead node within the window's margin after the
    job ended (``reason.lost_hosts``: an address no other host owns is the dead node's)."""
    if det.mechanism == Mechanism.SCHEDULER and "slurmctld log" in got:
        return True, "slurmctld sets the silent host DOWN while the job still waits: the job ends on its node failure"
    info = lay.evidence.nccl_debug.upper() in ("INFO", "TRACE")
    peers = "stdout of the peers across the fault" in got
    if peers and info:
        return True, "its peers' completion errors name its address, and NCCL's INFO init lines map it to the host"
    margin = settings.current().reasoning.window_margin_after_s
    if peers and "slurmctld log" in got and lay.timeouts.slurmd_timeout_s <= margin:
        return True, (
            f"slurmctld names the dead node {lay.timeouts.slurmd_timeout_s:.0f} s after it fell silent (within the "
            f"{margin:.0f} s a verdict reads past the job's end), and its peers' completion errors name an address "
            "no other host owns"
        )
    if peers:
        return False, (
            "its peers' completion errors name only an address (NCCL_DEBUG=WARN prints no init lines to map it to "
            "a host) and slurmctld notices too late or is not collected: a verdict will name the peer's link"
        )
    return False, "the host only falls silent: without the scheduler's log or NCCL's warnings nothing names it"


def isolation_for(lay: Layout, cls: ComponentClass, hosts: tuple[str, ...], n_direct: int, job: int) -> str:
    spares = lay.spares.nodes
    swap = (
        f"a spare swaps in ({spares} held)"
        if spares >= len(hosts)
        else f"no spare for {len(hosts)} host(s): the job waits for repair or shrinks"
    )
    restart = f"synchronous training: all {job} ranks restart from the last checkpoint"
    if cls in GPU_LIKE:
        return f"drain {hosts[0]} (the GPU needs a reset or replacement); {swap}; {restart}"
    if cls == ComponentClass.NIC:
        return f"drain {hosts[0]}: NCCL does not move a rank's traffic to another rail by itself; {swap}; {restart}"
    if cls == ComponentClass.HOST:
        return f"drain {hosts[0]}; {swap}; {restart}"
    if cls == ComponentClass.LEAF:
        return f"repair the switch or drain its {len(hosts)} hosts ({n_direct} ranks lose the rail); {swap}; {restart}"
    return f"drain the rack's {len(hosts)} hosts; {swap}; {restart}"
