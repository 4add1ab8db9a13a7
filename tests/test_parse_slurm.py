"""SLURM parsers and signatures on text real SLURM printed.

The bundles under tests/fixtures/slurm/ were produced by real Debian slurm-wlm 22.05.8 daemons
(`firstfault simulate slurm`); tests/fixtures/slurm/README.md says how each one was made.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import firstfault.parse.slurm  # noqa: F401  (registers the slurm_output parser)
from firstfault.discover import discover, sniff_kind
from firstfault.match.registry import load_file, load_registry
from firstfault.parse.run import parse_bundle
from firstfault.parse.slurm import (
    MAX_HOSTS,
    expand_hostlist,
    expand_tasks,
    expand_tasks_per_node,
    job_layout,
    learn_topology,
    parse_sacct,
    parse_scontrol_job,
    parse_scontrol_jobs,
)
from firstfault.vocab import Event
from firstfault.vocab.topology import Topology

FIX = Path(__file__).parent / "fixtures" / "slurm"
SIGS = Path(__file__).resolve().parent.parent / "firstfault" / "signatures" / "slurm.toml"


def _events(bundle: Path) -> tuple[list[Event], Topology]:
    res = parse_bundle(discover(bundle), load_registry())
    return [e for e in res.events if e.signature.startswith("slurm")], res.ctx.topology


def _out(bundle: Path) -> str:
    """The job output file's name (slurm-<jobid>.out)."""
    return next(bundle.glob("slurm-*.out")).name


def _by_sig(events: list[Event], sig: str, source: str | None = None) -> list[Event]:
    return [e for e in events if e.signature == sig and (source is None or e.source.endswith(source))]


