"""``firstfault slurm``: the epilog hook, the job monitor and the operator's exclude/drain output.

Thin shells over :mod:`firstfault.slurm`; SLURM itself is reached only through its client
programs, so these commands need no extra beyond a SLURM client on the PATH.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from firstfault.cli.common import fail

#: the hook's time bound (firstfault.slurm.epilog.DEFAULT_BUDGET_S, not imported: --help stays light)
DEFAULT_BUDGET_S = 120.0

app = typer.Typer(help="SLURM integration: epilog hook, job monitor, exclude list and drain.", no_args_is_help=True)


def _token(token_file: Path | None) -> str | None:
    if token_file is not None:
        try:
            return token_file.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None
    return os.environ.get("FIRSTFAULT_TOKEN") or None


@app.command("epilog")
def epilog(
    job_id: Annotated[str | None, typer.Argument(help="The job (default: $SLURM_JOB_ID, as slurmd sets it)")] = None,
    server: Annotated[
        str | None,
        typer.Option(envvar="FIRSTFAULT_SERVER", help="URL of a running `firstfault serve`; none: analyse here"),
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="File holding the server's API token (else $FIRSTFAULT_TOKEN)")
    ] = None,
    budget_s: Annotated[float, typer.Option("--budget-s", help="Seconds the whole hook may take")] = DEFAULT_BUDGET_S,
    log: Annotated[
        Path,
        typer.Option(envvar="FIRSTFAULT_EPILOG_LOG", help="Where every outcome and error is logged"),
    ] = Path("/var/log/firstfault-slurm-epilog.log"),
    include_cancelled: Annotated[bool, typer.Option(help="Also analyse jobs that were cancelled")] = False,
) -> None:
    """Run as SLURM's Epilog or an strigger --fini program; always exits 0.

    A job that ended badly is submitted to the server, or analysed here with the verdict written
    next to its output."""
    from firstfault.slurm.epilog import EpilogConfig, run_epilog

    config = EpilogConfig(
        server=server,
        token=_token(token_file),
        budget_s=max(1.0, budget_s),
        log=log,
        include_cancelled=include_cancelled,
    )
    result = run_epilog(job_id, os.environ, config)
    print(f"firstfault slurm epilog: job {result.job_id or '?'}: {result.outcome}: {result.detail}")
    raise typer.Exit(0)


def _report_line(r: Any) -> dict[str, Any]:
    v = (r.verdict or {}).get("verdict") or {}
    return {
        "job": r.job_id,
        "state": str(r.state),
        "exit_code": f"{r.exit_code.code}:{r.exit_code.signal}" if r.exit_code else None,
        "follower_rc": r.follower_rc,
        "category": v.get("category"),
        "action": v.get("action"),
        "culprit_hosts": (v.get("culprit") or {}).get("hosts"),
        "summary": v.get("summary"),
        "out": str(r.out),
    }


@app.command("monitor")
def monitor(
    out: Annotated[Path, typer.Option("--out", help="Folder for the followers' output and the verdicts")] = Path(
        "firstfault-monitor"
    ),
    template: Annotated[
        str,
        typer.Option(help="Follower command; placeholders {job} {workdir} {stdout} {out} {nodes}"),
    ] = "firstfault watch {workdir} --jsonl {out}",
    user: Annotated[str | None, typer.Option(help="Only this user's jobs")] = None,
    partition: Annotated[str | None, typer.Option(help="Only this partition's jobs")] = None,
    poll_s: Annotated[float, typer.Option("--poll-s", help="Seconds between squeue sweeps")] = 5.0,
    settle_s: Annotated[float, typer.Option("--settle-s", help="Seconds a follower may finish after its job")] = 5.0,
    duration_s: Annotated[
        float | None, typer.Option("--duration-s", help="Stop after this many seconds (default: until Ctrl-C)")
    ] = None,
) -> None:
    """Follow every running job (squeue/scontrol) with a follower command.

    One JSON line per ended job on stdout (its state, the follower's verdict, culprit hosts), and
    the exclude list at the end."""
    from firstfault.slurm.monitor import Monitor, MonitorConfig
    from firstfault.slurm.operator import exclude_list

    if poll_s <= 0 or settle_s < 0:
        raise fail("--poll-s must be positive and --settle-s not negative")
    try:
        mon = Monitor(
            MonitorConfig(out, template, user, partition, poll_s, settle_s),
            say=lambda m: print(f"firstfault slurm monitor: {m}", file=sys.stderr, flush=True),
        )
    except (ValueError, OSError) as exc:
        raise fail(exc) from None
    verdicts: list[dict[str, Any]] = []

    def report(r: Any) -> None:
        if r.verdict is not None:
            verdicts.append(r.verdict)
        print(json.dumps(_report_line(r)), flush=True)

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C or SIGTERM: the followers are still stopped
        mon.run(duration_s, report)
    hosts = exclude_list(verdicts)
    if hosts.hosts:
        print(json.dumps({"exclude": hosts.hostlist}), flush=True)


@app.command("exclude")
def exclude(
    verdicts: Annotated[list[Path], typer.Argument(help="Verdict files: analyze --json output, or watch's JSON lines")],
    store: Annotated[
        str | None, typer.Option("--store", help="Incident store whose lemon hosts are added (fleet history)")
    ] = None,
    drain: Annotated[bool, typer.Option("--drain", help="Really drain the hosts (default: print the command)")] = False,
) -> None:
    """Hosts to exclude, in SLURM hostlist form, and the drain command (a dry run unless --drain).

    The hosts are those the verdicts blame (action exclude_and_restart), plus the fleet's lemon
    hosts with --store."""
    from firstfault.slurm.operator import drain as do_drain
    from firstfault.slurm.operator import drain_command, exclude_list, read_verdicts

    found = [v for p in verdicts for v in read_verdicts(p)]
    if not found:
        raise fail("no firstfault verdict in the files given")
    hosts = exclude_list(found, _lemons(store) if store else ())
    if not hosts.hosts:
        print("no host to exclude: no verdict blames a machine")
        return
    print(f"exclude: {hosts.hostlist}")
    cmd = drain_command(hosts)
    if not drain:
        print(f"dry run (add --drain to run it): {shlex.join(cmd)}")
        return
    ok, said = do_drain(hosts)
    if not ok:
        raise fail(f"drain failed: {said}", code=1)
    print(f"drained: {hosts.hostlist}")


def _lemons(store: str) -> list[str]:
    from firstfault.cli.fleet import open_store
    from firstfault.fleet.reputation import fleet

    with open_store(store, read_only=True) as s:
        return fleet(s).lemon_hosts()
