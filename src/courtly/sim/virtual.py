"""Virtual time: a model web of Poisson-changing pages, crawled by the real core.

Theory of operation
-------------------
`build_web` draws a model web from a seed: P pages over H hosts (host sizes
skewed, p ~ 1/rank^0.7), each host with a few path templates; a template has a
change rate drawn log-uniform between `rate_per_s_min` and `rate_per_s_max`
(once a quarter .. once an hour) and its pages scatter around it (log-normal,
`rate_spread`), clipped to the range: so rates are heterogeneous and a URL's
template says something about it, as on the real web. Importance is a power
law over a random ranking (w = rank^-alpha, top = 1); tiers are importance
quantiles (`tier_shares`).

`drive` runs a crawl of that web on a `VirtualClock`: every `period_s` the
planner (courtly's `RecrawlScheduler`, or a reference) grants URLs; they go
into the REAL `Frontier` (band = tier) and `fetch_tasks` virtual fetchers
lease host batches and fetch them one by one through the REAL `Politeness`
(`started` raises if a host's spacing were ever broken), with seeded
log-normal latency and failures (500, and 503 which doubles the host's delay).
A 200/304 answer syncs the page in the `FreshnessMeter`; courtly sends its
conditional headers and gets a 304 when nothing changed. Nothing sleeps: the
loop jumps to the next instant something happens (a plan, a batch end, the
frontier's `next_wakeup`), so the work is O(fetches + plans), never
O(pages x ticks). A batch is fetched in one step when leased (its fetches are
sequential on one host), and the frontier gets the key back at the batch end.

Initial state: at t = 0 every page has just been fetched (fresh, one fetch in
its history, no revisit sample); the references start from the same state.
Discovery is not modelled (no new URLs), so recrawl gets the whole budget.

Rules: every random draw comes from generators seeded by `SimParams.seed`;
same params -> same numbers.
"""

from __future__ import annotations

import heapq
import math
import random
import time as _wall
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from courtly.core.frontier import Frontier
from courtly.core.politeness import Politeness, PolitenessConfig
from courtly.core.recrawl import ChangeHistory, RecrawlPolicy, RecrawlScheduler, conditional_headers, policy_for_intent
from courtly.core.types import UrlItem
from courtly.sim.freshness import FreshnessMeter

__all__ = ["VirtualClock", "SimParams", "ModelWeb", "build_web", "Planner", "CourtlyPlanner",
           "FixedIntervalPlanner", "DriveResult", "drive", "courtly_policy"]

DAY_S = 86400.0
HOUR_S = 3600.0


class VirtualClock:
    """A clock that only moves when told to (`advance_to`); `sleep_until` jumps."""

    def __init__(self, start_at: float = 0.0) -> None:
        self._now = start_at

    def now(self) -> float:
        return self._now

    def advance_to(self, at: float) -> None:
        if at < self._now:
            raise ValueError(f"virtual time cannot go back ({at} < {self._now})")
        self._now = at

    async def sleep_until(self, at: float) -> None:
        self.advance_to(max(self._now, at))


@dataclass(frozen=True, slots=True)
class SimParams:
    seed: int = 1
    days: float = 30.0
    pages: int = 100_000
    hosts: int = 1_000
    budget: int = 50_000                  # fetches per day
    intent: str = "search"
    index: str = "freshness"              # courtly's index ("staleness" for the greedy rule)
    templates_per_host: int = 4
    rate_per_s_min: float = 1.0 / (90 * DAY_S)
    rate_per_s_max: float = 1.0 / HOUR_S
    rate_spread: float = 0.5              # sd of log(rate) around the template's rate
    importance_alpha: float = 0.8
    tier_shares: tuple[float, ...] = (0.01, 0.09, 0.90)
    failure_rate: float = 0.01            # half 500, half 503
    latency_s_median: float = 0.3
    latency_sigma: float = 0.5
    delay_s: float = 1.0
    fetch_tasks: int = 256
    batch_max: int = 20
    period_s: float = 300.0
    warmup_days: float = 0.0

    def __post_init__(self) -> None:
        for name in ("days", "warmup_days", "importance_alpha", "failure_rate", "period_s", "delay_s"):
            if not math.isfinite(getattr(self, name)):   # inf days never ended; NaN passes every test
                raise ValueError(f"{name} must be a finite number, not {getattr(self, name)}")
        if self.pages < 1 or self.hosts < 1 or self.days <= 0 or self.budget < 0:
            raise ValueError("pages, hosts >= 1; days > 0; budget >= 0")
        if self.period_s <= 0 or self.importance_alpha < 0:
            raise ValueError("period_s must be > 0 and importance_alpha >= 0")
        if not 0 < self.rate_per_s_min <= self.rate_per_s_max:
            raise ValueError("0 < rate_per_s_min <= rate_per_s_max")
        if not 0 <= self.warmup_days < self.days:
            raise ValueError("warmup_days must be in [0, days)")
        if not 0 <= self.failure_rate < 1:
            raise ValueError("failure_rate in [0, 1)")


