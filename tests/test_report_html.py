"""The HTML incident report, checked in a real browser (Debian's chromium via Playwright).

The verdicts here are built with the real ``records`` types: a 4-rank job on two hosts where
rank 1 raises in the model code (its peers time out, torchrun tears down), and the synthetic
16,384-rank Xid 79 job from ``firstfault_bench.html``. Log wording is that of the real
software (PyTorch ProcessGroupNCCL and elastic agent, SLURM); see the comments at each line.

Browser tests are marked ``browser`` and skip only when chromium or Playwright is missing.
Screenshots land in ``.artifacts/`` at the repository root (git-ignored).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from firstfault.report.html import render_html, write_html
from firstfault.report.html_model import MAX_SAMPLES, build_model
from firstfault.vocab import Action, Category, Culprit, Verdict
from firstfault_bench import html as bench_html
from tests.report_verdicts import FOUR_FR, four_rank_verdict

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"


@pytest.fixture(scope="module")
def four() -> dict[str, Any]:
    d = four_rank_verdict().to_dict()
    d["flight_recorder"] = FOUR_FR  # the report reads the verdict's JSON; this FR summary is hand-made
    return d


@pytest.fixture(scope="module")
def big() -> dict[str, Any]:
    return bench_html.synthetic_verdict(16384, 8).to_dict()


# --------------------------------------------------------------------------- no browser needed


def test_model_groups_and_counts(four: dict[str, Any]) -> None:
    m = build_model(four)
    by_sig = {(g["signature"], g["role"]): g for g in m["groups"]}
    root = by_sig[("python.exception.runtime_error", "root")]
    assert root["has_root"] and m["root_group"] == root["id"]
    assert m["root"]["file"] == "gpu-node-01/attempt_0/1/stderr.log" and m["root"]["line"] == 212
    to = by_sig[("torch.nccl.watchdog_timeout", "cascade")]
    assert to["count"] == 2 and to["n_ranks"] == 2 and to["label"] == "watchdog timeout on 2 ranks"
    assert [root["id"], 2] in [[e[0], e[2]] for e in m["edges"] if e[1] == to["id"]]
    assert to["col"] == 1 and root["col"] == 0
    assert all(
        g["col"] > by_sig[("torch.nccl.watchdog_exception", "cascade")]["col"]
        for g in m["groups"]
        if g["role"] == "teardown"
    )
    topo = dict(zip(m["ranks"], m["topology"]["role"], strict=True))
    roles = m["topology"]["roles"]
    assert roles[topo[1]] == "culprit" and roles[topo[0]] == "torn_down"
    assert roles[topo[2]] == roles[topo[3]] == "victim"
    assert m["topology"]["fr_culprits"] == [m["ranks"].index(1)]
    assert len(m["marks"]["t"]) == len(four["causal_chain"])
    assert m["root"]["t"] == 0.0 and m["t0_is_root"]


def test_large_model_is_aggregated(big: dict[str, Any]) -> None:
    m = build_model(big)
    assert len(m["groups"]) == 5
    assert all(len(g["samples"]) <= MAX_SAMPLES + 4 for g in m["groups"])
    to = next(g for g in m["groups"] if g["signature"] == "torch.nccl.watchdog_timeout")
    assert to["label"] == "watchdog timeout on 16,383 ranks" and to["n_hosts"] == 2048
    assert len(m["hosts"]) == 2048 and len(m["ranks"]) == 16384
    html = render_html(big)
    assert len(html.encode()) < 10 * 1024 * 1024


def test_event_count_is_the_terminals_when_the_root_is_not_in_the_chain() -> None:
    """Issue 13: the page counted 12 events where the terminal counted 11 (the root, drawn on the
    page though the chain lacked it, was counted as one more error event)."""
    from conftest import EXAMPLE

    import firstfault

    if not EXAMPLE.is_dir():
        pytest.skip(f"{EXAMPLE} is absent")
    vd = firstfault.analyze(EXAMPLE).to_dict()
    assert build_model(vd)["n_events"] == vd.get("causal_chain_total", len(vd["causal_chain"]))


def test_hostile_text_cannot_close_the_script() -> None:
    evil = "RuntimeError: </script><script>window.__pwned=1</script><!-- {a|b} & \u2028"
    html = render_html(four_rank_verdict(hostile=evil).to_dict())
    body = html.split('<script id="ff-data" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert "<" not in body and "window.__pwned" in body
    data = json.loads(body)
    assert data["root"]["text"] == evil
    # Server-rendered header: autoescaped.
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned" in html


def test_degenerate_verdicts_render() -> None:
    empty = Verdict(Category.UNKNOWN, Culprit(), Action.NONE, 0.0, "", None, [], 0.0, [], [])
    assert "<html" in render_html(empty.to_dict())
    v = four_rank_verdict()
    for link in v.causal_chain:
        link.event.ts = None
    v.root_event = None
    v.progress = []
    v.flight_recorder = None
    m = build_model(v.to_dict())
    assert m["t0"] is None and not m["marks"]["t"] and m["progress"] is None
    assert any("no timestamp" in w for w in m["report_warnings"])
    # Garbage in the chain is skipped, not fatal.
    d = four_rank_verdict().to_dict()
    d["causal_chain"].append("not an event")
    d["causal_chain"][1]["timestamp"] = "NaN"
    d["progress"].append({"rank": "x"})
    assert "<html" in render_html(d)


def test_write_html_is_atomic(tmp_path: Path, four: dict[str, Any]) -> None:
    p = write_html(four, tmp_path / "r.html")
    assert p.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not list(tmp_path.glob("*.tmp"))


def test_vendored_library_has_its_license() -> None:
    import firstfault.report.html as report_html

    static = Path(report_html.__file__).parent / "static"
    assert (static / "ECHARTS-LICENSE").read_text().startswith("\n") or "Apache License" in (
        static / "ECHARTS-LICENSE"
    ).read_text()
    total = sum(f.stat().st_size for f in static.glob("*.js"))
    assert total < 1.5 * 1024 * 1024


# --------------------------------------------------------------------------- in the browser

needs_browser = pytest.mark.skipif(
    not bench_html.browser_available(), reason="needs /usr/bin/chromium and the playwright package"
)


class Opened:
    """A page with its console errors and every request it tried to make."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1600, "height": 1000})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        # with the JS stack, so a failure says where it was thrown
        self.page.on("pageerror", lambda e: self.errors.append(f"{e} at {getattr(e, 'stack', '')}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri())
        self.wait("window.__ff && window.__ff.ready === true")

    def js(self, expr: str) -> Any:
        return self.page.evaluate(expr)

    def wait(self, expr: str, timeout: float = 60.0) -> None:
        """Poll ``expr`` from outside: the page's CSP forbids the eval wait_for_function uses."""
        end = time.monotonic() + timeout
        while not self.page.evaluate(f"() => !!({expr})"):
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {expr}")
            self.page.wait_for_timeout(50)

    def click_in(self, selector: str, xy: list[float]) -> None:
        """A real mouse click at ``xy`` (element-relative pixels) inside ``selector``."""
        loc = self.page.locator(selector)
        loc.scroll_into_view_if_needed()
        box = loc.bounding_box()
        assert box is not None
        self.page.mouse.click(box["x"] + xy[0], box["y"] + xy[1])

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        out = ARTIFACTS / name
        # Top of the page, no hover tooltip: the sticky evidence pane then sits beside the header.
        self.page.mouse.move(1, 1)
        self.page.evaluate("window.scrollTo(0, 0)")
        self.page.wait_for_timeout(150)
        self.page.screenshot(path=str(out), full_page=True)
        return out


@pytest.mark.browser
@needs_browser
def test_four_rank_report_in_browser(browser: Any, tmp_path: Path, four: dict[str, Any]) -> None:
    path = write_html(four, tmp_path / "report-4rank.html")
    o = Opened(browser, path)
    page = o.page
    # Self-contained: the only request is the file itself.
    assert [u for u in o.requests if not u.startswith("file://")] == []
    assert o.errors == []
    assert "raised RuntimeError in the model code" in page.inner_text("#verdict-sentence")
    assert page.inner_text("#verdict-category") == "application_error"
    assert page.inner_text("#verdict-action") == "stop"
    root_box = page.inner_text("#root-evidence")
    assert "gpu-node-01/attempt_0/1/stderr.log:212" in root_box and "expert router produced no tokens" in root_box
    # Timeline: root drawn and marked, lanes per host expanded to ranks for a small job.
    assert o.js("__ff.timeline.rootDrawn()") is True
    assert o.js("__ff.timeline.rootT") == 0
    lanes = o.js("__ff.timeline.lanes()")
    assert {"gpu-node-01 (2 ranks)", "gpu-node-02 (2 ranks)"} <= {ln["label"] for ln in lanes}
    assert any(ln["kind"] == "rank" for ln in lanes) and any(ln["kind"] == "nohost" for ln in lanes)
    # Evidence opens on the root group.
    ev = page.locator("#evidence")
    assert ev.get_attribute("data-group") == str(o.js("__ff.data.root_group"))
    assert "RuntimeError" in ev.inner_text() and "first-exception-before-timeouts" in ev.inner_text()
    # Graph: one node per non-noise group; clicking the cascade node shows its evidence.
    nodes = o.js("__ff.graph.nodes()")
    assert len(nodes) == 8 and sum(n["role"] == "root" for n in nodes) == 1
    to = next(n for n in nodes if n["label"] == "watchdog timeout on 2 ranks")
    o.click_in("#graph", o.js(f"__ff.graph.nodePixel({to['id']})"))
    o.wait(f"document.querySelector('#evidence').getAttribute('data-group') === '{to['id']}'")
    text = ev.inner_text()
    assert "Watchdog caught collective operation timeout" in text
    assert "gpu-node-02/attempt_0/0/stderr.log:4410" in text and "collective-timeout-after-root" in text
    # Topology: a real click on rank 0's cell shows that rank.
    o.click_in("#topology canvas", o.js("__ff.topology.cellPixel(0)"))
    o.wait("document.querySelector('#evidence').getAttribute('data-rank') === '0'")
    assert "torn down" in ev.inner_text()
    # Collapse a host lane by clicking its label.
    key = next(ln["key"] for ln in lanes if ln["label"] == "gpu-node-02 (2 ranks)")
    o.click_in("#timeline", o.js(f"__ff.timeline.labelPixel('{key}')"))
    o.wait(f"!__ff.timeline.lanes().find(l => l.key === '{key}').open")
    assert "Flight recorder" in page.inner_text("#topo-sec") and "never issued ALLREDUCE" in page.inner_text(
        "#fr-culprits"
    )
    assert "could be the network" in page.inner_text("#alternatives")
    assert "last line truncated" in page.inner_text("#warnings")
    o.js(f"__ff.timeline.toggle('{key}')")  # open again for the screenshot
    o.js("__ff.showGroup(__ff.data.root_group)")
    o.shot("report-4rank.png")
    assert o.errors == []
    page.close()


@pytest.mark.browser
@needs_browser
def test_hostile_text_stays_text_in_browser(browser: Any, tmp_path: Path) -> None:
    evil = 'RuntimeError: </script><img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>{b|x}'
    path = write_html(four_rank_verdict(hostile=evil).to_dict(), tmp_path / "evil.html")
    o = Opened(browser, path)
    assert o.js("window.__pwned === undefined") is True
    assert evil in o.page.inner_text("#evidence")
    assert o.errors == []
    o.page.close()


@pytest.mark.browser
@needs_browser
def test_degenerate_report_in_browser(browser: Any, tmp_path: Path) -> None:
    v = four_rank_verdict()
    for link in v.causal_chain:
        link.event.ts = None
    v.root_event = None
    v.progress = []
    path = write_html(v.to_dict(), tmp_path / "untimed.html")
    o = Opened(browser, path)
    assert o.errors == []
    assert "No timed events" in o.page.inner_text("#timeline")
    empty = Verdict(Category.UNKNOWN, Culprit(), Action.NONE, 0.0, "", None, [], 0.0, [], [])
    o2 = Opened(browser, write_html(empty.to_dict(), tmp_path / "empty.html"))
    assert o2.errors == []
    o.page.close()
    o2.page.close()


@pytest.mark.browser
@needs_browser
@pytest.mark.parametrize("ranks", [4096, 16384])
def test_large_report_in_browser(browser: Any, tmp_path: Path, ranks: int, big: dict[str, Any]) -> None:
    vd = big if ranks == 16384 else bench_html.synthetic_verdict(ranks, 8).to_dict()
    path = write_html(vd, tmp_path / f"report-{ranks}.html")
    size = path.stat().st_size
    assert size < 10 * 1024 * 1024, f"{size:,} bytes"
    best = None
    for _ in range(2 if ranks == 16384 else 1):
        o = Opened(browser, path)
        assert o.errors == []
        ready = o.js("__ff.timings.ready_ms")
        best = ready if best is None else min(best, ready)
        if _ == 0:
            first = o
        else:
            o.page.close()
    o = first
    page = o.page
    if ranks == 16384:
        assert best is not None and best < 3000, f"opened in {best} ms"
    lanes = o.js("__ff.timeline.lanes()")
    assert len(lanes) < 60, "16k ranks must aggregate, not draw one lane per rank"
    assert any(ln["kind"] == "group" for ln in lanes)
    culprit = vd["verdict"]["culprit"]["ranks"][0]
    assert any(ln["label"].startswith("★ ") for ln in lanes)
    assert o.js("__ff.timeline.rootDrawn()") is True
    nodes = o.js("__ff.graph.nodes()")
    assert f"watchdog timeout on {ranks - 1:,} ranks" in [n["label"] for n in nodes]
    assert o.js("__ff.topology.cells") == ranks and o.js("__ff.topology.culprits") == 1
    # Expand an aggregated group lane: its hosts appear.
    key = next(ln["key"] for ln in lanes if ln["kind"] == "group")
    assert o.js(f"__ff.timeline.toggle('{key}')") is True
    assert len(o.js("__ff.timeline.lanes()")) > len(lanes)
    o.js(f"__ff.timeline.toggle('{key}')")
    # Real wheel zoom over the cascade: the window narrows around it, never into the silence.
    before = o.js("__ff.timeline.window()")
    tl = page.locator("#timeline")
    tl.scroll_into_view_if_needed()
    box = tl.bounding_box()
    assert box is not None
    px = o.js("__ff.charts.timeline.convertToPixel({xAxisIndex: 0}, 600500)")
    page.mouse.move(box["x"] + px, box["y"] + box["height"] / 2)
    for _ in range(3):
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(100)
    o.wait(f"__ff.timeline.window()[1] - __ff.timeline.window()[0] < {(before[1] - before[0]) / 2}")
    lo, hi = o.js("__ff.timeline.window()")
    assert lo > 590_000 and hi > 600_500, (lo, hi)
    page.dblclick("#timeline", position={"x": box["width"] / 2, "y": box["height"] / 2})
    o.wait(f"__ff.timeline.window()[0] === {before[0]}")
    # Graph click at scale.
    to = next(n for n in nodes if n["label"].startswith("watchdog timeout"))
    o.click_in("#graph", o.js(f"__ff.graph.nodePixel({to['id']})"))
    o.wait(f"document.querySelector('#evidence').getAttribute('data-group') === '{to['id']}'")
    assert re.search(r"Watchdog caught collective operation timeout", page.inner_text("#evidence"))
    o.click_in("#topology canvas", o.js(f"__ff.topology.cellPixel({culprit})"))
    o.wait(f"document.querySelector('#evidence').getAttribute('data-rank') === '{culprit}'")
    o.js("__ff.showGroup(__ff.data.root_group)")
    o.shot(f"report-{ranks}.png")
    (ARTIFACTS / f"report-{ranks}.json").write_text(json.dumps({"bytes": size, "ready_ms": best}))
    assert o.errors == []
    page.close()


def test_marks_are_thinned_beyond_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from firstfault.report import html_model as html_mod

    vd = bench_html.synthetic_verdict(256, 8).to_dict()
    # A chatty job: every chain line repeated four times, a second apart.
    base = list(vd["causal_chain"])
    for k in range(1, 4):
        vd["causal_chain"] += [{**e, "id": e["id"] + 10_000 * k, "timestamp": e["timestamp"] + k} for e in base]
    monkeypatch.setattr(html_mod, "MAX_MARKS", 900)
    m = html_mod.build_model(vd)
    n = len(m["marks"]["t"])
    # Every (group, rank) keeps its first event; the rest of the room is an even sample.
    per_rank = {(g, r) for g, r in zip(m["marks"]["g"], m["marks"]["r"], strict=True)}
    assert n == 900 and len(per_rank) == len(base) and n < len(vd["causal_chain"])
    assert m["marks"]["t"] == sorted(m["marks"]["t"])
    assert any("thinned" in w for w in m["report_warnings"])
    assert sum(g["count"] for g in m["groups"]) == len(vd["causal_chain"])


# --------------------------------------------------------------------------- real torchrun bundles


def _check_real(browser: Any, bundle: Path, out: Path, shot: str | None = None) -> dict[str, Any]:
    """The real pipeline's verdict for ``bundle``, rendered and opened: no errors, every view up."""
    from firstfault.pipeline import analyze

    vd = analyze(bundle).to_dict()
    o = Opened(browser, write_html(vd, out))
    assert o.errors == [], o.errors
    assert [u for u in o.requests if not u.startswith("file://")] == []

    def squash(t: str) -> str:  # HTML collapses runs of spaces (torch prints "exitcode  :")
        return " ".join(t.split())

    assert squash(vd["verdict"]["summary"][:40]) in squash(o.page.inner_text("#verdict-sentence"))
    if vd["causal_chain"]:
        assert o.js("__ff.graph.nodes().length") >= 1
        if vd["root_event"]:
            assert o.js("__ff.timeline.rootDrawn()") is True
            assert squash(vd["root_event"]["text"][:60]) in squash(o.page.inner_text("#evidence"))
    if vd["verdict"]["culprit"]["ranks"]:
        assert o.js("__ff.topology.culprits") >= 1
    if shot:
        o.shot(shot)
    o.page.close()
    return vd


@pytest.mark.browser
@needs_browser
def test_example_bundle_in_browser(browser: Any, tmp_path: Path) -> None:
    """The repository's real 4-rank hang bundle (torchrun + gloo + flight recorder)."""
    from conftest import EXAMPLE

    if not EXAMPLE.is_dir():
        pytest.skip(f"{EXAMPLE} is absent")
    vd = _check_real(browser, EXAMPLE, tmp_path / "example.html", shot="report-real-hang_4rank.png")
    assert vd["verdict"]["category"] == "hang"


@pytest.mark.slow
@pytest.mark.browser
@needs_browser
def test_real_bundle_of_every_kind_in_browser(browser: Any, tmp_path: Path, kind_bundles: dict[str, Path]) -> None:
    """One real simulator bundle per fault kind (conftest.kind_bundles), each report opened."""
    for kind, bundle in sorted(kind_bundles.items()):
        shot = f"report-real-{kind}.png" if kind in ("exception", "hang", "desync") else None
        _check_real(browser, bundle, tmp_path / f"{kind}.html", shot=shot)
