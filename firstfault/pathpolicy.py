"""The allowed-roots path policy: which server paths a remote client may make firstfault read.

Shared by every tool that reads a path named by someone else with its own rights: the HTTP
service (``firstfault serve``) and the MCP server (``firstfault mcp``). One copy, so the two
cannot drift: a path is absolute, has no ``..`` component, sits lexically under one of the
allowed roots (themselves resolved once at start), has no symbolic link anywhere below the root
(each component is ``lstat``-ed; a link is refused even when it points inside), still resolves
(``strict=True``) under that root, and is a regular file or a directory. Anything else is
refused with a one-line reason. Imports nothing of the project.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path


class PathRefused(Exception):
    """A submitted path the policy refuses (HTTP 403), with the one-line reason."""


def allowed_roots(roots: Sequence[Path]) -> tuple[Path, ...]:
    """The roots as real directories, once, at start."""
    out = []
    for r in roots:
        real = Path(r).resolve(strict=True)
        if not real.is_dir():
            raise NotADirectoryError(f"{r}: an allowed root must be a directory")
        out.append(real)
    return tuple(out)


def check_path(raw: str, roots: Sequence[Path]) -> Path:
    """``raw`` as a real path under one of ``roots``, or :class:`PathRefused`."""
    if not raw or "\0" in raw or len(raw) > 4096:
        raise PathRefused("not a usable path")
    p = Path(raw)
    if not p.is_absolute():
        raise PathRefused("give an absolute path")
    if ".." in p.parts:
        raise PathRefused("'..' is not allowed in a path")
    root = next((r for r in roots if p == r or p.is_relative_to(r)), None)
    if root is None:
        raise PathRefused("path is not under an allowed root")
    here = root
    for part in p.relative_to(root).parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            raise PathRefused("no such file or directory under the allowed root") from None
        if stat.S_ISLNK(mode):
            raise PathRefused("symbolic links are not followed in a submitted path")
    try:
        real = p.resolve(strict=True)
    except (OSError, RuntimeError):
        raise PathRefused("no such file or directory under the allowed root") from None
    if not real.is_relative_to(root):  # a rename between the checks; belt and braces
        raise PathRefused("path is not under an allowed root")
    if not (real.is_file() or real.is_dir()):  # a FIFO would block a worker for ever, a device read for ever
        raise PathRefused("not a regular file or a directory")
    return real
