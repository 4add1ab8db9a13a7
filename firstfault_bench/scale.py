"""``bench scale-accuracy``: attribution at cluster scale, on bundles from the cluster simulator.

N random scenarios spanning every fault kind and sizes from 8 to 16,384 ranks; each bundle is
simulated, analysed, scored and deleted. Culprit top-1 is judged on what the fault kind blames
(``truth.json`` ``culprit_key``): the rank, the host, the link (host + HCA), or for a
scheduler-ended job the category. Tables: by kind x size, a category confusion matrix, and every
miss with what was expected and what firstfault said. ``bench scale-speed``, on the same
simulator, is ``firstfault_bench.scale_speed``.

Results go to Markdown and to a PNG drawn with a small built-in rasteriser (``firstfault_bench/png.py``: no
plotting library is installed here).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from firstfault_bench.png import COLORS, Canvas
from firstfault_sim.cluster.faults import FAULT_KINDS, KINDS, FaultSpec

SIZE_BUCKETS = ((8, 64), (128, 512), (1024, 2048), (4096, 8192), (16384, 16384))


# ============================================================================ scenarios
@dataclass
class Scenario:
    name: str
    kinds: list[str]
    hosts: int
    gpus_per_host: int
    tp: int
    pp: int
    ep: int
    seed: int
    kill_on_bad_exit: bool
    remote_errors: bool
    noise: int
    clock_skew_s: float
    nccl_timeout_s: float
    steps: int
    second_after_s: float = 0.0
    cp: int = 1

    @property
    def world(self) -> int:
        return self.hosts * self.gpus_per_host


def _sizes_for(count: int, sizes: Sequence[int]) -> list[int]:
    """Many small jobs, few big ones: weight ~ 1/log(size), at most a handful of the largest."""
    big = [s for s in sizes if s >= 4096]
    small = [s for s in sizes if s < 4096]
    n_big = min(len(big) * 3, max(len(big), count // 40))
    out = [big[i % len(big)] for i in range(n_big)] if big else []
    n_small = count - len(out)
    w = [1.0 / (1 + (s.bit_length() - 3) * 0.35) for s in small]
    tot = sum(w)
    quota = [max(1, round(n_small * x / tot)) for x in w]
    while sum(quota) > n_small:
        quota[quota.index(max(quota))] -= 1
    while sum(quota) < n_small:
        quota[0] += 1
    for s, q in zip(small, quota, strict=True):
        out += [s] * q
    return out


DEFAULT_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 16384)


def plan(
    count: int = 200,
    seed: int = 0,
    sizes: Sequence[int] = DEFAULT_SIZES,
    kinds: Sequence[str] = FAULT_KINDS,
    pairs: float = 0.06,
) -> list[Scenario]:
    """``count`` scenarios: every kind at least at the small sizes, sizes spread as :func:`_sizes_for`."""
    rng = random.Random(seed)
    ks = list(kinds)
    sz = _sizes_for(count, sorted(sizes))
    rng.shuffle(sz)
    # kinds round-robin, so every kind meets several sizes; big sizes go to a rotating subset
    out: list[Scenario] = []
    for i, world in enumerate(sorted(sz, key=lambda s: (s >= 4096, rng.random()))):
        kind = ks[i % len(ks)]
        gph = 4 if world == 8 else 8
        hosts = world // gph
        if KINDS[kind].mode in ("net", "node") and hosts < 2:
            hosts, gph = 2, world // 2
        tp = min(gph, rng.choice((2, 4, 8)))
        min_dp = 4 if kind == "mismatch" else 2  # a size mismatch needs a majority to be decidable
        if world // tp < min_dp:
            tp = max(1, world // min_dp)
        pp_choices = [p for p in (1, 2, 4, 8) if world % (tp * p) == 0 and world // (tp * p) >= min_dp]
        pp = rng.choice(pp_choices[:3] or [1])
        dp = world // (tp * pp)
        cp = 2 if world >= 64 and dp % 4 == 0 and rng.random() < 0.15 else 1
        dp //= cp
        ep = rng.choice([e for e in (1, 1, 2, 4) if dp % e == 0])
        pair = rng.random() < pairs and kind not in ("time_limit", "preemption", "thermal")
        kinds_ = [kind]
        if pair:
            kinds_.append(rng.choice([k for k in ks if KINDS[k].mode == "exit"]))
        timeout = rng.choice((600.0, 600.0, 900.0, 1800.0)) if world >= 1024 else rng.choice((120.0, 300.0, 600.0))
        out.append(
            Scenario(
                name=f"{len(out):03d}_{'+'.join(kinds_)}_{world}",
                kinds=kinds_,
                hosts=hosts,
                gpus_per_host=gph,
                tp=tp,
                pp=pp,
                ep=ep,
                cp=cp,
                seed=seed * 100003 + i,
                kill_on_bad_exit=rng.random() < 0.7,
                remote_errors=rng.random() < 0.6,
                noise=rng.choice((1, 1, 2)),
                clock_skew_s=rng.choice((0.005, 0.05, 0.2, 1.0)),
                nccl_timeout_s=timeout,
                steps=40 if world >= 4096 else rng.choice((40, 80, 160)),
                second_after_s=rng.uniform(0.5, 20.0) if pair else 0.0,
            )
        )
    return out


def _config(s: Scenario) -> Any:
    from firstfault_sim.cluster import Layout, SimConfig

    rng = random.Random(s.seed)
    first_at = s.steps * 2.0 * rng.uniform(0.3, 0.6)
    specs = [FaultSpec(s.kinds[0], at_s=first_at)]
    if len(s.kinds) > 1:
        specs.append(FaultSpec(s.kinds[1], at_s=first_at + s.second_after_s))
    return SimConfig(
        hosts=s.hosts,
        gpus_per_host=s.gpus_per_host,
        layout=Layout(tp=s.tp, pp=s.pp, cp=s.cp, ep=s.ep),
        nccl_timeout_s=s.nccl_timeout_s,
        seed=s.seed,
        clock_skew_s=s.clock_skew_s,
        noise=s.noise,
        steps=s.steps,
        faults=tuple(specs),
        kill_on_bad_exit=s.kill_on_bad_exit,
        remote_errors=s.remote_errors,
    )


# ============================================================================ scoring
@dataclass
class Result:
    scenario: str
    kind: str
    world: int
    key: str
    truth_ranks: list[int]
    truth_hosts: list[str]
    truth_gpus: list[str]
    truth_links: list[str]
    truth_category: str
    truth_action: str
    got_ranks: list[int] = field(default_factory=list)
    got_hosts: list[str] = field(default_factory=list)
    got_gpus: list[str] = field(default_factory=list)
    got_links: list[str] = field(default_factory=list)
    got_category: str = ""
    got_action: str = ""
    confidence: float = 0.0
    root: str = ""
    culprit_ok: bool = False
    gpu_ok: bool | None = None
    category_ok: bool = False
    action_ok: bool = False
    gen_s: float = 0.0
    verdict_s: float = 0.0
    bundle_mb: float = 0.0
    error: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def score(truth: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """Top-1 culprit on the key the fault kind blames, GPU where a GPU is blamed, category, action."""
    v = verdict["verdict"]
    c = v["culprit"]
    key = truth["culprit_key"]
    ranks, hosts, gpus, links = c.get("ranks", []), c.get("hosts", []), c.get("gpus", []), c.get("links", [])
    if key == "rank":
        ok = ranks[:1] == truth["culprit_ranks"][:1]
    elif key == "host":
        ok = hosts[:1] == truth["culprit_hosts"][:1]
    elif key == "link":
        # the faulty end: the host, and the HCA where the verdict names one
        host = truth["culprit_hosts"][0]
        dev = truth["culprit_links"][0].split(":", 1)[1].split("/", 1)[0] if truth["culprit_links"] else ""
        named = [x for x in links[:1] if "mlx5" in x or ":" in x.split("<->")[-1]]
        ok = hosts[:1] == [host] and (not named or dev in named[0])
    else:  # the scheduler ended the job: no rank to blame
        ok = v["category"] == "scheduler"
    gpu_ok = None
    if truth.get("culprit_gpus") and key == "rank":
        gpu_ok = bool(gpus[:1] == truth["culprit_gpus"][:1] and hosts[:1] == truth["culprit_hosts"][:1])
    return {
        "culprit_ok": bool(ok),
        "gpu_ok": gpu_ok,
        "category_ok": v["category"] == truth["expected_category"],
        "action_ok": v["action"] == truth["expected_action"],
        "got_ranks": ranks[:4],
        "got_hosts": hosts[:3],
        "got_gpus": gpus[:2],
        "got_links": links[:2],
        "got_category": v["category"],
        "got_action": v["action"],
        "confidence": v.get("confidence", 0.0),
    }


def run_one(s: Scenario, workdir: str, keep: bool = False) -> Result:
    """Simulate, analyse, score, delete (worker-process entry point)."""
    from firstfault.pipeline import analyze
    from firstfault_sim.cluster import simulate_cluster

    bundle = Path(workdir) / s.name
    res = Result(s.name, s.kinds[0], s.world, KINDS[s.kinds[0]].culprit, [], [], [], [], "", "")
    try:
        t0 = time.perf_counter()
        truth = simulate_cluster(_config(s), bundle)
        res.gen_s = time.perf_counter() - t0
        res.bundle_mb = int(truth["bundle_bytes"]) / 1e6
        res.truth_ranks, res.truth_hosts = list(truth["culprit_ranks"]), list(truth["culprit_hosts"])
        res.truth_gpus, res.truth_links = list(truth["culprit_gpus"]), list(truth["culprit_links"])
        res.truth_category, res.truth_action = str(truth["expected_category"]), str(truth["expected_action"])
        res.key = str(truth["culprit_key"])
        t1 = time.perf_counter()
        verdict = analyze(bundle).to_dict()
        res.verdict_s = time.perf_counter() - t1
        for k, v in score(truth, verdict).items():
            setattr(res, k, v)
        root = verdict.get("root_event") or {}
        where = f"{root.get('file', '-')}:{root.get('line', '-')}"
        res.root = f"{root.get('signature', '-')} @ {where}: {str(root.get('text', ''))[:160]}"
        res.detail = {
            "summary": verdict["verdict"]["summary"][:300],
            "kill_on_bad_exit": s.kill_on_bad_exit,
            "remote_errors": s.remote_errors,
            "layout": f"tp{s.tp} pp{s.pp} cp{s.cp} ep{s.ep}",
            "hosts": s.hosts,
            "faults": s.kinds,
            "timeouts": truth["timeouts"],
        }
    except Exception as exc:  # a scenario must not stop the benchmark; the table says what broke
        res.error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        if not keep:
            shutil.rmtree(bundle, ignore_errors=True)
    return res


def _bucket(world: int) -> str:
    for lo, hi in SIZE_BUCKETS:
        if lo <= world <= hi:
            return f"{lo}" if lo == hi else f"{lo}-{hi}"
    return str(world)


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def render_accuracy(results: list[Result]) -> str:
    ok = [r for r in results if not r.error]
    n = len(ok)
    failed = f" ({len(results) - n} failed to run)" if n < len(results) else ""
    md = [f"# Cluster-scale accuracy: {n} scenarios{failed}", ""]
    gpu = [r for r in ok if r.gpu_ok is not None]
    md += [
        "| measure | firstfault |",
        "|---|---|",
        f"| culprit top-1 (rank / host / link / scheduler, by kind) | {_pct(sum(r.culprit_ok for r in ok), n)} |",
        f"| GPU (where a GPU is blamed) | {_pct(sum(bool(r.gpu_ok) for r in gpu), len(gpu))} |",
        f"| category | {_pct(sum(r.category_ok for r in ok), n)} |",
        f"| action | {_pct(sum(r.action_ok for r in ok), n)} |",
        "",
    ]
    if ok:
        md.append(
            f"mean time to verdict {sum(r.verdict_s for r in ok) / n:.2f} s, "
            f"max {max(r.verdict_s for r in ok):.1f} s (largest bundle {max(r.bundle_mb for r in ok):.0f} MB); "
            f"mean generation {sum(r.gen_s for r in ok) / n:.2f} s"
        )
        md.append("")
    buckets = [b for b in (_bucket(lo) for lo, _ in SIZE_BUCKETS) if any(_bucket(r.world) == b for r in ok)]
    md += [
        "## Culprit top-1 by fault kind and job size (ranks)",
        "",
        "| kind | key | " + " | ".join(buckets) + " | all | category | action |",
        "|---|---|" + "---|" * (len(buckets) + 3),
    ]
    for kind in FAULT_KINDS:
        rs = [r for r in ok if r.kind == kind]
        if not rs:
            continue
        cells = []
        for b in buckets:
            rb = [r for r in rs if _bucket(r.world) == b]
            cells.append(f"{sum(r.culprit_ok for r in rb)}/{len(rb)}" if rb else "-")
        md.append(
            f"| {kind} | {KINDS[kind].culprit} | "
            + " | ".join(cells)
            + f" | {_pct(sum(r.culprit_ok for r in rs), len(rs))} | {sum(r.category_ok for r in rs)}/{len(rs)} | "
            f"{sum(r.action_ok for r in rs)}/{len(rs)} |"
        )
    cats = sorted({r.truth_category for r in ok} | {r.got_category for r in ok})
    conf: Counter[tuple[str, str]] = Counter((r.truth_category, r.got_category) for r in ok)
    md += [
        "",
        "## Category confusion (rows: expected, columns: firstfault)",
        "",
        "| expected \\ got | " + " | ".join(cats) + " |",
        "|---|" + "---|" * len(cats),
    ]
    for a in cats:
        if any(conf[(a, b)] for b in cats):
            md.append(f"| {a} | " + " | ".join(str(conf[(a, b)] or "") for b in cats) + " |")
    misses = [r for r in ok if not r.culprit_ok or not r.category_ok or not r.action_ok]
    md += [
        "",
        f"## Misses ({len(misses)})",
        "",
        "| scenario | expected culprit / category / action | firstfault | root event |",
        "|---|---|---|---|",
    ]
    for r in misses:
        exp = (
            f"{r.key}: ranks {r.truth_ranks[:2]} hosts {r.truth_hosts[:1]}"
            + (f" links {r.truth_links[:1]}" if r.truth_links else "")
            + f" / {r.truth_category} / {r.truth_action}"
        )
        got = f"ranks {r.got_ranks[:3]} hosts {r.got_hosts[:2]} / {r.got_category} / {r.got_action}"
        flags = (("C", not r.culprit_ok), ("K", not r.category_ok), ("A", not r.action_ok))
        marks = "".join(x for x, bad in flags if bad)
        kob = r.detail.get("kill_on_bad_exit")
        md.append(
            f"| {r.scenario} ({marks}; {r.detail.get('layout')}, kill-on-bad-exit={kob}) "
            f"| {exp} | {got} | {r.root.replace('|', '/')} |"
        )
    errs = [r for r in results if r.error]
    if errs:
        md += ["", "## Scenarios that did not run", ""] + [f"- {r.scenario}: {r.error}" for r in errs]
    return "\n".join(md) + "\n"


def run_accuracy(
    out: Path,
    count: int = 200,
    seed: int = 0,
    jobs: int = 2,
    sizes: Sequence[int] | None = None,
    kinds: Sequence[str] | None = None,
    keep: bool = False,
    workdir: Path | None = None,
    progress: bool = True,
) -> list[Result]:
    scen = plan(count, seed, sizes or (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 16384), kinds or FAULT_KINDS)
    out.mkdir(parents=True, exist_ok=True)
    work = workdir or Path(tempfile.mkdtemp(prefix="ff-scale-", dir=os.environ.get("TMPDIR", "/tmp")))
    work.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    small = [s for s in scen if s.world < 4096]
    big = [s for s in scen if s.world >= 4096]
    t0 = time.perf_counter()
    partial = (out / "scale_accuracy.partial.jsonl").open("w", encoding="utf-8")

    def note(r: Result) -> None:
        results.append(r)
        partial.write(json.dumps(asdict(r)) + "\n")
        partial.flush()
        if progress:
            _progress_line(r, len(results), len(scen), t0)

    # fork workers (no re-import of __main__), recycled every few bundles to return memory
    with multiprocessing.get_context("fork").Pool(max(1, jobs), maxtasksperchild=8) as pool:
        for r in pool.imap(_run_star, [(s, str(work), keep) for s in small]):
            note(r)
    for s in big:  # one at a time: a 16,384-rank bundle is GBs and most of a core
        note(run_one(s, str(work), keep))
    partial.close()
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    (out / "scale_accuracy.json").write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    (out / "scale_accuracy.md").write_text(render_accuracy(results))
    _accuracy_png(results, out / "scale_accuracy.png")
    return results


def _run_star(args: tuple[Scenario, str, bool]) -> Result:
    return run_one(*args)


def _progress_line(r: Result, i: int, n: int, t0: float) -> None:
    mark = "ok " if r.culprit_ok and not r.error else ("ERR" if r.error else "MISS")
    sys.stderr.write(
        f"[{i}/{n} {time.perf_counter() - t0:6.0f}s] {mark} {r.scenario} gen {r.gen_s:.1f}s "
        f"verdict {r.verdict_s:.1f}s {r.bundle_mb:.0f}MB {r.error}\n"
    )


def _accuracy_png(results: list[Result], path: Path) -> None:
    ok = [r for r in results if not r.error]
    if not ok:
        return
    kinds = [k for k in FAULT_KINDS if any(r.kind == k for r in ok)]
    cv = Canvas(900, 60 + 22 * len(kinds))
    cv.text(10, 10, "CULPRIT TOP-1 BY FAULT KIND (ALL SIZES)", scale=2)
    for i, k in enumerate(kinds):
        rs = [r for r in ok if r.kind == k]
        frac = sum(r.culprit_ok for r in rs) / len(rs)
        y = 44 + i * 22
        cv.text(10, y + 4, k)
        cv.rect(170, y, 170 + int(600 * frac), y + 14, COLORS[0] if frac >= 0.98 else COLORS[1])
        cv.rect(170 + int(600 * frac), y, 770, y + 14, (235, 235, 235))
        cv.text(780, y + 4, f"{100 * frac:.0f}% {sum(r.culprit_ok for r in rs)}/{len(rs)}")
    path.write_bytes(cv.png())


# ============================================================================ CLI (mounted by the lead)
