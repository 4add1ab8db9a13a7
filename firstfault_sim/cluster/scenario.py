"""One simulated job: faults resolved to ranks and times, then the failure played out.

The engine is a small discrete-event simulation on the true clock. Faults stop ranks; the
schedule (``schedule.propagate``) says where every other rank ends up blocked; then events
run in time order: a watchdog fires ``nccl_timeout`` after a rank entered the collective it is
stuck in (if the rank is still alive then), the first timeout makes every live rank dump its
flight recorder, a dead process makes its node's torchrun agent tear the node down, an agent
that exits makes ``srun --kill-on-bad-exit`` kill the step everywhere, SLURM cancels the job on
a time limit, a preemption or a node it lost. An event on a process that is already gone does
nothing, which is exactly why a rank killed by the tear-down never prints its timeout.

Every line an event produces is recorded here already formatted (with the host's clock);
:mod:`emit` writes the files, and the progress lines, in bulk.
"""

from __future__ import annotations

import heapq
import random
from typing import Any

from firstfault_sim.cluster import templates as T
from firstfault_sim.cluster.clock import Clock, host_offsets
from firstfault_sim.cluster.faults import KINDS
from firstfault_sim.cluster.layout import ProcessGroups
from firstfault_sim.cluster.outcome import Fault, Outcome, SimConfig
from firstfault_sim.cluster.schedule import Op, Schedule, Stop, propagate
from firstfault_sim.cluster.teardown import TearDown
from firstfault_sim.cluster.topology import Cluster, ClusterShape

DAY0 = 1796198400.0  # 2026-12-02T00:00:00Z, the date of the real captures this mimics
CUDA_ERRORS = {
    79: ("unknown error", "cudaErrorUnknown"),
    48: ("uncorrectable ECC error encountered", "cudaErrorECCUncorrectable"),
    94: ("uncorrectable ECC error encountered", "cudaErrorECCUncorrectable"),
    95: ("uncorrectable ECC error encountered", "cudaErrorECCUncorrectable"),
    74: ("uncorrectable NVLink error was detected during the execution", "cudaErrorNvlinkUncorrectable"),
}
IB_RETRY_S = 34.0  # NCCL_IB_TIMEOUT=20 (4.3 s per try) x (NCCL_IB_RETRY_CNT=7 + 1)


