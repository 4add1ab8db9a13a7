"""A little job under PyTorch Lightning or Hugging Face Accelerate (gloo on CPU) for firstfault's
set of real framework runs.

Why it exists: the torchrun, SLURM and Ray sets show firstfault those launchers' wording; a job
under a training framework prints through it instead. Lightning's own DDP launcher prints
``Initializing distributed: GLOBAL_RANK: ...``, the model summary, ``Child process with PID ...
terminated with code ...`` when a rank dies; ``accelerate launch`` wraps torchrun and ends a failed
job with its own ``CalledProcessError``. Those words are the frameworks' and torch's, from real
runs; this script adds only ordinary application code (a training step, a missing file, a
KeyError, a SIGKILL) as ``train.py`` does.

    python tools/realjobs/frameworks_train.py --framework lightning --fault exception --rank 2 --workers 4
    accelerate launch --multi_gpu --num_processes 4 tools/realjobs/frameworks_train.py --framework accelerate ...

(``--multi_gpu`` is how ``accelerate launch`` starts several processes under torchrun, and
``Accelerator(cpu=True)`` runs them as ``MULTI_CPU`` over gloo: ``--cpu`` alone starts one.)
Run by ``make_frameworks_set.py``, which keeps the console as the bundle.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys
import time
from datetime import timedelta

from ray_train import (
    FAULTS,
    more_faults,
    stall_at_save,
)  # the same faults as the Ray Train job (its module imports no Ray)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=("lightning", "accelerate", "hf"), default="lightning")
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--rank", type=int, default=1, help="the global rank the fault hits")
    p.add_argument("--step", type=int, default=5, help="the step it hits at")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=4, help="Lightning's devices (accelerate launch sets its own)")
    p.add_argument("--timeout", type=float, default=15.0, help="process-group timeout, seconds")
    p.add_argument("--style", choices=("logging", "print"), default="logging")
    p.add_argument("--data", default="/tmp/ff-frameworks-data")
    p.add_argument("--root", default="/tmp/ff-frameworks-root")
    return p.parse_args()


def logger(style: str) -> logging.Logger:
    log = logging.getLogger("trainer")
    h = logging.StreamHandler(sys.stdout)
    fmt = "%(asctime)s - %(name)s - %(levelname)s - %(message)s" if style == "logging" else "%(message)s"
    h.setFormatter(logging.Formatter(fmt))
    log.addHandler(h)
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


def set_up_faults(a: argparse.Namespace, world: int) -> None:
    """The faults of the set-up, raised before the first step on every rank."""
    if a.fault == "import":
        import apex  # noqa: F401  (a dependency the environment lacks)
    if a.fault == "missing_file_all":
        with open(os.path.join(a.data, "tokenizer.json"), "rb") as fh:
            fh.read()
    if a.fault == "divisible":
        pp = 3
        if world % pp != 0:
            raise ValueError(f"world size ({world}) is not divisible by pipeline_parallel_size ({pp})")


def poison(a: argparse.Namespace, x, rank: int, step: int):  # type: ignore[no-untyped-def]
    """The batch a NaN fault feeds: inputs scaled to infinity on the chosen rank(s) and step."""
    if (a.fault == "nan_all" and step == a.step) or (a.fault == "nan_one" and rank == a.rank and step == a.step):
        return x * float("inf")
    return x


def step_faults(a: argparse.Namespace, loss, rank: int, step: int, log: logging.Logger) -> None:  # type: ignore[no-untyped-def]
    """The faults of a training step: ordinary application code; every other word is the framework's."""
    import torch
    import torch.distributed as dist

    if a.fault in ("nan_all", "nan_one") and not torch.isfinite(loss):
        raise FloatingPointError(
            f"loss is {loss.item()} at step {step}; stopping (check the data and the learning rate)"
        )
    if rank == a.rank and step == a.step:
        if a.fault == "exception":
            lr_schedule = {0: 0.1, 100: 0.01}
            _ = lr_schedule[step]  # a KeyError in the user's code
        if a.fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if a.fault == "segfault":
            ctypes.string_at(0)
        if a.fault == "exit":
            log.error("validation data is empty; exiting")
            sys.exit(3)
        if a.fault == "hang":
            time.sleep(3600)  # a stuck read from remote storage
        more_faults(a.fault, rank, step, log)
    if step == a.step:
        stall_at_save(a.fault, rank == a.rank, step, a.timeout, log)
    if a.fault == "size_mismatch" and step == a.step:
        metrics = torch.zeros(3000 if rank == a.rank else 2000)  # a metrics buffer of another size
        dist.all_reduce(metrics)


