"""``firstfault bench fr``: firstfault's FR analysis against PyTorch's own ``fr_trace``.

Two parts, both run each tool in its own subprocess (so wall time and peak RSS are
the tool's own, and fr_trace, which ``pickle.load``s its input, never runs in
this process):

* **Cases**: labelled dump sets (simulator bundles with ``truth.json``, NVIDIA's
  nvrx cases with ``fault_injection.log``): injected ranks, what each tool
  reported, each tool's time.  fr_trace crashing (it raises ``KeyError`` on gloo
  dumps, whose ``pg_config`` is empty) is reported as its result.
* **Scale**: synthetic 4,096- and 16,384-rank sets built from a real dump's
  structure (its entries, sizes, dtypes, FR version, pg_status), renumbered onto a
  TP x DP x EP layout with a world group, with one rank at fault (it stopped
  issuing collectives, like NVIDIA's LOCK_GIL case).  Reports both times, the
  ratio, and firstfault's peak memory.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from firstfault.flightrec.fast_loader import restricted_load_file
from firstfault.flightrec.load import discover_dump_files

__all__ = ["CaseResult", "ScaleResult", "bench_fr", "make_synthetic"]

DEFAULT_NVRX = Path(__file__).resolve().parents[1].parent / "shared" / "peer-data" / "nvrx-fr-traces"
#: the repository's own bundles with dumps and a truth.json (no developer-local default)
DEFAULT_SAMPLES = Path(__file__).resolve().parents[1] / "examples" / "bundles"
_FR_TRACE = "torch.distributed.flight_recorder.fr_trace"
_MISSING_RE = re.compile(r"missing ranks: \{([\d,\s]*)\}")
_CULPRIT_RE = re.compile(r"Culprit rank (\d+)")


@dataclass
class ToolRun:
    """One tool's run over one dump directory."""

    seconds: float
    rc: int
    peak_rss_mb: float
    found: list[int]
    first: list[int]
    note: str = ""


@dataclass
class CaseResult:
    name: str
    path: str
    injected: list[int]
    firstfault: ToolRun
    fr_trace: ToolRun


@dataclass
class ScaleResult:
    ranks: int
    culprit: int
    bytes_on_disk: int
    firstfault: ToolRun
    fr_trace: ToolRun
    ratio: float | None
    ratio_is_lower_bound: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- running tools


def _run(cmd: list[str], timeout: float, cwd: str | None = None) -> tuple[float, int, float, str]:
    """Run a command; return (seconds, rc, peak RSS MB, combined output)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
        rc: int
        rss = 0.0
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                rc = os.waitstatus_to_exitcode(status)
                rss = usage.ru_maxrss / 1024
                break
            if time.perf_counter() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                rc = -9
                rss = usage.ru_maxrss / 1024
                break
            time.sleep(0.02)
        dt = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return dt, rc, rss, text


def _prefix_of(directory: str) -> str | None:
    found = discover_dump_files(directory)
    if not found:
        return None
    name = os.path.basename(found[0][0])
    m = re.match(r"^(.*?)(\d+)(\.json)?$", name)
    return m.group(1) if m else None


def run_firstfault(directory: str, *, world_size: int | None = None, timeout: float = 3600) -> ToolRun:
    """``firstfault fr DIR --json`` in a subprocess; culprits in rank order."""
    cmd = [sys.executable, "-m", "firstfault.cli.fr", directory, "--json"]
    if world_size:
        cmd += ["--world-size", str(world_size)]
    dt, rc, rss, text = _run(cmd, timeout)
    found: list[int] = []
    note = ""
    try:
        start = text.index("{")
        payload = json.loads(text[start:])
        found = [int(c["rank"]) for c in payload.get("culprits", [])]
        strong = [int(c["rank"]) for c in payload.get("culprits", []) if float(c.get("score", 0)) >= 0.5]
        note = payload.get("verdict", "") or payload.get("error", "")
        return ToolRun(dt, rc, rss, found, strong or found[:1], note)
    except (ValueError, KeyError, TypeError):
        note = (text.strip().splitlines() or ["no output"])[-1][:200]
    return ToolRun(dt, rc, rss, found, found[:1], note if rc != -9 else f"timed out after {timeout:.0f}s")


def run_fr_trace(directory: str, *, timeout: float = 3600) -> ToolRun:
    """PyTorch's analyzer; ranks it names as missing or as culprits of a mismatch."""
    prefix = _prefix_of(directory)
    cmd = [sys.executable, "-m", _FR_TRACE, directory, "--allow-incomplete-ranks"]
    if prefix:
        cmd += ["-p", prefix]
    dt, rc, rss, text = _run(cmd, timeout, cwd=tempfile.gettempdir())
    found: list[int] = []
    first: list[int] = []
    for m in _MISSING_RE.finditer(text):
        ranks = [int(x) for x in m.group(1).replace(" ", "").split(",") if x]
        if not first:
            first = sorted(ranks)
        found.extend(r for r in ranks if r not in found)
    for m in _CULPRIT_RE.finditer(text):
        r = int(m.group(1))
        if r not in found:
            found.append(r)
        if not first:
            first = [r]
    note = ""
    if rc == -9:
        note = f"timed out after {timeout:.0f}s"
    elif rc != 0:
        tail = [ln for ln in text.strip().splitlines() if ln.strip()]
        exc = next(
            (ln for ln in reversed(tail) if re.match(r"^\w*(Error|Exception)\b", ln)),
            tail[-1] if tail else "",
        )
        note = f"crashed: {exc.strip()[:160]}"
    elif not found:
        note = "no missing ranks reported"
    return ToolRun(dt, rc, rss, sorted(found), first, note)


