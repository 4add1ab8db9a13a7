"""Python traceback frames, read once for the rules that ask whose code a line of a traceback is.

Two rules read the frames an error event kept in its context: :func:`refine.raise_site` asks which
library's code *raised* (the innermost frame, an installed package's: ``software_bug``), and
:func:`causality.call_site` asks where the *program* called in (the innermost frame that is neither
an installed package's nor the interpreter's). One frame pattern and one notion of "a library's
path" serve both, so the two cannot drift apart. A rank's stack dump at a stop (faulthandler's
frames, kept as the event's ``top_frame``) says where it was: :func:`where_stopped`. A pickling
error whose frames pass through torch's source-only object collectives was its rank's alone:
:func:`pickled_as_source`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from firstfault.vocab import Event

# CPython's traceback line, ``  File "/x/train.py", line 204, in main``, wherever a launcher's
# prefix put it (``[rank0]:   File ...``).
FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>[\w<>.]+))?')
# Where installed packages live: a frame there is a library's code, not the user's script.
INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<package>[^/\\]+)")
# The interpreter's own code: the standard library, frozen modules, ``<string>``.
_INTERPRETER = re.compile(r"<frozen|[/\\]lib[/\\]python\d|^<")


def frames(lines: Iterable[str]) -> Iterator[tuple[int, re.Match[str]]]:
    """The traceback frames among ``lines``, with each one's index."""
    for i, line in enumerate(lines):
        m = FRAME.search(line)
        if m is not None:
            yield i, m


def installed_package(path: str) -> str | None:
    """The installed package a frame's file belongs to (``site-packages/torch/...`` -> torch)."""
    m = INSTALLED.search(path)
    return m["package"].removesuffix(".py") if m else None


def is_programs(path: str) -> bool:
    """Is a frame's file the program's own, neither an installed package's nor the interpreter's?"""
    return INSTALLED.search(path) is None and _INTERPRETER.search(path) is None


def where_stopped(events: Sequence[Event]) -> str | None:
    """Where a rank's stack dump (faulthandler on SIGTERM) shows it was when it was stopped."""
    stack = next((e for e in events if e.fields.get("top_frame")), None)
    if stack is None:
        return None
    loader = any("dataloader" in f or "__getitem__" in f or "fetch" in f for f in stack.context[:4])
    where = f"when it was stopped it was in {stack.fields['top_frame']}"
    return where + (" (inside the data loader)" if loader else "")


# torch.distributed's object collectives that pickle on one rank only (distributed_c10d.py, torch
# 2.13: "Serialize object_list elements to tensors on src rank"): the source of a broadcast or a
# scatter, the sender of send_object_list. all_gather_object and gather_object pickle on every rank.
_SOURCE_ONLY_PICKLING = frozenset({"broadcast_object_list", "scatter_object_list", "send_object_list"})


def pickled_as_source(root: Event | None) -> bool:
    """Did ``root`` fail while its rank serialized an object only the source rank serializes?

    Then it is that rank's failure alone: its peers wait for the object, they never pickle it."""
    if root is None:
        return False
    funcs = {m["func"] for _, m in frames(root.context)}
    return "_object_to_tensor" in funcs and not funcs.isdisjoint(_SOURCE_ONLY_PICKLING)
