"""JAX's multi-controller runtime (signatures/jax.toml): its start-up lines make a paste a job's log,
and a surviving process's report of a dead peer names that peer.

The lines are JAX's own: the fault-tolerance guide (jax-ml/jax docs/fault_tolerance.rst) prints
what the other processes say when process 3 of four is killed, and jax-ml/jax PR 8364 pasted a
two-host ``jax.distributed.initialize`` run that shut down cleanly.
"""

from __future__ import annotations

from pathlib import Path

from tests.paste_text import analyze_text

PEER_DIED = [
    "E0926 17:26:32.075402  157988 coordination_service_agent.cc:332] Polled an error from coordination service "
    "(this can be an error from this or another task).",
    "F0926 17:26:32.075587  157988 client.h:77] Terminating process because the JAX distributed service detected "
    "fatal errors. This most likely indicates that another task died; see the other task logs for more details. "
    "Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: "
    "UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
    "/job:jax_worker/replica:0/task:3",
    "The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, "
    "eviction) to debug further.",
]

HEALTHY_8364 = [
    "2021-10-26 01:19:17.133471: I external/org_tensorflow/tensorflow/compiler/xla/pjrt/distributed/service.cc:369] "
    "Jax service listening on 10.128.0.47:1456",
    "2021-10-26 01:19:28.339404: I external/org_tensorflow/tensorflow/compiler/xla/pjrt/distributed/client.cc:129] "
    "Connected to distributed JAX controller",
    "2021-10-26 01:19:28.376179: I external/org_tensorflow/tensorflow/compiler/xla/pjrt/distributed/client.cc:180] "
    "Distributed task shutdown result: OK",
]


def test_a_peers_report_of_a_task_that_stopped_heartbeating_names_that_task(tmp_path: Path) -> None:
    """The line naming the dead task comes after the earliest error: the report is still the
    victims' account of whom they lost, and the task is JAX process 3."""
    v = analyze_text(tmp_path, "\n".join(PEER_DIED) + "\n")
    assert str(v.category) == "process_crash"
    assert v.culprit.ranks == [3]
    assert any("names rank(s) 3" in r for r in v.reasons)


def test_the_runtimes_start_up_lines_make_a_paste_a_jobs_log(tmp_path: Path) -> None:
    """Not refused as "not a training job", and nothing in it is a failure."""
    v = analyze_text(tmp_path, "\n".join(HEALTHY_8364) + "\n")
    assert str(v.category) == "none"
