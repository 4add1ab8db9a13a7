"""The "user's trainer" that the simulator runs under the real ``torchrun``.

It is a small but structurally realistic data/tensor-parallel training loop:

* a ``torch.utils.data.Dataset`` + ``DataLoader`` (+ ``DistributedSampler``) feeding
  synthetic classification batches;
* a tiny model whose middle block does a "row-parallel" all_reduce in a
  tensor-parallel (TP) group and routes tokens to experts with a capacity check;
* a manual data-parallel gradient all_reduce over the world group, a metric
  all_reduce in a data-parallel (DP) group, a broadcast of the initial parameters
  from rank 0 and a barrier every few steps;
* a flight-recorder "watchdog" thread that dumps torch's real flight-recorder
  buffer when this rank sees a collective error or when any rank asked for a
  dump through the TCPStore (mirroring NCCL's dump-on-timeout propagation).

Faults from :mod:`firstfault_sim.faults` are injected at natural places so
that the resulting errors are the genuine output of torch / gloo / CPython /
torchrun. Only the progress lines and the trainer's own checks are ours.

Run it with ``torchrun ... -m firstfault_sim.workload --fault hang ...``.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import faulthandler
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed import TCPStore  # type: ignore[attr-defined]  # re-exported from torch._C, not in __all__
from torch.distributed.elastic.multiprocessing.errors import record
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from firstfault_sim import faults
from firstfault_sim.faults import FaultPlan

#: Simulated accelerator time per step (seconds); keeps a healthy step at ~50-100 ms
#: without four ranks fighting over two CPU cores.
COMPUTE_S = 0.045
FEATURES = 32
HIDDEN = 64
CLASSES = 8
EXPERTS = 4
BATCH = 32
BARRIER_EVERY = 4
#: Key prefix in torchrun's TCPStore used to propagate "please dump" between ranks.
DUMP_KEY_PREFIX = "firstfault/fr_dump"
#: Env var (set by the simulator) naming the store used for FR dump requests.
FR_STORE_ENV = "FIRSTFAULT_FR_STORE"
# Stress runs (``firstfault stress``): the fault fires only in this torchrun attempt, and rank 0
# checkpoints every N steps to this file so a restart resumes after it (unset: neither).
FAULT_ATTEMPT_ENV = "FIRSTFAULT_FAULT_ATTEMPT"
CKPT_ENV = "FIRSTFAULT_CKPT"
CKPT_EVERY_ENV = "FIRSTFAULT_CKPT_EVERY"
#: How often the watchdog polls the store for a dump request (seconds).
WATCHDOG_POLL_S = 0.02

log = logging.getLogger("firstfault.trainer")
T = TypeVar("T")


# ---------------------------------------------------------------------------
# flight recorder watchdog
# ---------------------------------------------------------------------------


def _fr_dump_bytes(backend: str) -> bytes:
    """Return torch's own pickled flight-recorder dump for this process.

    gloo (CPU) entries live in the CPU flight recorder exposed as ``_dump_fr_trace``;
    CUDA builds expose the NCCL recorder as ``_dump_nccl_trace``.
    """
    c10d: Any = torch._C._distributed_c10d
    if backend == "nccl" and hasattr(c10d, "_dump_nccl_trace"):
        return bytes(c10d._dump_nccl_trace())
    return bytes(c10d._dump_fr_trace())


class FlightRecorderWatchdog(threading.Thread):
    """Daemon thread that writes this rank's flight-recorder dump at most once.

    Why a thread: NCCL's watchdog dumps from a background thread, so ranks that are
    stuck (for example sleeping in the data loader) still produce a dump when a peer
    times out. We reproduce that for gloo: a rank that catches a collective error
    sets a key in torchrun's TCPStore; every rank's watchdog polls that key and dumps.
    Ranks killed abruptly (SIGKILL, SIGSEGV) naturally write nothing.
    """

    def __init__(self, rank: int, backend: str, prefix: str | None, attempt: int) -> None:
        super().__init__(name="fr-watchdog", daemon=True)
        self.rank = rank
        self.backend = backend
        self.prefix = prefix
        self.key = f"{DUMP_KEY_PREFIX}/attempt{attempt}"
        self._lock = threading.Lock()
        self._dumped = False
        self._stop_event = threading.Event()
        self._t_start = time.time()
        self._store: TCPStore | None = None
        self._store_lock = threading.Lock()
        if prefix:
            # Prefer the launcher-hosted rendezvous store: it survives the death of any rank.
            endpoint = os.environ.get(FR_STORE_ENV) or (
                f"{os.environ.get('MASTER_ADDR', '')}:{os.environ.get('MASTER_PORT', '')}"
            )
            host, _, port = endpoint.rpartition(":")
            try:
                self._store = TCPStore(
                    host,
                    int(port),
                    is_master=False,
                    timeout=timedelta(seconds=10),
                    wait_for_workers=False,
                )
            except (RuntimeError, ValueError) as exc:
                log.warning("flight recorder watchdog has no store (%s); local dumps only", exc)

    def run(self) -> None:
        """Poll the store until a dump is requested or the trainer stops us."""
        if self._store is None:
            return
        while not self._stop_event.wait(WATCHDOG_POLL_S):
            try:
                with self._store_lock:
                    requested = self._store.check([self.key])
                    reason = self._store.get(self.key).decode() if requested else ""
            except Exception:  # the agent's store went away: the job is ending
                return
            if requested:
                self.dump(f"requested by {reason}")
                return

    def stop(self) -> None:
        """Stop polling (normal end of training)."""
        self._stop_event.set()

    def signal_all(self, reason: str) -> None:
        """Ask every rank (including stuck ones) to dump, then dump ourselves."""
        if self._store is not None:
            try:
                with self._store_lock:
                    self._store.set(self.key, f"rank{self.rank}: {reason}")
            except Exception as exc:
                log.warning("could not propagate flight recorder dump request: %s", exc)
        self.dump(reason)

    def dump(self, reason: str) -> None:
        """Write torch's real FR pickle to ``<prefix><rank>`` (atomically, once)."""
        if not self.prefix:
            return
        with self._lock:
            if self._dumped:
                return
            self._dumped = True
            path = f"{self.prefix}{self.rank}"
            if self.backend == "nccl" and os.path.exists(path) and os.path.getmtime(path) >= self._t_start:
                # ProcessGroupNCCL's own dump-on-timeout already wrote this attempt's file.
                log.info("flight recorder: %s already written by NCCL (%s)", path, reason)
                return
            try:
                data = _fr_dump_bytes(self.backend)
                tmp = f"{path}.tmp"
                with open(tmp, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path)
            except Exception as exc:
                log.warning("flight recorder dump failed: %s", exc)
                return
            log.info("flight recorder: wrote %d bytes to %s (%s)", len(data), path, reason)


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


