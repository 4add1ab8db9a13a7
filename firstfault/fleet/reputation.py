"""Node reputation: per host / GPU / link history, lemon nodes, "seen before", noise signatures.

Lemon test (documented in docs/fleet.md). For each kind of place (host, GPU, link), count the
distinct jobs each place was the culprit of, over incidents that blame the machine (a job's own
exception or OOM does not count, see ``incident.CODE_CATEGORIES``). Under the null hypothesis
every place of the kind fails at the fleet's rate ``lambda = culprit jobs / places``, so its count
is Poisson(lambda). A place is a lemon when its count is at least ``min_jobs`` and
``P(X >= count) x places <= alpha`` (Bonferroni over every place tested; ``alpha`` 0.01: about one
false lemon in a hundred fleets of healthy nodes). Lemons inflate ``lambda``; it is re-estimated
without the places flagged so far until the set stops changing. Exposure: when every stored
verdict lists the hosts its job ran on (``inputs.hosts``), a host's expected count is the fleet's
rate per job run times the jobs it ran (``lemon_test_exposed``), so a busy host is not a lemon for
being busy; otherwise exposure is assumed uniform (every node ran about as many jobs).

Noise (L4's cross-job filtering: log events that healthy jobs print too do not indicate a
failure, Jiang et al., "L4: Diagnosing Large-scale LLM Training Failures via Automated Log
Analysis", FSE 2025 industry track): a signature is noise when at least ``min_healthy`` healthy
runs show it and its share of healthy runs is at least ``noise_ratio`` of its share of failed runs.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from enum import StrEnum

from firstfault.fleet.incident import Incident
from firstfault.fleet.poisson import bonferroni, poisson_sf
from firstfault.fleet.store import PlaceHit, SignatureCount, Store

DAY = 86400.0


class Trend(StrEnum):
    """How a place's incidents move: first seen lately, more lately, as before, none lately."""

    NEW = "new"
    RISING = "rising"
    STEADY = "steady"
    QUIET = "quiet"


@dataclass(frozen=True, slots=True)
class Policy:
    """The thresholds of the lemon and noise tests, each with the reason for its value."""

    alpha: float = 0.01  # family-wise false-lemon rate per kind (Bonferroni)
    min_jobs: int = 3  # two failed jobs on one node is a coincidence an operator does not drain for
    recent_days: float = 14.0  # the window a trend compares with the rest of the history
    hosts: int | None = None  # the fleet's size; None: the hosts the store knows (a lower bound)
    gpus_per_host: int = 8  # HGX H100/H200 boards
    min_healthy: int = 2  # one healthy run printing a signature is an anecdote
    noise_ratio: float = 0.5  # healthy share at least half the failed share: not a failure's mark


@dataclass(frozen=True, slots=True)
class PlaceStats:
    """One host, GPU or link's record."""

    kind: str
    place: str
    incidents: int
    jobs: int
    first_seen: float | None
    last_seen: float | None
    recent: int
    trend: Trend
    p_value: float  # Bonferroni-corrected
    lemon: bool
    categories: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SignatureStats:
    signature: str
    failed: int
    healthy: int
    noise: bool


@dataclass(frozen=True, slots=True)
class Fleet:
    """Everything the fleet report shows."""

    places: list[PlaceStats]
    signatures: list[SignatureStats]
    failed: int
    healthy: int
    population: dict[str, int]
    rate: dict[str, float]  # the null rate (culprit jobs per place) of each kind, lemons left out
    policy: Policy = field(default_factory=Policy)

    def lemons(self, kind: str | None = None) -> list[PlaceStats]:
        return [p for p in self.places if p.lemon and (kind is None or p.kind == kind)]

    def lemon_hosts(self) -> list[str]:
        """Hosts to drain: a lemon host, or the host of a lemon GPU (a GPU's excess is diluted
        among the other seven at the host level; the GPU test sees it sooner)."""
        hosts = {p.place for p in self.lemons("host")}
        hosts |= {p.place.split("/", 1)[0] for p in self.lemons("gpu") if not p.place.startswith("?/")}
        return sorted(hosts)