def progress(a: argparse.Namespace, log: logging.Logger, rank: int, step: int, loss: float, took_ms: float) -> None:
    msg = f"step {step + 1}/{a.steps} loss {loss:.4f} step_time {took_ms:.1f}ms"
    if a.style == "logging":
        log.info("rank %d: %s", rank, msg)
    else:
        print(f"[rank {rank}] {msg}", flush=True)


def dataset(a: argparse.Namespace, world: int):  # type: ignore[no-untyped-def]
    import torch
    from torch.utils.data import TensorDataset

    torch.manual_seed(0)
    n = 8 * a.steps * world
    return TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))


def network():  # type: ignore[no-untyped-def]
    import torch.nn as nn

    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


def run_lightning(a: argparse.Namespace, log: logging.Logger) -> None:
    import lightning as L
    import torch
    import torch.nn as nn
    from lightning.pytorch.strategies import DDPStrategy
    from torch.utils.data import DataLoader

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = network()
            self.lossf = nn.CrossEntropyLoss()
            self.t_last = time.perf_counter()

        def setup(self, stage: str) -> None:
            set_up_faults(a, self.trainer.world_size)

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            rank, step = self.global_rank, self.global_step
            x, y = batch
            loss = self.lossf(self.net(poison(a, x, rank, step)), y)
            step_faults(a, loss, rank, step, log)
            now = time.perf_counter()
            progress(a, log, rank, step, loss.item(), 1000 * (now - self.t_last))
            self.t_last = now
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = L.Trainer(
        accelerator="cpu",
        devices=a.workers,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=a.timeout)),
        max_steps=a.steps,
        enable_progress_bar=False,
        enable_checkpointing=False,
        logger=False,
        default_root_dir=a.root,
    )
    trainer.fit(Model(), DataLoader(dataset(a, a.workers), batch_size=8))
    if trainer.global_rank == 0:
        print(f"training finished: {trainer.callback_metrics}", flush=True)


def run_accelerate(a: argparse.Namespace, log: logging.Logger) -> None:
    import torch
    import torch.nn as nn
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs
    from torch.utils.data import DataLoader

    acc = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=a.timeout))])
    rank, world = acc.process_index, acc.num_processes
    set_up_faults(a, world)
    model = network()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt, dl = acc.prepare(model, opt, DataLoader(dataset(a, world), batch_size=8))
    lossf = nn.CrossEntropyLoss()
    t_last = time.perf_counter()
    for step, (x, y) in enumerate(dl):
        if step >= a.steps:
            break
        loss = lossf(model(poison(a, x, rank, step)), y)
        step_faults(a, loss, rank, step, log)
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
        now = time.perf_counter()
        progress(a, log, rank, step, loss.item(), 1000 * (now - t_last))
        t_last = now
    acc.wait_for_everyone()
    if acc.is_main_process:
        print(f"training finished: {a.steps} steps", flush=True)
    acc.end_training()


def run_hf(a: argparse.Namespace, log: logging.Logger) -> None:
    """Hugging Face ``Trainer`` under torchrun: its own logging, tqdm bar and loss dicts around the loop."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from transformers import Trainer, TrainingArguments

    set_up_faults(a, int(os.environ.get("WORLD_SIZE", "1")))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = network()
            self.lossf = nn.CrossEntropyLoss()
            self.step = 0
            self.t_last = time.perf_counter()

        def forward(self, x, labels):  # type: ignore[no-untyped-def]
            rank, step = dist.get_rank() if dist.is_initialized() else 0, self.step
            self.step += 1
            loss = self.lossf(self.net(poison(a, x, rank, step)), labels)
            step_faults(a, loss, rank, step, log)
            now = time.perf_counter()
            progress(a, log, rank, step, loss.item(), 1000 * (now - self.t_last))
            self.t_last = now
            return {"loss": loss}

    class Rows(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __init__(self) -> None:
            self.x, self.y = dataset(a, int(os.environ.get("WORLD_SIZE", "1"))).tensors

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i: int) -> dict[str, object]:
            return {"x": self.x[i], "labels": self.y[i]}

    args = TrainingArguments(
        output_dir=a.root,
        max_steps=a.steps,
        per_device_train_batch_size=8,
        use_cpu=True,
        logging_steps=5,
        report_to=[],
        save_strategy="no",
        ddp_backend="gloo",
        ddp_timeout=int(a.timeout),
        remove_unused_columns=False,
    )
    Trainer(model=Net(), args=args, train_dataset=Rows()).train()


def main() -> None:
    a = parse()
    log = logger(a.style)
    {"lightning": run_lightning, "accelerate": run_accelerate, "hf": run_hf}[a.framework](a, log)


if __name__ == "__main__":
    main()
