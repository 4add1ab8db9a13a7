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
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from firstfault.report.html_places import Places, progress, topology
from firstfault.report.html_sections import alternatives_section, culprit_of, flight_recorder_section, warnings_of
from firstfault.report.html_values import group_label, humanize, int_or_none, natural_key, num, ranks_text, utc

#: Evidence lines embedded per event group (the first ones in time, plus the root and culprits).
MAX_SAMPLES = 5
#: Context (traceback) lines kept per sample; the verdict itself caps at 30.
MAX_CONTEXT_LINES = 40
#: Longest raw line embedded; parse already caps at 2,000 characters.
MAX_TEXT = 2000
#: Beyond this many timed events the per-event columns are thinned (first event of each
#: group on each rank is always kept) so the file stays small; a warning says so.
MAX_MARKS = 250_000

ROLES = ("root", "cascade", "teardown", "noise")

_TEMPLATE = "report.html.j2"


class _Builder:
    """Turns one verdict dict into the page model (see docs/html-report.md, 'Data model')."""

    def __init__(self, verdict: Mapping[str, Any]) -> None:
        self.v = verdict
        self.warnings: list[str] = []
        raw_chain = verdict.get("causal_chain") or []
        self.chain: list[Mapping[str, Any]] = [e for e in raw_chain if isinstance(e, Mapping)]
        if len(self.chain) != len(raw_chain):
            self.warnings.append(f"{len(raw_chain) - len(self.chain)} malformed chain entries ignored")
        self.places = Places(verdict, self.chain)
        root = verdict.get("root_event")
        self.root: Mapping[str, Any] | None = root if isinstance(root, Mapping) else None
        self.root_id = self.root.get("id") if self.root else None
        times = [t for t in (num(e.get("timestamp")) for e in self.chain) if t is not None]
        root_ts = num(self.root.get("timestamp")) if self.root else None
        # The page's clock: seconds relative to the root event (what an incident timeline says:
        # "600 s after the Xid, every rank timed out"); else to the first timed event.
        self.t0: float | None = root_ts if root_ts is not None else (min(times) if times else None)

    # -- helpers ----------------------------------------------------------------------------
    def rel_ms(self, ts: Any) -> float | None:
        t = num(ts)
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
            "rank": int_or_none(e.get("rank")),
            "host": e.get("host"),
            "gpu": e.get("gpu"),
            "pid": e.get("pid"),
            "attempt": e.get("attempt"),
            "t": self.rel_ms(e.get("timestamp")),
            "ts": utc(num(e.get("timestamp"))),
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
        culprit = culprit_of(verdict)
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
        topo = topology(self.places, self.v, chain, group_of_event, groups, culprit)
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
            "t0_utc": utc(self.t0),
            "t0_is_root": self.root is not None and num(self.root.get("timestamp")) is not None,
            "verdict": {
                "category": category,
                "action": str(verdict.get("action") or "none"),
                "confidence": num(verdict.get("confidence")),
                "summary": summary,
                "reasons": [str(r) for r in verdict.get("reasons") or []],
                "culprit": culprit,
                "explained_fraction": num(v.get("explained_fraction")),
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
            "n_events": int_or_none(v.get("causal_chain_total")) or len(self.chain),
            "progress": progress(self.places, self.v.get("progress") or [], self.rel_ms),
            "topology": topo,
            "flight_recorder": flight_recorder_section(fr),
            "alternatives": alternatives_section(v.get("alternatives") or [], group_of_event),
            "warnings": warnings_of(v, fr),
            "report_warnings": self.warnings,
            "inputs": v.get("inputs") or {},
            "stats": v.get("stats") or {},
        }

    @staticmethod
    def _grouping(chain: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[list[int]], dict[Any, int]]:
        """Events grouped by (signature, role), groups in order of first appearance in time."""

        def tkey(e: Mapping[str, Any]) -> tuple[int, float]:
            t = num(e.get("timestamp"))
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
            r = int_or_none(e.get("rank"))
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
        ranks = sorted({r for r in (int_or_none(e.get("rank")) for e in evs) if r is not None})
        hosts = sorted({str(e["host"]) for e in evs if e.get("host")}, key=natural_key)
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
        name = humanize(sig)
        return {
            "id": gi,
            "signature": sig,
            "name": name,
            "label": group_label(name, role, len(evs), len(ranks), len(hosts)),
            "role": role,
            "category": cats.most_common(1)[0][0],
            "layer": layers.most_common(1)[0][0],
            "severity": str(first.get("severity") or ""),
            "count": len(evs),
            "n_ranks": len(ranks),
            "n_hosts": len(hosts),
            "ranks_text": ranks_text(ranks),
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
        keep.sort(key=lambda i: num(chain[i].get("timestamp")) or 0.0)
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
            if int_or_none(e.get("rank")) in culprit_ranks:
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


def build_model(verdict_dict: Mapping[str, Any], *, title: str | None = None) -> dict[str, Any]:
    """The JSON-ready page model: aggregated groups, compact per-event columns, topology roles."""
    return _Builder(verdict_dict).build(title)
