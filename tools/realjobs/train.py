"""An independent little training job for firstfault's development set of real runs.

Why it exists: firstfault's simulator (``firstfault_sim``) is what the tool was tuned on;
accuracy that counts is on output it was not built from. This job is written separately, in a
different style (DDP, its own logging format, a real DataLoader with workers), and fails in the
ways real jobs fail: configuration errors before the first step, a silent SIGKILL, a gloo size
mismatch, a hang, a full disk, a NaN, ... Every message in its logs is printed by real torch,
gloo, torchrun, CPython or by this script's own (ordinary) application code.

Run under torchrun or srun; see ``tools/realjobs/make_set.py``.
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
import warnings
from datetime import timedelta

from ray_train import more_faults, stall_at_save  # the sibling script's faults (it imports no Ray at load)

FAULTS = (
    "none",
    "warnings",
    "straggler",
    "exception",
    "missing_file_all",
    "missing_file_one",
    "divisible",
    "import",
    "version",
    "sigkill",
    "sigkill_then_peer_exc",
    "segfault",
    "abort",
    "exit",
    "hang",
    "size_mismatch",
    "detail_mismatch",
    "nan_one",
    "nan_all",
    "memory",
    "diskfull",
    "dl_worker_kill",
    "dl_worker_exc",
    "init_late",
    "hang_forever",
    "detail_ddp",
    "alloc_start",
    "unused_param",
    "model_mismatch",
    "nccl_backend",
    "cuda_device",
    "world_size_arg",
    "resume_mismatch",
    "dl_timeout",
    "no_launcher",
    "rank0_barrier",
    "uneven_data",
    "dcp_ok",
    "dcp_full",
    "dcp_full_all",
    "dcp_blocked",
    "sigkill_once",
    "exception_once",
    "monitored_barrier",
    "monitored_barrier_all",
    "anomaly_nan",
    "anomaly_ok",
    "pickle_broadcast",
    "extra_allreduce",
    "perm_ckpt",
    "slow_once",
    "eval_exc",
    "no_grad",
    "exit0",
    "shape",
    "dl_worker_segv",
    "assert",
    "leak",
    "argparse_all",
    "thread_exc",
    "emfile",
    "recursion",
    "git_noise",
    "stack_dump",
    "logged_exit",
    "unicode",
    "backward_hang",
    "no_local_rank",
    "clip_nonfinite",
    "clip_ok",
    "ckpt_stall",
    "lr_order",
    "exit_message",
    "compile_recompile",
    "compile_fullgraph",
    "pp_ring",
    "pp_skip_send",
    "reentrant_twice",
)


def tagged_metric(loss: object, tag: str) -> object:
    """A compiled helper that guards on a string argument: each new tag recompiles it, until
    torch._dynamo's recompile limit (8) and a warning; training goes on (the job is healthy)."""
    import torch

    global _TAGGED
    if _TAGGED is None:
        _TAGGED = torch.compile(lambda x, t: x * len(t) + 1)
    return _TAGGED(loss, tag)


_TAGGED = None


def flatten(tree: dict[str, object], prefix: str = "") -> dict[str, object]:
    """Flatten a nested config: a node that refers to itself recurses until RecursionError."""
    out: dict[str, object] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--rank", type=int, default=1, help="the rank the fault hits")
    p.add_argument("--step", type=int, default=5, help="the step it hits at")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--timeout", type=float, default=15.0, help="process-group timeout, seconds")
    p.add_argument("--style", choices=("logging", "print", "rankfmt", "tqdm", "json"), default="logging")
    p.add_argument("--data", default="/tmp/ff-realjobs-data")
    p.add_argument("--ckpt", default="/tmp/ff-realjobs-ckpt")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--resume", default=None, help="a checkpoint to start from")
    p.add_argument(
        "--noise",
        choices=("none", "upload", "io"),
        default="none",
        help="an error caught and gone on from at step 3: rank 0's metrics upload, or every rank's index read",
    )
    p.add_argument("--wrap", choices=("ddp", "fsdp"), default="ddp", help="DDP, or FSDP2's fully_shard")
    p.add_argument("--mesh", default=None, help="FSDP's device mesh shape, '4' or '2,2' (default: the world)")
    known, _ = p.parse_known_args()
    if known.fault != "no_local_rank":  # DeepSpeed's launcher passes --local_rank=N to every rank
        p.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    if known.fault == "argparse_all":  # a launch script passing a flag this version no longer has
        return p.parse_args([*sys.argv[1:], "--warmup-steps", "100"])
    return p.parse_args()


