"""The HTML incident report's model: what the page shows, computed from the verdict JSON.

``report.html`` renders it (template, styles, the vendored chart library, the data inline).

The verdict JSON convinces a program; this page is meant to convince a person. It shows the one
red event, the wave of timeouts it caused and the tear-down that followed, on one clock, and lets
the reader click from any picture to the raw lines behind it.

Design, in short (details in docs/html-report.md):

* **Aggregate in Python, draw in the browser.** A 16,384-rank job leaves ~50k chain events; the
  page must open in under 3 s and stay under 10 MB. Raw text is what is expensive, so events are
  grouped by (signature, role) here and only the first few lines of each group travel as
  evidence samples. What every event keeps is a few integers (time, rank, host, group) in
  column arrays, so the timeline can re-bin its density bands at every zoom level.
* **Everything inline.** Styles, the vendored chart library (Apache ECharts, unmodified official
  build, see ``static/``), the page script and the data all live in the one file; no request
  leaves the page, so it works from an incident ticket attachment or an air-gapped laptop.
* **Untrusted text stays text.** Log lines are attacker-controllable. They reach the page only as
  JSON inside ``<script type="application/json">`` (with ``<``, ``>``, ``&`` escaped) or through
  Jinja autoescaping, and the page script writes them with ``textContent`` only.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: Evidence lines embedded per event group (the first ones in time, plus the root and culprits).
MAX_SAMPLES = 5
#: Context (traceback) lines kept per sample; the verdict itself caps at 30.
MAX_CONTEXT_LINES = 40
#: Longest raw line embedded; parse already caps at 2,000 characters.
MAX_TEXT = 2000
#: Beyond this many timed events the per-event columns are thinned (first event of each
#: group on each rank is always kept) so the file stays small; a warning says so.
MAX_MARKS = 250_000
#: Ranks per placeholder host when the bundle does not say where ranks ran.
PSEUDO_HOST_RANKS = 8
#: Ranks listed by number in a group's summary before it switches to a count.
MAX_RANKS_LISTED = 12

ROLES = ("root", "cascade", "teardown", "noise")
# Topology cell roles, in the order the page's colour legend uses.
TOPO_ROLES = ("healthy", "culprit", "failed", "victim", "torn_down", "no_data")

_TEMPLATE = "report.html.j2"


def _natural_key(s: str) -> tuple[Any, ...]:
    """node2 before node10: hosts are numbered without padding often enough to matter."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and abs(f) != float("inf") else None


