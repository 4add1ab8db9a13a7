"""Run ``train.py``'s ranks under ``torch.multiprocessing.spawn``, not torchrun.

    python tools/realjobs/spawn_train.py NPROC PORT [train.py arguments ...]

``mp.spawn`` is how a great many scripts start their ranks (PyTorch's own DDP tutorial, the 1.x-era
examples, Lightning's ``ddp_spawn``, detectron2's ``launch``): one parent process, no agent, no
per-rank prefixes. When a rank fails, the parent's ``join`` raises for the first process it finds
dead, ``ProcessRaisedException`` ("-- Process N terminated with the following error:") or
``ProcessExitedException`` ("process N terminated with signal SIGKILL" / "with exit code 3"), and
terminates the rest. Each rank runs ``train.main()`` with the environment torchrun would give it, so
the faults are exactly ``train.py``'s.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _rank(local_rank: int, nproc: int, port: int, argv: list[str]) -> None:
    import multiprocessing

    import train  # the sibling script: each spawned process imports it afresh

    # a spawned rank inherits the spawn start method; its DataLoader workers fork, as under torchrun
    # (train.py's Dataset is a local class, which only a forked worker can use)
    multiprocessing.set_start_method("fork", force=True)

    os.environ.update(
        RANK=str(local_rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    sys.argv = ["train.py", *argv]
    train.main()


def main() -> None:
    import torch.multiprocessing as mp

    nproc, port, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    mp.spawn(_rank, args=(nproc, port, argv), nprocs=nproc, join=True)


if __name__ == "__main__":
    main()