class SyntheticClassification(Dataset[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]):
    """Deterministic synthetic samples: features, class label and a per-sample loss weight.

    The trainer sets :attr:`step` before fetching each batch (``num_workers=0`` keeps the
    dataset in-process), which is how data-side faults (stall, poisoned sample) know
    when to fire.
    """

    def __init__(self, length: int, seed: int, plan: FaultPlan, rank: int) -> None:
        self.length = length
        self.seed = seed
        self.plan = plan
        self.rank = rank
        self.step = 0
        self._stalled_at = -1
        self._poisoned_at = -1
        gen = torch.Generator().manual_seed(seed)
        self.teacher = torch.randn(FEATURES, CLASSES, generator=gen)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        delay = faults.data_item_delay(self.plan, self.rank, self.step)
        if delay and self._stalled_at != self.step:
            self._stalled_at = self.step
            time.sleep(delay)  # e.g. a read from a wedged network filesystem
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        x = torch.randn(FEATURES, generator=gen)
        y = torch.argmax(x @ self.teacher)
        weight = torch.tensor(1.0)
        if faults.poison_batch(self.plan, self.rank, self.step) and self._poisoned_at != self.step:
            self._poisoned_at = self.step
            weight = torch.tensor(float("nan"))  # a corrupt record in the shard
        return x, y, weight


# ---------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------