def fleet(store: Store, policy: Policy | None = None, until: float | None = None) -> Fleet:
    """The fleet's reputation from every incident in the store (up to ``until``, epoch seconds)."""
    policy = policy or Policy()
    hits = store.machine_hits(until)
    hosts = policy.hosts or max(store.known_hosts(), 1)
    by_kind: dict[str, list[PlaceHit]] = defaultdict(list)
    for h in hits:
        by_kind[h.kind].append(h)
    now = max((h.failed_at for h in hits if h.failed_at is not None), default=None)
    places: list[PlaceStats] = []
    population: dict[str, int] = {}
    rate: dict[str, float] = {}
    exposure = store.exposure()
    for kind, rows in sorted(by_kind.items()):
        n = {"host": hosts, "gpu": hosts * policy.gpus_per_host}.get(kind, len({h.place for h in rows}))
        stats, lam = _kind_stats(kind, rows, max(n, 1), policy, now, exposure if kind == "host" else None)
        places += stats
        population[kind], rate[kind] = max(n, 1), lam
    counts, failed, healthy = store.signature_counts()
    return Fleet(
        places=sorted(places, key=lambda p: (not p.lemon, -p.jobs, p.kind, p.place)),
        signatures=noise_signatures(counts, failed, healthy, policy),
        failed=failed,
        healthy=healthy,
        population=population,
        rate=rate,
        policy=policy,
    )


def _kind_stats(
    kind: str,
    rows: list[PlaceHit],
    population: int,
    policy: Policy,
    now: float | None,
    exposure: dict[str, int] | None = None,
) -> tuple[list[PlaceStats], float]:
    grouped: dict[str, list[PlaceHit]] = defaultdict(list)
    for h in rows:
        grouped[h.place].append(h)
    jobs = {p: len({h.job for h in hs}) for p, hs in grouped.items()}
    if exposure:
        population = max(population, len(exposure))
        lemons, lam = lemon_test_exposed(jobs, exposure, population, policy)
    else:
        lemons, lam = lemon_test(jobs, population, policy)
    out = []
    for place, hs in grouped.items():
        times = [h.failed_at for h in hs if h.failed_at is not None]
        recent = sum(1 for t in times if now is not None and t >= now - policy.recent_days * DAY)
        mean = lam * _exposed(place, jobs, exposure) if exposure else lam
        p = bonferroni(poisson_sf(jobs[place], mean), population)
        out.append(
            PlaceStats(
                kind=kind,
                place=place,
                incidents=len(hs),
                jobs=jobs[place],
                first_seen=min(times, default=None),
                last_seen=max(times, default=None),
                recent=recent,
                trend=_trend(times, recent, now, policy.recent_days),
                p_value=p,
                lemon=place in lemons,
                categories=tuple(c for c, _ in Counter(str(h.category) for h in hs).most_common(3)),
            )
        )
    return out, lam


def lemon_test(jobs: dict[str, int], population: int, policy: Policy) -> tuple[set[str], float]:
    """The places whose distinct-job count is improbably high; and the null rate used."""
    flagged: set[str] = set()
    lam = 0.0
    for _ in range(10):
        rest = sum(n for p, n in jobs.items() if p not in flagged)
        lam = rest / max(1, population - len(flagged))
        now = {
            p
            for p, n in jobs.items()
            if n >= policy.min_jobs and bonferroni(poisson_sf(n, lam), population) <= policy.alpha
        }
        if now == flagged:
            break
        flagged = now
    return flagged, lam


