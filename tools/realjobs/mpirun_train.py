"""Run one of ``train.py``'s ranks under Open MPI's ``mpirun``, not torchrun.

    mpirun -np N -x MASTER_ADDR -x MASTER_PORT python tools/realjobs/mpirun_train.py [train.py arguments ...]

Many HPC sites start PyTorch with ``mpirun`` (or ``srun --mpi``) and let each process find its rank
in Open MPI's environment (``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_LOCAL_RANK``,
``OMPI_COMM_WORLD_SIZE``), then form a gloo or NCCL group over TCP as torchrun's ranks do. There is
no torchrun agent: when a process fails, ``mpirun`` reports it in its own words ("Primary job
terminated normally, but 1 process returned a non-zero exit code", "mpirun noticed that process
rank 1 with PID ... exited on signal 9 (Killed)") and kills the rest. Each process runs
``train.main()`` with the environment torchrun would give it, so the faults are exactly train.py's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import train  # the sibling script

    env = os.environ
    os.environ.update(
        RANK=env["OMPI_COMM_WORLD_RANK"],
        LOCAL_RANK=env["OMPI_COMM_WORLD_LOCAL_RANK"],
        WORLD_SIZE=env["OMPI_COMM_WORLD_SIZE"],
        LOCAL_WORLD_SIZE=env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env["OMPI_COMM_WORLD_SIZE"]),
    )
    sys.argv = ["train.py", *sys.argv[1:]]
    train.main()


if __name__ == "__main__":
    main()
