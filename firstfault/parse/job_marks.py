"""What marks a file as a distributed job's output, and how large the job is, from the lines alone.

A rank tag that a launcher or framework put on a line (torch's ``[rank3]:``, mpirun's
``--tag-output``, a Ray Train actor's prefix, DeepSpeed's ``log_dist``) or the launch command
pasted above the output says "a job wrote this" even when no line is one a signature knows; a line
stating the world size says how many ranks there were, so a rank that printed nothing can be
counted. Why apart from ``parse.facts``: these are read from a file's head only, and each is a
table of real wording with its source, which grows on its own.
"""

from __future__ import annotations

import re

from firstfault.parse.base import ParseContext
from firstfault.vocab import settings
from firstfault.vocab.identity import MPI_PREFIX, RANK_PREFIX

# Ray actors that exist only in a training job, as Ray prefixes their lines ("(Name pid=N, ip=..) "):
# Ray Train's (ray/train/_internal/worker_group.py RayTrainWorker, Ray 1.x's BaseWorkerMixin and
# BackendExecutor, TorchTrainer and the TrainTrainable it runs as, Train v2's TrainController),
# verl's colocated WorkerDict (verl/single_controller/ray/base.py create_colocated_worker_cls) and
# OpenRLHF's PPO roles (openrlhf/trainer/ray: ActorModelRayActor, CriticModelRayActor, ...).
_RAY_TRAIN_ACTORS = (
    "(RayTrainWorker ",
    "(BaseWorkerMixin ",
    "(BackendExecutor ",
    "(TorchTrainer ",
    "(TrainTrainable ",
    "(TrainController ",
    "(WorkerDict ",
    "(ActorModelRayActor ",
    "(CriticModelRayActor ",
    "(ReferenceModelRayActor ",
    "(RewardModelRayActor ",
)
# DeepSpeed's rank-tagged logging: ``log_dist`` prefixes "[Rank N] " (deepspeed/utils/logging.py
# get_dist_msg: "[Rank {}] {}".format(my_rank, message)) under its logger's
# "[%(filename)s:%(lineno)d:%(funcName)s]" ("[logging.py:96:log_dist] [Rank 0] DeepSpeed info: ...").
_DEEPSPEED_DIST = re.compile(r"\[logging\.py:\d+:log_dist\] \[Rank -?\d+\] ")
# A distributed launch as the user typed it above the output: torchrun's own option
# (torch/distributed/run.py: "--nproc-per-node", "--nproc_per_node"), also taken by
# ``python -m torch.distributed.run/launch`` (with the interpreter's own flags before ``-m``:
# "python -u -m torch.distributed.run", ML Engineering's all_reduce_bench) and torchtune's
# ``tune run`` (which runs torchrun).
_LAUNCH_COMMAND = re.compile(
    r"^\s*(?:\$ )?(?:torchrun|tune run|python[\d.]{0,5}(?: -[A-Za-z]{1,3}){0,4} -m "
    r"torch\.distributed\.(?:run|launch))\b.*--nproc[-_]per[-_]node"
)
_TAG_LITERALS = ("[rank", ">:", "log_dist] [Rank", "nproc", *_RAY_TRAIN_ACTORS)


def rank_tagged(lines: list[str], ctx: ParseContext, blob: str | None = None) -> None:
    """Note a line a distributed launcher tagged with its rank: a job's output, whatever it says.

    torch's ``[rank3]:``, mpirun's ``--tag-output`` ``[1,3]<stdout>:``, a Ray Train worker's
    ``(RayTrainWorker pid=..)`` and DeepSpeed's ``log_dist`` "[Rank 0]" are put there by the job's
    own machinery; a file of such lines is a job's log even when no line of it is one a signature
    knows (a healthy run's own prints). So is the launch command pasted above it ("torchrun
    --nproc_per_node 8 train.py"). ``[defaultN]:`` already makes a file a launcher's console
    (``discover``); srun's bare ``3: `` is not taken (a numbered list looks the same). Only the fact
    is noted: the line itself is read as it would be (an error a tagged line carries stays one)."""
    if ctx.job_evidence:
        return
    if blob is not None and not any(lit in blob for lit in _TAG_LITERALS):
        return
    for raw in lines:
        text = raw.lstrip("> ")
        if (
            RANK_PREFIX.match(text)
            or MPI_PREFIX.match(text)
            or text.startswith(_RAY_TRAIN_ACTORS)
            or _DEEPSPEED_DIST.search(text)
            or _LAUNCH_COMMAND.match(text)
        ):
            ctx.job_evidence = True
            return


# Lines that state the job's world size: an environment echo, a config dump ("world_size ..... 8"),
# NCCL's init ("nranks 8"), ProcessGroupNCCL's options ("size: 8, global rank: 0"), Lightning's
# "MEMBER: 1/8", an MPI launcher's command line ("mpirun -np 32 ...", horovodrun's "-np 4"). A
# claimed size above ``Limits.max_world`` is not believed (it would only cost memory).
_WORLD = re.compile(
    r"(?:\bWORLD_SIZE=|\b[Ww]orld[_ ][Ss]ize\b['\"]?\s*(?:[:=]|\.{3,})\s*|\bn[Rr]anks |\bsize: (?=\d+, global rank: )"
    r"|\bMEMBER: \d+/|\b(?:mpirun|mpiexec|horovodrun)\b[^\n]{0,200}?\s-(?:np|n)\s+)(?P<n>\d{1,7})\b"
)
_WORLD_WORDS = ("ize", "anks", "MEMBER", "mpirun", "mpiexec", "horovodrun")


def world_size(lines: list[str], ctx: ParseContext, blob: str | None = None) -> None:
    """The largest world size a line of these states (the world group, not a sub-group's size)."""
    if blob is not None and not any(w in blob for w in _WORLD_WORDS):
        return
    for raw in lines:
        if not any(w in raw for w in _WORLD_WORDS):
            continue
        for m in _WORLD.finditer(raw):
            n = int(m["n"])
            if 1 < n <= settings.current().limits.max_world and (
                ctx.topology.world_size is None or n > ctx.topology.world_size
            ):
                ctx.topology.world_size = n