def lemon_test_exposed(
    jobs: dict[str, int], exposure: dict[str, int], population: int, policy: Policy
) -> tuple[set[str], float]:
    """The lemon test with each host's exposure: under the null a host blamed for jobs at the fleet's
    rate per job it ran, ``lambda = culprit jobs / jobs run``, is Poisson(lambda x its jobs run). A
    host that ran ten times the jobs may be blamed ten times as often without being a lemon."""
    flagged: set[str] = set()
    lam = 0.0
    for _ in range(10):
        blamed = sum(n for p, n in jobs.items() if p not in flagged)
        ran = sum(_exposed(p, jobs, exposure) for p in exposure.keys() | jobs.keys() if p not in flagged)
        lam = blamed / max(1, ran)
        now = {
            p
            for p, n in jobs.items()
            if n >= policy.min_jobs
            and bonferroni(poisson_sf(n, lam * _exposed(p, jobs, exposure)), population) <= policy.alpha
        }
        if now == flagged:
            break
        flagged = now
    return flagged, lam


def _exposed(place: str, jobs: dict[str, int], exposure: dict[str, int] | None) -> int:
    """Jobs a host ran: at least the jobs it was blamed for (a verdict may name a host it did not list)."""
    return max((exposure or {}).get(place, 0), jobs.get(place, 0), 1)


def _trend(times: list[float], recent: int, now: float | None, recent_days: float) -> Trend:
    if now is None or not times:
        return Trend.STEADY
    if min(times) >= now - recent_days * DAY:
        return Trend.NEW
    if recent == 0:
        return Trend.QUIET
    earlier_days = max((now - recent_days * DAY - min(times)) / DAY, recent_days)
    earlier_rate = (len(times) - recent) / earlier_days
    if recent >= 2 and recent / recent_days > 2 * earlier_rate:
        return Trend.RISING
    return Trend.STEADY


def noise_signatures(counts: list[SignatureCount], failed: int, healthy: int, policy: Policy) -> list[SignatureStats]:
    """Each signature with whether healthy runs print it as often as failed ones (L4-style)."""
    out = []
    for c in counts:
        noise = (
            healthy > 0
            and c.healthy >= policy.min_healthy
            and c.healthy / healthy >= policy.noise_ratio * (c.failed / max(failed, 1))
        )
        out.append(SignatureStats(c.signature, c.failed, c.healthy, noise))
    return sorted(out, key=lambda s: (-s.failed - s.healthy, s.signature))


_NOUN = {"gpu": "GPU", "host": "host", "link": "link"}


def seen_before(store: Store, inc: Incident, noise: set[str] | None = None) -> list[str]:
    """Lines for one incident: how often its GPU, host and link failed earlier jobs, whether its
    signature is new, and whether healthy runs print it too."""
    lines = []
    if inc.blames_machine:
        for kind, place in sorted(inc.places(), key=lambda kp: ("gpu", "host", "link").index(kp[0])):
            earlier = _earlier(store.place_history(kind, place), inc)
            noun = _NOUN[kind]
            if not earlier:
                lines.append(f"first time on this {noun} ({place})")
                continue
            days = _days(inc.failed_at, earlier)
            times = "once" if len(earlier) == 1 else f"{len(earlier)} times"
            lines.append(f"seen before: {times} on this {noun} ({place}){days}")
    if inc.signature and not inc.healthy:
        earlier_jobs = _earlier(store.signature_history(inc.signature), inc)
        if earlier_jobs:
            lines.append(f"signature {inc.signature}: seen in {len(earlier_jobs)} earlier job(s)")
        else:
            lines.append(f"signature {inc.signature}: new to this fleet")
        if noise and inc.signature in noise:
            lines.append(f"signature {inc.signature}: healthy runs print it too (learnt as noise)")
    return lines


def _earlier(history: list[tuple[str, str, float | None]], inc: Incident) -> list[float | None]:
    """Times of other jobs' incidents before this one (all others when times are unknown)."""
    out: dict[str, float | None] = {}
    for key, job, t in history:
        if key == inc.key or job == inc.job:
            continue
        if inc.failed_at is not None and t is not None and t >= inc.failed_at:
            continue
        out.setdefault(job, t)
    return list(out.values())


def _days(at: float | None, earlier: list[float | None]) -> str:
    known = [t for t in earlier if t is not None]
    if at is None or not known:
        return ""
    span = max(1, math.ceil((at - min(known)) / DAY))
    return f" in {span} day" + ("s" if span != 1 else "")
