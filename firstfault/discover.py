"""Discover: what files a bundle holds and what each one is.

A bundle is whatever a job left behind: a directory, a ``.tar.gz`` of one, or a single log
pasted into a ticket. Each file is sniffed from its path and its first bytes, never read
whole. Archives are unpacked into a private temporary directory under hard limits (member
count, total bytes, compression ratio) so that an archive bomb or a member named
``../../etc/passwd`` is refused with a clear message. Symbolic links that lead outside the
bundle are not followed.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from firstfault.vocab import FileKind, settings
from firstfault.vocab.errors import BundleError

SNIFF = 16 * 1024

_ELASTIC = re.compile(r"attempt_(?P<attempt>\d+)/(?P<local_rank>\d+)/(?P<stream>stdout|stderr)\.log$")
_ELASTIC_ERR = re.compile(r"attempt_(?P<attempt>\d+)/(?P<local_rank>\d+)/error\.json$")
#: how a protocol-0 or -1 pickle of a dict begins: MARK DICT PUT (text) or EMPTY_DICT/MARK DICT BINPUT
_OLD_PICKLE_DICT = (b"(dp0\n", b"(dp1\n", b"(dp", b"}q\x00", b"(dq\x00", b"}(")
_FR_NAME = re.compile(r"(?:fr_trace|nccl_trace|_dump|trace)_?(?:rank_?)?(?P<rank>\d+)(?:\.json)?$")
# one rank's own log, named for it: DeepSpeed's --enable_each_rank_log writes
# "<YYYYmmddHHMMSS>_rank<N>.log" (deepspeed/launcher/launch.py), and people name theirs
# "rank3.log", "log_rank_3.txt", "train-rank-2.out". The word must stand apart ("frank3.log" is not)
_RANK_LOG_NAME = re.compile(r"(?:^|[^A-Za-z0-9])rank[_-]?(?P<rank>\d{1,6})\.(?:log|txt|out|err)$", re.IGNORECASE)
_SCRIPT_SUFFIXES = (".sbatch", ".sh", ".slurm", ".py", ".bash")
# a run's configuration (a Hydra or DeepSpeed/Accelerate YAML, a TOML, an INI): like the script it
# says what was asked for. Its text is full of words such as "error" or "timeout" as keys and values,
# which read as events would be faults no process ever had. JSON stays a log: JSON-lines loggers
# write ``.json`` files, and flight-recorder and topology files are told apart by name first. A
# Kubernetes object saved as YAML (``kubectl get pod -o yaml``) is a record of what happened: its
# ``status`` holds the container's "reason: OOMKilled", so it stays a log.
_CONFIG_SUFFIXES = (".yaml", ".yml", ".toml", ".ini", ".cfg")
_K8S_OBJECT = re.compile(rb"^apiVersion:", re.MULTILINE)
_SLURM_OUT = re.compile(r"^slurm-\d+(?:_\d+)?\.(?:out|err)$")
# a bundle collected per host: "hosts/<host>/" or "nodes/<host>/", "host-<host>/", or a folder
# named like a node ("node07/", which is its host name).
_NODE_DIR = re.compile(
    r"(?:^|/)(?:(?:hosts|nodes)/(?P<named>[\w.-]+)|host[-_](?P<prefixed>[\w.-]+?)|(?P<node>node[-_]?[\w.-]*?))/"
)


@dataclass(slots=True)
class SourceFile:
    path: Path
    rel: str
    kind: FileKind
    size: int
    rank: int | None = None
    local_rank: int | None = None
    attempt: int | None = None
    host: str | None = None
    stream: str | None = None
    encoding: str | None = None  # set for UTF-16 text, which discovery turns into a UTF-8 copy


@dataclass(slots=True)
class Bundle:
    root: Path
    files: list[SourceFile]
    warnings: list[str] = field(default_factory=list)
    tempdir: Path | None = None

    def of_kind(self, *kinds: FileKind) -> list[SourceFile]:
        return [f for f in self.files if f.kind in kinds]

    def close(self) -> None:
        if self.tempdir is not None:
            shutil.rmtree(self.tempdir, ignore_errors=True)
            self.tempdir = None


def _ctrl_share(data: bytes) -> float:
    return sum(1 for b in data if b < 9 or 13 < b < 32) / max(len(data), 1)


def _is_binary(head: bytes) -> bool:
    """Not text. NUL bytes alone do not make a log binary: srun's output files hold runs of NULs
    where a node died mid-write (file holes). What remains without them must read as text."""
    head = head[:8192]
    if not head:
        return False
    if b"\x00" in head:
        rest = head.replace(b"\x00", b"")
        return len(rest) < 16 or _ctrl_share(rest) > 0.05
    return _ctrl_share(head) > 0.1


def utf16_codec(head: bytes) -> str | None:
    """``utf-16`` when the first bytes are UTF-16 text (a BOM, or ASCII with every other byte 0),
    as logs written by Windows tools and some launchers' redirections are."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    sample = head[:128]
    if len(sample) >= 32 and not sample[1::2].strip(b"\x00") and _ctrl_share(sample[0::2]) < 0.05:
        return "utf-16-le"
    if len(sample) >= 32 and not sample[0::2].strip(b"\x00") and _ctrl_share(sample[1::2]) < 0.05:
        return "utf-16-be"
    return None