def _utc(ts: float | None) -> str | None:
    if ts is None:
        return None
    try:
        d = _dt.datetime.fromtimestamp(ts, tz=_dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return d.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _ranks_text(ranks: Sequence[int]) -> str:
    """'1, 5, 9' for a few ranks, '0–4095 (4,095 ranks)' style ranges for many."""
    if not ranks:
        return ""
    rs = sorted(set(ranks))
    if len(rs) <= MAX_RANKS_LISTED:
        return ", ".join(str(r) for r in rs)
    return f"{rs[0]}–{rs[-1]} ({len(rs):,} ranks)"


def _humanize(signature: str) -> str:
    """Short label from a signature id: 'torch.nccl_watchdog_timeout' -> 'nccl watchdog timeout'."""
    parts = [p for p in (signature or "unclassified").split(".") if p]
    tail = parts[-1] if parts else "unclassified"
    if len(parts) > 1 and (tail.isdigit() or len(tail) < 3):
        tail = f"{parts[-2]} {tail}"  # 'nvidia.xid.79' -> 'xid 79'
    return tail.replace("_", " ").replace("-", " ").strip() or signature


def _group_label(name: str, role: str, n_events: int, n_ranks: int, n_hosts: int) -> str:
    """The node text of the propagation graph, e.g. 'watchdog timeout on 4,095 ranks'."""
    if n_ranks > 1:
        where = f" on {n_ranks:,} ranks"
    elif n_ranks == 1:
        where = " on 1 rank"
    elif n_hosts > 1:
        where = f" on {n_hosts:,} hosts"
    elif n_hosts == 1:
        where = " on 1 host"
    else:
        where = ""
    times = f" ({n_events:,}×)" if n_events > max(n_ranks, n_hosts, 1) else ""
    return f"{name}{where}{times}"


class _Places:
    """Rank and host indices for the page: dense small integers instead of repeated strings.

    Placement comes from whatever the verdict says: progress rows carry the host, events carry
    rank/host/local rank/GPU. A rank seen nowhere is not on the page (the verdict has no record
    of it); a host seen only in kernel logs still gets a lane.
    """

    def __init__(self, verdict: Mapping[str, Any], chain: Sequence[Mapping[str, Any]]) -> None:
        host_of, slot_of, gpu_of, hosts, ranks = _placements(verdict, chain)
        hosts.update(host_of.values())
        # Ranks with no known host (a single-machine run logs none) still deserve lanes and
        # cells: put them on placeholder hosts of 8 consecutive ranks, named so nobody mistakes
        # them for real machines.
        self.pseudo: set[str] = set()
        for r in sorted(ranks):
            if r not in host_of:
                lo = r - r % PSEUDO_HOST_RANKS
                name = f"unknown host · ranks {lo}–{lo + PSEUDO_HOST_RANKS - 1}"
                host_of[r] = name
                self.pseudo.add(name)
                slot_of[r] = r - lo
        hosts.update(self.pseudo)
        self.hosts: list[str] = sorted(hosts, key=lambda h: (h in self.pseudo, _natural_key(h)))
        self.host_index = {h: i for i, h in enumerate(self.hosts)}
        self.ranks: list[int] = sorted(ranks)
        self.rank_index = {r: i for i, r in enumerate(self.ranks)}
        # Slot = position of the rank on its host (GPU column in the topology view): local rank
        # when known, else a numeric GPU id, else order of rank numbers on that host.
        by_host: dict[str, list[int]] = defaultdict(list)
        for r in self.ranks:
            if r in host_of:
                by_host[host_of[r]].append(r)
        self.rank_host: list[int] = []
        self.rank_slot: list[int] = []
        self.rank_gpu: list[str | None] = []
        for r in self.ranks:
            h = host_of.get(r)
            self.rank_host.append(self.host_index[h] if h is not None else -1)
            slot = slot_of.get(r)
            if slot is None:
                slot = _int_or_none(gpu_of.get(r))
            if slot is None and h is not None:
                slot = by_host[h].index(r)
            self.rank_slot.append(slot if slot is not None else -1)
            self.rank_gpu.append(gpu_of.get(r))


def _placements(
    verdict: Mapping[str, Any], chain: Sequence[Mapping[str, Any]]
) -> tuple[dict[int, str], dict[int, int], dict[int, str], set[str], set[int]]:
    """What the verdict says of places: rank -> host, slot (local rank), GPU; the hosts and ranks seen."""
    host_of: dict[int, str] = {}
    slot_of: dict[int, int] = {}
    gpu_of: dict[int, str] = {}
    hosts: set[str] = set()
    ranks: set[int] = set()
    for p in verdict.get("progress") or []:
        r = _int_or_none(p.get("rank"))
        if r is None:
            continue
        ranks.add(r)
        if p.get("host"):
            host_of.setdefault(r, str(p["host"]))
    for e in chain:
        r = _int_or_none(e.get("rank"))
        h = e.get("host")
        if h:
            hosts.add(str(h))
        if r is None:
            continue
        ranks.add(r)
        if h:
            host_of.setdefault(r, str(h))
        lr = _int_or_none(e.get("local_rank"))
        if lr is not None:
            slot_of.setdefault(r, lr)
        g = e.get("gpu")
        if g not in (None, ""):
            gpu_of.setdefault(r, str(g))
    cul = (verdict.get("verdict") or {}).get("culprit") or {}
    for r in cul.get("ranks") or []:
        ri = _int_or_none(r)
        if ri is not None:
            ranks.add(ri)
    hosts.update(str(h) for h in cul.get("hosts") or [] if h)
    for c in (verdict.get("flight_recorder") or {}).get("culprits") or []:
        ri = _int_or_none(c.get("rank")) if isinstance(c, Mapping) else None
        if ri is not None:
            ranks.add(ri)
    return host_of, slot_of, gpu_of, hosts, ranks


class _Builder:
    """Turns one verdict dict into the page model (see docs/html-report.md, 'Data model')."""

    def __init__(self, verdict: Mapping[str, Any]) -> None:
        self.v = verdict
        self.warnings: list[str] = []
        raw_chain = verdict.get("causal_chain") or []
        self.chain: list[Mapping[str, Any]] = [e for e in raw_chain if isinstance(e, Mapping)]
        if len(self.chain) != len(raw_chain):
            self.warnings.append(f"{len(raw_chain) - len(self.chain)} malformed chain entries ignored")
        self.places = _Places(verdict, self.chain)
        root = verdict.get("root_event")
        self.root: Mapping[str, Any] | None = root if isinstance(root, Mapping) else None
        self.root_id = self.root.get("id") if self.root else None
        times = [t for t in (_num(e.get("timestamp")) for e in self.chain) if t is not None]
        root_ts = _num(self.root.get("timestamp")) if self.root else None
        # The page's clock: seconds relative to the root event (what an incident timeline says:
        # "600 s after the Xid, every rank timed out"); else to the first timed event.
        self.t0: float | None = root_ts if root_ts is not None else (min(times) if times else None)

    # -- helpers ----------------------------------------------------------------------------
    def rel_ms(self, ts: Any) -> float | None:
        t = _num(ts)
        if t is None or self.t0 is None:
            return None
        return round((t - self.t0) * 1000.0, 1)

    def _sample(self, e: Mapping[str, Any], group_of_event: Mapping[Any, int]) -> dict[str, Any]:
        ctx = [str(x)[:MAX_TEXT] for x in (e.get("context") or [])]
        if len(ctx) > MAX_CONTEXT_LINES:
            ctx = [
                *ctx[: MAX_CONTEXT_LINES // 2],
                f"… {len(ctx) - MAX_CONTEXT_LINES} lines …",
                *ctx[-MAX_CONTEXT_LINES // 2 :],
            ]
        fields = e.get("fields") or {}
        return {
            "id": e.get("id"),
            "file": str(e.get("file") or ""),
            "line": e.get("line"),
            "text": str(e.get("text") or "")[:MAX_TEXT],
            "context": ctx,
            "rank": _int_or_none(e.get("rank")),
            "host": e.get("host"),
            "gpu": e.get("gpu"),
            "pid": e.get("pid"),
            "attempt": e.get("attempt"),
            "t": self.rel_ms(e.get("timestamp")),
            "ts": _utc(_num(e.get("timestamp"))),
            "ts_quality": e.get("timestamp_quality"),
            "severity": e.get("severity"),
            "fields": {str(k): str(v)[:200] for k, v in fields.items()} if isinstance(fields, Mapping) else {},
            "rule": e.get("rule"),
            "explained_by": e.get("explained_by"),
            "explained_by_group": group_of_event.get(e.get("explained_by")),
            "is_root": self.root_id is not None and e.get("id") == self.root_id,
            "mark": -1,
        }

    # -- the model --------------------------------------------------------------------------
    def build(self, title: str | None) -> dict[str, Any]:
        v = self.v
        verdict = v.get("verdict") or {}
        pl = self.places
        chain = list(self.chain)
        if self.root is not None and not any(e.get("id") == self.root_id for e in chain):
            # A root named by the verdict but absent from the chain still belongs on the page.
            chain.insert(0, {**self.root, "role": "root", "explained_by": None, "rule": "verdict.root_event"})
        order, members, group_of_event = self._grouping(chain)
        culprit = _culprit(verdict)
        marks, mark_of_event, untimed = self._marks(chain, order, group_of_event)
        groups = [
            self._group(gi, [chain[i] for i in idxs], group_of_event, mark_of_event, set(culprit["ranks"]))
            for gi, idxs in enumerate(members)
        ]
        edges: Counter[tuple[int, int]] = Counter()
        for e in chain:
            src = group_of_event.get(e.get("explained_by"))
            dst = group_of_event.get(e.get("id"))
            if src is not None and dst is not None and src != dst:
                edges[(src, dst)] += 1
        layers_of = self._layers(groups, edges)
        for g in groups:
            g["col"] = layers_of[g["id"]]
        root_group = next((g["id"] for g in groups if g["has_root"]), None)
        root_sample = None
        if root_group is not None:
            root_sample = next((s for s in groups[root_group]["samples"] if s["is_root"]), None)
        topo = self._topology(chain, group_of_event, groups, culprit)
        fr = v.get("flight_recorder") if isinstance(v.get("flight_recorder"), Mapping) else None
        if untimed:
            self.warnings.append(
                f"{untimed:,} of {len(chain):,} chain events have no timestamp; they are counted in the "
                "graph and evidence but not drawn on the timeline"
            )
        summary = str(verdict.get("summary") or "")
        category = str(verdict.get("category") or "unknown")
        return {
            "title": title or f"firstfault: {category} — {summary[:90]}",
            "schema_version": v.get("schema_version"),
            "generated": _dt.datetime.now(tz=_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "t0": self.t0,
            "t0_utc": _utc(self.t0),
            "t0_is_root": self.root is not None and _num(self.root.get("timestamp")) is not None,
            "verdict": {
                "category": category,
                "action": str(verdict.get("action") or "none"),
                "confidence": _num(verdict.get("confidence")),
                "summary": summary,
                "reasons": [str(r) for r in verdict.get("reasons") or []],
                "culprit": culprit,
                "explained_fraction": _num(v.get("explained_fraction")),
            },
            "root": root_sample,
            "root_group": root_group,
            "groups": groups,
            "edges": [[s, d, c] for (s, d), c in sorted(edges.items())],
            "hosts": pl.hosts,
            "ranks": pl.ranks,
            "rank_host": pl.rank_host,
            "rank_slot": pl.rank_slot,
            "rank_gpu": pl.rank_gpu if any(g is not None for g in pl.rank_gpu) else None,
            "pseudo_hosts": sorted(pl.host_index[h] for h in pl.pseudo),
            "marks": marks,
            # what the verdict's chain counts, as the terminal and Markdown say it (the root drawn
            # on the page when the chain lacks it is not one more error event)
            "n_events": _int_or_none(v.get("causal_chain_total")) or len(self.chain),
            "progress": self._progress(),
            "topology": topo,
            "flight_recorder": self._fr(fr),
            "alternatives": self._alternatives(v.get("alternatives") or [], group_of_event),
            "warnings": _warnings(v, fr),
            "report_warnings": self.warnings,
            "inputs": v.get("inputs") or {},
            "stats": v.get("stats") or {},
        }

    @staticmethod
    def _grouping(chain: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[list[int]], dict[Any, int]]:
        """Events grouped by (signature, role), groups in order of first appearance in time."""

        def tkey(e: Mapping[str, Any]) -> tuple[int, float]:
            t = _num(e.get("timestamp"))
            return (0, t) if t is not None else (1, 0.0)

        order = sorted(range(len(chain)), key=lambda i: tkey(chain[i]))
        gkeys: dict[tuple[str, str], int] = {}
        members: list[list[int]] = []
        for i in order:
            e = chain[i]
            role = str(e.get("role") or "cascade")
            if role not in ROLES:
                role = "cascade"
            k = (str(e.get("signature") or "unclassified"), role)
            if k not in gkeys:
                gkeys[k] = len(members)
                members.append([])
            members[gkeys[k]].append(i)
        group_of_event: dict[Any, int] = {}
        for gi, idxs in enumerate(members):
            for i in idxs:
                group_of_event[chain[i].get("id")] = gi
        return order, members, group_of_event

    def _marks(
        self, chain: Sequence[Mapping[str, Any]], order: list[int], group_of_event: Mapping[Any, int]
    ) -> tuple[dict[str, list[Any]], dict[Any, int], int]:
        """One compact column entry per timed event (time, rank, host, group): the timeline's data."""
        pl = self.places
        timed = [i for i in order if self.rel_ms(chain[i].get("timestamp")) is not None]
        untimed = len(chain) - len(timed)
        if len(timed) > MAX_MARKS:
            timed = self._thin(chain, timed, group_of_event)
        mark_t: list[float] = []
        mark_r: list[int] = []
        mark_h: list[int] = []
        mark_g: list[int] = []
        mark_of_event: dict[Any, int] = {}
        for i in timed:
            e = chain[i]
            r = _int_or_none(e.get("rank"))
            ri = pl.rank_index.get(r, -1) if r is not None else -1
            h = e.get("host")
            hi = pl.host_index.get(str(h), -1) if h else -1
            if hi < 0 and ri >= 0:
                hi = pl.rank_host[ri]
            mark_of_event.setdefault(e.get("id"), len(mark_t))
            mark_t.append(self.rel_ms(e.get("timestamp")))  # type: ignore[arg-type]
            mark_r.append(ri)
            mark_h.append(hi)
            mark_g.append(group_of_event[e.get("id")])
        return {"t": mark_t, "r": mark_r, "h": mark_h, "g": mark_g}, mark_of_event, untimed

    def _group(
        self,
        gi: int,
        evs: Sequence[Mapping[str, Any]],
        group_of_event: Mapping[Any, int],
        mark_of_event: Mapping[Any, int],
        culprit_ranks: set[int],
    ) -> dict[str, Any]:
        """One event group as the page draws it: counts, places, rules, evidence samples."""
        first = evs[0]
        sig, role = str(first.get("signature") or "unclassified"), str(first.get("role") or "cascade")
        if role not in ROLES:
            role = "cascade"
        ranks = sorted({r for r in (_int_or_none(e.get("rank")) for e in evs) if r is not None})
        hosts = sorted({str(e["host"]) for e in evs if e.get("host")}, key=_natural_key)
        rules = Counter(str(e.get("rule") or "") for e in evs)
        cats = Counter(str(e.get("category") or "") for e in evs)
        layers = Counter(str(e.get("layer") or "") for e in evs)
        files = Counter(str(e.get("file") or "") for e in evs)
        explainers = Counter(
            group_of_event[e.get("explained_by")] for e in evs if e.get("explained_by") in group_of_event
        )
        picked = self._pick_samples(evs, culprit_ranks)
        samples = [self._sample(e, group_of_event) for e in picked]
        for s in samples:
            s["mark"] = mark_of_event.get(s["id"], -1)
        ts_rel = [t for t in (self.rel_ms(e.get("timestamp")) for e in evs) if t is not None]
        name = _humanize(sig)
        return {
            "id": gi,
            "signature": sig,
            "name": name,
            "label": _group_label(name, role, len(evs), len(ranks), len(hosts)),
            "role": role,
            "category": cats.most_common(1)[0][0],
            "layer": layers.most_common(1)[0][0],
            "severity": str(first.get("severity") or ""),
            "count": len(evs),
            "n_ranks": len(ranks),
            "n_hosts": len(hosts),
            "ranks_text": _ranks_text(ranks),
            "hosts_text": ", ".join(hosts[:6]) + (f" … (+{len(hosts) - 6:,})" if len(hosts) > 6 else ""),
            "rules": [[k, c] for k, c in rules.most_common(8)],
            "files": [[k, c] for k, c in files.most_common(5)],
            "n_files": len(files),
            "explained_by": [[g, c] for g, c in explainers.most_common()],
            "t_first": min(ts_rel) if ts_rel else None,
            "t_last": max(ts_rel) if ts_rel else None,
            "untimed": len(evs) - len(ts_rel),
            "has_root": any(s["is_root"] for s in samples)
            or (self.root_id is not None and any(e.get("id") == self.root_id for e in evs)),
            "samples": samples,
        }

    def _thin(
        self, chain: Sequence[Mapping[str, Any]], timed: list[int], group_of_event: Mapping[Any, int]
    ) -> list[int]:
        """Keep the first event of each (group, rank) and an even sample of the rest."""
        seen: set[tuple[int, Any]] = set()
        keep: list[int] = []
        rest: list[int] = []
        for i in timed:
            e = chain[i]
            k = (group_of_event[e.get("id")], e.get("rank") if e.get("rank") is not None else e.get("host"))
            if k in seen and e.get("id") != self.root_id:
                rest.append(i)
            else:
                seen.add(k)
                keep.append(i)
        room = max(MAX_MARKS - len(keep), 0)
        if rest and room:
            step = len(rest) / room
            keep += [rest[int(j * step)] for j in range(min(room, len(rest)))]
        keep.sort(key=lambda i: _num(chain[i].get("timestamp")) or 0.0)
        self.warnings.append(
            f"timeline thinned: {len(keep):,} of {len(timed):,} timed events drawn (every group on every "
            "rank keeps its first event); counts everywhere else are exact"
        )
        return keep

    def _pick_samples(self, evs: Sequence[Mapping[str, Any]], culprit_ranks: set[int]) -> list[Mapping[str, Any]]:
        """First lines in time, plus the root and the culprits' own lines: what a reader checks."""
        picked: list[Mapping[str, Any]] = []
        ids: set[Any] = set()

        def add(e: Mapping[str, Any]) -> None:
            if e.get("id") not in ids:
                ids.add(e.get("id"))
                picked.append(e)

        for e in evs:
            if self.root_id is not None and e.get("id") == self.root_id:
                add(e)
        n_cul = 0
        for e in evs:
            if n_cul >= 3:
                break
            if _int_or_none(e.get("rank")) in culprit_ranks:
                add(e)
                n_cul += 1
        for e in evs:
            if len(picked) >= MAX_SAMPLES + n_cul + 1:
                break
            add(e)
        return picked[: MAX_SAMPLES + 4]

    @staticmethod
    def _layers(groups: Sequence[Mapping[str, Any]], edges: Mapping[tuple[int, int], int]) -> dict[int, int]:
        """Graph columns: roots at 0, each group one right of what explains it, tear-down last.

        Longest-path layering with a bounded number of relaxation rounds, so a cycle in the
        explained-by relation (it should not happen, but input is input) cannot loop forever.
        """
        col = {g["id"]: (0 if g["role"] == "root" else 1) for g in groups}
        for _ in range(min(len(groups), 32)):
            changed = False
            for s, d in edges:
                if groups[d]["role"] == "root":
                    continue
                if col[d] < col[s] + 1 and col[s] + 1 < 32:
                    col[d] = col[s] + 1
                    changed = True
            if not changed:
                break
        non_td = [col[g["id"]] for g in groups if g["role"] not in ("teardown", "noise")]
        last = (max(non_td) + 1) if non_td else 1
        for g in groups:
            if g["role"] == "teardown":
                col[g["id"]] = max(col[g["id"]], last)
            elif g["role"] == "noise":
                col[g["id"]] = -1
        return col

    def _progress(self) -> dict[str, Any] | None:
        """Per-rank last step, its time and median step time, aligned with ``ranks``."""
        rows = self.v.get("progress") or []
        if not rows:
            return None
        n = len(self.places.ranks)
        step: list[int | None] = [None] * n
        ts: list[float | None] = [None] * n
        med: list[float | None] = [None] * n
        for p in rows:
            r = _int_or_none(p.get("rank"))
            ri = self.places.rank_index.get(r, -1) if r is not None else -1
            if ri < 0:
                continue
            step[ri] = _int_or_none(p.get("last_step"))
            ts[ri] = self.rel_ms(p.get("last_step_ts"))
            m = _num(p.get("median_step_ms"))
            med[ri] = round(m, 2) if m is not None else None
        return {"step": step, "t": ts, "median_ms": med}

    def _topology(
        self,
        chain: Sequence[Mapping[str, Any]],
        group_of_event: Mapping[Any, int],
        groups: Sequence[Mapping[str, Any]],
        culprit: Mapping[str, list[Any]],
    ) -> dict[str, Any]:
        """Role of every known rank: culprit > failed (own root event) > victim > torn down > healthy."""
        pl = self.places
        n = len(pl.ranks)
        worst = [0] * n  # 0 none, 1 noise, 2 teardown, 3 cascade, 4 root
        rank_of_role = {"noise": 1, "teardown": 2, "cascade": 3, "root": 4}
        host_roots: set[tuple[int, str]] = set()
        for e in chain:
            g = group_of_event.get(e.get("id"))
            if g is None:
                continue
            lvl = rank_of_role[groups[g]["role"]]
            r = _int_or_none(e.get("rank"))
            ri = pl.rank_index.get(r, -1) if r is not None else -1
            if ri >= 0:
                worst[ri] = max(worst[ri], lvl)
            elif lvl == 4 and e.get("host") and e.get("gpu") not in (None, ""):
                host_roots.add((pl.host_index.get(str(e["host"]), -1), str(e["gpu"])))
        cul_ranks = set(culprit["ranks"])
        cul_hosts = {pl.host_index[h] for h in culprit["hosts"] if h in pl.host_index}
        cul_gpus = set(culprit["gpus"])
        role: list[int] = []
        for i, r in enumerate(pl.ranks):
            hi = pl.rank_host[i]
            gpu = pl.rank_gpu[i]
            slot = str(pl.rank_slot[i])
            is_cul = r in cul_ranks
            if not is_cul and not cul_ranks and hi in cul_hosts:
                # A host-level culprit (host OOM, NIC) or a named GPU on a culprit host.
                is_cul = (
                    not cul_gpus
                    or bool({gpu, slot} & cul_gpus)
                    or any(g.endswith((f":{slot}", f" {slot}")) for g in cul_gpus)
                )
            if not is_cul and ((hi, slot) in host_roots or (gpu is not None and (hi, gpu) in host_roots)):
                worst[i] = max(worst[i], 4)
            code = 1 if is_cul else {4: 2, 3: 3, 2: 4, 1: 0, 0: 0}[worst[i]]
            role.append(code)
        fr = self.v.get("flight_recorder") if isinstance(self.v.get("flight_recorder"), Mapping) else None
        fr_ranks = sorted(
            {
                pl.rank_index[r]
                for r in (
                    _int_or_none(c.get("rank")) for c in (fr or {}).get("culprits") or [] if isinstance(c, Mapping)
                )
                if r is not None and r in pl.rank_index
            }
        )
        counts = Counter(role)
        return {
            "roles": list(TOPO_ROLES),
            "role": role,
            "fr_culprits": fr_ranks,
            "counts": {TOPO_ROLES[k]: c for k, c in sorted(counts.items())},
            "culprit_hosts": sorted(cul_hosts),
        }

    @staticmethod
    def _fr(fr: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if not fr:
            return None
        culprits = []
        for c in fr.get("culprits") or []:
            if not isinstance(c, Mapping):
                continue
            frames = [str(f)[:300] for f in (c.get("frames") or [])][:12]
            culprits.append(
                {
                    "rank": c.get("rank"),
                    "kind": c.get("kind"),
                    "reason": str(c.get("reason") or ""),
                    "pg": c.get("pg"),
                    "seq": c.get("seq"),
                    "op": c.get("op"),
                    "score": _num(c.get("score")),
                    "frames": frames,
                    "time": _utc(tns / 1e9) if (tns := _num(c.get("time_ns"))) else None,
                }
            )
        groups = []
        for g in fr.get("groups") or []:
            if isinstance(g, Mapping):
                groups.append(
                    {
                        str(k): (
                            v
                            if isinstance(v, str | int | float | bool) or v is None
                            else json.dumps(v, default=str)[:300]
                        )
                        for k, v in g.items()
                    }
                )
        cols: list[str] = []
        for g in groups:
            for k in g:
                if k not in cols:
                    cols.append(k)
        return {"culprits": culprits, "groups": groups, "group_columns": cols[:10]}

    @staticmethod
    def _alternatives(alts: Iterable[Any], group_of_event: Mapping[Any, int]) -> list[dict[str, Any]]:
        out = []
        for a in alts:
            if not isinstance(a, Mapping):
                continue
            cul = a.get("culprit") or {}
            where = []
            if cul.get("ranks"):
                where.append("rank " + _ranks_text([r for r in cul["ranks"] if isinstance(r, int)]))
            if cul.get("hosts"):
                where.append("host " + ", ".join(map(str, cul["hosts"][:4])))
            if cul.get("gpus"):
                where.append("GPU " + ", ".join(map(str, cul["gpus"][:4])))
            out.append(
                {
                    "category": str(a.get("category") or ""),
                    "action": str(a.get("action") or ""),
                    "score": _num(a.get("score")),
                    "summary": str(a.get("summary") or ""),
                    "where": "; ".join(where),
                    "reasons": [str(r) for r in a.get("reasons") or []],
                    "group": group_of_event.get(a.get("root_event_id")),
                }
            )
        return out


def build_model(verdict_dict: Mapping[str, Any], *, title: str | None = None) -> dict[str, Any]:
    """The JSON-ready page model: aggregated groups, compact per-event columns, topology roles."""
    return _Builder(verdict_dict).build(title)


def _culprit(verdict: Mapping[str, Any]) -> dict[str, list[Any]]:
    vc = verdict.get("culprit") or {}
    return {
        "ranks": [r for r in (_int_or_none(x) for x in vc.get("ranks") or []) if r is not None],
        "hosts": [str(h) for h in vc.get("hosts") or []],
        "gpus": [str(g) for g in vc.get("gpus") or []],
        "links": [str(x) for x in vc.get("links") or []],
    }


def _warnings(v: Mapping[str, Any], fr: Mapping[str, Any] | None) -> list[str]:
    warnings = [str(w) for w in v.get("warnings") or []]
    if fr:  # the pipeline usually copies these into the verdict's own warnings already
        warnings += [f"flight recorder: {w}" for w in fr.get("warnings") or []]
    return list(dict.fromkeys(warnings))
