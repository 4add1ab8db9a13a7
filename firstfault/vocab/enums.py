"""Every closed set of firstfault's vocabulary, as an enum.

``StrEnum`` members are their own string values: they compare equal to the plain strings the
signature files and the verdict JSON use (``Role.ROOT == "root"``), serialise as those strings, and
still let a type checker refuse a value outside the set.
"""

from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    """What kind of fault a verdict names; the public list in the v1 schema."""

    GPU_HARDWARE = "gpu_hardware"
    GPU_OOM = "gpu_oom"
    HOST_OOM = "host_oom"
    NETWORK = "network"
    HANG = "hang"
    COLLECTIVE_MISMATCH = "collective_mismatch"
    PROCESS_CRASH = "process_crash"
    APPLICATION_ERROR = "application_error"
    NUMERICAL = "numerical"
    STORAGE_IO = "storage_io"
    CONFIGURATION = "configuration"
    SOFTWARE_BUG = "software_bug"
    SCHEDULER = "scheduler"
    STRAGGLER = "straggler"
    NONE = "none"
    UNKNOWN = "unknown"


class Role(StrEnum):
    """The part an event plays in a failure.

    ``root`` is a fault in its own right; ``cascade`` is a symptom another fault explains
    (a peer's timeout, a closed connection); ``teardown`` is the launcher or scheduler
    cleaning up; ``noise`` is text that looks alarming but is advice or benign.
    """

    ROOT = "root"
    CASCADE = "cascade"
    TEARDOWN = "teardown"
    NOISE = "noise"


class Layer(StrEnum):
    """Where in the stack an event originates, from the metal up."""

    HARDWARE = "hardware"
    DRIVER = "driver"
    NETWORK = "network"
    HOST = "host"
    SCHEDULER = "scheduler"
    LAUNCHER = "launcher"
    FRAMEWORK = "framework"
    APPLICATION = "application"


class Action(StrEnum):
    """What an operator should do next."""

    RESTART = "restart"
    EXCLUDE_AND_RESTART = "exclude_and_restart"
    STOP = "stop"
    NONE = "none"


class Severity(StrEnum):
    """How bad a line says it is. ``info`` lines are never counted as errors."""

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class TsQuality(StrEnum):
    """Where an event's time came from: its own line (``exact``), torchrun's error file or a record
    known to the second (``coarse``), a line near it (``inherited``: the line above, a lower bound,
    or, above a file's first timed line, that line, an upper bound), or nowhere."""

    EXACT = "exact"
    COARSE = "coarse"
    INHERITED = "inherited"
    NONE = "none"


class FileKind(StrEnum):
    """What a file of a bundle is, as discovery sniffs it from its path and first bytes."""

    ELASTIC_RANK_LOG = "elastic_rank_log"
    ELASTIC_ERROR_JSON = "elastic_error_json"
    LAUNCHER_CONSOLE = "launcher_console"
    SLURM_OUTPUT = "slurm_output"
    APP_LOG = "app_log"
    KERNEL_LOG = "kernel_log"
    NCCL_DEBUG = "nccl_debug"
    FR_DUMP = "fr_dump"
    TOPOLOGY = "topology"
    IB_STATE = "ib_state"  # ibstat / ibv_devinfo / rdma link output
    IB_COUNTER = "ib_counter"  # one sysfs InfiniBand counter file
    TRUTH = "truth"
    SCRIPT = "script"
    BINARY = "binary"
    UNREADABLE = "unreadable"


#: the kinds streamed as text and matched against the signatures
TEXT_KINDS = (
    FileKind.ELASTIC_RANK_LOG,
    FileKind.LAUNCHER_CONSOLE,
    FileKind.SLURM_OUTPUT,
    FileKind.APP_LOG,
    FileKind.KERNEL_LOG,
    FileKind.NCCL_DEBUG,
)


class CandidateKind(StrEnum):
    """What makes a rank (or host) a candidate for the root."""

    EVENT = "event"  # an error line of its own
    EXIT = "exit"  # an exit with no error of its own (a kill, a bare non-zero exit)
    SILENT = "silent"  # it went quiet while its peers timed out
    SLOW = "slow"  # a sustained slowdown of its own work
    UNRECOGNISED = "unrecognised"  # an error line no signature knows
    COMMON = "common"  # every rank failed the same way
    STALLED = "stalled"  # the job stopped long before the scheduler's time limit


class FRKind(StrEnum):
    """Why the flight recorder blames a rank (strongest first)."""

    STALLED = "stalled"
    MISMATCHED = "mismatched"
    MISSING = "missing"
    DEADLOCK = "deadlock"
    STUCK = "stuck"
    STRAGGLER = "straggler"
    NO_DUMP = "no_dump"
