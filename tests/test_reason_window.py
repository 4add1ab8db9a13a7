"""Unit tests of reason/window.py: the job's window and the host lines that are only context."""

from __future__ import annotations

from stage_events import ev

from firstfault.reason.window import context_of, demote_inconsequential, demote_outside, job_window
from firstfault.vocab import Category, Layer, Role, settings

T0 = 1_764_000_000.0


def test_window_spans_job_output_and_the_schedulers_record() -> None:
    w = job_window([(T0, T0 + 50), (T0 + 5, T0 + 80)], {"start": T0 - 10, "end": T0 + 90})
    assert (w.start, w.end) == (T0 - 10, T0 + 90)
    assert "job's own output" in w.how and "scheduler" in w.how
    assert job_window([], {}).how == "unknown"


def test_host_lines_from_days_before_are_context_not_candidates() -> None:
    w = job_window([(T0, T0 + 100)], {})
    margin = settings.current().reasoning.window_margin_before_s
    old_xid = ev("NVRM: Xid 79", host="n1", ts=T0 - 86_400, category=Category.GPU_HARDWARE, layer=Layer.DRIVER)
    edge = ev("NVRM: Xid 79", host="n1", ts=T0 - margin / 2, category=Category.GPU_HARDWARE, layer=Layer.DRIVER)
    rank_line = ev("RuntimeError", rank=0, host="n1", ts=T0 - 86_400, source="logs/r0.log")
    out = demote_outside([old_xid, edge, rank_line], w, job_files={"logs/r0.log"})
    assert out == [old_xid] and old_xid.role == Role.NOISE and old_xid.fields["context"] == "outside the job window"
    assert edge.role == Role.ROOT  # inside the margin: it may have killed the job at start
    assert rank_line.role == Role.ROOT  # the job's own files are never outside its window


def test_an_unknown_window_demotes_nothing() -> None:
    old = ev("NVRM: Xid 79", host="n1", ts=0.0)
    assert demote_outside([old], job_window([], {}), set()) == []


def test_a_port_flap_with_nothing_after_it_is_context() -> None:
    flap = ev("mlx5_core: Link down", host="n1", ts=T0, category=Category.NETWORK, layer=Layer.NETWORK)
    flap.fields["needs_consequence"] = "1"
    other_host = ev("RuntimeError", rank=3, host="n2", ts=T0 + 5)
    assert demote_inconsequential([flap, other_host], {}) == [flap]
    assert flap.role == Role.NOISE


def test_a_port_flap_followed_by_a_rank_error_on_its_host_stays() -> None:
    flap = ev("mlx5_core: Link down", host="n1", ts=T0, category=Category.NETWORK, layer=Layer.NETWORK)
    flap.fields["needs_consequence"] = "1"
    follows = ev("NCCL WARN NET/IB : Got completion with error 12", rank=1, host="n1", ts=T0 + 20)
    context, warnings = context_of([flap, follows], job_window([(T0, T0 + 60)], {}), set(), {})
    assert context == [] and warnings == [] and flap.role == Role.ROOT


def test_a_peer_naming_the_flapping_host_is_a_consequence() -> None:
    flap = ev("mlx5_core: Link down", host="n1", ts=T0, category=Category.NETWORK, layer=Layer.NETWORK)
    flap.fields["needs_consequence"] = "1"
    peer = ev("Connection closed by peer 10.0.0.1", rank=5, host="n2", ts=T0 + 3)
    assert demote_inconsequential([flap, peer], {peer.id: "n1"}) == []