@dataclass(slots=True)
class ModelWeb:
    urls: list[str]
    host_of: list[str]
    rate: np.ndarray          # true change rate per second
    importance: np.ndarray    # (0, 1]
    tier: np.ndarray          # int
    index_of: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.index_of:
            self.index_of = {u: i for i, u in enumerate(self.urls)}

    def __len__(self) -> int:
        return len(self.urls)


def build_web(p: SimParams, n_tiers: int = 3) -> ModelWeb:
    """The model web of `p` (a pure function of its fields)."""
    g = np.random.default_rng([p.seed, 0x5EB])
    n, h, t = p.pages, p.hosts, p.templates_per_host
    host_p = 1.0 / np.arange(1, h + 1) ** 0.7
    host = g.choice(h, size=n, p=host_p / host_p.sum())
    tmpl = g.integers(0, t, size=n)
    lo, hi = math.log(p.rate_per_s_min), math.log(p.rate_per_s_max)
    tmpl_rate = g.uniform(lo, hi, size=(h, t))
    log_rate = np.clip(tmpl_rate[host, tmpl] + g.normal(0.0, p.rate_spread, size=n), lo, hi)
    rank = g.permutation(n) + 1
    importance = rank.astype(float) ** -p.importance_alpha
    shares = list(p.tier_shares[:n_tiers])
    shares[-1] = 1.0
    cuts = np.ceil(np.cumsum(shares) * n)
    tier = np.searchsorted(cuts, rank - 0.5, side="right").clip(0, n_tiers - 1)
    urls = [f"https://h{host[i]}.example/s{tmpl[i]}/p{i}" for i in range(n)]
    hosts = [f"h{x}.example" for x in host.tolist()]
    return ModelWeb(urls, hosts, np.exp(log_rate), importance, tier.astype(np.int64))


def courtly_policy(p: SimParams) -> RecrawlPolicy:
    return policy_for_intent(p.intent, p.budget, period_s=p.period_s, index=p.index)


# ---- planners ------------------------------------------------------------------------

class Planner(Protocol):
    def plan(self, now: float) -> Sequence[str]: ...
    def validators(self, url: str) -> dict[str, str]: ...
    def fetched(self, url: str, now: float, status: int, content_hash: str, etag: str) -> None: ...
    def failed(self, url: str, now: float) -> None: ...


class CourtlyPlanner:
    """courtly's `RecrawlScheduler`, seeded with the model web at t = 0."""

    def __init__(self, web: ModelWeb, policy: RecrawlPolicy, rng: random.Random) -> None:
        self.scheduler = RecrawlScheduler(policy, rng)
        self.plans = 0
        self.late = 0
        imp, tiers = web.importance.tolist(), web.tier.tolist()
        for i, url in enumerate(web.urls):
            hist = ChangeHistory(policy.history_max, last_fetched_at=0.0, content_hash='"v0"',
                                 etag='"v0"', fetches=1)
            self.scheduler.add(url, 0.0, host=web.host_of[i], tier=min(tiers[i], len(policy.tiers) - 1),
                               importance=imp[i], history=hist)

    def plan(self, now: float) -> Sequence[str]:
        plan = self.scheduler.plan(now)
        self.plans += 1
        self.late += plan.late
        return plan.urls

    def validators(self, url: str) -> dict[str, str]:
        return conditional_headers(self.scheduler.history(url))

    def fetched(self, url: str, now: float, status: int, content_hash: str, etag: str) -> None:
        self.scheduler.record_fetch(url, now, status=status, content_hash=content_hash, etag=etag)

    def failed(self, url: str, now: float) -> None:
        self.scheduler.record_failure(url, now)


class FixedIntervalPlanner:
    """A reference: page i every `intervals[i]` seconds from a seeded phase."""

    def __init__(self, web: ModelWeb, intervals: np.ndarray, rng: random.Random, period_s: float) -> None:
        self._iv = intervals.tolist()
        self._period = period_s
        self._heap = [(rng.random() * iv, i) for i, iv in enumerate(self._iv) if math.isfinite(iv)]
        heapq.heapify(self._heap)
        self._urls = web.urls
        self._index = web.index_of

    def plan(self, now: float) -> Sequence[str]:
        out, heap, horizon = [], self._heap, now + self._period
        while heap and heap[0][0] <= horizon:
            _, i = heapq.heappop(heap)
            out.append(self._urls[i])
        return out

    def validators(self, url: str) -> dict[str, str]:
        return {}

    def fetched(self, url: str, now: float, status: int = 200, content_hash: str = "", etag: str = "") -> None:
        i = self._index[url]
        heapq.heappush(self._heap, (now + self._iv[i], i))

    def failed(self, url: str, now: float) -> None:
        self.fetched(url, now)


