"""parse.headers: the lines below a header are the rank it names (gaps only, or a quoted copy)."""

from __future__ import annotations

from stage_events import ev

from firstfault.parse.headers import place_under_headers
from firstfault.vocab import Role


def _header(rank: int | None, owner: str, line: int, quoted: bool):  # type: ignore[no-untyped-def]
    fields = {"owns_below": "60", "snippet_ranks": owner}
    if quoted:
        fields["quoted"] = "yes"
    return ev(
        "Traceback (most recent call last): (RANK 2)",
        rank=rank,
        source="c.log",
        line=line,
        role=Role.NOISE,
        fields=fields,
    )


def test_a_header_fills_rankless_lines_only() -> None:
    h = _header(None, "2", 10, quoted=False)
    rankless = ev("OSError: x", source="c.log", line=14)
    prefixed = ev("OSError: x", rank=0, source="c.log", line=15)
    far = ev("OSError: x", source="c.log", line=200)
    place_under_headers([h, rankless, prefixed, far])
    assert (rankless.rank, prefixed.rank, far.rank) == (2, 0, None)


def test_a_quoted_header_moves_its_printers_copy_to_the_named_rank() -> None:
    h = _header(0, "2", 10, quoted=True)  # printed by rank 0, quoting rank 2's error
    own_copy = ev("OSError: [Errno 28] No space left on device", rank=0, source="c.log", line=13)
    other_printer = ev("OSError: y", rank=1, source="c.log", line=14)  # interleaved output of another rank
    place_under_headers([h, own_copy, other_printer])
    assert own_copy.rank == 2 and other_printer.rank == 1
