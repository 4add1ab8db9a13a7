"""How a real job ended: stops from outside, what torchrun's agent writes after its workers
succeeded, commands a job script went past, and which quiet rank comes first.

Each case is a bundle a real run left (``tests/fixtures/realjobs/``, made by ``tools/realjobs/``
and regenerated on 2026-12-07; the README there says what each one is). Regenerating the sets on
a new machine found these: timing decides which rank's block a console shows last, whether a line
has a clock, which exit torchrun notices first.
"""

from __future__ import annotations

from pathlib import Path

from firstfault.pipeline import analyze
from tests.paste_text import analyze_text

FIX = Path(__file__).parent / "fixtures" / "realjobs"


def _v(name: str):  # type: ignore[no-untyped-def]
    return analyze(FIX / name)


def test_rank_0s_progress_counts_when_quiet_ranks_are_ordered() -> None:
    """set 9's i_exit0_r0 regenerated: rank 0 stops early after step 6 (sys.exit(0)), ranks 1 and 3
    lose their connections, and torchrun stops rank 2, which had made step 7. Both quiet ranks are
    candidates; the one behind (rank 0, step 6) comes first. Rank 0's progress was looked up as
    rank -1 (``c.rank or -1``), so rank 0 always sorted as if it had no step at all."""
    v = _v("i_exit0_r0_peer_stopped")
    assert str(v.category) == "application_error" and v.culprit.ranks[:1] == [0]


def test_a_command_the_script_lacked_is_refuted_by_the_training_after_it() -> None:
    """The job script's ``nvidia-smi`` is not on the node ("command not found"), then 4 ranks train
    until rank 3 is SIGKILLed at step 7. No line above torchrun's tear-down has a time, so the
    shell's line takes the tear-down's (an upper bound) and came first; but its reading, that no
    process started, is refuted by the training below it: the kill is the failure."""
    v = _v("l_shell_noise_then_sigkill_r3")
    assert str(v.category) == "host_oom" and v.culprit.ranks[:1] == [3]
    assert any("error(s) that say nothing started" in w and "nvidia-smi" in w for w in v.warnings)


def test_an_exit_barrier_after_training_reached_its_end_is_no_failure() -> None:
    """A healthy two-agent job: both nodes train to step 30/30, node 0's agent (the store's host)
    exits first, and node 1's agent logs "Error waiting on exit barrier" over the store read's
    "Failed to recv, got 0 bytes". torchrun's agent enters that barrier only in the SUCCEEDED
    branch of _invoke_run and logs the error without raising it: the job ended well."""
    v = _v("mo_healthy_exit_barrier")
    assert str(v.category) == "none"
    assert any("exit-barrier report" in w for w in v.warnings)


def test_a_keyboard_interrupt_is_a_stop_from_outside_not_a_job_that_ended_well() -> None:
    """mp.spawn's parent prints the only traceback of a job a SIGINT stopped, ending in CPython's
    bare "KeyboardInterrupt". It was no event at all, and the verdict was "no failure found". It is
    a stop from outside (as torchrun's "Received 2 death signal"), with no rank of its own; its
    time is the line above's, so whether the job had stalled before it is not known: lower
    confidence. (Here rank 1 had stalled 25 s before: the stall is what the log cannot show.)"""
    v = _v("sc_ctrlc_hang_r1")
    assert str(v.category) == "scheduler" and v.culprit.ranks == []
    assert v.root_event is not None and v.root_event.text.strip() == "KeyboardInterrupt"
    assert v.confidence <= 0.7
    assert any("when the stop from outside came is not in the log" in r for r in v.reasons)


_PREEMPTED = """\
slurmstepd: error: *** STEP 37361369.0 ON learnfair5146 CANCELLED AT 2021-03-15T17:50:23 ***
submitit WARNING (2021-03-15 17:50:23,701) - Bypassing signal 15
WARNING:submitit:Bypassing signal 15
slurmstepd: error: *** JOB 37361369 ON learnfair5146 CANCELLED AT 2021-03-15T18:00:46 DUE TO PREEMPTION ***
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
submitit WARNING (2021-03-15 18:00:46,902) - Bypassing signal 15
WARNING:submitit:Bypassing signal 15
slurmstepd: error: Failed to send MESSAGE_TASK_EXIT: Connection refused
submitit ERROR (2021-03-15 18:45:40,210) - Submitted job triggered an exception
ERROR:submitit:Submitted job triggered an exception
"""


def test_error_lines_no_signature_knows_after_a_stop_from_outside_are_its_fallout(tmp_path: Path) -> None:
    """facebookincubator/submitit#1613 ("Strange bug upon preemption"): SLURM cancels the step, then
    preempts the job; slurmstepd's "Failed to send MESSAGE_TASK_EXIT" and submitit's "Submitted job
    triggered an exception" follow. No signature knows those two, and an unknown error line ranks
    above a plain cancel as a root; but the cancel came first, and what is printed after it is its
    fallout. It read "unknown" on slurmstepd's line."""
    v = analyze_text(tmp_path, _PREEMPTED)
    assert str(v.category) == "scheduler"
    assert v.root_event is not None and "CANCELLED AT 2021-03-15T17:50:23" in v.root_event.text


# vllm-project/vllm#15498: the worker pod's torchrun under --rdzv_backend=c10d, whose leader's name
# did not resolve; the paste ends on c10d's retry warning (the thread: the job never got further)
_UNRESOLVED = """\
worker # torchrun --nnodes 2 --nproc-per-node=gpu --rdzv_backend=c10d --rdzv_endpoint=leader test.py

W0323 01:38:17.786000 275 torch/distributed/run.py:792]
W0323 01:38:17.786000 275 torch/distributed/run.py:792] *****************************************
W0323 01:38:17.786000 275 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
W0323 01:38:17.786000 275 torch/distributed/run.py:792] *****************************************
[W323 01:38:19.204441686 socket.cpp:759] [c10d] The IPv6 network addresses of (leader-6b8cr, 35421) cannot be retrieved (gai error: -2 - Name or service not known).
"""


def test_a_log_that_ends_on_a_connection_retry_is_a_job_still_waiting_not_a_healthy_one(tmp_path: Path) -> None:
    """c10d's client socket retries a store connection until its connect timeout (socket.cpp
    ``tryConnect``: ``retry = true``); a healthy job warns and goes on. This paste ends on the
    retry, with no error line: it read "no failure found". It is the rendezvous host's name that
    does not resolve, a failure of the set-up."""
    v = analyze_text(tmp_path, _UNRESOLVED)
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert "still being retried" in v.summary and "gai error: -2" in v.summary
    assert v.confidence <= 0.5


def test_a_connection_retry_the_log_goes_on_from_is_no_failure(tmp_path: Path) -> None:
    """The same warning with the job's end below it (torchrun's agent's own line, api.py
    ``_invoke_run``): the retry succeeded, and the job ended well."""
    done = (
        "I0323 01:52:40.118000 275 torch/distributed/elastic/agent/server/api.py:879] [default] worker group "
        "successfully finished. Waiting 300 seconds for other agents to finish.\n"
    )
    assert str(analyze_text(tmp_path, _UNRESOLVED + done).category) == "none"
