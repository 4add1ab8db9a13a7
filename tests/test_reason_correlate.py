"""Unit tests of reason/correlate.py and reason/attribute.py over hand-made events.

The end-to-end tests run real torchrun bundles through every stage; these pin the reasoning
itself: who is a candidate, what a host fault explains, and what the verdict says.
"""

from __future__ import annotations

from stage_events import ev

from firstfault.reason.attribute import attribute
from firstfault.reason.configuration import TrainingSeen
from firstfault.reason.correlate import correlate, host_explains
from firstfault.reason.inputs import ReasoningInput
from firstfault.reason.placing import place_on_lost
from firstfault.vocab import CandidateKind, Category, Layer, Role, Severity

T0 = 1_764_000_000.0


def _job(root_rank: int = 1, world: int = 4) -> list:
    """One rank raises; every other rank times out in the collective it never joined."""
    out = [ev("RuntimeError: expert capacity exceeded", rank=root_rank, host="n0", ts=T0)]
    for r in range(world):
        if r != root_rank:
            out.append(
                ev(
                    "Watchdog caught collective operation timeout",
                    rank=r,
                    host="n0",
                    ts=T0 + 600 + r * 0.01,
                    role=Role.CASCADE,
                    category=Category.HANG,
                    layer=Layer.FRAMEWORK,
                )
            )
    return out


def test_the_rank_that_raised_is_the_only_candidate() -> None:
    corr = correlate(_job(), known_ranks=range(4))
    assert [(c.kind, c.rank) for c in corr.candidates] == [(CandidateKind.EVENT, 1)]
    assert sorted(corr.ranks) == [0, 1, 2, 3]


def test_a_victim_that_raises_later_is_not_a_candidate() -> None:
    events = _job()
    events.append(ev("RuntimeError: NCCL communicator was aborted", rank=2, host="n0", ts=T0 + 601))
    corr = correlate(events, known_ranks=range(4))
    assert [c.rank for c in corr.candidates] == [1]  # rank 2 timed out first: its exception follows


def test_the_verdict_names_the_culprit_and_explains_the_timeouts() -> None:
    training = TrainingSeen(True, T0 - 100)  # steps before the fault: an error of training, not of start-up
    v = attribute(correlate(_job(), range(4)), ReasoningInput(training=training))
    assert v.category == Category.APPLICATION_ERROR and v.culprit.ranks == [1]
    assert v.root_event is not None and "expert capacity" in v.root_event.text
    assert v.explained_fraction == 1.0
    cascades = [lk for lk in v.causal_chain if lk.role == Role.CASCADE]
    assert {lk.event.rank for lk in cascades} == {0, 2, 3}
    assert 0.0 < v.confidence <= 1.0


def test_a_gpu_fault_on_the_culprits_host_just_before_explains_its_error() -> None:
    xid = ev("NVRM: Xid (PCI:0000:b1:00): 79, GPU has fallen off the bus.", host="n0", ts=T0 - 2)
    xid.category, xid.layer = Category.GPU_HARDWARE, Layer.DRIVER
    rank_err = _job()[0]
    assert host_explains(xid, rank_err)
    far_before = ev("NVRM: Xid 79", host="n0", ts=T0 - 3600, category=Category.GPU_HARDWARE, layer=Layer.DRIVER)
    assert not host_explains(far_before, rank_err)
    other_host = ev("NVRM: Xid 79", host="n9", ts=T0 - 2, category=Category.GPU_HARDWARE, layer=Layer.DRIVER)
    assert not host_explains(other_host, rank_err)
    v = attribute(correlate([xid, *_job()], range(4)), ReasoningInput())
    assert v.category == Category.GPU_HARDWARE and v.culprit.hosts == ["n0"]


def test_nothing_wrong_is_said_so_not_guessed() -> None:
    fine = [ev("step 10 loss 2.1", rank=0, host="n0", ts=T0, role=Role.NOISE, severity=Severity.INFO)]
    v = attribute(correlate(fine, [0]), ReasoningInput())
    assert v.root_event is None and v.culprit.ranks == []


def _exit(rank: int, code: str, sig: str | None = None) -> object:
    e = ev(f"  exitcode  : {code} (pid: {100 + rank})", rank=rank, ts=T0 + 10, role=Role.TEARDOWN)
    e.signature, e.layer, e.category = "torchelastic.failure_record", Layer.LAUNCHER, Category.PROCESS_CRASH
    e.fields["exitcode"] = code
    if sig:
        e.fields["signame"] = sig
    return e


