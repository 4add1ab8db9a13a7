"""The audit's HTML page: self-contained, every text escaped, heatmap and findings render in a
real browser (Debian's chromium via Playwright; skipped only when either is missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from firstfault.audit import audit, layout_from_dict
from firstfault.audit.html import colour, render_html, write_html

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"
HOSTILE = "</style><script>window.__owned=1</script><img src=x onerror=alert(1)>"


def small(name: str = "small") -> Any:
    return audit(layout_from_dict({"name": name, "hosts": 6, "hosts_per_leaf": 4, "parallel": {"tp": 8, "pp": 2}}))


def test_text_is_escaped() -> None:
    page = render_html(small(HOSTILE))
    assert "<script" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert "&lt;/style&gt;&lt;script&gt;" in page


def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    return page, errors, requests


@pytest.mark.browser
def test_page_renders_heatmap_blast_and_findings(browser: Any, tmp_path: Path) -> None:
    rep = small(HOSTILE)
    path = tmp_path / "audit.html"
    write_html(rep, path)
    page, errors, requests = open_page(browser, path)
    assert errors == [] and [u for u in requests if not u.startswith("file://")] == []
    assert page.evaluate("window.__owned") is None  # the hostile name stayed text
    assert HOSTILE in page.inner_text("h1")
    # one cell per GPU, drawn with a size, the audited hosts outlined
    assert page.locator("#heatmap rect.gpu").count() == 48
    box = page.locator("#heatmap").bounding_box()
    assert box is not None and box["width"] > 40 and box["height"] > 40
    assert page.locator("#heatmap rect.audited").count() >= 1
    # stage 0 (hosts 1-3 of 6) sits under one leaf switch per rail: every replica of its shards (1.0);
    # stage 1 spans two leaves: host 4 shares one with stage 0 (1 of 3 replicas), hosts 5-6 the other (2 of 3)
    fills = page.eval_on_selector_all("#heatmap rect.gpu", "els => els.map(e => e.getAttribute('fill'))")
    assert fills[0] == fills[23] == colour(1.0)
    assert fills[24] == fills[31] == colour(1 / 3)
    assert fills[32] == fills[47] == colour(2 / 3)
    rows = page.locator("#blast tr.blast")
    assert rows.count() == len(rep.blasts) == 6
    assert "leaf_switch" in page.inner_text("#blast")
    findings = page.locator("#findings li.finding")
    assert findings.count() == len(rep.findings)
    sev = page.eval_on_selector_all("#findings li.finding", "els => els.map(e => e.dataset.severity)")
    assert sev[0] == "critical" and "fr_off" in page.inner_text("#findings")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "audit-small.png"), full_page=True)
    page.close()


@pytest.mark.browser
def test_16k_page_renders(browser: Any, tmp_path: Path) -> None:
    rep = audit(layout_from_dict({"hosts": 2048, "hosts_per_leaf": 32, "parallel": {"tp": 8, "pp": 16}}))
    path = tmp_path / "audit16k.html"
    write_html(rep, path)
    assert path.stat().st_size < 3_000_000
    page, errors, _ = open_page(browser, path)
    assert errors == []
    assert page.locator("#heatmap rect.gpu").count() == 16384
    assert page.locator("#blast tr.blast").count() == 6
    page.close()