class Parallel:
    """The process groups of this rank and helpers that run collectives through the watchdog."""

    def __init__(self, rank: int, world: int, tp: int, timeout: timedelta, watchdog: FlightRecorderWatchdog) -> None:
        self.rank = rank
        self.world = world
        self.tp = tp
        self.watchdog = watchdog
        self.tp_ranks: list[int] = []
        self.dp_ranks: list[int] = []
        self.tp_group: Any = None
        self.dp_group: Any = None
        #: Seconds spent inside collectives since the last reset (for the step breakdown).
        self.comm_s = 0.0
        # Every rank must create every group, in the same order.
        for start in range(0, world, tp):
            ranks = list(range(start, start + tp))
            group = dist.new_group(ranks, timeout=timeout, group_desc=f"tp{start // tp}")
            if rank in ranks:
                self.tp_ranks, self.tp_group = ranks, group
        for offset in range(tp):
            ranks = list(range(offset, world, tp))
            group = dist.new_group(ranks, timeout=timeout, group_desc=f"dp{offset}")
            if rank in ranks:
                self.dp_ranks, self.dp_group = ranks, group

    def collective(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one collective; on failure ask all ranks to dump their flight recorder."""
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            self.watchdog.signal_all(f"{what} failed: {type(exc).__name__}")
            raise
        finally:
            self.comm_s += time.perf_counter() - t0


class Router(nn.Module):
    """Top-1 token router with a capacity limit, like a small mixture-of-experts layer."""

    def __init__(self, capacity_factor: float = 0.75) -> None:
        super().__init__()
        self.proj: torch.Tensor
        self.register_buffer("proj", torch.randn(HIDDEN, EXPERTS, generator=torch.Generator().manual_seed(7)))
        self.capacity_factor = capacity_factor

    def forward(self, h: torch.Tensor, skew: bool = False) -> torch.Tensor:
        logits = h.detach() @ self.proj
        if skew:  # a degenerate batch that sends every token to one expert
            logits[:, 0] += 1e4
        expert = logits.argmax(dim=-1)
        counts = torch.bincount(expert, minlength=EXPERTS)
        capacity = max(1, int(self.capacity_factor * h.shape[0]))
        _check_capacity(counts, capacity)
        return expert


def _check_capacity(counts: torch.Tensor, capacity: int) -> None:
    busiest = int(counts.argmax())
    if int(counts[busiest]) > capacity:
        raise RuntimeError(
            f"expert capacity exceeded: expert {busiest} was routed {int(counts[busiest])} "
            f"tokens but capacity is {capacity}"
        )


class ParallelBlock(nn.Module):
    """MLP block whose output projection is a TP row-parallel linear (partial sums all-reduced)."""

    def __init__(self, par: Parallel, plan: FaultPlan) -> None:
        super().__init__()
        self.par = par
        self.plan = plan
        self.norm = nn.LayerNorm(HIDDEN)
        self.fc_in = nn.Linear(HIDDEN, 2 * HIDDEN)
        self.fc_out = nn.Linear(2 * HIDDEN, HIDDEN)
        self.router = Router()

    def forward(self, x: torch.Tensor, step: int) -> torch.Tensor:
        h = self.norm(x)
        self.router(h, skew=faults.raises_in_model(self.plan, self.par.rank, step))
        h = F.gelu(self.fc_in(h))
        partial = self.fc_out(h) / self.par.tp
        reduced = partial.detach().clone()
        self.par.collective("tp all_reduce", dist.all_reduce, reduced, group=self.par.tp_group)
        if faults.wants_host_oom(self.plan, self.par.rank, step):
            self._attention_scores(x, seq_len=8192)
        # Straight-through: forward uses the reduced sum, backward the local partial.
        out: torch.Tensor = x + partial + (reduced - partial).detach()
        return out

    def _attention_scores(self, x: torch.Tensor, seq_len: int) -> torch.Tensor:
        """Host-side scores buffer for a long-sequence batch: (batch, heads, seq, seq) fp32 = 64 GiB.

        Always on the CPU (on GPU runs it stands for CPU offload), so the failure is a
        host allocation failure from torch's DefaultCPUAllocator.
        """
        faults.limit_address_space()
        return torch.empty((BATCH, 8, seq_len, seq_len), dtype=x.dtype, device="cpu")


class TinyModel(nn.Module):
    def __init__(self, par: Parallel, plan: FaultPlan) -> None:
        super().__init__()
        self.plan = plan
        self.rank = par.rank
        self.embed = nn.Linear(FEATURES, HIDDEN)
        self.block = ParallelBlock(par, plan)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor, step: int) -> torch.Tensor:
        h = F.gelu(self.embed(x))
        _simulated_kernels(self.plan, self.rank, step)
        h = self.block(h, step)
        out: torch.Tensor = self.head(h)
        return out


def _simulated_kernels(plan: FaultPlan, rank: int, step: int) -> None:
    """Stand-in for accelerator kernels: costs time, and is where process-level faults hit."""
    time.sleep(COMPUTE_S + faults.compute_delay(plan, rank, step))
    if plan.fires("sigkill", rank, step):
        faults.kill_self_sigkill()
    if plan.fires("segfault", rank, step):
        _fused_layernorm_ext()


def _fused_layernorm_ext() -> bytes:
    """A 'native extension' call that reads through a NULL pointer: a genuine SIGSEGV.

    Inlined here (not in faults.py) so the faulthandler stack looks like user code.
    """
    return ctypes.string_at(0)


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------


def _flat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def _unflatten_into(flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t))
        offset += n


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--fault", default="none", choices=faults.FAULT_KINDS)
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=5)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--pg-timeout", type=float, default=10.0, help="process-group timeout (s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    return p.parse_args(argv)


def _setup_logging(rank: int) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [rank{rank}] %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False


def _pick_backend(requested: str, local_rank: int) -> str:
    if requested != "auto":
        return requested
    if torch.cuda.is_available() and dist.is_nccl_available() and torch.cuda.device_count() > local_rank:
        return "nccl"
    return "gloo"


@record
def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; ``@record`` makes torchrun write this rank's error.json on an exception."""
    args = _parse_args(argv)
    # Real trainers commonly do this so crashes and SIGTERM teardown print Python stacks.
    faulthandler.enable()
    faulthandler.register(signal.SIGTERM, chain=True)
    torch.set_num_threads(1)

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    _setup_logging(rank)
    backend = _pick_backend(args.backend, local_rank)
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    timeout = timedelta(seconds=args.pg_timeout)
    plan = FaultPlan(args.fault, args.fault_rank, args.fault_step, world, args.pg_timeout)
    only = os.environ.get(FAULT_ATTEMPT_ENV)
    if only is not None and only.strip() != str(attempt):
        plan = FaultPlan("none", args.fault_rank, args.fault_step, world, args.pg_timeout)  # a stress run's restart

    if plan.exit_flush_seconds:
        atexit.register(_flush_metrics_at_exit, plan.exit_flush_seconds)

    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    watchdog = FlightRecorderWatchdog(rank, backend, prefix, attempt)
    watchdog.start()

    dist.init_process_group(backend, timeout=timeout, device_id=device if backend == "nccl" else None)
    tp = 2 if world % 2 == 0 else 1
    par = Parallel(rank, world, tp, timeout, watchdog)
    log.info(
        "start world_size=%d rank=%d local_rank=%d hostname=%s pid=%d attempt=%d backend=%s "
        "pg_timeout_s=%g tp_group=%s dp_group=%s steps=%d",
        world,
        rank,
        local_rank,
        socket.gethostname(),
        os.getpid(),
        attempt,
        backend,
        args.pg_timeout,
        par.tp_ranks,
        par.dp_ranks,
        args.steps,
    )

    try:
        _train(args, plan, par, device)
    except Exception as exc:
        # NCCL-style dump on error: keep this rank's view of the collectives.
        watchdog.dump(f"{type(exc).__name__} on this rank")
        raise
    watchdog.stop()
    dist.destroy_process_group()


def _flush_metrics_at_exit(seconds: float) -> None:
    """Stand-in for a metrics logger's exit-time sync (wandb.finish() and friends)."""
    log.info("flushing metrics before exit")
    time.sleep(seconds)


def _train(args: argparse.Namespace, plan: FaultPlan, par: Parallel, device: torch.device) -> None:
    torch.manual_seed(args.seed)
    model = TinyModel(par, plan).to(device)
    params = [p for p in model.parameters()]
    optim = torch.optim.AdamW(params, lr=3e-3)

    # DDP-style start: everyone starts from rank 0's parameters.
    with torch.no_grad():
        flat = _flat([p.data for p in params])
        par.collective("broadcast params", dist.broadcast, flat, src=0)
        _unflatten_into(flat, [p.data for p in params])

    first = _resume(model, optim, par.rank)
    dataset = SyntheticClassification(par.world * BATCH * max(args.steps, 1), args.seed, plan, par.rank)
    sampler: DistributedSampler[int] = DistributedSampler(
        dataset, num_replicas=par.world, rank=par.rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=0, drop_last=True)
    batches = iter(loader)

    for step in range(first, args.steps):
        t0 = time.perf_counter()
        par.comm_s = 0.0
        dataset.step = step
        try:
            x, y, w = next(batches)
        except StopIteration:
            sampler.set_epoch(step)
            batches = iter(loader)
            x, y, w = next(batches)
        x, y, w = x.to(device), y.to(device), w.to(device)
        data_s = time.perf_counter() - t0

        if plan.fires("exit_code", par.rank, step):
            sys.exit(3)

        logits = model(x, step)
        loss = (F.cross_entropy(logits, y, reduction="none") * w).mean()
        value = float(loss.item())
        if not math.isfinite(value):
            raise FloatingPointError(f"loss is {'NaN' if math.isnan(value) else 'inf'} at step {step}")

        optim.zero_grad(set_to_none=False)
        loss.backward()
        grads = [p.grad for p in params if p.grad is not None]
        flat = _flat(grads)
        n = faults.desync_grad_elems(plan, par.rank, step, flat.numel())
        bucket = torch.zeros(n, device=device)
        bucket[: min(n, flat.numel())] = flat[:n]
        par.collective("grad all_reduce", dist.all_reduce, bucket)
        flat[: min(n, flat.numel())] = bucket[: flat.numel()] / par.world
        _unflatten_into(flat, grads)
        optim.step()

        metric = torch.tensor([value], device=device)
        par.collective("dp loss all_reduce", dist.all_reduce, metric, group=par.dp_group)
        if (step + 1) % BARRIER_EVERY == 0:
            par.collective("barrier", dist.barrier)
        total_s = time.perf_counter() - t0
        # The breakdown is what exposes a straggler: in synchronous training every rank's
        # step_time_ms is equal, but only the slow rank has high compute_ms / low comm_ms.
        log.info(
            "step %d loss %.4f step_time_ms %.1f data_ms %.1f compute_ms %.1f comm_ms %.1f",
            step,
            float(metric) / len(par.dp_ranks),
            total_s * 1e3,
            data_s * 1e3,
            (total_s - data_s - par.comm_s) * 1e3,
            par.comm_s * 1e3,
        )
        _checkpoint(model, optim, par.rank, step)
    log.info("training complete steps=%d", args.steps)


def _ckpt_path() -> tuple[Path | None, int]:
    path = os.environ.get(CKPT_ENV)
    return (Path(path) if path else None), max(1, int(os.environ.get(CKPT_EVERY_ENV, "1")))


def _checkpoint(model: nn.Module, optim: torch.optim.Optimizer, rank: int, step: int) -> None:
    """Rank 0 saves the model, the optimizer and the step every N steps (stress runs only)."""
    path, every = _ckpt_path()
    if path is None or rank != 0 or (step + 1) % every:
        return
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": model.state_dict(), "optim": optim.state_dict()}, tmp)
    os.replace(tmp, path)  # a restart never reads a half-written checkpoint
    log.info("checkpoint saved step=%d", step)


def _resume(model: nn.Module, optim: torch.optim.Optimizer, rank: int) -> int:
    """The first step to run: after the last checkpoint, when a stress run's restart finds one."""
    path, _every = _ckpt_path()
    if path is None or not path.exists():
        return 0
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optim.load_state_dict(state["optim"])
    log.info("resumed from checkpoint step=%d", int(state["step"]))
    return int(state["step"]) + 1


if __name__ == "__main__":
    main()