_KIND_MARKERS: list[tuple[FileKind, tuple[bytes, ...]]] = [
    (
        FileKind.KERNEL_LOG,
        (
            b"NVRM: ",
            b"kernel: ",
            b"Out of memory: Killed process",
            b"mlx5_core",
            # dmesg -x, raw /dev/kmsg, lines only the kernel prints, NVIDIA fabric manager
            b"kern  :",
            b",-;",
            b"segfault at ",
            b"oom-kill:constraint=",
            b"nvidia-nvswitch",
            b"] [INFO] [tid ",
        ),
    ),
    (
        FileKind.SLURM_OUTPUT,
        (
            b"srun: ",
            b"slurmstepd: ",
            b"slurmstepd-",
            # scontrol show job / jobcomp, sacct -P header, slurmctld/slurmd logs, env echoes
            b"JobState=",
            b"JobID|",
            b"sched: Allocate JobId=",
            b"_job_complete: JobId=",
            b"slurmctld version",
            b"slurmd version",
            b"launch task StepId=",
            b"SLURM_JOB_ID=",
            b"SLURM_JOB_NODELIST=",
        ),
    ),
    (
        FileKind.LAUNCHER_CONSOLE,
        (b"torch.distributed.elastic", b"torch/distributed/elastic", b"[default0]:", b"torchrun"),
    ),
    (FileKind.NCCL_DEBUG, (b" NCCL INFO ", b" NCCL WARN ")),
]


# InfiniBand state: ibstat / ibv_devinfo / rdma link outputs by content, sysfs counter files by path
COUNTER_PATH = re.compile(
    r"infiniband/(?P<dev>[\w.-]+)/ports/(?P<port>\d+)/(?:hw_)?counters/(?P<name>\w+)(?::|\s+)\s*(?P<value>\d+)\s*$"
)
COUNTER_FILE = re.compile(r"infiniband/(?P<dev>[\w.-]+)/ports/(?P<port>\d+)/(?:hw_)?counters/(?P<name>\w+)$")


def sniff_ib(text: str) -> str | None:
    """Which of the formats ``text`` is (``ibstat``, ``ibv_devinfo``, ``rdma_link``, ``counters``)."""
    head = text[:8192]
    if re.search(r"^\s*CA '[^']+'", head, re.M) and "Port " in head:
        return "ibstat"
    if re.search(r"^\s*hca_id:", head, re.M):
        return "ibv_devinfo"
    if re.search(r"^\s*(?:link\s+|\d+/\d+:\s*)[\w.-]+/\d+:?\s+state\s", head, re.M):
        return "rdma_link"
    if COUNTER_PATH.search(head.replace("\r", "")) or re.search(
        r"infiniband/[\w.-]+/ports/\d+/(?:hw_)?counters/", head
    ):
        return "counters"
    return None


