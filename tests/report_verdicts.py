"""A hand-made 4-rank verdict for the HTML report's tests, built with the real ``records`` types.

Rank 1 raises in the model code at step 5 on one of two hosts; its same-host peer is torn down by
torchrun and ranks 2-3 time out in the collective rank 1 never joined. Log wording is that of the
real software (PyTorch ProcessGroupNCCL and elastic agent, SLURM); see the comments at each line.
Kept apart from the tests so that the test module holds checks, not a 280-line builder.
"""

from __future__ import annotations

from typing import Any

from firstfault.vocab import (
    Action,
    Category,
    ChainLink,
    Culprit,
    Event,
    Hypothesis,
    Layer,
    RankProgress,
    Role,
    Verdict,
)

T0 = 1741087207.412

# --------------------------------------------------------------------------- fixtures

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 212, in <module>',
    "    main()",
    '  File "/workspace/train.py", line 198, in main',
    "    loss = train_step(model, batch, step)",
    '  File "/workspace/train.py", line 141, in train_step',
    "    out = model(batch)",
    '  File "/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1773, in _wrapped_call_impl',
    "    return self._call_impl(*args, **kwargs)",
    '  File "/workspace/model.py", line 88, in forward',
    '    raise RuntimeError(f"expert router produced no tokens for expert {e} at step {step}")',
]


# A hand-made flight-recorder summary in the verdict JSON's shape (set by four_rank_verdict).
FOUR_FR: dict[str, Any] = {}


