"""firstfault slurm against a real SLURM: the epilog hook, the monitor, the hostlist, the drain.

One cluster (munged, slurmctld, two slurmds, ``Epilog=`` a wrapper running ``firstfault slurm
epilog``) for the module. The jobs are small shell jobs under ``srun -l`` whose one task raises
in Python: real SLURM and real Python print every line, and no torch is needed, so the module
runs in about 35 s. The epilog is tried in both modes (verdict written locally, bundle
submitted to a real ``firstfault serve``, server down) and as an ``strigger --fini`` program,
``firstfault slurm monitor`` follows a running job with ``firstfault analyze``, and a node of the
cluster is drained and resumed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from firstfault_sim.ports import free_ports
from firstfault_sim.slurm_cluster import APT_PACKAGES, SlurmCluster, missing_binaries

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
# one task raises (the simulator workload's own exception fault, firstfault_sim/workload.py), as a
# training rank would; srun then prints its own "error: node01: task 0: Exited with exit code 1"
TASK = """import os, time
rank = int(os.environ["SLURM_PROCID"])
print(f"step 1 loss 2.5 rank {rank}", flush=True)
if rank == int(os.environ.get("FAIL_RANK", "0")):
    raise RuntimeError("expert capacity exceeded: expert 3 was routed 40 tokens")
time.sleep(2)
"""
MARK = "expert capacity exceeded"


def _skip_reason() -> str | None:
    miss = missing_binaries()
    if miss:
        return f"SLURM not installed ({', '.join(miss)} missing; apt-get install {' '.join(APT_PACKAGES)})"
    if os.geteuid() != 0:
        return "the single-host cluster runs slurmd as root"
    if subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode != 0:
        return "cannot create UTS namespaces (unshare -u), which the simulated nodes need"
    return None


@dataclass
class Ops:
    cluster: SlurmCluster
    root: Path
    log: Path
    env_file: Path

    def job(self, name: str, body: str, nodes: int = 1) -> tuple[int, Path]:
        """Submit a batch job whose output lands in its own folder under ``root/jobs``."""
        folder = self.root / "jobs" / name
        folder.mkdir(parents=True)
        (folder / "task.py").write_text(TASK, encoding="utf-8")
        body = body.replace("TASK", f"{sys.executable} {folder / 'task.py'}")
        script = folder / "job.sbatch"
        script.write_text(
            f"#!/bin/bash\n#SBATCH --job-name={name} --nodes={nodes} --ntasks-per-node=1 --no-requeue\n"
            f"#SBATCH --output={folder}/slurm-%j.out\n{body}\n",
            encoding="utf-8",
        )
        return self.cluster.sbatch(script), folder

    def epilog_lines(self, job_id: int) -> list[str]:
        text = self.log.read_text(encoding="utf-8") if self.log.exists() else ""
        return [ln for ln in text.splitlines() if f" job {job_id}: " in ln]

    def wait_epilog(self, job_id: int, word: str, bound_s: float = 90) -> str:
        """The epilog's log line for the job that says ``word`` (the bound only stops a broken run)."""
        end = time.monotonic() + bound_s
        while time.monotonic() < end:
            hit = [ln for ln in self.epilog_lines(job_id) if f": {word}: " in ln]
            if hit:
                return hit[0]
            time.sleep(0.3)
        raise AssertionError(f"no '{word}' epilog line for job {job_id}: {self.epilog_lines(job_id)}")


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("slurm-ops")
    (root / "jobs").mkdir()
    wrapper, log, env_file = root / "epilog.sh", root / "epilog.log", root / "epilog.env"
    with SlurmCluster(nodes=2, epilog=wrapper) as c, pytest.MonkeyPatch.context() as mp:
        # what an admin's Epilog= wrapper does: the settings, then the hook (slurmd gives a bare env)
        wrapper.write_text(
            f"#!/bin/sh\n[ -f {env_file} ] && . {env_file}\n"
            f"exec env SLURM_CONF={c.conf} PYTHONPATH={ROOT} {sys.executable} -m firstfault.cli "
            f"slurm epilog --log {log} --budget-s 60\n",
            encoding="utf-8",
        )
        wrapper.chmod(0o755)
        mp.setenv("SLURM_CONF", str(c.conf))
        yield Ops(c, root, log, env_file)