def sniff_kind(rel: str, head: bytes) -> FileKind:
    """Classify one file by its path within the bundle and its first bytes."""
    name = rel.rsplit("/", 1)[-1]
    if name == "truth.json":
        return FileKind.TRUTH
    if _ELASTIC_ERR.search(rel):
        return FileKind.ELASTIC_ERROR_JSON
    if _ELASTIC.search(rel):
        return FileKind.ELASTIC_RANK_LOG
    looks_fr = (
        head[:1] == b"\x80"  # pickle protocol 2+ (what torch writes)
        or head.startswith(_OLD_PICKLE_DICT)  # protocol 0/1: a dict first (``fr`` reads them; so must analyze)
        or (name.endswith(".json") and b'"entries"' in head and b'"pg_config"' in head)
    )
    if looks_fr and (_FR_NAME.search(name) or "/fr/" in f"/{rel}"):
        return FileKind.FR_DUMP
    if name in {"topology.json"}:
        return FileKind.TOPOLOGY
    if name.endswith(_SCRIPT_SUFFIXES) or head.startswith(b"#!"):
        return FileKind.SCRIPT  # the job's batch or launch script: what was asked for, not what happened
    if name.endswith(_CONFIG_SUFFIXES) and not _K8S_OBJECT.search(head):
        return FileKind.SCRIPT
    if COUNTER_FILE.search(rel):
        return FileKind.IB_COUNTER
    if _is_binary(head):
        return FileKind.BINARY
    if _SLURM_OUT.match(name):
        return FileKind.SLURM_OUTPUT  # sbatch's default --output name
    for kind, markers in _KIND_MARKERS:
        if any(m in head for m in markers):
            return kind
    if sniff_ib(head[:8192].decode("utf-8", "replace")) is not None:
        return FileKind.IB_STATE
    return FileKind.APP_LOG


def _safe_extract(archive: Path, dest: Path) -> list[str]:
    """Unpack ``archive`` under ``dest``: headers first, then the files.

    The first pass reads only the members' headers (count and declared sizes), so an archive bomb
    is refused before one byte is written, not after gigabytes (a gzip stream has to be inflated to
    find its headers, which costs CPU but no disk). The second pass writes the members the first
    pass accepted; a damaged stream keeps what came before the damage, with a warning.
    """
    warnings: list[str] = []
    limits = settings.current().limits
    try:
        with tarfile.open(archive, "r:*") as tar:
            accepted, damage = _scan_headers(tar, archive, limits)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        return [f"{archive}: archive is damaged or truncated ({exc}); using what could be read"]
    if damage:
        warnings.append(damage)
    root = os.path.realpath(dest)
    try:  # a fresh stream: a gzip reader that hit the damage is not rewound reliably
        with tarfile.open(archive, "r:*") as tar:
            for _, member in zip(range(accepted), tar, strict=False):
                where, why = _member_target(member, root)
                if where is None:
                    if why:
                        warnings.append(f"{archive}: skipped member {member.name[:200]!r}: {why}")
                    continue
                try:
                    if member.isdir():
                        os.makedirs(where, exist_ok=True)
                        continue
                    os.makedirs(os.path.dirname(where), exist_ok=True)
                    src = tar.extractfile(member)
                    if src is None:
                        continue
                    with src, open(where, "wb") as out:
                        _copy_salvaging(src, out)
                except OSError as exc:  # one bad member (a name too long, a clash) is skipped, not the rest
                    warnings.append(f"{archive}: skipped member {member.name[:200]!r}: {exc.strerror or exc}")
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        if not damage:
            warnings.append(f"{archive}: archive is damaged or truncated ({exc}); using what could be read")
    return warnings


