"""Write a simulated job as a bundle with the layout of a real SLURM + torchrun job.

::

    slurm-<job>.out                      srun -l output: every node's torchrun agent, the
                                         workers' streams (torchrun --tee), srun/slurmstepd lines
    job.sbatch  sacct.txt  slurmctld.log the batch script, accounting, the controller's log
    host-<host>/logs/<run>/attempt_0/<local_rank>/{stdout,stderr}.log[, error.json]
    host-<host>/dmesg.log                dmesg -x --time-format iso of the host
    fr/nccl_trace_rank_<rank>            flight-recorder dumps (TORCH_NCCL_DEBUG_INFO_TEMP_FILE)
    truth.json                           what really happened (firstfault.truth/v1)

This is the layout of the real two-node capture ``tests/fixtures/slurm/torch_exception_torchrun``
(``host-<node>/logs`` per host, ``slurm-<job>.out``, ``fr/``), scaled out. Files are written with
one ``write`` each from pre-built strings; progress lines come from a handful of pre-formatted
pools, so a 16,384-rank bundle is seconds to a few minutes of work.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from firstfault_sim.cluster import templates as T
from firstfault_sim.cluster.faults import KINDS
from firstfault_sim.cluster.frdump import dump_bytes
from firstfault_sim.cluster.outcome import Outcome


def _pool(rng_seed: int, n: int, mean: float, rel: float) -> list[str]:
    """``n`` pre-formatted '%.1f' values around ``mean`` (deterministic)."""
    out = []
    x = rng_seed * 2654435761 % (1 << 32)
    for _ in range(n):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        u = x / 0x7FFFFFFF
        out.append(f"{mean * (1 + rel * (2 * u - 1)):.1f}")
    return out


class Writer:
    """Builds and writes every file of one :class:`Outcome`."""

    def __init__(self, o: Outcome, root: Path):
        self.o = o
        self.root = root
        cfg = o.cfg
        self.cfg = cfg
        self.tee = cfg.tee or (3 if cfg.world * cfg.steps <= 400_000 else 2)
        self.label_w = len(str(cfg.hosts - 1))
        S = o.step_s * 1000
        self.st_pool = _pool(cfg.seed + 1, 256, S, 0.01)
        self.data_pool = _pool(cfg.seed + 2, 256, 1.2, 0.5)
        self.comp_pool = _pool(cfg.seed + 3, 256, 0.62 * S, 0.02)
        self.comm_pool = _pool(cfg.seed + 4, 256, 0.37 * S, 0.04)
        self.slow_comp: dict[int, list[str]] = {}
        for r, (_, factor) in o.slow.items():
            self.slow_comp[r] = _pool(cfg.seed + 5 + r, 256, 0.62 * S * factor, 0.02)
        # synchronous training: from the slow step on, every step takes as long as the slow rank's
        self.k0 = o.slow_step if o.slow_step is not None else 1 << 30
        S2 = o.slow_step_s * 1000 if o.slow_step is not None else S
        self.st_slow = _pool(cfg.seed + 7, 256, S2, 0.01)
        self.slow_comm = _pool(cfg.seed + 6, 256, S2 - 0.62 * S - 1.2, 0.04)
        self.bytes = 0
        self.files = 0
        self._dirs: set[str] = set()

    # ------------------------------------------------------------------ helpers
    def write(self, rel: str, data: str | bytes) -> None:
        """One file, one ``write`` call (tens of thousands of files: the open/close is the cost)."""
        path = os.path.join(self.root, rel)
        parent = os.path.dirname(path)
        if parent not in self._dirs:
            os.makedirs(parent, exist_ok=True)
            self._dirs.add(parent)
        b = data.encode("utf-8") if isinstance(data, str) else data
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(b)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
        self.bytes += len(b)
        self.files += 1

    def rank_dir(self, r: int) -> str:
        cl = self.o.cluster
        return f"host-{cl.host(cl.rank_host(r))}/logs/{self.o.run_id}/attempt_0/{cl.rank_local(r)}"

    def last_step(self, r: int) -> int:
        o = self.o
        last = self.cfg.steps - 1
        b = o.blocked.get(r)
        if b is not None:
            last = min(last, b.step - 1)
        if r in o.exits:
            t = o.exits[r][0]
            last = min(last, int((t - o.t_train) // o.step_s) - 1)
        h = o.cluster.rank_host(r)
        if h in o.vanished:
            last = min(last, int((o.vanished[h] - o.t_train) // o.step_s) - 1)
        if not o.completed and b is None and r not in o.exits:
            last = min(last, int((o.end_t - o.t_train) // o.step_s) - 1)
        return last

    # ------------------------------------------------------------------ per rank
    def progress(self, r: int) -> tuple[list[float], list[str]]:
        o, cl = self.o, self.o.cluster
        h = cl.rank_host(r)
        clk = o.clocks[h]
        last = self.last_step(r)
        jit = 0.002 + (r * 7919 % 997) / 997 * 0.006
        t0, S = o.t_train, o.step_s
        d = o.groups.layout.coords(r)[2]
        slow = self.slow_comp.get(r)
        times: list[float] = []
        lines: list[str] = []
        fmt = T.W_STEP
        stp, dat, comp, comm = self.st_pool, self.data_pool, self.comp_pool, self.comm_pool
        k0, S2 = self.k0, o.slow_step_s
        for k in range(last + 1):
            j = (r * 31 + k * 17) & 255
            loss = f"{2.3 * math.exp(-k / 500.0) + 0.9 + ((d * 131 + k * 71) % 97) / 4000.0:.4f}"
            if k >= k0:
                t = t0 + k0 * S + (k + 1 - k0) * S2 - 0.01 + jit
                st = self.st_slow[j]
                c = slow[j] if slow is not None else comp[j]
                m = comm[j] if slow is not None else self.slow_comm[j]
            else:
                t = t0 + (k + 1) * S - 0.01 + jit
                st, c, m = stp[j], comp[j], comm[j]
            times.append(t)
            lines.append(fmt % (clk.py(t), r, k, loss, st, dat[j], c, m))
        return times, lines

    def nccl_init(self, r: int) -> list[tuple[float, str]]:
        o, cl, cfg = self.o, self.o.cluster, self.cfg
        if cfg.noise < 1:
            return []
        h, lr = cl.rank_host(r), cl.rank_local(r)
        pid = o.pid[r]
        host = cl.host(h)
        ip = cl.ip(h)
        t = o.t0 + 24.0 + (r % 97) * 0.003
        pre = T.NCCL_PFX.format(host=host, pid=pid, tid=pid, lr=lr)
        pre2 = T.NCCL_PFX.format(host=host, pid=pid, tid=pid + 211, lr=lr)
        devs = " ".join(f"[{k}]{cl.nic(k)}:1/IB" for k in range(cl.rails))
        out = [
            (t, pre + T.N_INFO_BOOTSTRAP.format(ip=ip)),
            (t + 0.01, pre + T.N_INFO_PLUGIN),
            (t + 0.011, pre + T.N_INFO_P2P_PLUGIN),
            (t + 0.02, pre2 + T.N_INFO_NET_IB.format(devs=devs, ip=ip)),
            (t + 0.021, pre2 + T.N_INFO_USING_NET),
        ]
        comms: list[tuple[int, int, int, int, int]] = [(0, r, cfg.world, cfg.hosts, lr)]
        if cfg.noise >= 2:
            for k in o.groups.kinds:
                g = o.groups.group_of(r, k)
                if g is None:
                    continue
                hosts = {cl.rank_host(m) for m in (g.ranks[0], g.ranks[-1])}
                comms.append((int(g.guid), o.groups.group_rank(r, k), g.size, len(hosts), o.groups.group_rank(r, k)))
        tt = t + 0.5
        for guid, crank, n, nodes, clr in comms:
            comm = f"0x{0x55D000000000 + (pid * 977 + guid * 131) % 0xFFFFFFFFF:x}"
            cid = f"0x{((guid + 1) * 0x9E3779B97F4A7C15 ^ (o.job * 0xBF58476D1CE4E5B9)) & 0xFFFFFFFFFFFFFFFF:x}"
            local_ranks = min(cl.gph, n)
            if crank == 0:
                out.append((tt, T.N_VERSION))
            out.append(
                (
                    tt + 0.001,
                    pre2
                    + T.N_INFO_LOCAL.format(
                        comm=comm, crank=crank, n=n, nodes=nodes, lranks=local_ranks, clr=clr % local_ranks
                    ),
                )
            )
            out.append(
                (
                    tt + 0.9,
                    pre2 + T.N_INFO_COMPLETE.format(comm=comm, crank=crank, n=n, lr=lr, bus=cl.nccl_busid(lr), cid=cid),
                )
            )
            tt += 1.3
        return out

    def start_line(self, r: int) -> tuple[float, str]:
        o, cl, cfg = self.o, self.o.cluster, self.cfg
        h = cl.rank_host(r)
        t = o.t_train - 3.0 + (r % 89) * 0.001
        g = o.groups
        tp = list(g.group_of(r, "tp").ranks) if "tp" in g.member[r] else [r]  # type: ignore[union-attr]
        dp = list(g.group_of(r, "dp").ranks) if "dp" in g.member[r] else [r]  # type: ignore[union-attr]
        return t, T.W_START.format(
            ts=o.clocks[h].py(t),
            rank=r,
            world=cfg.world,
            lr=cl.rank_local(r),
            host=cl.host(h),
            pid=o.pid[r],
            timeout=cfg.nccl_timeout_s,
            tp=tp,
            dp=dp,
            steps=cfg.steps,
        )

    def stdout_of(self, r: int) -> tuple[list[float], list[str]]:
        """(times, lines) of rank r's stdout, in time order."""
        times, lines = self.progress(r)
        head = [*self.nccl_init(r), self.start_line(r)]
        extra = [(t, ln) for t, _, ln in sorted(self.o.stdout.get(r, []))]
        h = self.o.cluster.rank_host(r)
        cut = self.o.vanished.get(h)
        ht = [t for t, _ in head]
        hl = [ln for _, ln in head]
        times = ht + times
        lines = hl + lines
        for t, ln in extra:
            i = bisect.bisect_right(times, t)
            times.insert(i, t)
            lines.insert(i, ln)
        if cut is not None:
            n = bisect.bisect_right(times, cut)
            times, lines = times[:n], lines[:n]
        return times, lines

    def stderr_of(self, r: int) -> list[tuple[float, str]]:
        evs = sorted(self.o.stderr.get(r, []))
        h = self.o.cluster.rank_host(r)
        cut = self.o.vanished.get(h)
        return [(t, ln) for t, _, ln in evs if cut is None or t <= cut]

    # ------------------------------------------------------------------ whole bundle
    def run(self) -> dict[str, Any]:
        o, cfg, cl = self.o, self.cfg, self.o.cluster
        console: list[tuple[float, int, str]] = []
        lw = self.label_w
        tee_out = self.tee == 3
        n = 0
        for r in range(cfg.world):
            h, lr = cl.rank_host(r), cl.rank_local(r)
            label = f"{h:>{lw}}: [default{lr}]:"
            times, lines = self.stdout_of(r)
            self.write(self.rank_dir(r) + "/stdout.log", "\n".join(lines) + "\n" if lines else "")
            if tee_out:
                console.extend((t, n + i, label + ln) for i, (t, ln) in enumerate(zip(times, lines, strict=True)))
                n += len(lines)
            err = self.stderr_of(r)
            self.write(self.rank_dir(r) + "/stderr.log", "".join(ln + "\n" for _, ln in err))
            console.extend((t, n + i, label + ln) for i, (t, ln) in enumerate(err))
            n += len(err)
            if r in o.error_json:
                t, msg, stack = o.error_json[r]
                body = {"message": {"message": msg, "extraInfo": {"py_callstack": stack, "timestamp": str(int(t))}}}
                self.write(self.rank_dir(r) + "/error.json", json.dumps(body))
        for h in range(cfg.hosts):
            label = f"{h:>{lw}}: "
            for t, s, ln in o.agent.get(h, []):
                console.append((t, s, label + ln))
        for t, s, ln, lab in o.srun:
            console.append((t, s, (f"{lab:>{lw}}: " if lab is not None else "") + ln))
        console.sort()
        env = T.S_ENV.format(job=o.job, nodelist=cl.nodelist(), ntasks=cfg.hosts, nnodes=cfg.hosts)
        self.write(f"slurm-{o.job}.out", env + "\n" + "".join(ln + "\n" for _, _, ln in console))
        del console
        for h in range(cfg.hosts):
            klines = sorted(o.kernel.get(h, []))
            self.write(f"host-{cl.host(h)}/dmesg.log", "".join(ln + "\n" for _, _, ln in klines))
        if cfg.scheduler_logs:
            self.write("slurmctld.log", "".join(ln + "\n" for _, _, ln in sorted(o.ctld)))
            self.write("sacct.txt", self.sacct())
            self.write("job.sbatch", self.sbatch())
        n_dumps = 0
        if cfg.fr_dumps and o.dumps:
            os.makedirs(self.root / "fr", exist_ok=True)
            for r, t in sorted(o.dumps.items()):
                self.write(f"fr/nccl_trace_rank_{r}", dump_bytes(o, r, t, cfg.fr_entries))
                n_dumps += 1
        truth = truth_of(o)
        truth["bundle_bytes"] = self.bytes
        truth["files"] = self.files + 1
        truth["fr_dumps"] = n_dumps
        self.write("truth.json", json.dumps(truth, indent=2) + "\n")
        return truth

    def sacct(self) -> str:
        o, cl = self.o, self.o.cluster
        clk = o.clocks[0]
        start, end = clk.slurm(o.t0), clk.slurm(o.end_t or o.t0)
        el = int((o.end_t or o.t0) - o.t0)
        elapsed = f"{el // 3600:02d}:{el % 3600 // 60:02d}:{el % 60:02d}"
        return (
            "JobID|JobName|Partition|State|ExitCode|NNodes|NodeList|Start|End|Elapsed|UID\n"
            f"{o.job}|ff-cluster|gpu|{o.job_state}|{o.exit_code}|{self.cfg.hosts}|{cl.nodelist()}|"
            f"{start}|{end}|{elapsed}|1000\n"
        )

    def sbatch(self) -> str:
        cfg, o = self.cfg, self.o
        lay = o.groups.layout
        return (
            "#!/bin/bash\n#SBATCH --job-name=ff-cluster\n"
            f"#SBATCH --nodes={cfg.hosts}\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node={cfg.gpus_per_host}\n"
            f"#SBATCH --output=/shared/job%j/slurm-%j.out\n"
            'echo "SLURM_JOB_ID=$SLURM_JOB_ID SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST \\\n'
            'SLURM_NTASKS=$SLURM_NTASKS SLURM_TASKS_PER_NODE=$SLURM_TASKS_PER_NODE"\n'
            "export TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/shared/job$SLURM_JOB_ID/fr/nccl_trace_rank_\n"
            f"export NCCL_DEBUG={'INFO' if cfg.noise >= 1 else 'WARN'}\n"
            f"srun -l {'--kill-on-bad-exit=1 ' if cfg.kill_on_bad_exit else ''}bash -c '"
            + T.VENV_BIN
            + f"/torchrun --nnodes $SLURM_NNODES --nproc-per-node {cfg.gpus_per_host} \\\n"
            "  --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 --rdzv-id ff-$SLURM_JOB_ID \\\n"
            f"  --max-restarts 0 --log-dir /shared/job$SLURM_JOB_ID/host-$SLURMD_NODENAME/logs --tee {self.tee} "
            f"-m firstfault_sim.workload --backend nccl --steps {cfg.steps} --pg-timeout {cfg.nccl_timeout_s:g} "
            f"--tp {lay.tp} --pp {lay.pp} --cp {lay.cp} --ep {lay.ep}'\n"
        )