def four_rank_verdict(*, hostile: str | None = None) -> Verdict:
    """Rank 1 raises at step 5; rank 0 (same host) is torn down, ranks 2-3 time out after 60 s."""
    ids = iter(range(1000))
    root_text = hostile or "RuntimeError: expert router produced no tokens for expert 3 at step 5"

    def ev(**kw: Any) -> Event:
        return Event(id=next(ids), ts_quality="exact", **kw)

    h1, h2 = "gpu-node-01", "gpu-node-02"
    root = ev(
        source=f"{h1}/attempt_0/1/stderr.log",
        line=212,
        text=root_text,
        signature="python.exception.runtime_error",
        category=Category.APPLICATION_ERROR,
        layer=Layer.APPLICATION,
        role=Role.ROOT,
        ts=T0,
        host=h1,
        rank=1,
        local_rank=1,
        pid=48112,
        attempt=0,
        context=(*TRACEBACK, root_text),
        fields={"exc_type": "RuntimeError"},
    )
    chain = [ChainLink(root, Role.ROOT, None, "first-exception-before-timeouts")]
    # torch/distributed/elastic/multiprocessing/api.py
    failed = ev(
        source=f"{h1}/torchrun.log",
        line=131,
        text="failed (exitcode: 1) local_rank: 1 (pid: 48112) of binary: /usr/bin/python3",
        signature="torchelastic.worker_failed",
        category=Category.PROCESS_CRASH,
        layer=Layer.LAUNCHER,
        role=Role.TEARDOWN,
        ts=T0 + 0.52,
        host=h1,
        rank=1,
        local_rank=1,
        pid=48112,
        fields={"exitcode": "1"},
    )
    chain.append(ChainLink(failed, Role.TEARDOWN, root.id, "launcher-teardown"))
    sigterm = ev(
        source=f"{h1}/torchrun.log",
        line=132,
        text="Sending process 48111 closing signal SIGTERM",
        signature="torchelastic.sigterm",
        category=Category.PROCESS_CRASH,
        layer=Layer.LAUNCHER,
        role=Role.TEARDOWN,
        ts=T0 + 0.53,
        host=h1,
        rank=0,
        local_rank=0,
        pid=48111,
    )
    chain.append(ChainLink(sigterm, Role.TEARDOWN, root.id, "launcher-teardown"))
    child = ev(
        source=f"{h1}/torchrun.log",
        line=160,
        text="torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        signature="torchelastic.child_failed",
        category=Category.PROCESS_CRASH,
        layer=Layer.LAUNCHER,
        role=Role.TEARDOWN,
        ts=T0 + 1.9,
        host=h1,
    )
    chain.append(ChainLink(child, Role.TEARDOWN, failed.id, "launcher-teardown"))
    for r, lr, pid in ((2, 0, 51230), (3, 1, 51231)):
        t = T0 + 60.02 + 0.004 * lr
        log = f"{h2}/attempt_0/{lr}/stderr.log"
        # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (torch 2.4+ wording)
        to = ev(
            source=log,
            line=4410,
            text=(
                f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=38, "
                "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=60000) ran for "
                f"{60021 + lr * 4} milliseconds before timing out."
            ),
            signature="torch.nccl.watchdog_timeout",
            category=Category.NETWORK,
            layer=Layer.FRAMEWORK,
            role=Role.CASCADE,
            ts=t,
            host=h2,
            rank=r,
            local_rank=lr,
            pid=pid,
            attempt=0,
            fields={"seq": "38", "op": "ALLREDUCE", "timeout_ms": "60000"},
        )
        chain.append(ChainLink(to, Role.CASCADE, root.id, "collective-timeout-after-root"))
        exc = ev(
            source=log,
            line=4411,
            text=(
                f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] Exception (either an error or timeout) "
                "detected by watchdog at work: 38, last enqueued NCCL work: 38, last completed NCCL work: 37."
            ),
            signature="torch.nccl.watchdog_exception",
            category=Category.NETWORK,
            layer=Layer.FRAMEWORK,
            role=Role.CASCADE,
            ts=t + 0.0003,
            host=h2,
            rank=r,
            local_rank=lr,
            pid=pid,
            attempt=0,
        )
        chain.append(ChainLink(exc, Role.CASCADE, to.id, "watchdog-exception-follows-timeout"))
    f2 = ev(
        source=f"{h2}/torchrun.log",
        line=98,
        text="failed (exitcode: -6) local_rank: 0 (pid: 51230) of binary: /usr/bin/python3",
        signature="torchelastic.worker_failed",
        category=Category.PROCESS_CRASH,
        layer=Layer.LAUNCHER,
        role=Role.TEARDOWN,
        ts=T0 + 61.3,
        host=h2,
        rank=2,
        local_rank=0,
        pid=51230,
        fields={"exitcode": "-6"},
    )
    chain.append(ChainLink(f2, Role.TEARDOWN, chain[4].event.id, "launcher-teardown"))
    s2 = ev(
        source=f"{h2}/torchrun.log",
        line=99,
        text="Sending process 51231 closing signal SIGTERM",
        signature="torchelastic.sigterm",
        category=Category.PROCESS_CRASH,
        layer=Layer.LAUNCHER,
        role=Role.TEARDOWN,
        ts=T0 + 61.31,
        host=h2,
        rank=3,
        local_rank=1,
        pid=51231,
    )
    chain.append(ChainLink(s2, Role.TEARDOWN, f2.id, "launcher-teardown"))
    # slurmstepd's cancel banner and srun's per-task exit line (SLURM src/srun, src/slurmd/slurmstepd)
    srun = ev(
        source="slurm-8812.out",
        line=41,
        text="srun: error: gpu-node-01: task 1: Exited with exit code 1",
        signature="slurm.srun_task_exit",
        category=Category.SCHEDULER,
        layer=Layer.SCHEDULER,
        role=Role.TEARDOWN,
        ts=T0 + 2.4,
    )
    chain.append(ChainLink(srun, Role.TEARDOWN, root.id, "scheduler-teardown"))
    cancel = ev(
        source="slurm-8812.out",
        line=44,
        text="slurmstepd: error: *** STEP 8812.0 ON gpu-node-01 CANCELLED AT 2025-03-04T11:21:09 ***",
        signature="slurm.step_cancelled",
        category=Category.SCHEDULER,
        layer=Layer.SCHEDULER,
        role=Role.TEARDOWN,
        ts=T0 + 61.6,
    )
    chain.append(ChainLink(cancel, Role.TEARDOWN, root.id, "scheduler-teardown"))
    noise = ev(
        source=f"{h1}/attempt_0/0/stderr.log",
        line=17,
        text=(
            "UserWarning: TypedStorage is deprecated. It will be removed in the future and "
            "UntypedStorage will be the only storage class."
        ),
        signature="torch.warning.typed_storage",
        category=Category.NONE,
        layer=Layer.FRAMEWORK,
        role=Role.NOISE,
        severity="warning",
        ts=T0 - 410.0,
        host=h1,
        rank=0,
        local_rank=0,
    )
    chain.append(ChainLink(noise, Role.NOISE, None, "advice-not-error"))
    progress = [
        RankProgress(
            rank=r,
            last_step=4,
            last_step_ts=T0 - 1.45 + 0.01 * r,
            steps_seen=5,
            median_step_ms=1452.0 + 3 * r,
            host=h1 if r < 2 else h2,
        )
        for r in range(4)
    ]
    FOUR_FR.clear()
    FOUR_FR.update(
        {
            "culprits": [
                {
                    "rank": 1,
                    "kind": "not_started",
                    "pg": "0",
                    "seq": 38,
                    "op": "nccl:all_reduce",
                    "reason": "rank 1 never issued ALLREDUCE seq 38; ranks 0, 2, 3 are waiting in it",
                    "frames": ["train_step at /workspace/train.py:141", "main at /workspace/train.py:198"],
                    "time_ns": None,
                    "score": 0.92,
                }
            ],
            "groups": [
                {
                    "pg": "0",
                    "desc": "default_pg",
                    "op": "nccl:all_reduce",
                    "size": "262144",
                    "dtype": "Float",
                    "missing_ranks": "1",
                }
            ],
            "warnings": ["rank 1 wrote no dump (the process had already exited)"],
        }
    )
    return Verdict(
        category=Category.APPLICATION_ERROR,
        culprit=Culprit(ranks=[1], hosts=[h1], gpus=["1"], links=[]),
        action=Action.STOP,
        confidence=0.91,
        summary=(
            "Rank 1 on gpu-node-01 raised RuntimeError in the model code at step 5; ranks 2 and 3 then "
            "timed out waiting for it in ALLREDUCE #38 and torchrun stopped the job."
        ),
        root_event=root,
        causal_chain=chain,
        explained_fraction=0.93,
        alternatives=[
            Hypothesis(
                Category.NETWORK,
                Culprit(hosts=[h2]),
                Action.RESTART,
                0.12,
                "ranks 2 and 3 timed out in ALLREDUCE: could be the network",
                root_event=chain[4].event,
                reasons=["no link error logged"],
            )
        ],
        warnings=["gpu-node-02/attempt_0/1/stderr.log: last line truncated (no newline)"],
        reasons=[
            "the RuntimeError on rank 1 precedes every other error by 0.5 s",
            "ranks 2 and 3 time out one PG timeout (60 s) later, in the collective rank 1 never joined",
        ],
        progress=progress,
        inputs={"path": "bundles/exception-r1", "files": 14},
        stats={"events": len(chain)},
    )