def _scan_headers(tar: tarfile.TarFile, archive: Path, limits: settings.Limits) -> tuple[int, str | None]:
    """How many members' headers read well, under the count, size and ratio limits (refused
    before anything is written), and the damage that stopped the reading, if any."""
    compressed = max(archive.stat().st_size, 1)
    members = 0
    total = 0
    damage: str | None = None
    try:
        for member in tar:
            if members >= limits.archive_members:
                raise BundleError(f"{archive}: more than {limits.archive_members} members; refusing (archive bomb?)")
            members += 1
            if member.isfile():
                total += member.size
                if total > limits.archive_bytes or (total > compressed * limits.archive_ratio and total > 64 * 1024**2):
                    raise BundleError(
                        f"{archive}: declares more than {total} bytes ({total // compressed}x its size); "
                        "refusing (archive bomb?)"
                    )
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        damage = f"{archive}: archive is damaged or truncated ({exc}); using what could be read"
    return members, damage


def _member_target(member: tarfile.TarInfo, root: str) -> tuple[str | None, str | None]:
    """Where ``member`` goes under ``root`` (already real), or why it goes nowhere (None: silently).

    Pure string work, no system call per member: nothing extracted is a link, so the normalised
    path is the real one, and 190,000 members cost no 190,000 ``resolve()`` calls.
    """
    name = member.name
    if "\0" in name or not name.strip():
        return None, "its name is not a usable path"
    if name.startswith("/") or ".." in name.replace("\\", "/").split("/"):
        return None, "path leaves the archive root"
    target = os.path.normpath(os.path.join(root, name))
    if target == root:
        return None, ("a file named like the archive root" if member.isfile() else None)
    if not target.startswith(root + os.sep):
        return None, "path leaves the archive root"
    if not (member.isfile() or member.isdir()):
        return None, "links and devices are not extracted"
    return target, None


SALVAGE_CHUNK = 64 * 1024


def _copy_salvaging(src: IO[bytes], out: IO[bytes]) -> None:
    """Copy a member in small pieces, so that when the archive breaks inside it, what came before
    the break is on disk (a truncated log's first lines are often the ones that matter)."""
    while True:
        try:
            chunk = src.read(SALVAGE_CHUNK)
        except (tarfile.TarError, EOFError, OSError, zlib.error):
            out.flush()
            raise
        if not chunk:
            return
        out.write(chunk)


def discover(path: Path | str) -> Bundle:
    """Walk ``path`` (directory, archive or single file) into a :class:`Bundle`."""
    p = Path(path)
    if not p.exists():
        raise BundleError(f"{p}: no such file or directory")
    tempdir: Path | None = None
    warnings: list[str] = []
    if p.is_file() and (p.name.endswith((".tar.gz", ".tgz", ".tar", ".tar.xz", ".tar.bz2"))):
        tempdir = Path(tempfile.mkdtemp(prefix="firstfault-"))
        try:
            warnings += _safe_extract(p, tempdir)
        except BaseException:  # a refusal, or SIGINT/SIGTERM mid-way: no unpacked bundle is left behind
            shutil.rmtree(tempdir, ignore_errors=True)
            raise
        root = tempdir
    elif p.is_file():
        root = p.parent
        files = [_source(p, root, p.name, warnings)]
        return Bundle(root, files, warnings, _transcode_utf16(files, None, warnings))
    else:
        root = p
    root = root.resolve()
    files = []
    for f, rel in _walk(root, warnings):
        files.append(_source(f, root, rel, warnings))
    tempdir = _transcode_utf16(files, tempdir, warnings)
    if not files:
        if tempdir:
            shutil.rmtree(tempdir, ignore_errors=True)
        why = f" ({warnings[0]})" if warnings else ""
        raise BundleError(f"{p}: no readable files{why}")
    return Bundle(root, files, warnings, tempdir)


