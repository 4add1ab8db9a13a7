"""Readings pinned by the real sets of 2026-12-07: the families torchrun sets 13 and 14 brought
(what healthy runs print before they train on, a logged exit, a stall under srun) and their runs
under DeepSpeed's launcher (tests/fixtures/realjobs/README.md). Kept apart from test_real_rules.py,
which holds the earlier sets' rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.pipeline import analyze
from firstfault.vocab import BundleError

FIX = Path(__file__).parent / "fixtures" / "realjobs"


def _v(name: str):  # type: ignore[no-untyped-def]
    return analyze(FIX / name)


def test_an_exception_that_ended_a_thread_is_no_failure_where_training_went_on() -> None:
    """Set 13: rank 1's background metrics upload raises at step 3 ("Exception in thread
    metrics-upload:", CPython's threading excepthook); the main thread trains to step 20/20 and the
    job exits 0. The traceback is in rank 1's stderr.log, its steps in stdout.log: the job was read
    as "application error on rank 1" at 0.90."""
    v = _v("m_thread_exc_healthy")
    assert str(v.category) == "none"
    assert any("ended a thread, not its process" in w for w in v.warnings)


def test_a_threads_exception_keeps_its_reading_where_its_rank_stopped(tmp_path: Path) -> None:
    """The same job's console, pasted only down to the thread's exception: nothing shows rank 1
    going on after it, so it stays the failure (a loader thread that died can leave its rank
    waiting: a hang whose root it is)."""
    lines = (FIX / "m_thread_exc_healthy" / "console.log").read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "ConnectionError: metrics endpoint" in line)
    log = tmp_path / "console.log"
    log.write_text("\n".join(lines[: cut + 1]) + "\n")
    v = analyze(log)
    assert str(v.category) != "none" and v.culprit.ranks[:1] == [1]
    assert v.root_event is not None and "ConnectionError" in v.root_event.text


@pytest.mark.parametrize(
    ("case", "line"),
    [
        ("n_git_noise_healthy", "fatal: not a git repository"),
        ("n_stack_dump_healthy", "most recent call first"),
        # two agents, one console each: the dump is in node 1's, above node 1's own "iter 20/20"
        ("mq_stack_dump_healthy_print", "most recent call first"),
    ],
)
def test_what_a_healthy_run_printed_before_its_last_step_is_not_its_failure(case: str, line: str) -> None:
    """Set 14 (healthy, exit 0, 20/20 steps): rank 0's script ran `git rev-parse` outside a
    checkout ("fatal: not a git repository ...", read "unknown on rank 0"), or dumped every
    thread's stack with faulthandler while debugging a slow step (read as the job torn down). Both
    lines sit in rank 0's stderr.log, with no clock; their console copies sit above "step 20/20"."""
    v = _v(case)
    assert str(v.category) == "none"
    assert any("before training reached its last step" in w and line in w for w in v.warnings)


def test_the_rank_that_did_not_time_out_is_the_one_a_time_limited_hang_waited_for() -> None:
    """SLURM set 4: rank 1 blocks in a gradient hook at step 5; ranks 0, 2 and 3 time out waiting in
    the all-reduce (15 s) and exit, and srun holds the step until the one-minute limit. Every rank
    stopped at step 5, so the stall read "nothing tells which one hung first" and named none."""
    v = _v("s4_backward_hang_r1")
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [1]
    assert any("it is the one they waited for" in r for r in v.reasons)


def test_deepspeeds_exit_line_is_the_dead_process_only_by_what_its_peers_say() -> None:
    """DeepSpeed launcher set (real `deepspeed --num_gpus 4`): rank 1 is SIGKILLed at step 5; the
    launcher kills the rest and logs "[... '--local_rank=3' ...] exits with return code = -9", the
    command of the last process it started. Read as rank 3's exit it blamed rank 3; rank 1, the
    one its peers lost without a word, is the process killed."""
    v = _v("ds_sigkill_r1")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [1]
    assert any("names no rank" in r and "rank 1, the one its peers lost without a word" in r for r in v.reasons)


def test_a_script_that_refuses_deepspeeds_local_rank_fails_on_every_rank() -> None:
    """DeepSpeed's launcher passes --local_rank=N; a script without that argument exits 2 on every
    rank ("train.py: error: unrecognized arguments: --local_rank=1"). The launcher's exit line names
    the last process started, which had made it "configuration on rank 3"."""
    v = _v("ds_no_local_rank")
    assert str(v.category) == "configuration" and list(v.culprit.ranks) == []


