"""Majority readings of causality (reason.causality): who called another collective, who built another model.

Both read the ranks' own words side by side and name the few that differ from the many; with two
ranks, or no strict majority, they name nobody (the real bundles are in test_real_rules.py).
"""

from __future__ import annotations

from stage_events import ev

from firstfault.reason.causality import call_site, odd_call_site, odd_reported_value, ring_collective, ring_sender
from firstfault.vocab import Category, Role

TIMEOUT = "RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 15000ms for recv operation to complete"
LIB = '  File "/venv/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward'


def _timeout(rank: int, line: int, code: str):  # type: ignore[no-untyped-def]
    frames = (
        "Traceback (most recent call last):",
        '  File "/job/train.py", line 300, in <module>',
        "    main()",
        f'  File "/job/train.py", line {line}, in main',
        f"    {code}",
        LIB,
        "    torch.autograd.backward(",
    )
    return ev(TIMEOUT, rank=rank, role=Role.CASCADE, category=Category.HANG, signature="gloo.timeout", context=frames)


def test_the_call_site_is_the_programs_innermost_frame() -> None:
    assert call_site(_timeout(0, 204, "loss.backward()")) == ("train.py:204 in main", "loss.backward()")
    only_lib = ev(TIMEOUT, rank=0, role=Role.CASCADE, context=("Traceback (most recent call last):", LIB, "    x()"))
    assert call_site(only_lib) is None


def test_the_minority_call_site_is_odd() -> None:
    evs = [_timeout(r, 204, "loss.backward()") for r in (0, 1, 2)] + [_timeout(3, 263, "dist.barrier()")]
    odd = odd_call_site(evs)
    assert odd is not None and odd.ranks == [3]
    assert "train.py:263 in main (dist.barrier())" in odd.reason


def test_two_ranks_or_no_majority_name_nobody() -> None:
    assert odd_call_site([_timeout(0, 204, "loss.backward()"), _timeout(1, 263, "dist.barrier()")]) is None
    split = [_timeout(0, 204, "a()"), _timeout(1, 204, "a()"), _timeout(2, 263, "b()"), _timeout(3, 263, "b()")]
    assert odd_call_site(split) is None
    assert odd_call_site([_timeout(r, 204, "loss.backward()") for r in range(4)]) is None


def _ddp(rank: int, own: int, n: int, other: int, m: int):  # type: ignore[no-untyped-def]
    text = (
        f"RuntimeError: DDP expects same model across all ranks, but Rank {own} has {n} params, "
        f"while rank {other} has inconsistent {m} params."
    )
    fields = {"ddp_rank": str(own), "num_params": str(n), "other_ddp_rank": str(other), "other_num_params": str(m)}
    return ev(text, rank=rank, signature="c10d.ddp_model_mismatch", fields=fields)


def test_the_rank_whose_parameter_count_differs_is_named_in_global_ranks() -> None:
    # DDP over a group of global ranks [4, 5, 6, 7]: the messages speak of group ranks 0-3
    evs = [_ddp(4, 0, 4, 1, 6), _ddp(5, 1, 6, 0, 4), _ddp(6, 2, 4, 1, 6), _ddp(7, 3, 4, 1, 6)]
    odd = odd_reported_value(evs)
    assert odd is not None and odd.ranks == [5] and odd.signature == "c10d.ddp_model_mismatch"


def test_two_ranks_reporting_each_other_name_nobody() -> None:
    assert odd_reported_value([_ddp(0, 0, 4, 1, 6), _ddp(1, 1, 6, 0, 4)]) is None


def test_one_copy_names_the_odd_rank_when_the_ranks_before_it_were_found_alike() -> None:
    # reducer.cpp checks ranks 0, 1, 2... and raises at the first that differs: rank 3's copy naming
    # rank 2 says ranks 0 and 1 built rank 3's model (the last lines of a job keep only this copy)
    odd = odd_reported_value([_ddp(3, 3, 4, 2, 6)])
    assert odd is not None and odd.ranks == [2]
    # the odd rank's own copy names rank 0, before which no rank was checked: it names nobody
    assert odd_reported_value([_ddp(2, 2, 6, 0, 4)]) is None
    odd = odd_reported_value([_ddp(2, 2, 4, 1, 6)])  # ranks 0 and 2 alike, rank 1 not
    assert odd is not None and odd.ranks == [1]


def _reset(rank: int, func: str):  # type: ignore[no-untyped-def]
    frames = (
        "Traceback (most recent call last):",
        '  File "/job/train.py", line 120, in main',
        "    out = model(x)",
        f'  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4394, in {func}',
        "    work = group.allgather_into_tensor_coalesced(",
    )
    text = "RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:1: Connection reset by peer"
    return ev(text, rank=rank, role=Role.CASCADE, signature="gloo.connection_reset", context=frames)


def test_the_ring_neighbour_that_sent_depends_on_the_collective() -> None:
    assert ring_sender(2, 4) == ring_sender(2, 4, "all_reduce") == 3  # gloo/allreduce.cc: recvRank = rank + 1
    assert ring_sender(2, 4, "all_gather") == 1  # gloo/allgather.cc: recvRank = rank - 1
    assert ring_sender(0, 4, "all_gather") == 3
    assert ring_collective([_reset(1, "all_gather_single"), _reset(3, "all_gather_into_tensor")]) == "all_gather"
    assert ring_collective([_reset(1, "all_reduce")]) == "all_reduce"
    assert ring_collective([_reset(1, "all_gather_single"), _reset(3, "all_reduce")]) is None  # they disagree
    assert ring_collective([ev("RuntimeError: x", rank=1)]) is None  # no traceback: unknown
