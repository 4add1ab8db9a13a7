"""A little Ray Train job (TorchTrainer, gloo on CPU) for firstfault's set of real Ray runs.

Why it exists: the torchrun and SLURM sets show firstfault torchrun's and SLURM's wording; a job
under Ray Train prints through Ray instead (worker lines prefixed ``(RayTrainWorker pid=N)``,
the controller's own lines, ``ray.exceptions`` tracebacks, Ray's report of a worker that died).
Those words are Ray's and torch's, from a real local Ray cluster; this script adds only ordinary
application code (a training loop, a missing file, a KeyError, a SIGKILL) as ``train.py`` does.

    python tools/realjobs/ray_train.py --fault exception --rank 2 --step 6 --workers 4

Run by ``tools/realjobs/make_ray_set.py``, which keeps the driver's console as the bundle.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys
import tempfile
import time
from typing import Any

FAULTS = (
    "none",
    "exception",
    "missing_file_all",
    "import",
    "divisible",
    "sigkill",
    "segfault",
    "hang",
    "size_mismatch",
    "nan_all",
    "nan_one",
    "exit",
    "thread_exc",
    "stack_dump",
    "logged_exit",
    "unicode",
    "exit_message",
    "ckpt_stall",
)


def more_faults(fault: str, rank: int, step: int, log: logging.Logger) -> None:
    """The faults sets 13 to 15 brought, one piece for ``train.py`` and the Ray and framework jobs
    (called on the rank the fault hits, at its step): a background thread's exception the job trains on
    through, a faulthandler dump of every thread while debugging, a trainer that logs what it
    caught and exits 1, a text shard that is not UTF-8, ``sys.exit`` with a message."""
    if fault == "thread_exc":
        import threading

        def upload() -> None:
            raise ConnectionError(f"metrics endpoint http://metrics.internal:9000 refused the upload of step {step}")

        threading.Thread(target=upload, name="metrics-upload").start()
    if fault == "stack_dump":
        import faulthandler

        faulthandler.dump_traceback(all_threads=True)
    if fault == "logged_exit":
        try:
            float(f"lr={step}")
        except ValueError:
            log.exception("step %d failed; stopping", step)
            sys.exit(1)
    if fault == "unicode":
        bad = os.path.join(tempfile.mkdtemp(prefix="ff-realjobs-text-"), f"shard-{rank:05d}.txt")
        with open(bad, "wb") as fh:
            fh.write(b"the quick brown fox \xff\xfe jumps\n")
        with open(bad, encoding="utf-8") as fh:
            fh.read()
    if fault == "exit_message":  # sys.exit with a string: CPython prints it to stderr, status 1
        sys.exit(f"shard {rank}: no samples left after filtering at step {step}")


def stall_at_save(fault: str, hit: bool, step: int, timeout: float, log: logging.Logger) -> None:
    """Set 15's checkpoint stall, on every rank at its step: the rank the fault hits logs its save
    and its write hangs past the process-group timeout; every rank then waits at the barrier."""
    if fault != "ckpt_stall":
        return
    import torch.distributed as dist

    if hit:
        log.info("saving checkpoint at step %d", step)
        time.sleep(timeout + 20)
    dist.barrier()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--rank", type=int, default=1, help="the worker rank the fault hits")
    p.add_argument("--step", type=int, default=5, help="the step it hits at")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--timeout", type=float, default=15.0, help="process-group timeout, seconds")
    p.add_argument("--style", choices=("logging", "print"), default="logging")
    p.add_argument("--data", default="/tmp/ff-rayjobs-data")
    p.add_argument("--storage", default=os.path.join(tempfile.gettempdir(), "ff-rayjobs-results"))
    return p.parse_args()


def train_loop(cfg: dict[str, Any]) -> None:
    """One worker's loop: the fault is ordinary application code; every other word is Ray's or torch's."""
    import ray.train
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from ray.train.torch import prepare_model

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    fault, hit, at = cfg["fault"], ctx.get_world_rank() == cfg["rank"], cfg["step"]
    log = logging.getLogger("trainer")
    if not log.handlers:
        h = logging.StreamHandler(sys.stdout)
        fmt = "%(asctime)s - %(name)s - %(levelname)s - %(message)s" if cfg["style"] == "logging" else "%(message)s"
        h.setFormatter(logging.Formatter(fmt))
        log.addHandler(h)
        log.setLevel(logging.INFO)
        log.propagate = False

    if fault == "import":
        import apex  # noqa: F401  (a dependency the workers' environment lacks)
    if fault == "missing_file_all":
        with open(os.path.join(cfg["data"], "tokenizer.json"), "rb") as fh:
            fh.read()
    if fault == "divisible":
        pp = 3
        if world % pp != 0:
            raise ValueError(f"world size ({world}) is not divisible by pipeline_parallel_size ({pp})")

    torch.manual_seed(rank)
    model = prepare_model(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    lossf = nn.CrossEntropyLoss()
    t_last = time.perf_counter()
    for step in range(cfg["steps"]):
        x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
        if (fault == "nan_all" and step == at) or (fault == "nan_one" and hit and step == at):
            x = x * float("inf")
        loss = lossf(model(x), y)
        if fault in ("nan_all", "nan_one") and not torch.isfinite(loss):
            raise FloatingPointError(
                f"loss is {loss.item()} at step {step}; stopping (check the data and the learning rate)"
            )
        opt.zero_grad()
        loss.backward()
        opt.step()
        if hit and step == at:
            if fault == "exception":
                lr_schedule = {0: 0.1, 100: 0.01}
                _ = lr_schedule[step]  # a KeyError in the user's code
            if fault == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault == "segfault":
                ctypes.string_at(0)
            if fault == "exit":
                log.error("validation data is empty; exiting")
                sys.exit(3)
            if fault == "hang":
                time.sleep(3600)  # a stuck read from remote storage
            more_faults(fault, rank, step, log)
        if step == at:
            stall_at_save(fault, hit, step, cfg["timeout"], log)
        if fault == "size_mismatch" and step == at:
            metrics = torch.zeros(3000 if hit else 2000)  # a metrics buffer of another size
            dist.all_reduce(metrics)
        now = time.perf_counter()
        msg = f"step {step + 1}/{cfg['steps']} loss {loss.item():.4f} step_time {1000 * (now - t_last):.1f}ms"
        t_last = now
        if cfg["style"] == "logging":
            log.info("rank %d: %s", rank, msg)
        else:
            print(f"[rank {rank}] {msg}", flush=True)
        ray.train.report({"loss": float(loss.item()), "step": step + 1})


def main() -> None:
    a = parse()
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    ray.init(num_cpus=a.workers, include_dashboard=False)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={k: getattr(a, k) for k in ("fault", "rank", "step", "steps", "style", "data", "timeout")},
        scaling_config=ScalingConfig(num_workers=a.workers, use_gpu=False),
        torch_config=TorchConfig(backend="gloo", timeout_s=int(a.timeout)),
        run_config=RunConfig(
            name=f"ff-{a.fault}", storage_path=a.storage, failure_config=FailureConfig(max_failures=0)
        ),
    )
    result = trainer.fit()
    print(f"training finished: {result.metrics}")


if __name__ == "__main__":
    main()