def test_a_log_named_for_its_rank_gives_its_lines_that_rank() -> None:
    """DeepSpeed's --enable_each_rank_log writes each rank's output to "<time>_rank<N>.log". Rank 1
    logs "step 4 failed; stopping" with a traceback in print style (no line names a rank) and
    exits 1: the lines are rank 1's by the file they are in."""
    v = _v("dse_logged_exit_r1_print")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [1]


def test_the_rank_behind_every_peer_owns_a_rankless_kill() -> None:
    """DeepSpeed set 2: rank 0 segfaults after step 4, printing nothing; its peers make step 5 and
    wait until the launcher kills them, whose one record ("exits with return code = -11") names no
    rank (its command is the last process started). Rank 0's own log, the one behind every peer's,
    is the process that died."""
    v = _v("dse_segfault_r0")
    assert str(v.category) == "process_crash" and v.culprit.ranks[:1] == [0]
    assert any("behind every peer" in r for r in v.reasons)


def test_a_norm_every_rank_holds_alike_names_no_rank_when_one_rank_is_shown() -> None:
    """Spawn set 6: rank 3's batch overflows at step 4 and DDP's all-reduce hands every rank the
    same non-finite gradient, so `clip_grad_norm_(error_if_nonfinite=True)` raises on every rank
    at once; mp.spawn's console shows the one process it caught first ("-- Process 3 terminated
    with the following error:") and terminates the rest. The line cannot say whose batch it was:
    it read "numerical on rank 3" (the label names no rank). Under torchrun, where every rank's
    traceback is in the console, the same run reads "numerical on every rank"."""
    v = _v("sf_clip_nonfinite_r3")
    assert str(v.category) == "numerical"
    assert v.culprit.ranks == []
    assert any("every rank holds alike" in r for r in v.reasons)


def test_a_launch_command_or_deepspeeds_rank_tag_makes_a_healthy_paste_a_jobs_log(tmp_path: Path) -> None:
    """A healthy paste that holds no line a signature knows was refused as "not the output of a
    training job" (public threads: a DeepSpeed run's timers, a `tune run --nproc_per_node 4`
    fine-tune's checkpoint notes). DeepSpeed's `log_dist` tags its lines "[Rank N]" and torchrun's
    command line names its processes per node: both say a distributed job printed this. Text
    with neither is still refused."""
    ds = tmp_path / "ds.log"
    ds.write_text(
        "[2023-06-03 00:08:34,517] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | "
        "forward_microstep: 4958.39 | backward_microstep: 4665.83 | step_microstep: 0.06\n"
    )
    launch = tmp_path / "launch.log"
    launch.write_text(
        "$ torchrun --standalone --nproc_per_node=8 train.py\n"
        "Model checkpoint of size 4.98 GB saved to /tmp/out/hf_model_0002_0.pt\n"
    )
    for path in (ds, launch):
        assert str(analyze(path).category) == "none"
    other = tmp_path / "notes.txt"
    other.write_text("Model checkpoint of size 4.98 GB saved to /tmp/out/hf_model_0002_0.pt\n")
    with pytest.raises(BundleError):
        analyze(other)


def test_a_decimal_in_the_failing_line_names_no_rank() -> None:
    """The last 60 lines of torchrun set 15's console (rank 1's batch overflowed at step 5): rank
    0's traceback, and torchrun's record of ranks 0 and 2 exiting 1. "The total norm of order 2.0"
    read as naming rank 0's (and rank 2's) own input, a shard or device numbered like the rank,
    so the one rank shown was blamed. A decimal's digits are not a rank's number."""
    v = _v("o_clip_nonfinite_r1_tail60")
    assert str(v.category) == "numerical"
    assert v.culprit.ranks == []


def test_the_rank_that_lost_its_peers_only_after_they_timed_out_is_the_one_they_waited_for() -> None:
    """SLURM set 5 (2 nodes x 2 tasks under srun): rank 0 logs "saving checkpoint at step 5" and
    its write hangs; ranks 1-3 time out at the barrier after it and exit, and rank 0, reaching the
    barrier 20 s later, gets gloo's "Connection closed by peer". It read "process crash, no rank":
    node 1's slurmd log (the scheduler's own record, with no time the reading kept) was taken for
    a console whose processes were lost. The daemon's log is no process's console, and the one
    rank of the world that did not time out, losing its peers only after they gave up, is the
    rank they waited for."""
    v = _v("s5_ckpt_stall_r0")
    assert str(v.category) == "hang"
    assert v.culprit.ranks == [0]
    assert not any("slurmd.log" in r for r in v.reasons)