# --------------------------------------------------------------------------- labelled cases


def _injected(case_dir: Path) -> tuple[list[int], int | None]:
    truth = case_dir / "truth.json"
    if truth.is_file():
        try:
            t = json.loads(truth.read_text())
            return sorted(int(r) for r in t.get("culprit_ranks", [])), t.get("nproc")
        except (ValueError, TypeError):
            pass
    log = case_dir / "fault_injection.log"
    if log.is_file():
        m = re.search(r"Fault ranks:\s*\[([\d,\s]*)\]", log.read_text())
        if m:
            return sorted(int(x) for x in m.group(1).replace(" ", "").split(",") if x), None
    return [], None


def find_cases(extra: list[str] | None = None) -> list[tuple[str, Path]]:
    """Case directories: given paths, else the repository's example bundles and the nvrx cases in
    ``shared/`` where present."""
    out: list[tuple[str, Path]] = []
    if extra:
        for p in extra:
            path = Path(p)
            subdirs = sorted(d for d in path.iterdir() if d.is_dir()) if path.is_dir() else []
            if subdirs and not discover_dump_files(str(path)):
                out.extend((f"{path.name}/{d.name}", d) for d in subdirs if discover_dump_files(str(d)))
            else:
                out.append((path.name, path))
        return out
    for root, tag in ((DEFAULT_SAMPLES, "sim"), (DEFAULT_NVRX, "nvrx")):
        if root.is_dir():
            for d in sorted(root.iterdir()):
                if d.is_dir() and discover_dump_files(str(d)):
                    out.append((f"{tag}/{d.name}", d))
    return out


def bench_cases(cases: list[tuple[str, Path]], *, timeout: float = 600) -> list[CaseResult]:
    results = []
    for name, path in cases:
        injected, nproc = _injected(path)
        d = str(path / "fr") if (path / "fr").is_dir() else str(path)
        ff = run_firstfault(str(path), world_size=nproc, timeout=timeout)
        ft = run_fr_trace(d, timeout=timeout)
        results.append(CaseResult(name, str(path), injected, ff, ft))
    return results


# --------------------------------------------------------------------------- synthetic scale sets