# ---- the event loop ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _PageItem(UrlItem):
    """A frontier item that knows its page's index in the model web."""

    page: int = -1


@dataclass(slots=True)
class DriveResult:
    fetches: int = 0
    failures: int = 0
    not_modified: int = 0
    changed: int = 0
    granted: int = 0
    leases: int = 0
    wall_s: float = 0.0


def drive(web: ModelWeb, planner: Planner, p: SimParams, meter: FreshnessMeter,
          rng: random.Random, clock: VirtualClock | None = None,
          fetch_log: list | None = None, on_day=None) -> DriveResult:
    """Crawl `web` for `p.days` of virtual time; the meter accumulates freshness.

    `fetch_log`, if given, receives (key, started_at, ended_at, url) per fetch;
    `on_day(day)`, if given, is called as each virtual day begins (progress).
    A leased batch is fetched at once and its key given back to the frontier
    with its next ready instant (no lease can see the key before that); `busy`
    only keeps the batch ends, to know when a fetch task is free again."""
    started = _wall.perf_counter()
    clock = clock or VirtualClock()
    end = p.days * DAY_S
    frontier = Frontier(rng, batch_max=p.batch_max, lease_s=HOUR_S)
    pol = Politeness(PolitenessConfig(delay_s=p.delay_s))
    out = DriveResult()
    fetch = _batch_fetcher(web, planner, p, meter, rng, frontier, pol, out, fetch_log)
    item_of = {url: _PageItem(url, key, band=band, page=i)
               for i, (url, key, band) in enumerate(zip(web.urls, web.host_of, web.tier.tolist()))}
    key_ready_at = pol.ready_at
    busy: list[float] = []
    free, next_plan = p.fetch_tasks, 0.0
    next_day = 0.0 if on_day is not None else math.inf
    while True:
        now = next_plan
        if not free:
            if busy[0] < now:
                now = busy[0]
        else:
            wake = frontier.next_wakeup()
            if wake is not None and wake < now:
                now = max(wake, clock.now())
        if now >= end:
            break
        if now >= next_day:
            on_day(int(now // DAY_S))
            next_day = (now // DAY_S + 1) * DAY_S
        clock.advance_to(now)
        while busy and busy[0] <= now:
            heapq.heappop(busy)
            free += 1
        if now >= next_plan:
            urls = planner.plan(now)
            out.granted += len(urls)
            for url in urls:
                item = item_of[url]
                frontier.add(item, key_ready_at(item.key, now))
            next_plan += p.period_s
        while free:
            lease = frontier.lease(now)
            if lease is None:
                break
            free -= 1
            heapq.heappush(busy, fetch(lease, now))
    out.wall_s = _wall.perf_counter() - started
    return out


def _batch_fetcher(web: ModelWeb, planner: Planner, p: SimParams, meter: FreshnessMeter, rng: random.Random,
                   frontier: Frontier, pol: Politeness, out: DriveResult, fetch_log: list | None):
    """fetch(lease, now) -> end of the batch: its fetches one after the other through politeness."""
    end = p.days * DAY_S
    mu_lat, sigma, fail_p = math.log(p.latency_s_median), p.latency_sigma, p.failure_rate
    lognorm, rand = rng.lognormvariate, rng.random
    sync, change_at, version = meter.sync, meter.change_at, meter.version
    pfetched, pfailed, pvalid = planner.fetched, planner.failed, planner.validators
    started_at, finished_at, complete = pol.started, pol.finished, frontier.complete

    def fetch(lease, now: float) -> float:
        key, t, items = lease.key, now, lease.items
        deadline = lease.expires_at - 60.0
        done = failures = not_modified = changes = 0
        last_end = now
        for item in items:  # the frontier leased the key when ready; `finished` says when next
            if t >= deadline or t >= end:
                break
            started_at(key, t)
            latency = lognorm(mu_lat, sigma)
            t_end = t + latency
            url = item.url
            if fetch_log is not None:
                fetch_log.append((key, t, t_end, url))
            u = rand()
            if u < fail_p:
                status = 500 if u < fail_p / 2 else 503
                t = finished_at(key, t_end, response_s=latency, status=status)
                pfailed(url, t_end)
                failures += 1
            else:
                i = item.page
                changed = change_at[i] <= t_end
                etag = f'"v{version[i] + changed}"'
                if not changed and pvalid(url).get("If-None-Match") == etag:
                    status = 304
                    not_modified += 1
                else:
                    status = 200
                changes += changed
                sync(i, t_end)
                t = finished_at(key, t_end, response_s=latency, status=status)
                pfetched(url, t_end, status, etag, etag)
            done += 1
            last_end = t_end
        out.leases += 1
        out.fetches += done
        out.failures += failures
        out.not_modified += not_modified
        out.changed += changes
        complete(lease.lease_id, t, items[done:])
        return last_end

    return fetch