def truth_of(o: Outcome) -> dict[str, Any]:
    """firstfault.truth/v1: culprits root-first, the expected verdict, and how the job was built."""
    cfg, cl = o.cfg, o.cluster
    fired = [f for f in o.faults if f.t <= (o.end_t or math.inf)]
    root = fired[0] if fired else None
    ranks: list[int] = []
    hosts: list[str] = []
    gpus: list[str] = []
    links: list[str] = []
    for f in fired:
        info = KINDS[f.kind]
        host = cl.host(f.host)
        r = f.host * cl.gph + f.local
        if info.mode == "sched":
            continue
        if f.kind == "node_failure":
            cand = list(cl.host_ranks(f.host))
        elif f.kind == "disk_full":
            firsts = sorted(
                (o.exits[q][0], q) for q in cl.host_ranks(f.host) if q in o.exits and o.exits[q][2] == "exception"
            )
            cand = [q for _, q in firsts] or [r]
        else:
            cand = [r]
        for q in cand:
            if q not in ranks:
                ranks.append(q)
        if host not in hosts:
            hosts.append(host)
        if f.kind.startswith("xid") or f.kind in ("thermal", "sdc"):
            gpus.append(cl.gpu_pci(f.local))
        if info.mode == "net":
            links.append(cl.link_name(f.host, f.local))
    info0 = KINDS[root.kind] if root else None
    lay = o.groups.layout
    return {
        "schema": "firstfault.truth/v1",
        "generator": "firstfault_sim.cluster",
        "fault": root.kind if root else "none",
        "faults": [
            {
                "kind": f.kind,
                "time": round(f.t, 6),
                "offset_s": round(f.t - o.t_train, 3),
                "step": f.step,
                "host": cl.host(f.host),
                "local_rank": f.local,
                "rank": f.host * cl.gph + f.local,
                **{k: v for k, v in f.extra.items() if isinstance(v, (int, float, str))},
            }
            for f in o.faults
        ],
        "culprit_key": info0.culprit if info0 else "none",
        "culprit_ranks": ranks,
        "culprit_hosts": hosts,
        "culprit_gpus": gpus,
        "culprit_links": links,
        "expected_category": info0.category if info0 else "none",
        "expected_action": info0.action if info0 else "none",
        "summary": info0.summary if info0 else "healthy run; the job completes",
        "world_size": cfg.world,
        "hosts": cfg.hosts,
        "gpus_per_host": cfg.gpus_per_host,
        "layout": lay.describe(),
        "topology": cl.describe(),
        "nccl_timeout_s": cfg.nccl_timeout_s,
        "seed": cfg.seed,
        "noise": cfg.noise,
        "kill_on_bad_exit": cfg.kill_on_bad_exit,
        "remote_errors": cfg.remote_errors,
        "job_id": o.job,
        "job_state": o.job_state,
        "start": o.t0,
        "train_start": o.t_train,
        "end": o.end_t,
        "steps": cfg.steps,
        "step_time_s": o.step_s,
        "clock_offsets_s": {
            cl.host(h): round(c.offset, 6) for h, c in enumerate(o.clocks) if abs(c.offset) > 0.5 or cfg.hosts <= 64
        },
        "timeouts": len(o.timeouts),
        "first_timeout_rank": min(o.timeouts, key=lambda r: o.timeouts[r]) if o.timeouts else None,
    }


def write_bundle(o: Outcome, root: Path) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    return Writer(o, root).run()


def iter_lines(texts: Iterable[str]) -> Iterable[str]:
    for t in texts:
        yield from t.split("\n")