# --------------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(
    ("expr", "hosts"),
    [
        ("node[001-004,007]", ["node001", "node002", "node003", "node004", "node007"]),
        ("gpu-a[1-2]-b[3,5]", ["gpu-a1-b3", "gpu-a1-b5", "gpu-a2-b3", "gpu-a2-b5"]),
        ("node[01-02]", ["node01", "node02"]),
        ("node01", ["node01"]),
        ("n1,n2", ["n1", "n2"]),
        ("node[01-02],gpu[1-2]", ["node01", "node02", "gpu1", "gpu2"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("nid00[5475-5476]", ["nid005475", "nid005476"]),
        ("(null)", []),
        ("None assigned", []),
        ("", []),
    ],
)
def test_expand_hostlist(expr: str, hosts: list[str]) -> None:
    assert expand_hostlist(expr) == hosts


@pytest.mark.parametrize("expr", ["node[1-", "node[a-b]", "node]1[", "node[3-1]", "[[[", "node[1-2"])
def test_expand_hostlist_malformed_never_raises(expr: str) -> None:
    assert expand_hostlist(expr) == [expr]


def test_expand_hostlist_refuses_a_bomb() -> None:
    got = expand_hostlist("node[0-999999999]")
    assert got == ["node[0-999999999]"]
    assert len(expand_hostlist("a[0-9999],b[0-9999],c[0-99999]")) <= MAX_HOSTS


def test_task_lists() -> None:
    assert expand_tasks("0-2,5") == [0, 1, 2, 5]
    assert expand_tasks("3") == [3]
    assert expand_tasks("x,2-1,4") == [4]
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("1(x2)") == [1, 1]
    assert expand_tasks_per_node("two") == []


# --------------------------------------------------------------------------- scontrol / sacct


def test_scontrol_show_job_real() -> None:
    job = parse_scontrol_job((FIX / "node_failure" / "scontrol_show_job.txt").read_text())
    assert job["JobState"] == "NODE_FAIL"
    assert job["Reason"] == "NodeDown"
    assert job["ExitCode"] == "1:0"
    assert job["NodeList"] == "node[01-02]"
    assert job["BatchHost"] == "node01"
    assert job["NumNodes"] == "2"
    assert job["NumTasks"] == "4"
    assert job["StartTime"].startswith("20") and job["EndTime"].startswith("20")
    assert job["AllocNode:Sid"]  # keys keep SLURM's spelling
    assert job_layout(job) == {0: "node01", 1: "node01", 2: "node02", 3: "node02"}


def test_scontrol_time_limit_and_cancel_real() -> None:
    tl = parse_scontrol_job((FIX / "time_limit" / "scontrol_show_job.txt").read_text())
    assert (tl["JobState"], tl["Reason"], tl["TimeLimit"]) == ("TIMEOUT", "TimeLimit", "00:01:00")
    cancel = parse_scontrol_job((FIX / "scancel" / "scontrol_show_job.txt").read_text())
    assert cancel["JobState"] == "CANCELLED"
    assert cancel["ExitCode"] == "0:15"


def test_scontrol_values_with_spaces_and_several_jobs() -> None:
    text = (FIX / "node_failure" / "scontrol_show_job.txt").read_text()
    jobs = parse_scontrol_jobs(text + "\n" + (FIX / "scancel" / "scontrol_show_job.txt").read_text())
    assert [j["JobState"] for j in jobs] == ["NODE_FAIL", "CANCELLED"]
    assert parse_scontrol_job("no key value pairs here") == {}


def test_sacct_parsable2_real() -> None:
    rows = parse_sacct((FIX / "time_limit" / "sacct.txt").read_text())
    assert len(rows) == 1
    assert rows[0]["State"] == "TIMEOUT"
    assert rows[0]["NodeList"] == "node01"
    assert rows[0]["Elapsed"].startswith("00:01:")
    rows = parse_sacct((FIX / "torch_exception_srun" / "sacct.txt").read_text())
    assert (rows[0]["State"], rows[0]["ExitCode"]) == ("FAILED", "1:0")


def test_sacct_variants() -> None:
    parsable = "JobID|JobName|State|ExitCode|\n7|train|CANCELLED by 0|0:15|\n7.batch|batch|CANCELLED|0:15|\n"
    rows = parse_sacct(parsable)
    assert [r["JobID"] for r in rows] == ["7", "7.batch"]
    assert rows[0]["State"] == "CANCELLED by 0"
    assert parse_sacct("7|train|FAILED|1:0\n") == []  # no header: columns unknown
    assert parse_sacct("JobID|State\n9\n") == [{"JobID": "9", "State": ""}]


# --------------------------------------------------------------------------- signatures


def test_every_slurm_example_matches_its_own_signature() -> None:
    reg = load_registry()
    for sig in load_file(SIGS):
        assert sig.source and sig.examples, sig.id
        for ex in sig.examples:
            assert any(lit in ex for lit in sig.literals), (sig.id, ex)
            got = reg.match(ex, "slurm_output")
            assert got is not None and got.id == sig.id, (sig.id, got and got.id, ex)


def test_cancelled_variants_do_not_shadow_each_other() -> None:
    reg = load_registry()
    base = "slurmstepd: error: *** JOB 123 ON node01 CANCELLED AT 2026-12-02T14:31:33"
    cases = {
        base + " ***": ("slurm.cancelled", "cancelled"),
        base + " DUE TO TIME LIMIT ***": ("slurm.cancelled_time_limit", "time_limit"),
        base + " DUE TO PREEMPTION ***": ("slurm.cancelled_preemption", "preemption"),
        base + " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***": (
            "slurm.cancelled_node_failure",
            "node_failure",
        ),
        base.replace("JOB 123", "STEP 123.0") + " ***": ("slurm.cancelled", "cancelled"),
    }
    for line, (sid, reason) in cases.items():
        sig = reg.match(line, "slurm_output")
        assert sig is not None and sig.id == sid, line
        assert sig.sets["reason"] == reason


# --------------------------------------------------------------------------- whole bundles


def test_discover_sniffs_every_slurm_artefact() -> None:
    kinds = {f.rel: f.kind for f in discover(FIX / "node_failure").files}
    names = (
        _out(FIX / "node_failure"),
        "scontrol_show_job.txt",
        "sacct.txt",
        "slurmctld.log",
        "host-node01/slurmd.log",
    )
    for rel in names:
        assert kinds[rel] == "slurm_output", rel
    assert sniff_kind("slurm-12345.out", b"just the job's own output\n") == "slurm_output"


def test_torch_exception_under_srun() -> None:
    events, topo = _events(FIX / "torch_exception_srun")
    assert topo.rank_host == {0: "node01", 1: "node01", 2: "node02", 3: "node02"}
    exits = _by_sig(events, "slurm.task_exit", ".out")
    first = exits[0]
    assert (first.host, first.rank, first.fields["exitcode"]) == ("node01", 1, "1")  # the culprit
    assert {(e.host, e.rank) for e in exits} == {("node01", 0), ("node01", 1), ("node02", 2), ("node02", 3)}
    states = {e.source: e.fields["job_state"] for e in events if e.signature == "slurm.job_state_failed"}
    assert set(states.values()) == {"FAILED"} and len(states) == 2  # scontrol and sacct
    assert _by_sig(events, "slurmctld.job_complete_fail")[0].fields["exit_code"] == "1"


def test_time_limit() -> None:
    events, _ = _events(FIX / "time_limit")
    tl = _by_sig(events, "slurm.cancelled_time_limit", ".out")
    assert {e.fields["entity"] for e in tl} == {"JOB", "STEP"}
    assert all(e.host == "node01" and e.rank is None and e.ts_quality == "exact" for e in tl)
    assert _by_sig(events, "slurmctld.time_limit")[0].fields["reason"] == "time_limit"
    assert {e.fields["job_state"] for e in _by_sig(events, "slurm.job_state_timeout")} == {"TIMEOUT"}
    term = _by_sig(events, "slurm.task_terminated")
    assert term and term[0].host == "node01" and term[0].fields["tasks"] == "0-1"


def test_scancel() -> None:
    events, _ = _events(FIX / "scancel")
    cancelled = _by_sig(events, "slurm.cancelled", ".out")
    assert cancelled and all(e.fields["reason"] == "cancelled" and e.host == "node01" for e in cancelled)
    req = _by_sig(events, "slurmctld.kill_job_request")
    assert req and req[0].fields["uid"] == "0"
    assert _by_sig(events, "slurm.job_state_cancelled")
    assert not _by_sig(events, "slurm.cancelled_time_limit")


def test_node_failure() -> None:
    events, topo = _events(FIX / "node_failure")
    srun = _by_sig(events, "slurm.node_failure_srun")
    assert [(e.host, e.fields["failed_node"]) for e in srun] == [("node02", "node02")]
    ctld = _by_sig(events, "slurmctld.kill_on_failed_node")
    assert ctld and ctld[0].fields["failed_node"] == "node02"
    assert _by_sig(events, "slurmctld.node_not_responding")[0].fields["failed_node"] == "node02"
    # slurmstepd reports it from the surviving node: host is the reporter
    stepd = _by_sig(events, "slurm.cancelled_node_failure", ".out")
    assert stepd and stepd[0].host == "node01"
    assert {e.fields["job_state"] for e in _by_sig(events, "slurm.job_state_node_fail")} == {"NODE_FAIL"}
    # the surviving ranks exited after their peers vanished
    assert {e.host for e in _by_sig(events, "slurm.task_exit")} == {"node01"}
    assert topo.rank_host[2] == "node02"


def test_torchrun_under_srun_labels_are_agents() -> None:
    bundle = FIX / "torch_exception_torchrun"
    res = parse_bundle(discover(bundle), load_registry())
    # srun task ids are the two torchrun agents, not ranks: no rank->host from the labels
    out = next(f for f in discover(bundle).files if f.rel.startswith("slurm-"))
    assert out.kind == "slurm_output"
    rank_events = [e for e in res.events if e.source == out.rel and e.rank is not None]
    assert rank_events, "the [rankN]: lines still give ranks"
    for e in rank_events:
        assert e.host == ("node01" if e.rank in (0, 1) else "node02"), (e.rank, e.host, e.text)


def test_learn_topology_from_env_echo_and_exits() -> None:
    topo = Topology()
    got = learn_topology(
        [
            "SLURM_JOB_ID=9 SLURM_JOB_NODELIST=gpu[1-2] SLURM_NTASKS=4 SLURM_TASKS_PER_NODE=2(x2)",
            "srun: error: gpu2: task 3: Exited with exit code 1",
        ],
        topo,
    )
    assert got == {0: "gpu1", 1: "gpu1", 2: "gpu2", 3: "gpu2"}
    assert topo.world_size == 4
    # a conflicting exact statement wins over the block inference
    got = learn_topology(
        ["SLURM_JOB_NODELIST=a[1-2] SLURM_TASKS_PER_NODE=2(x2)", "srun: error: a2: task 0: Killed"],
        Topology(),
    )
    assert got[0] == "a2"


def test_wide_job_padded_labels() -> None:
    events, topo = _events(FIX / "wide_labels")
    exits = _by_sig(events, "slurm.task_exit")
    assert [(e.rank, e.host, e.fields["exitcode"]) for e in exits] == [(11, "node02", "7")]
    assert len(topo.rank_host) == 12


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\xff\xfe" * 1000,
        b"srun: error: node01: tasks 0-: Exited with exit code \n" + b"\xff" * 100,
        b"JobId=1 JobName=x\n   JobState=TIMEOUT Reason=",
        b"JobID|State\n" + b"|" * 200_000 + b"\n1|TIMEOUT|\n",
        b"SLURM_JOB_NODELIST=node[0-999999999] SLURM_TASKS_PER_NODE=9999999(x9999999)\n"
        b"    12: srun: error: node[: task 1: Killed\n",
        b"[2026-13-45T99:99:99.000] Killing JobId=4 on failed node node02\n",
    ],
)
def test_bad_input_never_crashes(tmp_path: Path, payload: bytes) -> None:
    (tmp_path / "slurm-1.out").write_bytes(payload)
    (tmp_path / "sacct.txt").write_bytes(payload)
    parse_bundle(discover(tmp_path), load_registry())


def test_admin_marks_node_down() -> None:
    """`scontrol update nodename=node02 state=down reason=ff-test` while a 2-node job runs."""
    events, _ = _events(FIX / "admin_down")
    down = _by_sig(events, "slurmctld.node_set_down")
    assert [(e.fields["failed_node"], e.fields["node_state"]) for e in down] == [("node02", "DOWN")]
    assert _by_sig(events, "slurmctld.node_reason")[0].fields["node_reason"] == "ff-test"
    assert _by_sig(events, "slurmctld.kill_on_failed_node")[0].fields["failed_node"] == "node02"
    assert _by_sig(events, "slurm.node_failure_srun")[0].host == "node02"
    stepd = _by_sig(events, "slurm.cancelled_node_failure")
    assert {e.fields["entity"] for e in stepd} == {"JOB", "STEP"} and {e.host for e in stepd} == {"node01"}