def test_a_rank_that_exited_without_a_traceback_is_quoted_from_its_own_stderr() -> None:
    """Torchrun set 15: rank 1 calls `sys.exit("shard 1: no samples left after filtering at step 3")`;
    CPython prints the message to its stderr (torchrun's per-rank stderr.log) and exits 1. The
    verdict said "exitcode : 1" and that "the error it printed is not in the log": it is, the last
    line of that rank's own stderr, which no signature knows."""
    v = _v("o_exit_message_r1_print")
    assert str(v.category) == "application_error" and v.culprit.ranks == [1]
    assert "no samples left after filtering" in v.summary
    assert any("stderr.log:" in r and "no samples left" in r for r in v.reasons)


def test_a_warning_or_a_frame_at_the_end_of_a_ranks_stderr_is_not_its_last_words(tmp_path: Path) -> None:
    """A rank's stderr that ends on a warning's source line (or a traceback's frame) ends on no
    message of the process's own: nothing is quoted, rather than "cpu = _conversion_method_template(...)"."""
    from firstfault.discover import SourceFile
    from firstfault.parse.base import ParseContext
    from firstfault.parse.facts import _last_words
    from firstfault.vocab import FileKind

    def last(lines: list[str]) -> dict[int, tuple[str, str]]:
        ctx = ParseContext()
        sf = SourceFile(tmp_path / "stderr.log", "logs/x/attempt_0/2/stderr.log", FileKind.ELASTIC_RANK_LOG, 1)
        sf.stream, sf.local_rank = "stderr", 2
        _last_words(lines, 1, sf, ctx)
        return ctx.last_words

    warned = [
        "/venv/lib/python3.11/site-packages/torch/_subclasses/functional_tensor.py:368: UserWarning: Failed to "
        "initialize NumPy: No module named 'numpy'",
        '  cpu = _conversion_method_template(device=torch.device("cpu"))',
    ]
    assert last(warned) == {}
    assert last(warned[:1]) == {}
    said = last([*warned, "shard 2: no samples left after filtering at step 5", ""])
    assert said[2][1] == "shard 2: no samples left after filtering at step 5"


@pytest.mark.parametrize(("case", "rank"), [("dsf_exit_message_r1", 1), ("dsf_exit_message_r2_ranklogs", 2)])
def test_a_rankless_coded_exit_is_the_quiet_ranks_own_error(case: str, rank: int) -> None:
    """DeepSpeed set 3: one rank calls `sys.exit("shard N: no samples left ...")`; the launcher logs
    "[...] exits with return code = 1" with the command of the last process it started, and the
    peers lose their connections. It read "process crash" (a rank that left without a word), and
    on the console alone "configuration": the launcher's echo of its command ("--rank 1 --step 4
    --steps 20") was taken for rank 1's progress before training. A command's option is no
    progress; the quiet rank owns the one rank-less record, and a code (not a signal) is the
    process ending itself with an error: an application error, quoted from its own log where
    the bundle has one (`--enable_each_rank_log`)."""
    v = _v(case)
    assert str(v.category) == "application_error"
    assert v.culprit.ranks == [rank]
    if case.endswith("ranklogs"):
        assert "no samples left after filtering" in v.summary


@pytest.mark.parametrize("case", ["tail_compile_fullgraph_4r", "tail_compile_fullgraph_3r"])
def test_a_set_up_failure_seen_in_a_tail_names_no_rank_by_its_exit_code(case: str) -> None:
    """The last 60 lines of torchrun set 16's consoles: `torch.compile(fullgraph=True)` over a
    data-dependent branch raises dynamo's UserError on every rank at the first forward; the tail
    holds the end of one rank's message (dynamo's "For more information about this error, see:"
    and "Set TORCHDYNAMO_VERBOSE=1" hints) and torchrun's summary. The hints read as an error line
    of rank 1's own (it "went further"), and rank 1's record "exitcode : 1" as a line naming its
    own input: rank 1 (or rank 0) was blamed for a failure every rank meets. The hints are part of
    the message, and an exit record's status and pid name no rank's input."""
    v = _v(case)
    assert str(v.category) == "configuration"
    assert v.culprit.ranks == []


@pytest.mark.parametrize("case", ["q_reentrant_twice_all_rankfmt_3r", "sg_reentrant_twice_all_print_2r"])
def test_reentrant_checkpointing_of_a_shared_block_is_the_set_ups_on_every_rank(case: str) -> None:
    """Set 17 and spawn set 7: DDP's "Expected to mark a variable ready only once" at the first
    backward (a block applied twice under reentrant checkpointing, ``find_unused_parameters=True``).
    Under torchrun every rank's traceback is in the console (read blind, before any rule of its
    own); under mp.spawn only the first process it caught, and that one copy stands for every
    rank's (``every_rank``): the set-up's, with no rank named. It read "application error on rank
    0" under mp.spawn."""
    v = _v(case)
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert "Expected to mark a variable ready only once" in v.summary