def test_hostlist_matches_real_scontrol(ops: Ops) -> None:
    from firstfault.slurm.hostlist import compress_hostlist

    cases = [
        ["node01", "node02", "node03", "node07"],
        ["node9", "node10", "node11"],
        ["gpu-a1", "gpu-a2", "login"],
        ["n001", "n002", "n010", "m5"],
        ["node1", "node01", "node2"],
    ]
    for hosts in cases:
        ours = compress_hostlist(hosts)
        names = ops.cluster.client("scontrol", "show", "hostnames", ours).stdout.split()
        assert sorted(names) == sorted(hosts), (hosts, ours)
    # on one width per prefix, the very string SLURM writes for the same (sorted) names
    for hosts in cases[:4]:
        ordered = ",".join(sorted(hosts, key=lambda h: (h.rstrip("0123456789"), len(h), h)))
        real = ops.cluster.client("scontrol", "show", "hostlist", ordered).stdout.strip()
        assert compress_hostlist(hosts) == real, (hosts, real)


def test_epilog_writes_verdict_of_failed_job_and_skips_healthy(ops: Ops) -> None:
    bad, bad_dir = ops.job("fails", "FAIL_RANK=1 srun -l TASK", nodes=2)
    good, _ = ops.job("passes", "srun -l true")
    line = ops.wait_epilog(bad, "analyzed")
    assert "FAILED exit 1:0" in line
    # slurmd runs the epilog on both nodes; only the batch host acts
    ops.wait_epilog(bad, "skipped")
    verdict = json.loads((bad_dir / f"firstfault-verdict-{bad}.json").read_text())
    assert verdict["tool"] == "firstfault"
    assert verdict["verdict"]["culprit"]["ranks"] == [1] and verdict["verdict"]["culprit"]["hosts"] == ["node02"]
    assert MARK in verdict["root_event"]["text"]
    healthy = ops.wait_epilog(good, "skipped")
    assert "COMPLETED" in healthy and "nothing to analyse" in healthy
    assert ops.cluster.wait_done(good, 60) == "COMPLETED" and ops.cluster.wait_done(bad, 60) == "FAILED"
    assert "DRAIN" not in ops.cluster.client("sinfo", "-h", "-o", "%T").stdout.upper()  # the hook exited 0


