"""Shared fixtures: real bundles made by the real simulator (torchrun), once per session."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FIRSTFAULT_SHARED", REPO.parent / "shared"))
EXAMPLE = REPO / "examples" / "bundles" / "hang_4rank"

# (kind, rank, step): one bundle of every fault kind, culprits spread over ranks and steps.
KIND_CASES = [
    ("exception", 1, 4),
    ("sigkill", 2, 5),
    ("segfault", 3, 3),
    ("hang", 2, 4),
    ("desync", 1, 5),
    ("host_oom", 0, 3),
    ("nan", 3, 6),
    ("straggler", 1, 2),
    ("exit_code", 2, 3),
    ("two_faults", 1, 4),
    ("none", 0, 0),
]


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="session")
def sim_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sim")


@pytest.fixture(scope="session")
def kind_bundles(sim_root: Path) -> dict[str, Path]:
    """One real torchrun bundle per fault kind, simulated two at a time (2 cores)."""
    if not _torch_available():
        pytest.skip("torch is not installed (pip install firstfault[torch])")
    from firstfault_sim.torch_sim import simulate_torch

    def one(case: tuple[str, int, int]) -> tuple[str, Path]:
        kind, rank, step = case
        return kind, simulate_torch(sim_root / kind, fault=kind, rank=rank, step=step, nproc=4, timeout=6.0)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, KIND_CASES))


@pytest.fixture(scope="session")
def make_bundle(sim_root: Path) -> Callable[..., Path]:
    """Simulate one extra bundle on demand (cached by its arguments)."""
    if not _torch_available():
        pytest.skip("torch is not installed")
    from firstfault_sim.torch_sim import simulate_torch

    cache: dict[tuple[object, ...], Path] = {}

    def make(fault: str, **kw: object) -> Path:
        key = (fault, *sorted(kw.items()))
        if key not in cache:
            name = "_".join(str(x) for x in (fault, *(f"{k}{v}" for k, v in sorted(kw.items()))))
            cache[key] = simulate_torch(sim_root / "extra" / name, fault=fault, **kw)  # type: ignore[arg-type]
        return cache[key]

    return make


def truth(bundle: Path) -> dict[str, object]:
    return json.loads((bundle / "truth.json").read_text())


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian chromium through Playwright, one per test module (the HTML report's and
    the audit page's browser tests); skipped where either is absent."""
    from firstfault_bench import html as bench_html

    if not bench_html.browser_available():
        pytest.skip("needs /usr/bin/chromium and the playwright package")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=bench_html.CHROMIUM, args=bench_html.CHROMIUM_ARGS)
        yield b
        b.close()