def setup_log(style: str, rank: int) -> logging.Logger:
    log = logging.getLogger("trainer")
    h = logging.StreamHandler(sys.stdout)
    if style == "logging":
        h.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    elif style == "json":  # structured logs, one JSON object a line, as log shippers want them
        h.setFormatter(
            logging.Formatter(
                f'{{"time": "%(asctime)s", "level": "%(levelname)s", "rank": {rank}, "logger": "%(name)s", '
                '"message": "%(message)s"}'
            )
        )
    elif style == "rankfmt":
        h.setFormatter(logging.Formatter(f"[%(asctime)s][rank {rank}][%(levelname)s] %(message)s"))
    else:
        h.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(h)
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


def save_dcp(a: argparse.Namespace, model: object, step: int, rank: int, hit: bool) -> None:
    """A sharded checkpoint with torch.distributed.checkpoint (what torchtitan and Megatron's
    torch_dist format write): every rank writes its own shard file ``__<rank>_0.distcp``, with the
    model and its own data loader's state (torchtitan's ``dataloader.dp_rank_N``). The faults put a
    full device (``/dev/full``) or a directory where a rank's shard file goes."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    path = os.path.join(a.ckpt, f"step-{step}")
    os.makedirs(path, exist_ok=True)
    shard = os.path.join(path, f"__{rank}_0.distcp")
    if (a.fault == "dcp_full" and hit) or a.fault == "dcp_full_all":
        os.symlink("/dev/full", shard)  # this rank's local disk is full
    if a.fault == "dcp_blocked" and hit:
        os.makedirs(shard)  # a stale directory where the shard file goes
    dist.barrier()
    state = {"model": model.state_dict(), f"dataloader.dp_rank_{rank}": torch.tensor([step])}  # type: ignore[attr-defined]
    dcp.save(state, checkpoint_id=path)
    logging.getLogger("trainer").info("saved checkpoint %s", path)


def shard(net: object, mesh_arg: str | None, world: int) -> object:
    """FSDP2 as torchtitan applies it: each Linear its own unit, then the whole model, on a device
    mesh (1-D: fully sharded; 2-D: HSDP, replicated over the first dimension, sharded over the second)."""
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    shape = tuple(int(x) for x in mesh_arg.split(",")) if mesh_arg else (world,)
    names = ("dp_replicate", "dp_shard")[-len(shape) :] if len(shape) <= 2 else None
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    for m in net.modules():  # type: ignore[attr-defined]
        if isinstance(m, nn.Linear):
            fully_shard(m, mesh=mesh)
    return fully_shard(net, mesh=mesh)  # type: ignore[arg-type]


def caught_noise(a: argparse.Namespace, log: logging.Logger, step: int) -> None:
    """An error the trainer handles and goes on from, traceback and all, as real trainers log them:
    rank 0's metrics upload that got no answer, or a cached index every rank rebuilds."""
    if a.noise == "upload":
        try:
            raise ConnectionError(f"metrics endpoint did not answer at step {step}")
        except ConnectionError:
            log.exception("could not upload metrics; will retry at the next step")
        return
    index = os.path.join(a.data, "shard.idx")
    try:
        with open(index, "rb") as fh:
            fh.read()
    except OSError:
        log.warning("index %s unreadable, rebuilding it", index, exc_info=True)