def _serve(ops: Ops) -> tuple[subprocess.Popen[bytes], str, str]:
    data = ops.root / "service"
    cli = [sys.executable, "-m", "firstfault.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    token = subprocess.run(
        [*cli, "serve", "token", "add", "slurm", "--data", str(data)], env=env, capture_output=True, text=True
    ).stdout.strip()
    port = free_ports(1)[0]
    log = open(ops.root / "serve.log", "wb")  # noqa: SIM115 - the server's whole life
    proc = subprocess.Popen(
        [*cli, "serve", "--data", str(data), "--port", str(port), "--allow-root", str(ops.root / "jobs")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    return proc, f"http://127.0.0.1:{port}", token


def test_epilog_submits_to_a_running_server(ops: Ops) -> None:
    import httpx

    proc, url, token = _serve(ops)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        ops.env_file.write_text(f"export FIRSTFAULT_SERVER={url}\nexport FIRSTFAULT_TOKEN={token}\n")
        job_id, folder = ops.job("served", "srun -l TASK")
        line = ops.wait_epilog(job_id, "submitted")
        server_job = line.rsplit(" as job ", 1)[1].strip()
        headers = {"Authorization": f"Bearer {token}"}
        end = time.monotonic() + 90
        while time.monotonic() < end:
            job = httpx.get(f"{url}/v1/jobs/{server_job}", headers=headers, timeout=10).json()
            if job["state"] in ("done", "refused", "failed"):
                break
            time.sleep(0.3)
        assert job["state"] == "done" and job["target"] == str(folder)
        assert MARK in job["verdict"]["root_event"]["text"]
        assert not (folder / f"firstfault-verdict-{job_id}.json").exists()  # the server has it, not the folder
    finally:
        ops.env_file.unlink(missing_ok=True)
        proc.terminate()
        proc.wait(timeout=30)


def test_epilog_with_the_server_down_analyzes_here_and_exits_zero(ops: Ops) -> None:
    port = free_ports(1)[0]  # nothing listens there
    ops.env_file.write_text(f"export FIRSTFAULT_SERVER=http://127.0.0.1:{port}\nexport FIRSTFAULT_TOKEN=ff_x\n")
    try:
        job_id, folder = ops.job("unserved", "srun -l TASK")
        line = ops.wait_epilog(job_id, "analyzed")
    finally:
        ops.env_file.unlink(missing_ok=True)
    # the verdict is not lost: made here, next to the job's output, when the server cannot take it
    assert "unreachable" in line and (folder / f"firstfault-verdict-{job_id}.json").exists()
    # an epilog that exits non-zero drains the node; this one logged and exited 0
    assert ops.cluster.wait_done(job_id, 60) == "FAILED"  # COMPLETING until every epilog has exited
    assert "DRAIN" not in ops.cluster.client("sinfo", "-h", "-o", "%T").stdout.upper()


def _wait_for(what: str, check: Callable[[], bool], bound_s: float = 90) -> None:
    """Poll ``check()`` until true (the bound only stops a broken run)."""
    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"never {what}")


def test_monitor_follows_a_running_job(ops: Ops) -> None:
    out = ops.root / "monitor"
    lines = ops.root / "monitor.jsonl"
    cli = [sys.executable, "-m", "firstfault.cli", "slurm", "monitor", "--out", str(out)]
    opts = ["--template", "firstfault analyze {workdir} --json", "--poll-s", "0.5", "--settle-s", "0.5"]
    with open(lines, "wb") as fh, open(ops.root / "monitor.err", "wb") as err:
        proc = subprocess.Popen([*cli, *opts], stdout=fh, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        # the rank fails at once; the job runs on for a while, as a job whose watchdog has not fired yet
        job_id, folder = ops.job("followed", "srun -l TASK\nsleep 6\nexit 1")
        _wait_for("a report of the job", lambda: f'"job": "{job_id}"' in lines.read_text())
    finally:
        proc.terminate()  # SIGTERM: the monitor stops its followers and exits
        assert proc.wait(timeout=60) == 0
    assert f"job {job_id}: following {folder}" in (ops.root / "monitor.err").read_text()
    (report,) = [json.loads(ln) for ln in lines.read_text().splitlines() if f'"job": "{job_id}"' in ln]
    assert report["state"] == "FAILED" and report["exit_code"] == "1:0" and report["follower_rc"] == 0
    assert "expert capacity exceeded" in report["summary"]  # analyze's verdict, made while the job ran
    assert (out / f"job-{job_id}.stdout").stat().st_size > 0


def test_strigger_fini_program(ops: Ops) -> None:
    """The same hook as an ``strigger --fini`` program: slurmctld runs it with the job id as argument."""
    log = ops.root / "trigger.log"
    program = ops.root / "trigger.sh"
    program.write_text(
        f"#!/bin/sh\nexec env SLURM_CONF={ops.cluster.conf} PYTHONPATH={ROOT} {sys.executable} -m firstfault.cli "
        f'slurm epilog --log {log} --budget-s 60 "$@"\n',
        encoding="utf-8",
    )
    program.chmod(0o755)
    job_id, folder = ops.job("triggered", "sleep 2\nsrun -l TASK")
    ops.cluster.client("strigger", "--set", f"--jobid={job_id}", "--fini", f"--program={program}")
    # slurmctld looks at its triggers every 15 s
    _wait_for("the trigger's log line", lambda: log.exists() and f"job {job_id}: analyzed" in log.read_text())
    assert (folder / f"firstfault-verdict-{job_id}.json").exists()


def _show_node(ops: Ops, name: str) -> str:
    return ops.cluster.client("scontrol", "show", "node", name).stdout


def test_exclude_list_and_drain_a_real_node(ops: Ops, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "firstfault.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    files = []
    for name in ("node_failure", "admin_down"):  # real SLURM bundles whose verdicts blame node02
        out = subprocess.run([*cli, "analyze", str(FIXTURES / name), "--json"], env=env, capture_output=True)
        files.append(tmp_path / f"{name}.json")
        files[-1].write_bytes(out.stdout)
    dry = subprocess.run([*cli, "slurm", "exclude", *map(str, files)], env=env, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "exclude: node02" in dry.stdout
    assert "scontrol update NodeName=node02 State=DRAIN 'Reason=firstfault: scheduler in job node_failure" in dry.stdout
    assert "DRAIN" not in _show_node(ops, "node02")  # a dry run drains nothing
    real = subprocess.run(
        [*cli, "slurm", "exclude", *map(str, files), "--drain"], env=env, capture_output=True, text=True
    )
    try:
        assert real.returncode == 0, real.stderr
        shown = _show_node(ops, "node02")
        assert "State=IDLE+DRAIN" in shown and "Reason=firstfault: scheduler in job node_failure" in shown
        assert "DRAIN" not in _show_node(ops, "node01")
    finally:
        ops.cluster.client("scontrol", "update", "NodeName=node02", "State=RESUME")
    assert "DRAIN" not in _show_node(ops, "node02")


def test_free_ports_stay_out_of_the_kernels_ephemeral_range() -> None:
    """A rendezvous port chosen before its job starts must not be one the kernel hands to another
    socket meanwhile (srun's I/O sockets took the c10d store's port on a loaded machine)."""
    ports = free_ports(5)
    assert len(set(ports)) == 5
    start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if start > 20000 + 20:
        assert all(p < start for p in ports)
