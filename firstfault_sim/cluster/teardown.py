"""How a job is taken down once something failed: torchrun's agents, srun and SLURM.

A dead process makes its node's torchrun agent SIGTERM the node's other ranks and print its
``ChildFailedError`` summary; the agent's exit makes ``srun --kill-on-bad-exit`` cancel the step
on every node; SLURM cancels the whole job on a time limit, a preemption or a lost node. These
are the lines that bury the first failure under thousands of others, so they are played as the
real components order them (torch/distributed/elastic, slurm's srun and slurmstepd).
"""

from __future__ import annotations

from firstfault_sim.cluster import templates as T
from firstfault_sim.cluster.lines import LineWriter
from firstfault_sim.cluster.outcome import Fault


class TearDown(LineWriter):
    """Exits, the agents' tear-down and the scheduler's cancellations (mixed into ``Engine``)."""

    alive: list[bool]
    agent_alive: list[bool]
    agent_torn: list[bool]
    agent_failed: dict[int, float]
    step_aborted: bool
    ended: bool
    oom_hosts: set[int]

    def ev_slurm_cancel(self, t: float, f: Fault) -> None:
        job = self.out.job
        if f.kind == "time_limit":
            self.ctld(t - 0.01, T.S_CTLD_TIME_LIMIT.format(job=job))
            why = " DUE TO TIME LIMIT"
            self.out.job_state = "TIMEOUT"
        else:
            self.ctld(t - 0.01, T.S_CTLD_PREEMPT.format(job=job, by=job + 1 + self.rng.randrange(50)))
            why = " DUE TO PREEMPTION"
            self.out.job_state = "PREEMPTED"
        self.out.exit_code = "0:15"
        self._cancel_all(t, why)

    def _cancel_all(self, t: float, why: str) -> None:
        """slurmstepd on every node signals its tasks; srun reports what it sees."""
        if self.ended:
            return
        h0 = self.cl.host(0)
        clk = self.out.clocks[0]
        self.srun(t, T.S_STEPD_CANCEL.format(host=h0, entity="JOB", step=self.out.job, at=clk.slurm(t), why=why))
        self.srun(
            t + 0.001,
            T.S_STEPD_CANCEL.format(host=h0, entity="STEP", step=f"{self.out.job}.0", at=clk.slurm(t), why=why),
            0,
        )
        self.srun(t + 0.01, T.S_STEP_ABORTED)
        self.step_aborted = True
        for h in range(self.cfg.hosts):
            if self.agent_alive[h]:
                self.push(t + 0.02 + self.rng.random() * 0.4, "agent_sigterm", h)
        self.push(t + 40.0, "job_end")

    # ------------------------------------------------------------------ process exits and tear-down
    def exit(self, r: int, t: float, code: int, why: str) -> None:
        self.push(t, "rank_exit", r, code, why)

    def ev_rank_exit(self, t: float, r: int, code: int, why: str) -> None:
        if not self.alive[r]:
            return
        self.alive[r] = False
        self.out.exits[r] = (t, code, why)
        h = self.host_of(r)
        if why == "sigterm":
            self._sigterm_stack(r, t - 0.01)
            return
        if self.agent_alive[h] and not self.agent_torn[h]:
            self.agent_failed.setdefault(h, t)
            self.push(t + 0.1 + self.rng.random() * 0.9, "agent_teardown", h)

    def _sigterm_stack(self, r: int, t: float) -> None:
        stack: tuple[str, ...] = T.FH_STACK_COLLECTIVE
        if any(f.kind == "dataloader_hang" and f.host * self.cl.gph + f.local == r for f in self.out.faults):
            stack = T.FH_STACK_DATALOADER
        main = 0x7F00_0000_0000 + (self.out.pid[r] % 0xFFFFF) * 0x1000 + 0x740
        self.err(r, t, [T.FH_CURRENT.format(tid=main), *list(stack)])

    def ev_agent_teardown(self, t: float, h: int) -> None:
        if not self.agent_alive[h] or self.agent_torn[h]:
            return
        self.agent_torn[h] = True
        last = max(t, self._sigterm_workers(h, t))
        self.push(last + 0.15, "agent_done", h)

    def _sigterm_workers(self, h: int, first: float) -> float:
        """The agent's SIGTERM to each live worker of host ``h`` (its "Sending process N closing
        signal SIGTERM" lines from ``first``); returns when the last of them has exited (-inf: none)."""
        last = float("-inf")
        for k, r in enumerate(self.cl.host_ranks(h)):
            if self.alive[r]:
                tt = first + 0.0003 * k
                self.agent_line(
                    h,
                    tt,
                    "W",
                    "torch/distributed/elastic/multiprocessing/api.py",
                    1010,
                    T.A_CLOSING.format(pid=self.out.pid[r], sig="SIGTERM"),
                )
                te = tt + 0.05 + self.rng.random() * 0.6
                self.push(te, "rank_exit", r, -15, "sigterm")
                last = max(last, te)
        return last

    def ev_agent_done(self, t: float, h: int) -> None:
        if not self.agent_alive[h]:
            return
        self.agent_alive[h] = False
        out, cl = self.out, self.cl
        ranks = list(cl.host_ranks(h))
        failed = [(out.exits[r][0], r) for r in ranks if r in out.exits and out.exits[r][1] not in (0,)]
        roots = sorted((x for x in failed if out.exits[x[1]][2] != "sigterm"), key=lambda x: x[0])
        root = roots[0][1] if roots else (sorted(failed)[0][1] if failed else ranks[0])
        code = out.exits.get(root, (t, 1, ""))[1]
        self.agent_line(
            h,
            t,
            "E",
            "torch/distributed/elastic/multiprocessing/api.py",
            874,
            T.A_FAILED.format(code=code, lr=cl.rank_local(root), pid=out.pid[root]),
        )
        if root in out.error_json:
            self.agent_line(
                h,
                t + 0.003,
                "E",
                "torch/distributed/elastic/multiprocessing/errors/error_handler.py",
                145,
                T.A_NO_ERRFILE.format(path=self.error_file(root)),
            )
        recs: list[str] = list(T.A_CHILD_TB)
        others = [r for _, r in sorted(failed) if r != root]
        if not others:
            recs.append("  <NO_OTHER_FAILURES>")
        for i, r in enumerate(others, 1):
            recs += self._record(i, r)
        recs.append("------------------------------------------------------------")
        recs.append("Root Cause (first observed failure):")
        recs += self._record(0, root)
        recs.append("============================================================")
        self.agent_raw(h, t + 0.005, recs)
        task_code = "Out Of Memory" if h in self.oom_hosts else None
        self._task_end(t + 0.1, h, 1, task_code)

    def _record(self, idx: int, r: int) -> list[str]:
        out, cl = self.out, self.cl
        t, code, _why = out.exits[r]
        h = self.host_of(r)
        sigtag, tb = "", "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        err_file = "<N/A>"
        if code < 0:
            name = {-15: "SIGTERM", -9: "SIGKILL", -6: "SIGABRT", -11: "SIGSEGV"}.get(code, "SIGTERM")
            sigtag = f" ({name})"
            tb = f"Signal {-code} ({name}) received by PID {out.pid[r]}"
        if r in out.error_json:
            err_file = self.error_file(r)
            stack = [s for s in out.error_json[r][2].split("\n") if not s.strip().startswith("^")]
            tb = stack[0] + "\n" + "\n".join("  " + s for s in stack[1:]) + "\n  "
            t = out.error_json[r][0]
        lines = [
            ln.format(
                idx=idx,
                time=out.clocks[h].record(t),
                host=cl.host(h),
                rank=r,
                lr=cl.rank_local(r),
                code=code,
                pid=out.pid[r],
                sigtag=sigtag,
                error_file=err_file,
                traceback=tb,
            )
            for ln in T.A_RECORD
        ]
        return "\n".join(lines).split("\n")

    def error_file(self, r: int) -> str:
        h = self.host_of(r)
        return (
            f"/shared/job{self.out.job}/host-{self.cl.host(h)}/logs/{self.out.run_id}/attempt_0/"
            f"{self.cl.rank_local(r)}/error.json"
        )

    def _task_end(self, t: float, h: int, code: int, special: str | None = None) -> None:
        host = self.cl.host(h)
        if special == "Out Of Memory":
            self.srun(t - 0.05, T.S_OOM_EVENT.format(host=host, job=self.out.job), h)
            self.srun(t, T.S_TASK_OOM.format(host=host, task=h))
        elif special:
            self.srun(t, f"srun: error: {host}: task {h}: {special}")
        elif code == 143 or code == -15:
            self.srun(t, T.S_TASK_TERM.format(host=host, task=h))
        else:
            self.srun(t, T.S_TASK_EXIT.format(host=host, task=h, code=code))
        if self.out.job_state == "COMPLETED":
            self.out.job_state = "OUT_OF_MEMORY" if special == "Out Of Memory" else "FAILED"
            self.out.exit_code = f"{code}:0"
        if self.cfg.kill_on_bad_exit and not self.step_aborted:
            self.step_aborted = True
            self.srun(t + 0.001, T.S_TERMINATING.format(job=self.out.job))
            h0 = self.cl.host(0)
            self.srun(
                t + 0.03,
                T.S_STEPD_CANCEL.format(
                    host=h0, entity="STEP", step=f"{self.out.job}.0", at=self.out.clocks[0].slurm(t), why=""
                ),
                0,
            )
            for hh in range(self.cfg.hosts):
                if self.agent_alive[hh] and hh != h:
                    self.push(t + 0.02 + self.rng.random() * 0.4, "agent_sigterm", hh)
            self.push(t + 34.0, "job_end")
        # srun still waits for the task of a dead node until slurmctld gives up on the node
        waiting = self.out.vanished and not self.cfg.kill_on_bad_exit and self.out.job_state != "NODE_FAIL"
        if not any(self.agent_alive) and not waiting:
            self.push(t + 0.2, "job_end")

    def ev_agent_sigterm(self, t: float, h: int) -> None:
        if not self.agent_alive[h]:
            return
        self.agent_line(h, t, "W", "torch/distributed/elastic/agent/server/api.py", 719, T.A_DEATH)
        self.agent_torn[h] = True
        last = max(t, self._sigterm_workers(h, t + 0.001))
        self.push(last + 0.1, "agent_signal_exit", h)

    def ev_agent_signal_exit(self, t: float, h: int) -> None:
        if not self.agent_alive[h]:
            return
        self.agent_alive[h] = False
        self.agent_raw(h, t, [ln.format(apid=self.out.agent_pid[h]) for ln in T.A_SIGNAL_TB])
        self._task_end(t + 0.05, h, 143)

    def ev_job_end(self, t: float) -> None:
        if self.ended:
            return
        code = self.out.exit_code.split(":")[0]
        self.ctld(t + 0.5, T.S_CTLD_COMPLETE.format(job=self.out.job, code=code if code != "0" else 1))
        if self.out.vanished and self.step_aborted and self.out.job_state != "NODE_FAIL":
            self.srun(t, T.S_STEP_TIMEOUT)
        if self.step_aborted and self.cfg.kill_on_bad_exit:
            self.srun(t + 0.01, T.S_FORCE_TERMINATED.format(job=self.out.job))
        self.out.end_t = t + 1.0
        self.ended = True
