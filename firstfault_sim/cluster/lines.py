"""How the engine writes a line: each destination's format, on its host's clock.

A rank's c10d log line, its stderr, NCCL's prefixed output, torchrun's agent log, srun's
console, the kernel ring buffer and slurmctld's log each have their own prefix and clock
(``templates``, ``clock``). Apart from the engine so that its event handlers read as what
happens, not how a line is spelled; a host that is gone writes nothing more.
"""

from __future__ import annotations

import heapq
import random
from typing import Any

from firstfault_sim.cluster import templates as T
from firstfault_sim.cluster.clock import Clock
from firstfault_sim.cluster.layout import ProcessGroups
from firstfault_sim.cluster.outcome import Outcome, SimConfig
from firstfault_sim.cluster.topology import Cluster


class LineWriter:
    """The engine's state that writing a line needs, and the writers (``Engine`` sets the state)."""

    cfg: SimConfig
    rng: random.Random
    cl: Cluster
    groups: ProcessGroups
    out: Outcome
    heap: list[tuple[float, int, str, tuple[Any, ...]]]

    def host_of(self, rank: int) -> int:
        return self.cl.rank_host(rank)

    def push(self, t: float, kind: str, *args: Any) -> None:
        heapq.heappush(self.heap, (t, self.out.nseq(), kind, args))

    # ------------------------------------------------------------------ line helpers
    def c10(self, rank: int, t: float, line: int, text: str, lvl: str = "E") -> None:
        h = self.host_of(rank)
        md, hms, ns = self.out.clocks[h].c10(t)
        parts = text.split("\n")
        head = T.C10.format(rank=rank, lvl=lvl, md=md, hms=hms, ns=ns, file="ProcessGroupNCCL.cpp", line=line)
        seq = self.out.nseq()
        lst = self.out.stderr[rank]
        lst.append((t, seq, head + parts[0]))
        for p in parts[1:]:
            lst.append((t, self.out.nseq(), p))

    def err(self, rank: int, t: float, lines: list[str] | tuple[str, ...]) -> None:
        lst = self.out.stderr[rank]
        for ln in lines:
            lst.append((t, self.out.nseq(), ln))

    def nccl(self, rank: int, t: float, text: str, tid_off: int = 37) -> None:
        h, lr = self.host_of(rank), self.cl.rank_local(rank)
        pid = self.out.pid[rank]
        pfx = T.NCCL_PFX.format(host=self.cl.host(h), pid=pid, tid=pid + tid_off, lr=lr)
        for ln in text.split("\n"):
            self.out.stdout[rank].append((t, self.out.nseq(), pfx + ln))

    def agent_line(self, h: int, t: float, lvl: str, file: str, line: int, text: str) -> None:
        md, hms, us = self.out.clocks[h].glog(t)
        pfx = T.AGENT.format(lvl=lvl, md=md, hms=hms, us=us, apid=self.out.agent_pid[h], file=file, line=line)
        for ln in text.split("\n"):
            self.out.agent[h].append((t, self.out.nseq(), pfx + ln))

    def agent_raw(self, h: int, t: float, lines: list[str] | tuple[str, ...]) -> None:
        for ln in lines:
            self.out.agent[h].append((t, self.out.nseq(), ln))

    def srun(self, t: float, text: str, label: int | None = None) -> None:
        if 0 in self.out.vanished and t > self.out.vanished[0]:
            return  # srun (and the batch step's slurmstepd) ran on the first node, which is gone
        self.out.srun.append((t, self.out.nseq(), text, label))

    def kern(self, h: int, t: float, lvl: str, msg: str) -> None:
        if h in self.out.vanished and t > self.out.vanished[h]:
            return
        self.out.kernel[h].append((t, self.out.nseq(), T.KERN.format(lvl=lvl, iso=self.out.clocks[h].kern(t)) + msg))

    def ctld(self, t: float, msg: str) -> None:
        if self.cfg.scheduler_logs:
            self.out.ctld.append((t, self.out.nseq(), T.CTLD.format(iso=Clock(0).daemon(t)) + msg))

    def tag(self, rank: int, kind: str | None) -> str:
        if kind is None or kind not in self.groups.member[rank]:
            return T.PG_TAG_DEFAULT.format(rank=rank)
        g = self.groups.group_of(rank, kind)
        assert g is not None
        return T.PG_TAG.format(
            pg_id=self.groups.pg_id(rank, kind), guid=g.guid, desc=g.desc, pg_rank=self.groups.group_rank(rank, kind)
        )

    def pg_rank(self, rank: int, kind: str | None) -> int:
        return rank if kind is None else self.groups.group_rank(rank, kind)
