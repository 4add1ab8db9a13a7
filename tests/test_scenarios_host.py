"""Acceptance scenarios of issue 3: real bundles plus real-wording host evidence, end to end.

Every scenario is a real torchrun bundle (simulated at test time, three simulations shared by all
scenarios) or a captured real-SLURM bundle, with its ranks placed on two hosts by a
``topology.json`` and, where the fault leaves host evidence, kernel-log or NCCL lines copied from
public logs onto the culprit's host (``tests/fixtures/scenarios/README.md`` cites each line). The
builders are in ``tests/scenario_builder.py``; the expectations come from the issue and from
firstfault's Xid catalog judgement, never from a previous run of the pipeline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scenario_builder import (
    BASES,
    HOST_FIX,
    SCN,
    Part,
    Scenario,
    SrcLine,
    _nccl_lines,
    _nccl_rewrite,
    check,
    describe_expect,
    describe_verdict,
    read_fixture,
    render_kernel_log,
    scenarios,
)

from firstfault.match.xid import lookup
from firstfault.pipeline import analyze

pytestmark = pytest.mark.slow

SCENARIOS = scenarios()


def _param(s: Scenario) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=s.xfail)] if s.xfail else []
    return pytest.param(s, id=s.id, marks=marks)


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_scenario(scenario: Scenario, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    base = None
    if scenario.base != "slurm":
        make_bundle = request.getfixturevalue("make_bundle")  # cached per session: 3 simulations
        kw = dict(BASES[scenario.base])
        base = make_bundle(kw.pop("fault"), **kw)
    built = scenario.build(base, tmp_path / scenario.id)
    v = analyze(built.path)
    print(f"{scenario.id}: expected {describe_expect(scenario.expect)}")
    print(f"{scenario.id}: got      {describe_verdict(v)}")
    bad = check(v, scenario.expect)
    assert not bad, (
        f"{scenario.id} ({scenario.title}): "
        + "; ".join(bad)
        + f"\nsummary: {v.summary}\nreasons: {v.reasons}\nbuilt: {built.notes}"
    )


def test_xid_actions_follow_the_catalog() -> None:
    """The hardware scenarios expect what firstfault's Xid judgement says (Xid 94: restart)."""
    for x in (79, 48, 74, 94, 95, 119, 13, 31, 45):
        info = lookup(x)
        print(
            f"Xid {x}: {info.mnemonic}: {info.role}, {info.layer}, action {info.event_action} "
            f"(NVIDIA immediate: {info.nvidia_immediate})"
        )
    hw = {s.id: s.expect.action for s in SCENARIOS if re.fullmatch(r"xid\d+", s.id)}
    assert hw == {f"xid{x}": str(lookup(x).event_action) for x in (79, 48, 74, 94, 95, 119)}
    assert lookup(45).can_be_root is False


_MASK = [
    (re.compile(r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"), "<pci>"),
    (re.compile(r"\bpid=\d+"), "pid=<pid>"),
    (re.compile(r"Killed process \d+ \([^)]*\)"), "Killed process <pid> (<comm>)"),
]
RENDERED = [  # (fixture, format) as the scenarios use them
    ("xid79_akash209.dmesg", "ctime"),
    ("xid48_gpu_operator1146.syslog", "syslog"),
    ("xid74_nvsentinel.dmesg", "mono"),
    ("xid94_nvidia_docs.txt", "journal"),
    ("xid95_nvidia_ga100.txt", "iso"),
    ("xid119_gpud.dmesg", "ctime"),
    ("xid13_gpud.dmesg", "iso"),
    ("xid31_tinygrad6947.dmesg", "mono"),
    ("xid45_chia301.dmesg", "ctime"),
    ("oom_lkml.dmesg", "mono"),
]


def _mask(msg: str) -> str:
    for pat, rep in _MASK:
        msg = pat.sub(rep, msg)
    return msg


def _key_of(src: list[SrcLine]) -> str:
    for ln in src:
        m = re.search(r"NVRM: Xid \([^)]*\): (\d+),", ln.msg)
        if m:
            return f"): {m[1]},"
        if "Killed process" in ln.msg:
            return "Killed process"
    raise AssertionError("fixture has no key line")


@pytest.mark.parametrize(("fixture", "fmt"), RENDERED)
def test_rendering_changes_only_times_hosts_pci_and_pids(fixture: str, fmt: str, tmp_path: Path) -> None:
    """A rendered kernel log says, word for word, what the published lines said."""
    src = read_fixture(SCN / fixture)
    part = Part(fixture, _key_of(src), pid=12345, victim=(12345, "python"))
    out_path = tmp_path / "kernel.log"
    out_path.write_text(render_kernel_log([part], fmt, 1_796_000_000.25, "gpu-b", "0000:b1:00.0"))
    out = read_fixture(out_path)
    assert [_mask(o.msg) for o in out] == [_mask(s.msg) for s in src]
    assert all("0000:b1:00" in o.msg for o in out if "NVRM: Xid" in o.msg)
    assert {s.name for s in SCN.iterdir()} >= {f for f, _ in RENDERED}


def test_nccl_rewrite_keeps_the_wording() -> None:
    for name in ("nccl2397_init.log", "nccl2397_ib_errors.log"):
        for ts, host, _local, raw in _nccl_lines(SCN / name):
            new = _nccl_rewrite(raw, host, 4242, 1_796_000_000.0 if ts is not None else None)
            strip = re.compile(r"^(?:\[[^]]+\] )?[\w.-]+:\d+:\d+ ")
            assert strip.sub("", new) == strip.sub("", raw)
            assert re.match(rf"^(?:\[[^]]+\] )?{host}:4242:", new), new


def test_every_fixture_is_cited() -> None:
    readme = (SCN / "README.md").read_text()
    for p in SCN.iterdir():
        if p.name != "README.md":
            assert f"`{p.name}`" in readme, f"{p.name} has no source in tests/fixtures/scenarios/README.md"
    assert (HOST_FIX / "link_flap" / "gpu-b" / "dmesg.log").exists()