def main() -> None:
    a = parse()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    log = setup_log(a.style, rank)
    hit = rank == a.rank

    if a.fault == "git_noise" and rank == 0:  # the run's commit, logged by a script run outside a checkout
        import subprocess

        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd="/", capture_output=False, check=False)
        log.info("code version: %s", "unknown" if head.returncode else "see above")
    if a.fault == "import":
        import apex  # noqa: F401  (a dependency the environment lacks, on every rank)
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset

    leaked: list[torch.Tensor] = []  # the "leak" fault's growing store

    if a.fault == "version":
        need = (3, 1)
        have = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        if have < need:
            raise RuntimeError(f"this training recipe requires torch>=3.1, but found torch=={torch.__version__}")
    if a.fault == "missing_file_all" or (a.fault == "missing_file_one" and hit):
        path = os.path.join(a.data, f"shard-{rank:05d}.bin" if a.fault == "missing_file_one" else "tokenizer.json")
        with open(path, "rb") as fh:
            fh.read()
    if a.fault == "init_late" and hit:
        time.sleep(a.timeout * 3)

    if a.fault == "alloc_start":
        cache = torch.ones(200 * 1024 * 1024)  # an 800 MB token cache loaded before training
        log.info("token cache loaded: %d entries", cache.numel())
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if a.fault == "cuda_device":
        torch.cuda.set_device(local_rank)  # a GPU recipe run on a machine (or a build) without CUDA
    backend = "nccl" if a.fault == "nccl_backend" else "gloo"
    log.info("initialising process group: rank %d of %d, backend %s", rank, world, backend)
    if a.fault == "world_size_arg":  # the world size taken from a config written for two nodes
        dist.init_process_group(backend, rank=rank, world_size=2 * world, timeout=timedelta(seconds=a.timeout))
    else:
        dist.init_process_group(backend, timeout=timedelta(seconds=a.timeout))
    if a.fault == "pickle_broadcast":  # the rank that read the config shares it with its peers
        cfg = [{"lr": 0.05, "warmup": lambda s: min(1.0, s / 100)}] if hit else [None]
        dist.broadcast_object_list(cfg, src=a.rank)
    if a.fault == "divisible":
        pp = 3
        if world % pp != 0:
            raise ValueError(f"world size ({world}) is not divisible by pipeline_parallel_size ({pp})")

    torch.manual_seed(0)

    class Tokens(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 100_000

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            step = (i - sampler_offset) // 8
            info = torch.utils.data.get_worker_info()
            if a.fault == "dl_worker_kill" and hit and step == a.step and info is not None:
                os.kill(os.getpid(), signal.SIGKILL)
            if a.fault == "dl_worker_segv" and hit and step == a.step and info is not None:
                ctypes.string_at(0)  # a native decoder crashing on one sample
            if a.fault == "dl_worker_exc" and hit and step == a.step:
                record = {"text": "..."}
                return record["input_ids"], record["labels"]  # KeyError in the data pipeline
            if a.fault in ("hang", "dl_timeout") and hit and step == a.step:
                time.sleep(3600)  # a stuck read from remote storage
            g = torch.Generator().manual_seed(i)
            x = torch.randn(64, generator=g)
            return x, torch.tensor(i % 10)

    sampler_offset = rank * 8 * (a.steps + 5)
    # uneven shards: one rank's shard ends early, so it leaves the loop while its peers train on
    n_batches = a.step if a.fault == "uneven_data" and hit else a.steps + 5
    loader = DataLoader(
        torch.utils.data.Subset(Tokens(), range(sampler_offset, sampler_offset + 8 * n_batches)),
        batch_size=8,
        num_workers=a.workers,
        shuffle=False,
        timeout=10 if a.fault == "dl_timeout" else 0,
    )
    hidden = 512 if a.fault == "model_mismatch" and hit else 256  # a rank that read another config
    net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    if a.fault == "compile_fullgraph":  # torch.compile(fullgraph=True) of a model with a data-dependent branch

        class Gated(nn.Module):
            def __init__(self, body: nn.Module) -> None:
                super().__init__()
                self.body = body

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                if x.abs().sum().item() > 1e6:  # skip outlier batches: a branch on a tensor's value
                    x = x.clamp(-10, 10)
                return self.body(x)  # type: ignore[no-any-return]

        net = torch.compile(Gated(net), fullgraph=True)  # type: ignore[assignment]
    if a.fault == "model_mismatch" and hit:
        net.append(nn.Dropout(0.1)).append(nn.Linear(10, 10))
    if a.fault == "unused_param":

        class WithAuxHead(nn.Module):
            """The model with an auxiliary head its forward pass never calls (DDP's unused parameters)."""

            def __init__(self, body: nn.Module) -> None:
                super().__init__()
                self.body = body
                self.aux_head = nn.Linear(10, 4)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.body(x)  # type: ignore[no-any-return]

        net = WithAuxHead(net)  # type: ignore[assignment]
    if a.fault == "reentrant_twice":  # a block shared by two layers, each under reentrant checkpointing
        from torch.utils.checkpoint import checkpoint

        class SharedBlock(nn.Module):
            """One block applied twice per forward pass (weight sharing, as ALBERT-style models and
            looped transformers do), each application under reentrant activation checkpointing."""

            def __init__(self) -> None:
                super().__init__()
                self.inp = nn.Linear(64, 256)
                self.block = nn.Sequential(nn.Linear(256, 256), nn.ReLU())
                self.out = nn.Linear(256, 10)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                h = self.inp(x)
                h = checkpoint(self.block, h, use_reentrant=True)
                h = checkpoint(self.block, h, use_reentrant=True)
                return self.out(h)  # type: ignore[no-any-return]

        net = SharedBlock()  # type: ignore[assignment]
    if a.resume is not None:  # torch.load's default is weights_only=True since torch 2.6
        state = torch.load(a.resume)
        net.load_state_dict(state.get("model", state))
    # DDP under TORCH_DISTRIBUTED_DEBUG=DETAIL crashes torch 2.13's CPU build at start-up (SIGSEGV on
    # every rank, kept as its own case); the mismatch case all-reduces gradients by hand instead
    detail = os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL"
    by_hand = a.fault == "detail_mismatch" or (a.fault == "extra_allreduce" and detail)
    unused = a.fault == "reentrant_twice"  # the recipe asks DDP to look for parameters a step leaves unused
    model = (
        shard(net, a.mesh, world) if a.wrap == "fsdp" else net if by_hand else DDP(net, find_unused_parameters=unused)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    lossf = nn.CrossEntropyLoss()
    if a.fault == "warnings":
        warnings.warn(
            "torch.cuda.amp.GradScaler is deprecated; use torch.amp.GradScaler('cuda') instead", FutureWarning
        )
        log.warning("checkpoint directory %s exists and is not empty; files may be overwritten", a.ckpt)
    if a.fault.startswith("anomaly"):  # debugging a NaN: autograd checks every backward function
        torch.autograd.set_detect_anomaly(True)
    # a schedule stepped before the optimizer's first step (torch warns once, and trains on)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10) if a.fault == "lr_order" else None

    bar = None
    if a.style == "tqdm":  # rank 0 alone draws a progress bar, as most trainers' consoles show it
        from tqdm import tqdm

        bar = tqdm(total=a.steps, desc="train", disable=rank != 0)
    t_last = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        if step >= a.steps:
            break
        if step == 3 and (a.noise == "io" or (a.noise == "upload" and rank == 0)):
            caught_noise(a, log, step)
        if a.fault == "slow_once" and hit and step == a.step:
            time.sleep(a.timeout + 10)  # one read from a slow filesystem, longer than the PG timeout
        if a.fault == "nan_one" and hit and step == a.step:
            x = x * float("nan")
        if a.fault == "shape" and hit and step == a.step:
            x = x[:, :63]  # a batch from a shard written with another feature width
        if a.fault == "assert" and hit and step == a.step:
            x = x[:5]
        if a.fault == "assert":  # the recipe's own check on what the loader gives it
            assert x.shape[0] == 8, f"expected a batch of 8 samples, got {x.shape[0]}"
        if a.fault == "anomaly_nan" and hit and step == a.step:
            x = x * float("nan")
        if a.fault == "nan_all" and step == a.step:
            x = x * float("inf")
        if a.fault == "clip_nonfinite" and hit and step == a.step:
            x = x * float("inf")  # one rank's batch overflows; DDP's all-reduce hands every rank its gradient
        out = model(x)
        loss = lossf(out, y)
        if a.fault == "no_grad" and hit and step == a.step:
            y = torch.full_like(y, -100)  # a batch whose every label is masked out
        if (y == -100).all():  # nothing to learn from in this batch
            loss = torch.zeros(())
        if a.fault in ("nan_one", "nan_all") and not torch.isfinite(loss):
            raise FloatingPointError(
                f"loss is {loss.item()} at step {step}; stopping (check the data and the learning rate)"
            )
        opt.zero_grad()
        if a.fault == "backward_hang" and hit and step == a.step:  # a gradient hook that blocks (a lock)
            out.register_hook(lambda g: time.sleep(3600) or g)
        loss.backward()
        if by_hand:  # no DDP: the gradients are all-reduced by hand
            for p in net.parameters():
                dist.all_reduce(p.grad)
        if a.fault == "compile_recompile":  # a compiled metric keyed by a tag that changes every step
            tagged_metric(loss.detach(), f"step-{step}")
        if a.fault.startswith("clip_"):  # the recipe clips, and refuses a non-finite norm
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        if sched is not None:
            sched.step()
        opt.step()
        if a.fault in ("pp_ring", "pp_skip_send") and world > 1:  # a stage hands its activations on
            act, got = torch.full((32,), float(step)), torch.empty(32)
            skipped = a.fault == "pp_skip_send" and hit and step == a.step  # a schedule's off-by-one
            reqs = [] if skipped else [dist.isend(act, dst=(rank + 1) % world)]
            reqs.append(dist.irecv(got, src=(rank - 1) % world))
            for req in reqs:
                req.wait()
        if a.fault == "straggler" and hit:
            time.sleep(0.04)
        if a.fault == "leak" and hit and step >= a.step:  # a history of activations kept by mistake
            leaked.append(torch.ones(16 * 1024 * 1024))  # 64 MiB a step, touched
            time.sleep(0.3)  # slow enough for a memory sampler of one second to see it grow
        if a.fault.startswith("dcp_") and step == a.step:
            save_dcp(a, model, step, rank, hit)
        if step == a.step:  # rank 0 saves; its write hangs on a slow filesystem while every rank waits
            stall_at_save(a.fault, hit, step, a.timeout, log)
        if a.fault == "rank0_barrier" and rank == 0 and step == a.step:
            log.info("saving checkpoint at step %d", step)
            os.makedirs(a.ckpt, exist_ok=True)
            torch.save(model.state_dict(), os.path.join(a.ckpt, f"step{step}.pt"))
            dist.barrier()  # waits for peers that never enter this branch
        if a.fault in ("monitored_barrier", "monitored_barrier_all") and step == a.step:
            if hit:
                time.sleep(3600)  # stuck in its evaluation pass
            every = a.fault == "monitored_barrier_all"
            dist.monitored_barrier(timeout=timedelta(seconds=10), wait_all_ranks=every)
        if a.fault == "extra_allreduce" and hit and step == a.step:
            metric = torch.tensor([loss.item()])  # a metric reduced on the logging rank only
            dist.all_reduce(metric)
        if a.fault in ("perm_ckpt", "eval_exc") and rank == 0 and step == a.step:
            if a.fault == "perm_ckpt":
                log.info("saving checkpoint at step %d", step)
                os.makedirs(a.ckpt, exist_ok=True)
                torch.save(model.state_dict(), os.path.join(a.ckpt, f"step{step}.pt"))
            else:  # rank 0 alone evaluates, on a held-out split that came out empty
                held_out: list[tuple[torch.Tensor, torch.Tensor]] = []
                correct = sum(int((model(ex).argmax(-1) == ey).sum()) for ex, ey in held_out)
                log.info("eval accuracy %.3f", correct / len(held_out))
        if a.fault == "size_mismatch" and step == a.step:
            metrics = torch.zeros(3000 if hit else 2000)  # a gradient bucket of another size
            dist.all_reduce(metrics)
        if a.fault == "detail_mismatch" and step == a.step:
            sub = dist.new_group([2, 3]) if world >= 4 else dist.group.WORLD
            if rank in (2, 3):
                t = torch.ones(4)
                if hit:
                    dist.all_gather([torch.zeros(4) for _ in range(2)], t, group=sub)
                else:
                    dist.all_reduce(t, group=sub)
        if hit and step == a.step:
            if a.fault == "exception":
                lr_schedule = {0: 0.1, 100: 0.01}
                _ = lr_schedule[step]  # a KeyError in the user's code
            if a.fault in ("sigkill", "sigkill_then_peer_exc"):
                os.kill(os.getpid(), signal.SIGKILL)
            first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
            if a.fault == "sigkill_once" and first_attempt:  # a fault the restart does not meet again
                os.kill(os.getpid(), signal.SIGKILL)
            if a.fault == "exception_once" and first_attempt:
                raise ConnectionError(f"lost the connection to the object store while reading batch {step}")
            if a.fault == "segfault":
                ctypes.string_at(0)
            if a.fault == "abort":
                os.abort()
            if a.fault == "exit":
                log.info("early stopping criterion met; leaving the training loop")
                sys.exit(3)
            if a.fault == "exit0":  # early stopping decided on one rank only: it leaves cleanly
                log.info("early stopping: validation loss has not improved for 3 evaluations")
                sys.exit(0)
            if a.fault == "memory":
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
                _ = torch.empty(4 * 1024**3, dtype=torch.uint8)
            if a.fault == "diskfull":
                log.info("saving checkpoint at step %d", step)
                torch.save(model.state_dict(), "/dev/full")
            if a.fault == "emfile":  # a node whose open-files limit is lower than the others'
                import resource

                resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
                cache = tempfile.mkdtemp(prefix=f"ff-realjobs-cache-{rank}-")  # outside the bundle
                held = [open(os.path.join(cache, f"index-{i:04d}.idx"), "w") for i in range(128)]  # noqa: SIM115
                del held
            if a.fault == "recursion":  # a config tree that refers to itself, walked recursively
                node: dict[str, object] = {"name": "optimizer"}
                node["parent"] = node
                flatten(node)
            # a thread's exception, a stack dump, a logged exit, a non-UTF-8 shard, sys.exit("...")
            more_faults(a.fault, rank, step, log)
        if a.fault == "sigkill_then_peer_exc" and rank != a.rank and step == a.step + 1:
            # the peer's own code raises when a metric round-trip it depends on fails
            try:
                dist.barrier()
            except RuntimeError as exc:
                raise RuntimeError(f"evaluation sync failed at step {step}: {exc}") from exc
        now = time.perf_counter()
        ms = (now - t_last) * 1000
        t_last = now
        if bar is not None:
            bar.set_postfix(loss=f"{loss.item():.4f}")
            bar.update(1)
        elif a.style == "print":
            print(f"iter {step + 1}/{a.steps} | loss {loss.item():.4f} | {ms:.1f} ms/it", flush=True)
        else:
            log.info("step %d/%d loss=%.4f step_time_ms=%.1f", step + 1, a.steps, loss.item(), ms)
    if a.fault == "hang_forever" and hit:
        time.sleep(3600)
    dist.barrier()
    if rank == 0:
        os.makedirs(a.ckpt, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(a.ckpt, "final.pt"))
        log.info("training finished: %d steps", a.steps)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