def _transcode_utf16(files: list[SourceFile], tempdir: Path | None, warnings: list[str]) -> Path | None:
    """UTF-16 logs become UTF-8 copies in the bundle's temporary folder (made if needed), so that
    the byte-level prefilter and every parser read them like any other log; the copy keeps the
    original's name in the bundle. Returns the temporary folder (None if none was needed)."""
    for i, sf in enumerate(files):
        if sf.encoding is None or sf.size > settings.current().limits.archive_bytes:
            continue
        try:
            with open(sf.path, "rb") as fh:
                text = fh.read().decode(sf.encoding, "replace").lstrip("\ufeff")
        except OSError:
            continue
        if tempdir is None:
            tempdir = Path(tempfile.mkdtemp(prefix="firstfault-"))
        copy = tempdir / "utf16" / sf.rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(text, encoding="utf-8", errors="replace")
        data = copy.read_bytes()
        files[i] = dataclasses.replace(
            sf, path=copy, kind=sniff_kind(sf.rel, data[:SNIFF]), size=len(data), encoding=None
        )
        warnings.append(f"{sf.rel}: UTF-16 text, read as such")
    return tempdir


def walk(root: Path, warnings: list[str]) -> list[tuple[Path, str]]:
    """(path, relative name) of the regular files under ``root``, sorted as a bundle lists them."""
    return _walk(root, warnings)


def source_file(f: Path, root: Path, rel: str, warnings: list[str]) -> SourceFile:
    """One file as discovery describes it (kind sniffed from its name and first bytes; rank,
    attempt and host from its path): for a reader that meets files one at a time as they appear."""
    return _source(f, root, rel, warnings)


def _walk(root: Path, warnings: list[str]) -> list[tuple[Path, str]]:
    """Regular files under ``root`` in a stable order; links out of the root are refused."""
    out: list[tuple[Path, str]] = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            warnings.append(f"{d}: cannot list ({exc.strerror or exc})")
            continue
        subdirs = []
        for e in entries:
            p = Path(e.path)
            try:
                if e.is_symlink():
                    try:
                        target = p.resolve(strict=True)
                    except (OSError, RuntimeError):  # a loop, or a link to nothing
                        warnings.append(
                            f"{p.relative_to(root)}: symbolic link that loops or leads nowhere; not followed"
                        )
                        continue
                    if not target.is_relative_to(root):
                        warnings.append(f"{p.relative_to(root)}: symbolic link leads outside the bundle; not followed")
                        continue
                    if target.is_dir():
                        continue  # no directory links: no loops
                if e.is_dir(follow_symlinks=False):
                    subdirs.append(p)
                elif e.is_file():
                    out.append((p, p.relative_to(root).as_posix()))
            except OSError as exc:
                warnings.append(f"{p}: cannot stat ({exc.strerror or exc})")
        stack.extend(reversed(subdirs))
    out.sort(key=lambda x: x[1])
    return out


def _source(f: Path, root: Path, rel: str, warnings: list[str]) -> SourceFile:
    try:
        size = f.stat().st_size
        with open(f, "rb") as fh:
            head = fh.read(SNIFF)
    except OSError as exc:
        warnings.append(f"{rel}: unreadable ({exc.strerror or exc})")
        return SourceFile(f, rel, FileKind.UNREADABLE, 0)
    kind = sniff_kind(rel, head)
    sf = SourceFile(f, rel, kind, size, encoding=utf16_codec(head))
    m = _ELASTIC.search(rel) or _ELASTIC_ERR.search(rel)
    if m:
        sf.attempt = int(m["attempt"])
        sf.local_rank = int(m["local_rank"])
        sf.stream = m.groupdict().get("stream")
    if kind == FileKind.FR_DUMP:
        fm = _FR_NAME.search(rel.rsplit("/", 1)[-1])
        if fm:
            sf.rank = int(fm["rank"])
    elif m is None and (rm := _RANK_LOG_NAME.search(rel.rsplit("/", 1)[-1])) is not None:
        sf.rank = int(rm["rank"])  # its lines that name no rank are that rank's
    nm = _NODE_DIR.search(rel)
    if nm:
        sf.host = nm["named"] or nm["prefixed"] or nm["node"]
    if kind == FileKind.BINARY and sf.encoding is None:
        warnings.append(f"{rel}: binary data, not a log; skipped")
    elif size == 0:
        warnings.append(f"{rel}: empty file")
    return sf