def test_identical_rankless_copies_are_several_processes() -> None:
    """Three ranks print one version check to a console without prefixes; torchrun reports the one
    that exited first, and tears the other two down: the copies are three processes', not one's."""
    from firstfault.reason.configuration import common_failure
    from firstfault.reason.placing import place_rankless

    msg = "RuntimeError: this training recipe requires torch>=3.1, but found torch==2.13.0+cpu"
    copies = [ev(msg, ts=T0 + i * 0.01, source="console.log", line=10 * i) for i in range(3)]
    events = [*copies, _exit(1, "1"), _exit(0, "-15", "SIGTERM"), _exit(2, "-15", "SIGTERM")]
    assert place_rankless(events) == 1
    assert [e.rank for e in copies] == [1, None, None]
    common = common_failure(correlate(events, range(3)), world=3)
    assert common is not None and common.copies == 3


def test_an_abort_after_a_lost_peer_is_no_second_copy() -> None:
    """CI's exit_code flake: rank 2 exits and aborts in shutdown (``terminate called without an
    active exception``); rank 3 loses its connection to rank 2 and aborts the same way. Neither
    line has a time; the file order says rank 3 was a victim first, so the job did not fail "the
    same way on every rank": rank 2 alone is the culprit."""
    from firstfault.reason.configuration import common_failure

    abort = "terminate called without an active exception"
    log = "launcher.log"
    events = [
        ev(abort, rank=2, source=log, line=11, signature="cpp.terminate_no_exception", category=Category.PROCESS_CRASH),
        ev(
            "RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:18590",
            rank=3,
            source=log,
            line=66,
            role=Role.CASCADE,
            category=Category.NETWORK,
            layer=Layer.FRAMEWORK,
            signature="gloo.connection_closed",
        ),
        ev(abort, rank=3, source=log, line=78, signature="cpp.terminate_no_exception", category=Category.PROCESS_CRASH),
    ]
    corr = correlate(events, range(4))
    assert common_failure(corr, world=4) is None
    assert [c.rank for c in corr.candidates] == [2]


def test_victims_naming_a_rank_beat_bare_exits() -> None:
    """Store waits time out on rank 5's key; the waiting ranks' lines carry no prefix, so all that is
    placed of them is their exit codes. Rank 5, named by the victims, is the culprit."""
    waits = [
        ev(
            "torch.distributed.DistStoreError: wait timeout after 10000ms, keys: /default_pg/0//cpu//0/5",
            ts=T0 + i * 0.01,
            source="console.log",
            line=20 * i,
            role=Role.CASCADE,
            category=Category.HANG,
            layer=Layer.FRAMEWORK,
        )
        for i in range(5)
    ]
    for w in waits:
        w.fields["awaited_rank"] = "5"
    events = [*waits, *(_exit(r, "1") for r in range(5)), _exit(5, "-15", "SIGTERM")]
    v = attribute(correlate(events, range(6)), ReasoningInput())
    assert v.category == Category.HANG and v.culprit.ranks == [5]
    assert any("name rank 5 as the rank they waited for" in r for r in v.reasons)


def _watchdog(rank: int, seq: int, numel: int) -> object:
    e = ev(
        f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
        f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.",
        rank=rank,
        ts=T0 + 600 + rank * 0.01,
        role=Role.CASCADE,
        category=Category.HANG,
        layer=Layer.FRAMEWORK,
        signature="nccl.watchdog_timeout",
    )
    e.fields.update(seq=str(seq), op_type="ALLREDUCE", numel_in=str(numel))
    return e


def test_the_rank_whose_watchdog_names_another_collective_is_the_odd_one() -> None:
    """Every rank timed out, but rank 0 in all-reduce #959 and the rest in #963: rank 0 diverged."""
    events = [_watchdog(0, 959, 544997376), *(_watchdog(r, 963, 2560) for r in (1, 2, 3, 4))]
    v = attribute(correlate(events, range(5)), ReasoningInput())
    assert v.category == Category.COLLECTIVE_MISMATCH and v.culprit.ranks == [0]


def test_two_ranks_disagreeing_name_nobody() -> None:
    from firstfault.reason.causality import odd_collective

    assert odd_collective([_watchdog(0, 5, 10), _watchdog(1, 6, 10)]) is None
    assert odd_collective([_watchdog(r, 7, 10) for r in range(4)]) is None  # all in one collective