class Engine(TearDown):
    """Plays one job. ``run()`` returns the :class:`Outcome`."""

    def __init__(self, cfg: SimConfig):
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        shape = ClusterShape(cfg.hosts, cfg.gpus_per_host, cfg.hosts_per_leaf, cfg.nvlink_domain)
        self.cl = Cluster(shape)
        self.groups = ProcessGroups.build(cfg.layout, cfg.world)
        self.sched = Schedule(self.groups)
        rng = self.rng
        self.t0 = DAY0 + 8 * 3600 + rng.randrange(0, 6 * 3600)
        self.t_train = self.t0 + 45.0 + rng.random() * 10
        self.S = cfg.step_time_s
        clocks = [Clock(o) for o in host_offsets(cfg.hosts, cfg.clock_skew_s, rng)]
        job = cfg.job_id or 400000 + rng.randrange(0, 500000)
        rid = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(8))
        pids: list[int] = []
        apids: list[int] = []
        for _h in range(cfg.hosts):
            base = rng.randrange(20000, 3_900_000)
            apids.append(base)
            pids.extend(base + 90 + k for k in range(cfg.gpus_per_host))
        self.out = Outcome(
            cfg,
            self.cl,
            self.groups,
            self.sched,
            clocks,
            self.t0,
            self.t_train,
            self.S,
            job,
            f"ff-{job}_{rid}",
            [],
            pids,
            apids,
        )
        self.jit = [rng.random() * 0.004 for _ in range(cfg.world)]  # per-rank issue jitter (s)
        self.heap: list[tuple[float, int, str, tuple[Any, ...]]] = []
        self.alive = [True] * cfg.world
        self.agent_alive = [True] * cfg.hosts
        self.agent_torn = [False] * cfg.hosts
        self.agent_failed: dict[int, float] = {}
        self.first_timeout: tuple[float, int] | None = None
        self.step_aborted = False
        self.ended = False
        self.oom_hosts: set[int] = set()

    # ------------------------------------------------------------------ time helpers
    def op_time(self, rank: int, step: int, idx: int) -> float:
        op = self.sched.template(rank)[idx]
        return self.t_train + (step + op.frac) * self.S + self.jit[rank]

    def position_at(self, rank: int, t: float) -> tuple[int, int]:
        """(step, index) of the first op ``rank`` issues at or after ``t``."""
        tmpl = self.sched.template(rank)
        step = max(0, int((t - self.t_train) // self.S))
        for s in (step, step + 1, step + 2):
            for i in range(len(tmpl)):
                if self.op_time(rank, s, i) >= t:
                    return s, i
        return step + 2, 0

    # ------------------------------------------------------------------ faults
    def resolve(self) -> list[Fault]:
        cfg, rng, cl = self.cfg, self.rng, self.cl
        specs = list(cfg.faults)
        out: list[Fault] = []
        run_s = cfg.steps * self.S
        for spec in specs:
            info = KINDS[spec.kind]
            if spec.at_step is not None:
                t = self.t_train + (spec.at_step + 0.1 + 0.8 * rng.random()) * self.S
            elif spec.at_s is not None:
                t = self.t_train + spec.at_s
            else:
                t = self.t_train + run_s * (0.3 + 0.4 * rng.random())
            if spec.rank is not None:
                if not 0 <= spec.rank < cfg.world:
                    raise ValueError(f"fault {spec.kind}: rank {spec.rank} is outside 0..{cfg.world - 1}")
                rank = spec.rank
                host, local = cl.rank_host(rank), cl.rank_local(rank)
            else:
                host = cl.host_index(spec.host) if spec.host else rng.randrange(cfg.hosts)
                local = spec.local if spec.local is not None else rng.randrange(cfg.gpus_per_host)
                if not 0 <= local < cfg.gpus_per_host:
                    raise ValueError(f"fault {spec.kind}: local index {local} outside 0..{cfg.gpus_per_host - 1}")
                rank = host * cfg.gpus_per_host + local
            if info.mode in ("net", "node", "sched") or spec.kind == "disk_full":
                culprit: int | None = rank if info.mode in ("net",) or spec.kind == "disk_full" else None
            else:
                culprit = rank
            if info.mode == "net" and cfg.hosts < 2:
                raise ValueError(f"fault {spec.kind} needs at least 2 hosts (NIC traffic is between hosts)")
            if spec.kind == "node_failure" and cfg.hosts < 2:
                raise ValueError("node_failure needs at least 2 hosts")
            step = max(0, int((t - self.t_train) // self.S))
            f = Fault(spec, t, culprit, host, local, step)
            if spec.kind == "link_flap":
                f.extra["down_s"] = IB_RETRY_S + 8 + rng.random() * 60
            if spec.kind == "exception":
                f.extra.update(
                    expert=rng.randrange(8), tokens=rng.randrange(700, 1400), cap=rng.choice((512, 640, 768))
                )
            if spec.kind == "thermal":
                f.extra["factor"] = 1.35 + rng.random() * 0.4
            if spec.kind == "disk_full":
                # the checkpoint interval lands inside the run: the fault is the checkpoint write
                f.extra["ckpt_step"] = step
            if t >= self.t_train + run_s:
                raise ValueError(
                    f"fault {spec.kind} at {t - self.t_train:.0f} s is after the run's last step "
                    f"({run_s:.0f} s); raise --steps"
                )
            out.append(f)
        out.sort(key=lambda f: f.t)
        return out

    # ------------------------------------------------------------------ main
    def run(self) -> Outcome:
        cfg, out = self.cfg, self.out
        faults = self.resolve()
        out.faults = faults
        self._init_noise()
        stops = self._stops(faults)
        blocked = propagate(self.sched, stops) if stops else {}
        out.blocked = blocked
        T_ = cfg.nccl_timeout_s
        for r, b in blocked.items():
            t_in = self.op_time(r, b.step, b.index)
            out.enter_t[r] = t_in
            if b.inside:
                self.push(t_in + T_ + 0.005 + self.rng.random() * 0.09, "timeout", r)
        for f in faults:
            self._schedule_fault(f)
        end_planned = self.t_train + cfg.steps * self.S + 0.5
        slow = [f for f in faults if KINDS[f.kind].mode == "slow"]
        if slow:
            f0 = slow[0]
            out.slow_step = int((f0.t - self.t_train) // self.S) + 1
            out.slow_step_s = self.S * (1 + 0.62 * (f0.extra["factor"] - 1))
            end_planned += (cfg.steps - out.slow_step) * (out.slow_step_s - self.S)
        if not any(KINDS[f.kind].mode != "slow" for f in faults):
            self.push(end_planned, "complete")
        self.ctld(self.t0 - 2.1, T.S_CTLD_SUBMIT.format(job=out.job))
        self.ctld(self.t0 - 0.3, T.S_CTLD_ALLOC.format(job=out.job, nodelist=self.cl.nodelist(), cpus=cfg.hosts * 224))
        while self.heap:
            t, _, kind, args = heapq.heappop(self.heap)
            if self.ended and kind not in ("node_down", "port_up"):
                continue  # after the job: the controller still notices a dead node, the kernel a port
            getattr(self, "ev_" + kind)(t, *args)
        return out

    # ------------------------------------------------------------------ stops
    def _stops(self, faults: list[Fault]) -> list[Stop]:
        stops: list[Stop] = []
        cl = self.cl
        for f in faults:
            mode = KINDS[f.kind].mode
            if mode == "slow" or mode == "sched":
                continue
            if mode == "node":
                for r in cl.host_ranks(f.host):
                    s, i = self.position_at(r, f.t)
                    stops.append(Stop(r, s, i))
                continue
            if mode == "net":
                r = f.host * cl.gph + f.local
                s, i = self._next_cross_host(r, f.t)
                f.extra["stuck"] = (s, i)
                stops.append(Stop(r, s, i, inside=True))
                continue
            ranks = list(cl.host_ranks(f.host)) if f.kind == "disk_full" else [f.host * cl.gph + f.local]
            for r in ranks:
                s, i = self.position_at(r, f.t)
                if mode in ("inside", "mismatch"):
                    if mode == "mismatch":
                        s, i = self._next_slot(r, f.t, "dp")
                        f.extra["stuck"] = (s, i)
                    stops.append(Stop(r, s, i, inside=True))
                else:
                    stops.append(Stop(r, s, i))
            if mode == "exit":
                # its node's agent tears the node down about a second later
                for q in cl.host_ranks(f.host):
                    if q not in ranks:
                        s, i = self.position_at(q, f.t + 1.5)
                        stops.append(Stop(q, s, i))
        return stops

    def _next_slot(self, rank: int, t: float, slot: str) -> tuple[int, int]:
        s, i = self.position_at(rank, t)
        tmpl = self.sched.template(rank)
        for step in (s, s + 1):
            for j in range(i if step == s else 0, len(tmpl)):
                if tmpl[j].slot == slot:
                    return step, j
        return s, i

    def _cross_host(self, rank: int, op: Op) -> bool:
        if op.slot in ("pp_up", "pp_down"):
            return self.host_of(self.sched.pp_peer(rank, op.slot)) != self.host_of(rank)
        g = self.groups.group_of(rank, op.slot)
        return g is not None and any(self.host_of(m) != self.host_of(rank) for m in (g.ranks[0], g.ranks[-1]))

    def _next_cross_host(self, rank: int, t: float) -> tuple[int, int]:
        s, i = self.position_at(rank, t)
        tmpl = self.sched.template(rank)
        for step in (s, s + 1, s + 2):
            for j in range(i if step == s else 0, len(tmpl)):
                if self._cross_host(rank, tmpl[j]):
                    return step, j
        return s, i

    def _ring_peers(self, rank: int, op: Op) -> list[int]:
        """The ring neighbours (send-to, receive-from) of ``rank`` in ``op``'s channel, other hosts only."""
        if op.slot in ("pp_up", "pp_down"):
            peers = [self.sched.pp_peer(rank, op.slot)]
        else:
            g = self.groups.group_of(rank, op.slot)
            if g is None:
                return []
            k = self.groups.group_rank(rank, op.slot)
            peers = [g.ranks[(k + 1) % g.size], g.ranks[(k - 1) % g.size]]
        h = self.host_of(rank)
        return [p for p in dict.fromkeys(peers) if self.host_of(p) != h]

    # ------------------------------------------------------------------ fault scheduling
    def _schedule_fault(self, f: Fault) -> None:
        mode = KINDS[f.kind].mode
        cl, rng = self.cl, self.rng
        r = f.host * cl.gph + f.local
        if f.kind.startswith("xid"):
            self.push(f.t, "xid", f)
        if mode == "exit":
            if f.kind.startswith("xid"):
                self.push(f.t + 0.05 + rng.random() * 0.6, "cuda_abort", r, f)
            elif f.kind == "host_oom":
                self.push(f.t, "oom_kill", r, f)
            elif f.kind == "disk_full":
                for q in cl.host_ranks(f.host):
                    self.push(f.t + rng.random() * 0.4, "py_exit", q, f)
            else:
                self.push(f.t, "py_exit", r, f)
            if self.cfg.remote_errors:
                self._remote_errors_after(r, f.t + 0.3)
        elif mode == "net":
            self.push(f.t, "port_down", f)
        elif mode == "node":
            self.push(f.t, "node_dead", f)
        elif mode == "sched":
            self.push(f.t, "slurm_cancel", f)
        elif mode == "slow":
            for q in [r]:
                self.out.slow[q] = (f.t, f.extra["factor"])

    def _remote_errors_after(self, dead: int, t_dead: float) -> None:
        """Peers on other hosts that were sending to a process that died see their QPs fail."""
        b = self.out.blocked
        hd = self.host_of(dead)
        for q, bq in b.items():
            if not bq.inside or q == dead or self.host_of(q) == hd:
                continue
            op = self.sched.template(q)[bq.index]
            if self._successor(q, op) == dead:  # q's ring sends go to ``dead``
                t = max(t_dead, self.out.enter_t.get(q, t_dead)) + IB_RETRY_S + self.rng.random() * 3
                self.push(t, "net_error", q, dead)

    def _successor(self, rank: int, op: Op) -> int | None:
        if op.slot in ("pp_up", "pp_down"):
            return self.sched.pp_peer(rank, op.slot) if op.optype == "SEND" else None
        g = self.groups.group_of(rank, op.slot)
        if g is None:
            return None
        return g.ranks[(self.groups.group_rank(rank, op.slot) + 1) % g.size]

    # ------------------------------------------------------------------ events
    def ev_complete(self, t: float) -> None:
        out = self.out
        out.completed = True
        out.end_t = t + 2.0
        for r in range(self.cfg.world):
            if self.alive[r]:
                h = self.host_of(r)
                tt = t + self.jit[r]
                done = T.W_DONE.format(ts=out.clocks[h].py(tt), rank=r, steps=self.cfg.steps)
                out.stdout[r].append((tt, out.nseq(), done))
        self.ended = True

    def ev_xid(self, t: float, f: Fault) -> None:
        h, lr, rng = f.host, f.local, self.rng
        bus = self.cl.gpu_bus(lr)
        pid = self.out.pid[h * self.cl.gph + lr]
        x = KINDS[f.kind].xid
        if x == 79:
            self.kern(h, t, "err", T.K_XID79.format(bus=bus))
            self.kern(h, t + 0.00002, "err", T.K_OFF_BUS.format(bus=bus))
        elif x == 48:
            self.kern(h, t, "err", T.K_XID48.format(bus=bus, part=rng.randrange(8), sub=rng.randrange(2)))
            self.kern(h, t + 0.8, "warn", T.K_XID63.format(bus=bus, addr=rng.randrange(1 << 22, 1 << 26)))
        elif x == 94:
            self.kern(h, t, "err", T.K_XID94.format(bus=bus))
        elif x == 95:
            self.kern(h, t, "err", T.K_XID95.format(bus=bus, pid=pid))
        elif x == 74:
            self.kern(h, t, "err", T.K_XID74.format(bus=bus, link=rng.randrange(18)))
        elif x == 119:
            for k in range(5):
                tt = t + 6.0 * k
                self.kern(h, tt, "err", T.K_XID119.format(bus=bus, pid=pid, lr=lr))
                if k == 0:
                    self.kern(h, tt, "err", T.K_GSP_BUFFER.format(lr=lr))
            self.kern(h, t + 30.0, "err", T.K_GSP_RATE.format(bus=bus))

    def ev_cuda_abort(self, t: float, r: int, f: Fault) -> None:
        if not self.alive[r]:
            return
        x = KINDS[f.kind].xid or 79
        msg, enum = CUDA_ERRORS.get(x, CUDA_ERRORS[79])
        kind = self._current_kind(r, f.t)
        tag = self.tag(r, kind)
        exc = T.CUDA_EXC.format(msg=msg, enum=enum)
        self.c10(r, t, 2057, T.C_TERMINATED.format(tag=tag, exc=exc) + "\n" + "\n".join(T.CPP_CUDA_CHECK))
        what = T.C_TERMINATED.format(tag=tag, exc=exc)
        self.err(r, t, [T.TERMINATE, *T.WHAT.format(what=what).split("\n"), *list(T.CPP_CUDA_CHECK)])
        self._fatal_abort(r, t)
        self.exit(r, t + 0.02, -6, "cuda")

    def _current_kind(self, r: int, t: float) -> str | None:
        _s, i = self.position_at(r, t)
        op = self.sched.template(r)[i]
        return op.kind

    def ev_oom_kill(self, t: float, r: int, f: Fault) -> None:
        if not self.alive[r]:
            return
        h, rng, pid = f.host, self.rng, self.out.pid[r]
        vm = rng.randrange(180_000_000, 260_000_000)
        self.kern(h, t - 0.0002, "info", T.K_OOM_CONSTRAINT.format(job=self.out.job, pid=pid))
        self.kern(h, t, "err", T.K_OOM_KILLED.format(pid=pid, vm=vm, rss=vm // 3, frss=rng.randrange(400_000, 900_000)))
        self.kern(h, t + 0.09, "info", T.K_OOM_REAPED.format(pid=pid))
        self.oom_hosts.add(h)
        self.exit(r, t + 0.01, -9, "sigkill")

    def ev_py_exit(self, t: float, r: int, f: Fault) -> None:
        if not self.alive[r]:
            return
        p = f"[rank{r}]: "
        frames: tuple[str, ...]
        if f.kind == "exception":
            frames = T.TB_HEAD + T.TB_MODEL
            msg = T.W_EXC_MSG.format(**{k: f.extra[k] for k in ("expert", "tokens", "cap")})
        elif f.kind == "sdc":
            frames = T.TB_HEAD + T.TB_NAN
            msg = T.W_NAN_MSG.format(step=self._step_at(r, t))
        elif f.kind == "disk_full":
            frames = T.TB_HEAD + T.TB_SAVE
            msg = T.SAVE_FAILED
        elif f.kind == "nccl_bug":
            self.nccl(r, t - 0.003, T.N_INFO_INTERNAL, tid_off=61)
            frames = T.TB_HEAD + T.TB_COLLECTIVE
            msg = T.DIST_BACKEND_INTERNAL
        else:
            frames, msg = T.TB_HEAD, "RuntimeError: unexpected failure"
        lines = [fr.format(p=p) for fr in frames]
        tail = [p + msg] + ([p + ln for ln in T.NCCL_INTERNAL_LINES] if f.kind == "nccl_bug" else [])
        self.err(r, t, lines + tail)
        stack = "Traceback (most recent call last):\n" + "\n".join(fr.format(p="") for fr in frames[5:]) + "\n" + msg
        self.out.error_json[r] = (t, msg, stack)
        self.exit(r, t + 0.3 + self.rng.random() * 0.4, 1, "exception")

    def _step_at(self, r: int, t: float) -> int:
        return max(0, int((t - self.t_train - self.jit[r]) // self.S))

    def _fatal_abort(self, r: int, t: float) -> None:
        """faulthandler's SIGABRT report: the main thread's stack, the watchdog thread's none."""
        main = 0x7F00_0000_0000 + (self.out.pid[r] % 0xFFFFF) * 0x1000 + 0x740
        lines = [T.FH_FATAL_ABORT, "", T.FH_THREAD.format(tid=main)]
        lines += list(T.FH_STACK_COLLECTIVE)
        lines += ["", T.FH_CURRENT.format(tid=main + 0x6A000), T.FH_NO_FRAME, "", T.FH_EXT]
        self.err(r, t + 0.01, lines)

    def ev_port_down(self, t: float, f: Fault) -> None:
        h, lr, cl, rng = f.host, f.local, self.cl, self.rng
        self.kern(h, t, "info", T.K_PORT.format(nic_pci=cl.nic_pci(lr), nic=cl.nic(lr), state="DOWN"))
        r = h * cl.gph + lr
        if self.alive[r]:
            self.nccl(r, t + 0.002, T.N_WARN_ASYNC.format(event="port error"), tid_off=23)
        if f.kind == "link_flap":
            up = t + f.extra["down_s"]
            self.push(up, "port_up", f)
        s, i = f.extra["stuck"]
        op = self.sched.template(r)[i]
        peers = self._ring_peers(r, op)
        t_err = max(t, self.op_time(r, s, i)) + IB_RETRY_S
        for p in peers:
            self.push(t_err + rng.random() * 2.0, "net_error", r, p)
            self.push(t_err + rng.random() * 2.0, "net_error", p, r)

    def ev_port_up(self, t: float, f: Fault) -> None:
        h, lr, cl = f.host, f.local, self.cl
        self.kern(h, t, "info", T.K_PORT.format(nic_pci=cl.nic_pci(lr), nic=cl.nic(lr), state="INIT"))
        self.kern(h, t + 1.1, "info", T.K_PORT.format(nic_pci=cl.nic_pci(lr), nic=cl.nic(lr), state="ACTIVE"))
        r = h * cl.gph + lr
        if self.alive[r]:
            self.nccl(r, t + 1.102, T.N_WARN_ASYNC.format(event="port active"), tid_off=23)

    def ev_net_error(self, t: float, r: int, peer: int) -> None:
        if not self.alive[r]:
            return
        cl = self.cl
        ip, myip = cl.ip(self.host_of(peer)), cl.ip(self.host_of(r))
        port = 30000 + (peer * 7919 + r) % 30000
        warn = T.N_WARN_COMPLETION.format(peer=ip, port=port, opcode=0, myip=myip)
        self.nccl(r, t, warn + "\n" + T.N_INFO_PROXY, tid_off=41)
        b = self.out.blocked.get(r)
        kind = self.sched.template(r)[b.index].kind if b else None
        pgr = self.pg_rank(r, kind)
        tag = self.tag(r, kind)
        exc = T.NCCL_REMOTE_EXC.format(last=warn.split(" NCCL WARN ", 1)[1])
        tt = t + 0.2 + self.rng.random() * 0.5
        self.c10(r, tt, 684, T.C_SOME_OPS.format(pg_rank=pgr))
        self.c10(r, tt, 698, T.C_AVOID.format(pg_rank=pgr))
        self.c10(r, tt + 0.001, 1899, T.C_TERMINATED.format(tag=tag, exc=exc) + "\n" + "\n".join(T.CPP_NCCL_ERROR))
        what = T.C_TERMINATED.format(tag=tag, exc=exc)
        self.err(r, tt + 0.002, [T.TERMINATE, *T.WHAT.format(what=what).split("\n"), *list(T.CPP_NCCL_ERROR)])
        self._fatal_abort(r, tt + 0.003)
        self.exit(r, tt + 0.02, -6, "nccl_remote")

    def ev_node_dead(self, t: float, f: Fault) -> None:
        h = f.host
        self.out.vanished[h] = t
        self.agent_alive[h] = False
        for r in self.cl.host_ranks(h):
            if self.alive[r]:
                self.alive[r] = False
                self.out.exits[r] = (t, 0, "vanished")
        if self.cfg.remote_errors:
            for r in self.cl.host_ranks(h):
                self._remote_errors_after(r, t)
        self.push(t + self.cfg.slurmd_timeout_s + self.rng.random() * 20, "node_down", f)

    def ev_node_down(self, t: float, f: Fault) -> None:
        """slurmctld gives up on the node: the job is cancelled DUE TO NODE FAILURE."""
        host = self.cl.host(f.host)
        job = self.out.job
        self.ctld(t, T.S_CTLD_KILL_FAILED.format(job=job, host=host))
        self.ctld(t + 0.001, T.S_CTLD_NOT_RESPONDING.format(host=host))
        if self.ended:
            return
        self.srun(t + 0.05, T.S_NODE_FAIL.format(host=host))
        self.out.job_state, self.out.exit_code = "NODE_FAIL", "0:0"
        self._cancel_all(t + 0.1, " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS")
        if not any(self.agent_alive):
            self.push(t + 1.0, "job_end")

    def ev_timeout(self, t: float, r: int) -> None:
        if not self.alive[r]:
            return
        out, cfg, rng = self.out, self.cfg, self.rng
        b = out.blocked[r]
        op = self.sched.template(r)[b.index]
        kind = op.kind
        seq = self.sched.seq(r, b.step, b.index) + 1
        tms = int(cfg.nccl_timeout_s * 1000)
        ran = int((t - out.enter_t[r]) * 1000)
        nin, nout = op.numel_in, op.numel_out
        mism = next((f for f in out.faults if f.kind == "mismatch" and f.host * self.cl.gph + f.local == r), None)
        if mism is not None:
            nin, nout = nin + 4096, nout + 4096
        pgr = self.pg_rank(r, kind)
        tag = self.tag(r, kind)
        opname = op.optype
        wd = T.C_WD_TIMEOUT.format(pg_rank=pgr, seq=seq, op=opname, nin=nin, nout=nout, tms=tms, ran=ran)
        le = seq + (1 if rng.random() < 0.5 else 0)
        self.c10(r, t, 683, wd)
        self.c10(r, t + 0.0001, 2241, T.C_FAIL_DETECTED.format(tag=tag, seq=seq, le=le, lc=seq - 1))
        fn = {
            "ALLREDUCE": "all_reduce",
            "_ALLGATHER_BASE": "all_gather_into_tensor",
            "_REDUCE_SCATTER_BASE": "reduce_scatter_tensor",
            "ALLTOALL_BASE": "all_to_all_single",
            "ALLGATHER": "all_gather",
            "SEND": "send",
            "RECV": "recv",
        }.get(opname, "all_reduce")
        frames = [ln.format(fn=fn, c10d_line=3174) for ln in T.C_STACK_FRAMES]
        self.c10(r, t + 0.0012, 730, T.C_STACK + "\n" + "\n".join(frames) + "\n")
        out.timeouts[r] = t
        if r not in out.dumps:
            self.c10(r, t + 0.0013, 2573, T.C_FIRST_PG.format(tag=tag))
            t_d = t + 0.3 + rng.random() * 0.1
            self.c10(r, t_d, 1858, T.C_DUMP_LOCAL.format(tag=T.PG_TAG_DEFAULT.format(rank=r), le=le, lc=seq - 1))
            self.c10(r, t_d + 0.0003, 1575, T.C_PREPARE_DUMP.format(tag=T.PG_TAG_DEFAULT.format(rank=r)))
            out.dumps[r] = t_d
        if self.first_timeout is None:
            self.first_timeout = (t, r)
            if cfg.fr_dumps:
                for q in range(cfg.world):
                    if self.alive[q] and q != r:
                        self.push(t + 0.2 + rng.random() * 1.0, "dump_signal", q, r)
        ta = t + 0.6 + rng.random() * 0.8
        self.c10(r, ta, 684, T.C_SOME_OPS.format(pg_rank=pgr))
        self.c10(r, ta, 698, T.C_AVOID.format(pg_rank=pgr))
        self.c10(r, ta + 0.0017, 1899, T.C_TERMINATED.format(tag=tag, exc=wd) + "\n" + "\n".join(T.CPP_CHECK_TIMEOUT))
        what = T.C_TERMINATED.format(tag=tag, exc=wd)
        self.err(
            r, ta + 0.002, [T.TERMINATE, *T.WHAT.format(what=what).split("\n"), *T.CPP_CHECK_TIMEOUT, *T.CPP_WATCHDOG]
        )
        self._fatal_abort(r, ta + 0.003)
        self.exit(r, ta + 0.02, -6, "watchdog")

    def ev_dump_signal(self, t: float, r: int, src: int) -> None:
        if not self.alive[r] or r in self.out.dumps:
            return
        tag = T.PG_TAG_DEFAULT.format(rank=r)
        b = self.out.blocked.get(r)
        le = self.sched.seq(r, b.step, b.index) + 1 if b is not None else 1
        self.c10(r, t, 1794, T.C_DUMP_OBSERVED.format(tag=tag))
        self.c10(r, t + 0.0001, 1858, T.C_DUMP_REMOTE.format(tag=tag, from_rank=src, le=le, lc=le - 1))
        self.c10(r, t + 0.0004, 1575, T.C_PREPARE_DUMP.format(tag=tag))
        self.out.dumps[r] = t + 0.0004

    # ------------------------------------------------------------------ start-up noise
    def _init_noise(self) -> None:
        """torchrun's start-up warning, the benign barrier warning, kernel boot noise."""
        cfg, out, cl, rng = self.cfg, self.out, self.cl, self.rng
        if cfg.noise < 1:
            return
        for h in range(cfg.hosts):
            t = self.t0 + 1.0 + rng.random()
            md, hms, us = out.clocks[h].glog(t)
            pfx = T.AGENT.format(
                lvl="W", md=md, hms=hms, us=us, apid=out.agent_pid[h], file="torch/distributed/run.py", line=793
            )
            for ln in T.A_OMP.split("\n"):
                out.agent[h].append((t, out.nseq(), pfx + ln))
            tk = self.t0 - 3600 * (2 + rng.random())
            for k in range(4):
                self.kern(h, tk + 0.001 * k, "info", T.K_NOISE_NVSWITCH.format(n=k))
            self.kern(h, tk + 4.2, "info", T.K_NOISE_ADDRCONF)
            if cfg.noise >= 2 and rng.random() < 0.02:
                tt = self.t_train + rng.random() * cfg.steps * self.S
                self.kern(h, tt, "warn", T.K_NOISE_PCIE_CORRECTED.format(gpu=cl.gpu_bus(rng.randrange(cl.gph))))
        for r in range(cfg.world):
            t = self.t0 + 20.0 + rng.random() * 4
            md, hms, ns = out.clocks[self.host_of(r)].c10(t)
            pfx = T.C10.format(rank=r, lvl="W", md=md, hms=hms, ns=ns, file="ProcessGroupNCCL.cpp", line=4115)
            tag0 = f"[PG ID 0 PG GUID 0 Rank {r}]"
            out.stderr[r].append((t, out.nseq(), pfx + T.C_BARRIER_WARN.format(tag0=tag0, lr=cl.rank_local(r))))
        if cfg.noise >= 2 and cfg.hosts > 2:
            # a short flap that NCCL rides out: a real distractor
            h = rng.randrange(cfg.hosts)
            lr = rng.randrange(cl.gph)
            tt = self.t_train + rng.random() * cfg.steps * self.S * 0.3
            self.kern(h, tt, "info", T.K_PORT.format(nic_pci=cl.nic_pci(lr), nic=cl.nic(lr), state="DOWN"))
            self.kern(h, tt + 1.2, "info", T.K_PORT.format(nic_pci=cl.nic_pci(lr), nic=cl.nic(lr), state="ACTIVE"))
            r = h * cl.gph + lr
            self.nccl(r, tt + 0.002, T.N_WARN_ASYNC.format(event="port error"), tid_off=23)
            self.nccl(r, tt + 1.202, T.N_WARN_ASYNC.format(event="port active"), tid_off=23)


def simulate(cfg: SimConfig) -> Outcome:
    return Engine(cfg).run()
