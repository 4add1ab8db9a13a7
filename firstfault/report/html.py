"""The HTML incident report: one self-contained file an on-call engineer can open from disk.

The verdict JSON convinces a program; this page is meant to convince a person. ``report.html_model``
computes what it shows (see its docstring for the design); this module renders that model: the
Jinja template, the styles, the vendored chart library (Apache ECharts, unmodified official build,
see ``static/``), the page script and the data, all inline, so no request leaves the page.
Untrusted text reaches it only as JSON inside ``<script type="application/json">`` (with ``<``,
``>``, ``&`` escaped) or through Jinja autoescaping, and the page script writes it with
``textContent`` only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from firstfault.report.html_model import build_model

_TEMPLATE = "report.html.j2"


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no '</script>', no '<!--', no HTML entities."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    return (
        s.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _inline_js(src: str) -> str:
    # A vendored library could in principle contain the closing tag; break it up if so.
    return re.sub(r"</(script)", r"<\\/\1", src, flags=re.IGNORECASE)


@cache
def _static(name: str) -> str:
    return resources.files("firstfault.report").joinpath("static", name).read_text(encoding="utf-8")


def _pct(x: Any) -> str:
    """'94 %', but '99.7 %' rather than a rounded-up '100 %' that would overstate."""
    if x is None:
        return "—"
    p = 100 * float(x)
    return f"{p:.1f} %" if 99 <= p < 100 else f"{p:.0f} %"


@cache
def _env() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(
        lambda name: resources.files("firstfault.report").joinpath("templates", name).read_text(encoding="utf-8")
    )
    env = jinja2.Environment(
        loader=loader, autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined
    )
    env.filters["pct"] = _pct
    env.filters["intc"] = lambda x: f"{int(x):,}"
    return env


def render_html(verdict_dict: Mapping[str, Any], *, title: str | None = None) -> str:
    """The whole report as one HTML string (styles, chart library, script and data inline)."""
    model = build_model(verdict_dict, title=title)
    tpl = _env().get_template(_TEMPLATE)
    return tpl.render(
        m=model,
        css=_static("report.css"),
        echarts_js=_inline_js(_static("echarts.min.js")),
        app_js=_inline_js(_static("report.js")),
        data_json=_script_json(model),
    )


def write_html(verdict_dict: Mapping[str, Any], path: str | Path, *, title: str | None = None) -> Path:
    """Render and write atomically (a half-written report in a ticket is worse than none)."""
    p = Path(path)
    html = render_html(verdict_dict, title=title)
    tmp = p.with_name(p.name + ".tmp")
    try:
        tmp.write_text(html, encoding="utf-8", errors="replace")  # a lone surrogate from a log is not a crash
        tmp.replace(p)
    finally:
        tmp.unlink(missing_ok=True)  # no stray .tmp when the rename failed
    return p