def test_a_consequence_xid_stands_for_the_cause_it_names() -> None:
    x = ev(
        "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
        host="n1",
        role=Role.CASCADE,
        category=Category.GPU_HARDWARE,
        layer=Layer.DRIVER,
        severity=Severity.WARNING,
        signature="kernel.xid.consequence",
    )
    x.fields.update(xid="45", detail="Ch 00000001 caused by previous Xid 149")
    v = attribute(correlate([x], []), ReasoningInput())
    assert v.category == Category.GPU_HARDWARE
    assert any("caused by a previous Xid 149" in r for r in v.reasons)


def test_a_launchers_rankless_sigkill_is_a_suspected_oom() -> None:
    e = ev("[ERROR] [launch.py:325:sigkill_handler] exits with return code = -9", role=Role.TEARDOWN, source="x.log")
    e.fields["exitcode"] = "-9"
    v = attribute(correlate([e], []), ReasoningInput())
    assert v.category == Category.HOST_OOM and v.culprit.ranks == []
    assert any("no kernel log to confirm" in r for r in v.reasons)
    v2 = attribute(correlate([e], []), ReasoningInput(kernel_logs=True))
    assert v2.category == Category.PROCESS_CRASH  # a kernel log without an OOM kill: something else killed it


def test_with_nothing_earlier_the_first_symptom_is_the_failure() -> None:
    """A rendezvous that timed out connecting, and nothing else: named, not 'unknown'."""
    e = ev(
        "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to connect to (IP1, 2222).",
        role=Role.CASCADE,
        category=Category.NETWORK,
        layer=Layer.FRAMEWORK,
        source="console.log",
    )
    v = attribute(correlate([e], []), ReasoningInput())
    assert v.category == Category.NETWORK and v.root_event is e


def test_a_rankless_announcement_defers_to_the_reason_below_it() -> None:
    term = ev("terminate called after throwing an instance of 'gloo::IoException'", source="c.log", line=1)
    term.category, term.fields["defer"] = Category.PROCESS_CRASH, "1"
    what = ev("  what():  [pair.cc:724] connect [127.0.1.1]:3210: Connection refused", source="c.log", line=2)
    what.category, what.priority = Category.CONFIGURATION, 15
    v = attribute(correlate([term, what], []), ReasoningInput())
    assert v.root_event is what and v.category == Category.CONFIGURATION


def test_torn_down_ranks_that_abort_on_their_way_out_did_not_fail_on_their_own() -> None:
    """Rank 2 exits early (code 3); torchrun tears the rest down with SIGTERM and, on a loaded
    machine, they too print 'terminate called without an active exception' while shutting down."""
    events = []
    for r in range(4):
        t = ev("terminate called without an active exception", rank=r, ts=T0 + (0.5 if r == 2 else 0.1 * r))
        t.signature, t.category, t.layer = "cpp.terminate_no_exception", Category.PROCESS_CRASH, Layer.FRAMEWORK
        events.append(t)
        events.append(_exit(r, "3") if r == 2 else _exit(r, "-15", "SIGTERM"))
    v = attribute(correlate(events, range(4)), ReasoningInput())
    assert v.culprit.ranks == [2]


def test_no_step_and_no_start_reads_as_start_up() -> None:
    """A lone paste that never shows training under way: its exception is one of the set-up."""
    v = attribute(correlate(_job(), range(4)), ReasoningInput())
    assert v.category == Category.CONFIGURATION
    assert any("no line shows training under way" in r for r in v.reasons)
    # a reading from what the log does not show costs confidence against one from a step seen
    seen = attribute(correlate(_job(), range(4)), ReasoningInput(training=TrainingSeen(True, T0 - 100)))
    assert v.confidence < seen.confidence


def _raised(exc: str, path: str) -> list:
    frames = [f'  File "{path}", line 1997, in no_sync', "    assert not self.zero_optimization_partition_gradients()"]
    root = ev(f"{exc}: no_sync is incompatible", rank=0, ts=T0, signature="python.exception", context=frames)
    root.fields["exc"] = exc
    return [root]


def test_a_programming_error_inside_a_library_is_its_bug() -> None:
    """deepspeed-6793's shape: an AssertionError whose innermost frame is in site-packages."""
    training = TrainingSeen(True, T0 - 100)
    lib = "/root/miniconda3/envs/llama/lib/python3.11/site-packages/deepspeed/runtime/engine.py"
    v = attribute(correlate(_raised("AssertionError", lib), range(1)), ReasoningInput(training=training))
    assert v.category == Category.SOFTWARE_BUG
    assert any("inside the library deepspeed" in r for r in v.reasons)
    # the user's own file: their error; a library refusing a bad value: not a bug of the library
    mine = attribute(
        correlate(_raised("AssertionError", "/home/me/train.py"), range(1)), ReasoningInput(training=training)
    )
    assert mine.category == Category.APPLICATION_ERROR
    refused = attribute(correlate(_raised("ValueError", lib), range(1)), ReasoningInput(training=training))
    assert refused.category == Category.APPLICATION_ERROR


