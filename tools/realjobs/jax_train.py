"""A small data-parallel JAX training job, one process per rank (multi-controller JAX on CPU).

    python tools/realjobs/jax_train.py --fault none|sigkill|exception|hang|absent --rank R --step S

Run by ``make_slurm_set.py --set 3`` under a real SLURM (``srun -l``, one task per process): each
process calls ``jax.distributed.initialize`` against process 0's coordination service, and the
gradient is averaged across processes with a ``psum`` over the global device mesh (CPU collectives
through gloo). Written apart from firstfault's simulator; every line it and JAX print is real.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--fault", choices=("none", "sigkill", "exception", "hang", "absent"), default="none")
    p.add_argument("--rank", type=int, default=1, help="the process the fault hits")
    p.add_argument("--step", type=int, default=5, help="the step it hits at")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--heartbeat", type=int, default=10, help="heartbeat timeout, seconds")
    p.add_argument("--init-timeout", type=int, default=20, help="the connect barrier's timeout, seconds")
    return p.parse_args()


def main() -> None:
    a = parse()
    rank = int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")))
    world = int(os.environ.get("SLURM_NTASKS", os.environ.get("WORLD_SIZE", "1")))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s - trainer - %(levelname)s - %(message)s")
    log = logging.getLogger("trainer")
    if a.fault == "absent" and rank == a.rank:
        log.info("process %d: no data shard assigned; exiting", rank)  # it never joins the job
        return

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{os.environ['MASTER_PORT']}",
        num_processes=world,
        process_id=rank,
        initialization_timeout=a.init_timeout,
        heartbeat_timeout_seconds=a.heartbeat,
    )
    log.info("JAX process %d of %d, %d global devices", jax.process_index(), jax.process_count(), jax.device_count())
    mesh = Mesh(np.array(jax.devices()), ("data",))
    batch_sharding = NamedSharding(mesh, PartitionSpec("data"))
    key = jax.random.PRNGKey(0)
    w = jnp.zeros((16, 1))

    def loss_fn(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((x @ w - y) ** 2)

    @jax.jit
    def step_fn(w: jax.Array, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        loss, g = jax.value_and_grad(loss_fn)(w, x, y)  # x, y sharded over every process: a global mean
        return w - 0.05 * g, loss

    for step in range(a.steps):
        t0 = time.perf_counter()
        key, kx = jax.random.split(jax.random.fold_in(key, rank))
        local_x = np.asarray(jax.random.normal(kx, (8, 16)))
        local_y = local_x.sum(axis=1, keepdims=True)
        x = jax.make_array_from_process_local_data(batch_sharding, local_x)
        y = jax.make_array_from_process_local_data(batch_sharding, local_y)
        if rank == a.rank and step == a.step:
            if a.fault == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if a.fault == "exception":
                raise ValueError(f"batch {step} has 8 rows but the model expects 16: check the data loader's drop_last")
            if a.fault == "hang":
                time.sleep(3600)  # stuck in its input pipeline
        w, loss = step_fn(w, x, y)
        loss_v = float(loss)
        log.info("step %d/%d loss=%.4f step_time_ms=%.1f", step + 1, a.steps, loss_v, (time.perf_counter() - t0) * 1000)
        time.sleep(0.2)
    log.info("training finished: %d steps", a.steps)
    jax.distributed.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
