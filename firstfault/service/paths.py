"""Which server paths a client may name, and the content hash of a bundle.

A path submitted to the service is read with the server's rights, so it is checked before anything
opens it, by the allowed-roots policy in :mod:`firstfault.pathpolicy` (shared with the MCP server,
re-exported here): absolute, no ``..`` component, under an allowed root, no symbolic link below
the root. Anything else is refused with the reason; there is no other way into the server's files.

The content hash is the job's key (same content, same job, same verdict). For an upload: the name
the client gave (it decides how the bytes are read: an archive or a log) and the bytes. For a path:
the sorted relative paths of its regular files, each with its size and mtime (ns), plus the bytes of
every file up to 1 MiB (64 MiB of them at most, in path order), so an edited small log is a new job
while a large tree is not re-read just to be hashed. Symbolic links inside a bundle are left to
discovery (which refuses those leading out).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from firstfault.pathpolicy import PathRefused as PathRefused
from firstfault.pathpolicy import allowed_roots as allowed_roots
from firstfault.pathpolicy import check_path as check_path
from firstfault.vocab import settings

SMALL_FILE = 1024 * 1024
#: Bytes read to hash one submitted path, at most: the request waits on it, and a tree of 100,000
#: small files must not cost 100 GB of reading. Past it, files count by name, size and mtime only.
HASHED_BYTES = 64 * 1024 * 1024


def path_key(path: Path) -> str:
    """The content hash of a bundle on disk (see the module's docstring)."""
    h = hashlib.sha256(b"path\0")
    files: list[tuple[str, Path, os.stat_result]] = []
    if path.is_file():
        files.append((path.name, path, path.stat()))
    else:
        cap = settings.current().limits.archive_members
        for d, dirs, names in os.walk(path, followlinks=False):
            dirs.sort()
            for n in names:
                f = Path(d) / n
                st = os.lstat(f)
                if stat.S_ISREG(st.st_mode):
                    files.append((f.relative_to(path).as_posix(), f, st))
            if len(files) > cap:
                raise PathRefused(f"more than {cap} files; refusing")
    budget = HASHED_BYTES
    for rel, f, st in sorted(files, key=lambda t: t[0]):
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode("utf-8", "surrogateescape"))
        if st.st_size <= SMALL_FILE and st.st_size <= budget:
            budget -= st.st_size
            try:
                h.update(f.read_bytes())
            except OSError:
                h.update(b"\0unreadable")
    return h.hexdigest()


def upload_key(name: str, data_digest: str) -> str:
    return hashlib.sha256(f"upload\0{name}\0{data_digest}".encode()).hexdigest()


def safe_name(name: str | None) -> str:
    """The client's file name, reduced to a plain name (it only tells discovery archive or log)."""
    kept = "".join(c for c in (name or "") if c.isalnum() or c in "._-")[:120].lstrip(".")
    return kept or "upload.log"