def test_one_call_of_two_kinds_conflicts_only_within_one_group() -> None:
    """Same sequence number, different collectives: a conflict. Not for a send and its receive, not
    across groups a line names or a timeout tells apart, and not for a subgroup's own numbering."""
    from firstfault.reason.causality import conflicting_collective

    def wd(rank: int, op: str, **fields: str) -> object:
        e = _watchdog(rank, 41, 10)
        e.fields.update({"op_type": op, "timeout_ms": "600000", **fields})
        return e

    found = conflicting_collective([wd(0, "ALLREDUCE"), wd(3, "BROADCAST"), wd(1, "ALLREDUCE")])
    assert found is not None and found.seq == "41" and found.ops == {"ALLREDUCE": [0, 1], "BROADCAST": [3]}
    assert conflicting_collective([wd(0, "SEND"), wd(1, "RECV")]) is None
    assert conflicting_collective([wd(0, "ALLREDUCE", pg_id="0"), wd(1, "BROADCAST", pg_id="2")]) is None
    assert conflicting_collective([wd(0, "ALLREDUCE"), wd(1, "BROADCAST", timeout_ms="1800000")]) is None
    assert conflicting_collective([wd(0, "ALLREDUCE"), wd(5, "BROADCAST", pg_rank="1")]) is None


def test_watchdogs_of_one_group_at_different_collectives_are_out_of_step() -> None:
    """A collective completes only once every member joined it, so ranks that wait on a peer wait
    at one sequence number. Rank 1 at #126 completed #122-#125, which rank 0 (at #122) never did:
    they did not issue the same calls (accelerate#3250's two watchdogs). Not across groups, and not
    for point-to-point calls, which are numbered apart."""
    from firstfault.reason.causality import conflicting_collective

    def wd(rank: int, seq: int, op: str, **fields: str) -> object:
        e = _watchdog(rank, seq, 10)
        e.fields.update({"op_type": op, "timeout_ms": "600000", **fields})
        return e

    found = conflicting_collective([wd(0, 122, "_REDUCE_SCATTER_BASE"), wd(1, 126, "_ALLGATHER_BASE")])
    assert found is not None and found.seq == "122"
    assert found.ops == {"_REDUCE_SCATTER_BASE #122": [0], "_ALLGATHER_BASE #126": [1]}
    assert found.what is not None and "did not issue the same collectives" in found.what
    assert conflicting_collective([wd(0, 122, "ALLREDUCE"), wd(1, 122, "ALLREDUCE")]) is None
    assert conflicting_collective([wd(0, 7, "ALLREDUCE", pg_id="0"), wd(1, 9, "ALLREDUCE", pg_id="2")]) is None
    assert conflicting_collective([wd(0, 7, "SEND"), wd(1, 9, "RECV")]) is None
    # thousands apart: two groups the lines do not tell apart, not one rank that ran ahead
    assert conflicting_collective([wd(0, 150, "ALLREDUCE"), wd(1, 9000, "ALLGATHER")]) is None


def _lost_job(quiet: tuple[int, ...], world: int = 4) -> list:
    """A rank-less error, then every rank not in ``quiet`` loses its connection to a peer."""
    out = [ev("RuntimeError: shard index out of range", ts=T0, layer=Layer.APPLICATION)]
    for r in range(world):
        if r not in quiet:
            out.append(
                ev(
                    "Connection closed by peer",
                    rank=r,
                    ts=T0 + 0.5,
                    role=Role.CASCADE,
                    category=Category.NETWORK,
                    layer=Layer.FRAMEWORK,
                )
            )
    return out


def test_a_rankless_error_belongs_to_the_one_rank_its_peers_lost() -> None:
    events = _lost_job(quiet=(2,))
    assert place_on_lost(events, 4) == 2
    assert events[0].rank == 2 and "peers lost" in events[0].fields["rank_from"]


def test_a_rankless_error_stays_rankless_when_two_ranks_are_quiet_or_the_world_is_unknown() -> None:
    events = _lost_job(quiet=(1, 2))
    assert place_on_lost(events, 4) is None and events[0].rank is None
    assert place_on_lost(_lost_job(quiet=(2,)), None) is None
