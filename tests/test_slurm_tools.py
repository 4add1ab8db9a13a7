"""The SLURM tools' pieces that need no cluster: hostlists, job records, verdict reading, templates,
and an epilog that must exit 0 whatever happens (the real-cluster tests are test_slurm_ops.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from firstfault.parse.slurm import expand_hostlist
from firstfault.slurm.hostlist import compress_hostlist
from firstfault.slurm.jobs import ExitCode, JobState, ended_badly, job_from_fields, job_state, parse_show_job
from firstfault.slurm.monitor import check_template, follower_argv
from firstfault.slurm.operator import drain_command, exclude_list, parse_verdict_text

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("hosts", "want"),
    [
        (["node03", "node01", "node02", "node07", "node02"], "node[01-03,07]"),
        (["node9", "node10"], "node[9-10]"),
        (["n5"], "n5"),
        (["gpu-b2", "gpu-a1", "gpu-a2", "login"], "gpu-a[1-2],gpu-b2,login"),
        ([], ""),
    ],
)
def test_compress_hostlist_round_trips(hosts: list[str], want: str) -> None:
    assert compress_hostlist(hosts) == want
    assert sorted(expand_hostlist(want)) == sorted(set(hosts))


def test_show_job_line_with_spaces_in_paths() -> None:
    line = (
        "JobId=42 JobName=train UserId=alice(1000) JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0 "
        "Partition=gpu NodeList=node[01-02] BatchHost=node01 WorkDir=/home/alice/my runs "
        "StdOut=/home/alice/my runs/42/slurm-42.out Power="
    )
    job = job_from_fields(parse_show_job(line))
    assert (job.job_id, job.user, job.partition, job.nodes, job.batch_host) == (
        "42",
        "alice",
        "gpu",
        "node[01-02]",
        "node01",
    )
    assert job.state is JobState.FAILED and job.exit_code == ExitCode(1, 0)
    assert job.bundle == Path("/home/alice/my runs/42")


def test_which_endings_are_failures() -> None:
    assert job_state("CANCELLED by 0") is JobState.CANCELLED and job_state("SUSPENDED") is JobState.OTHER
    for state in (JobState.FAILED, JobState.NODE_FAIL, JobState.TIMEOUT, JobState.OUT_OF_MEMORY):
        assert ended_badly(state, ExitCode(0, 0))
    assert not ended_badly(JobState.COMPLETED, ExitCode(0, 0))
    assert not ended_badly(JobState.CANCELLED, ExitCode(0, 15))  # an owner's scancel is an intent
    assert ended_badly(JobState.COMPLETING, ExitCode(1, 0)) and ended_badly(JobState.OTHER, ExitCode(0, 9))
    assert not ended_badly(JobState.COMPLETING, None)
    assert ExitCode.parse("x:1") is None and ExitCode.parse("") is None


def _verdict(action: str, hosts: list[str], job: str = "j1") -> dict[str, object]:
    return {
        "tool": "firstfault",
        "verdict": {"category": "gpu_hardware", "action": action, "culprit": {"hosts": hosts}},
        "inputs": {"job": job},
    }


def test_exclude_list_takes_machine_blames_and_lemons() -> None:
    got = exclude_list(
        [
            _verdict("exclude_and_restart", ["node07", "node01"]),
            _verdict("restart", ["node02"]),  # the job's own failure: its host is not excluded
            _verdict("exclude_and_restart", ["node03"], job="j2"),
        ],
        lemons=["node02", "node01"],
    )
    assert got.hostlist == "node[01-03,07]"
    assert got.why["node02"] == "lemon node in the fleet history"
    cmd = drain_command(got)
    assert cmd[:4] == ["scontrol", "update", "NodeName=node[01-03,07]", "State=DRAIN"]
    assert cmd[4] == "Reason=firstfault: gpu_hardware in job j1 (+3 more)"


def test_verdict_text_json_or_lines() -> None:
    a, b = _verdict("restart", []), _verdict("exclude_and_restart", ["n1"])
    assert parse_verdict_text(json.dumps(a, indent=1)) == a
    assert parse_verdict_text(f"{json.dumps(a)}\nnot json\n{json.dumps(b)}\n") == b  # the last one counts
    assert parse_verdict_text("firstfault: no verdict") is None


def test_follower_template() -> None:
    argv = follower_argv("firstfault watch {workdir} --jsonl {out}", {"workdir": "/a b/c", "out": "/o/j.jsonl"})
    assert argv == [sys.executable, "-m", "firstfault.cli", "watch", "/a b/c", "--jsonl", "/o/j.jsonl"]
    assert follower_argv("tail -F '{stdout}'", {"stdout": "/x/it's.out"}) == ["tail", "-F", "/x/it's.out"]
    with pytest.raises(ValueError, match="placeholders"):
        check_template("firstfault watch {dir}")
    with pytest.raises(ValueError):
        check_template("")


def test_epilog_exits_zero_without_slurm(tmp_path: Path) -> None:
    """No SLURM client on the PATH, no job id, a log that cannot be written: exit 0 every time."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": str(tmp_path)}
    env.pop("SLURM_JOB_ID", None)
    cli = [sys.executable, "-m", "firstfault.cli", "slurm", "epilog"]
    log = tmp_path / "epilog.log"
    res = subprocess.run([*cli, "--log", str(log)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "skipped: no job id" in res.stdout
    res = subprocess.run([*cli, "17", "--log", str(log)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "failed: scontrol not found" in res.stdout
    assert "job 17: failed: scontrol not found" in log.read_text()
    unwritable = str(tmp_path / "no" / "such" / "dir.log")
    res = subprocess.run([*cli, "17", "--log", unwritable], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0


def _incident_verdict(job: str, host: str, ts: float) -> dict[str, object]:
    v = _verdict("exclude_and_restart", [host], job=job)
    v["verdict"]["confidence"] = 0.9  # type: ignore[index]
    v["verdict"]["summary"] = ""  # type: ignore[index]
    v["root_event"] = {"signature": "kernel.xid.exclude", "timestamp": ts, "host": host}
    v["inputs"] = {"job": job, "job_window": {"end": ts}}
    return v


def test_exclude_command_adds_the_fleets_lemons(tmp_path: Path) -> None:
    """A store where node07 failed ten jobs among 60 hosts that failed once: node07 is a lemon and
    joins the verdict's node02 in the exclude list; the drain stays a dry run."""
    from firstfault.fleet.incident import incident_from_verdict
    from firstfault.fleet.store import Store

    t0 = 1_767_225_600.0
    rows = [_incident_verdict(f"j{i}", f"h{i:03d}", t0 + i * 3600) for i in range(60)]
    rows += [_incident_verdict(f"n{i}", "node07", t0 + i * 7200) for i in range(10)]
    with Store(tmp_path / "s.duckdb") as store:
        store.add(incident_from_verdict(v, job="?", source="t", added_at=0.0) for v in rows)
    verdict = tmp_path / "v.json"
    verdict.write_text(json.dumps(_verdict("exclude_and_restart", ["node02"], job="big")), encoding="utf-8")
    cli = [sys.executable, "-m", "firstfault.cli", "slurm", "exclude", str(verdict)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([*cli, "--store", str(tmp_path / "s.duckdb")], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "exclude: node[02,07]" in res.stdout
    assert "dry run (add --drain to run it): scontrol update 'NodeName=node[02,07]' State=DRAIN" in res.stdout
    assert "'Reason=firstfault: gpu_hardware in job big (+1 more)'" in res.stdout
    bad = subprocess.run([*cli, "--store", str(tmp_path / "none.duckdb")], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "no incident store yet" in bad.stderr


def _python_for_nobody() -> str | None:
    """An interpreter the user nobody may run, for this venv's packages (the venv's own may live
    under a home only root can enter, as on the test machine: then the system's same version)."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    for exe in (sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        ok = subprocess.run(["runuser", "-u", "nobody", "--", exe, "-c", "pass"], capture_output=True, timeout=60)
        if ok.returncode == 0:
            return exe
    return None


OWNER_SCRIPT = """
import json, sys
from pathlib import Path
from firstfault.slurm.epilog import analyze_here
out = {}
for job, name in (("7", "mine"), ("8", "roots")):
    r = analyze_here(job, Path(sys.argv[1]) / name, "FAILED", 120, owner=(65534, 65534))
    out[name] = [str(r.outcome), r.detail, str(r.verdict) if r.verdict else None]
print(json.dumps(out))
"""


def test_epilog_analysis_runs_with_the_job_owners_rights() -> None:
    """As root (slurmd), the analysis runs as the job's owner (nobody here): a bundle it may read is
    analysed and the verdict is the owner's; a bundle only root may read is not read at all."""
    import site
    import tempfile

    exe = _python_for_nobody()
    if exe is None:
        pytest.skip("needs root, runuser and a Python interpreter the user nobody may run")
    bundle = ROOT / "examples" / "bundles" / "hang_4rank"
    base = Path(tempfile.mkdtemp(prefix="ffepilog-", dir="/tmp"))
    try:
        base.chmod(0o755)
        shutil.copytree(bundle, base / "mine")
        os.chown(base / "mine", 65534, 65534)  # the owner's folder: the verdict is written there
        shutil.copytree(bundle, base / "roots")
        (base / "roots").chmod(0o700)  # root's own folder: the owner's analysis may not read it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *site.getsitepackages()])}
        res = subprocess.run([exe, "-c", OWNER_SCRIPT, str(base)], env=env, capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, res.stderr
        got = json.loads(res.stdout)
        assert got["mine"][0] == "analyzed", got
        verdict = Path(got["mine"][2])
        assert (verdict.stat().st_uid, verdict.stat().st_gid) == (65534, 65534)
        assert json.loads(verdict.read_text())["verdict"]["culprit"]["ranks"] == [2]
        assert got["roots"][0] == "failed" and "analyze exited 2" in got["roots"][1], got
        assert "is not readable" in got["roots"][1]
        assert not list((base / "roots").glob("firstfault-verdict-*"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