def _template(base: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A victim dump and a culprit-free reference from a real nvrx case.

    The victim is the real dump with the most pending entries; only plain data
    comes out of it (restricted unpickler), and it is re-pickled for the
    synthetic set so fr_trace can read the same files.
    """
    best: dict[str, Any] | None = None
    for path, _rank in discover_dump_files(str(base)):
        obj = restricted_load_file(path)
        if (
            isinstance(obj, dict)
            and isinstance(obj.get("entries"), list)
            and (best is None or len(obj["entries"]) > len(best["entries"]))
        ):
            best = obj
    if best is None:
        raise FileNotFoundError(f"no usable dump under {base}")
    return best, {}


def make_synthetic(
    out_dir: Path, ranks: int, *, base: Path | None = None, culprit: int | None = None
) -> tuple[int, int]:
    """Write ``ranks`` dumps under ``out_dir`` (``_dump_<rank>``); return (culprit, bytes).

    Layout: world (default_pg) + TP groups of 8 (contiguous) + DP groups of
    ranks/8 (stride 8) + EP groups of 64 (contiguous); names follow creation
    order like torch's (world, all TP, all DP, all EP) and each rank's pg uids
    are 0..3 in the same order.  Entries come from the real template's TP, EP and
    TENSOR_AND_DATA groups and one world-group collective, with the template's
    sequence ids, sizes and timestamps; every rank is an only-active dump whose
    pending collectives wait, except the culprit, which has nothing in flight and
    never entered them (a host that stopped issuing work).
    """
    if ranks % 64:
        raise ValueError("ranks must be a multiple of 64")
    base = base or (DEFAULT_NVRX / "lock_gil_2nd")
    tmpl, _ = _template(base)
    culprit = culprit if culprit is not None else ranks // 3 + 5
    tp, ep = 8, 64
    n_tp, n_dp = ranks // tp, tp
    desc_map = {
        "TENSOR_MODEL_PARALLEL_GROUP": "tp",
        "EXPERT_MODEL_PARALLEL_GROUP": "ep",
        "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP": "dp",
        "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP": "world",
    }
    by_kind: dict[str, list[dict[str, Any]]] = {"tp": [], "ep": [], "dp": [], "world": []}
    for e in tmpl["entries"]:
        pg = e.get("process_group")
        if e.get("is_p2p") or not isinstance(pg, (list, tuple)):
            continue
        k = desc_map.get(pg[1])
        if k:
            by_kind[k].append(e)
    heads = {k: min(e["collective_seq_id"] for e in v) - 1 for k, v in by_kind.items() if v}
    world_ranks = str(list(range(ranks)))
    dp_strings = {j: str(list(range(j, ranks, tp))) for j in range(n_dp)}
    out_dir.mkdir(parents=True, exist_ok=True)
    total = 0
    version = tmpl.get("version", "2.9")
    for r in range(ranks):
        t_i, d_i, e_i = r // tp, r % tp, r // ep
        names = {
            "world": "0",
            "tp": str(1 + t_i),
            "dp": str(1 + n_tp + d_i),
            "ep": str(1 + n_tp + n_dp + e_i),
        }
        descs = {
            "world": "default_pg",
            "tp": "TENSOR_MODEL_PARALLEL_GROUP",
            "dp": "DATA_PARALLEL_GROUP",
            "ep": "EXPERT_MODEL_PARALLEL_GROUP",
        }
        uids = {"world": 0, "tp": 1, "dp": 2, "ep": 3}
        pg_config = {
            names["world"]: {"name": names["world"], "desc": descs["world"], "ranks": world_ranks},
            names["tp"]: {
                "name": names["tp"],
                "desc": descs["tp"],
                "ranks": str(list(range(t_i * tp, t_i * tp + tp))),
            },
            names["dp"]: {"name": names["dp"], "desc": descs["dp"], "ranks": dp_strings[d_i]},
            names["ep"]: {
                "name": names["ep"],
                "desc": descs["ep"],
                "ranks": str(list(range(e_i * ep, e_i * ep + ep))),
            },
        }
        entries: list[dict[str, Any]] = []
        pg_status: dict[str, dict[str, int]] = {}
        rid = 1000
        for kind in ("tp", "ep", "dp", "world"):
            src = by_kind[kind]
            if not src:
                continue
            head = heads[kind]
            if r == culprit:
                last = head
            else:
                last = max(e["collective_seq_id"] for e in src)
                for e in src:
                    ne = dict(e)
                    ne["process_group"] = (names[kind], descs[kind])
                    ne["pg_id"] = uids[kind]
                    ne["record_id"] = rid
                    rid += 1
                    entries.append(ne)
            pg_status[str(uids[kind])] = {
                "last_enqueued_collective": last,
                "last_started_collective": -1,
                "last_completed_collective": head,
            }
        entries.sort(key=lambda e: e["time_created_ns"])
        for i, e in enumerate(entries):
            e["record_id"] = 1000 + i
        dump = {
            "version": version,
            "pg_config": pg_config,
            "nccl_version": tmpl.get("nccl_version", "2.27.3"),
            "pg_status": pg_status,
            "entries": entries,
        }
        data = pickle.dumps(dump, protocol=2)
        (out_dir / f"_dump_{r}").write_bytes(data)
        total += len(data)
    return culprit, total


def bench_scale(
    sizes: list[int], *, fr_timeout: float = 1800, keep: Path | None = None, base: Path | None = None
) -> list[ScaleResult]:
    results = []
    for n in sizes:
        root = Path(tempfile.mkdtemp(prefix=f"ff_fr_synth_{n}_")) if keep is None else keep / f"synth_{n}"
        try:
            t0 = time.perf_counter()
            culprit, nbytes = make_synthetic(root, n, base=base)
            gen_s = time.perf_counter() - t0
            ff = run_firstfault(str(root), timeout=fr_timeout)
            ft = run_fr_trace(str(root), timeout=fr_timeout)
            lower = ft.rc == -9
            ratio = ft.seconds / ff.seconds if ff.seconds > 0 else None
            results.append(ScaleResult(n, culprit, nbytes, ff, ft, ratio, lower, {"generate_s": gen_s}))
        finally:
            if keep is None:
                shutil.rmtree(root, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- report


def _ranks(rs: list[int], limit: int = 8) -> str:
    if not rs:
        return "-"
    s = ",".join(str(r) for r in rs[:limit])
    return s + (f",+{len(rs) - limit}" if len(rs) > limit else "")


def bench_fr(
    cases: list[str] | None = None,
    *,
    synthetic: list[int] | None = None,
    fr_timeout: float = 1800,
    console: Console | None = None,
    base: Path | None = None,
) -> dict[str, Any]:
    """Run both parts and print tables; returns the figures as a dict (for JSON)."""
    con = console or Console()
    found_cases = find_cases(cases)
    case_results = bench_cases(found_cases, timeout=min(fr_timeout, 600))
    if case_results:
        t = Table(title="FR analysis on labelled cases: firstfault vs torch fr_trace", show_lines=False)
        for col in (
            "case",
            "injected",
            "firstfault (top)",
            "ff all",
            "ff s",
            "fr_trace first",
            "fr_trace all",
            "fr_trace s",
            "fr_trace note",
        ):
            t.add_column(col, overflow="fold")
        for c in case_results:
            t.add_row(
                c.name,
                _ranks(c.injected),
                _ranks(c.firstfault.first),
                _ranks(c.firstfault.found),
                f"{c.firstfault.seconds:.2f}",
                _ranks(c.fr_trace.first),
                _ranks(c.fr_trace.found),
                f"{c.fr_trace.seconds:.2f}",
                c.fr_trace.note,
            )
        con.print(t)
    scale_results: list[ScaleResult] = []
    if synthetic:
        nvrx_base = base or (DEFAULT_NVRX / "lock_gil_2nd")
        if not nvrx_base.is_dir():
            con.print(f"[yellow]synthetic sets skipped: no template dumps at {nvrx_base}[/]")
        else:
            scale_results = bench_scale(synthetic, fr_timeout=fr_timeout, base=nvrx_base)
            t = Table(title="Scale: synthetic sets from a real dump's structure (one culprit)")
            for col in (
                "ranks",
                "MB on disk",
                "culprit",
                "ff found",
                "ff s",
                "ff peak MB",
                "fr_trace s",
                "fr_trace found",
                "speed-up",
            ):
                t.add_column(col)
            for s in scale_results:
                ratio = (
                    "-" if s.ratio is None else (f">{s.ratio:.1f}x" if s.ratio_is_lower_bound else f"{s.ratio:.1f}x")
                )
                t.add_row(
                    str(s.ranks),
                    f"{s.bytes_on_disk / 1e6:.0f}",
                    str(s.culprit),
                    _ranks(s.firstfault.first),
                    f"{s.firstfault.seconds:.1f}",
                    f"{s.firstfault.peak_rss_mb:.0f}",
                    f"{s.fr_trace.seconds:.1f}" + (" (timeout)" if s.ratio_is_lower_bound else ""),
                    _ranks(s.fr_trace.first) + (f" ({s.fr_trace.note})" if s.fr_trace.note else ""),
                    ratio,
                )
            con.print(t)
    return {
        "cases": [
            {
                "case": c.name,
                "injected": c.injected,
                "firstfault": vars(c.firstfault),
                "fr_trace": vars(c.fr_trace),
            }
            for c in case_results
        ],
        "scale": [
            {
                "ranks": s.ranks,
                "culprit": s.culprit,
                "bytes": s.bytes_on_disk,
                "firstfault": vars(s.firstfault),
                "fr_trace": vars(s.fr_trace),
                "ratio": s.ratio,
                "ratio_is_lower_bound": s.ratio_is_lower_bound,
                **s.extra,
            }
            for s in scale_results
        ],
    }
