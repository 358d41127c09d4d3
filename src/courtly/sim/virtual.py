"""The freshness simulation's model web: Poisson-changing pages with importance and tiers.

Theory of operation
-------------------
`build_web` draws a model web from a seed: P pages over H hosts (host sizes
skewed, p ~ 1/rank^0.7), each host with a few path templates; a template has a
change rate drawn log-uniform between `rate_per_s_min` and `rate_per_s_max`
(once a quarter .. once an hour) and its pages scatter around it (log-normal,
`rate_spread`), clipped to the range: so rates are heterogeneous and a URL's
template says something about it, as on the real web. Importance is a power
law over a random ranking (w = rank^-alpha, top = 1); tiers are importance
quantiles (`tier_shares`): the references' tier bounds and the figures' rows.

The crawl itself is the real runtime's (sim/rtfresh.py, in virtual time);
`SimParams` also holds what its fake fetcher answers with (failures,
latency) and the crawl's settings (politeness delay, fetch tasks, batch
size, plan period). The crawl loop that used to stand in for the runtime
here (`drive`) is retired: the runtime's own figures are the ones that count.

Rules: every random draw comes from generators seeded by `SimParams.seed`;
same params -> same web.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from courtly.core.recrawl import RecrawlPolicy, policy_for_intent

__all__ = ["SimParams", "ModelWeb", "build_web", "courtly_policy", "DAY_S", "HOUR_S"]

DAY_S = 86400.0
HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class SimParams:
    seed: int = 1
    days: float = 10.0
    pages: int = 10_000
    hosts: int = 100
    budget: int = 5_000                   # fetches per day, discovery included (the runtime's daily budget)
    intent: str = "search"
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
    warmup_days: float = 2.0              # left out of the figures: discovery, its debt, the first estimates

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
    """The intent's policy the references are bounded by (tiers, recrawl share)."""
    return policy_for_intent(p.intent, p.budget, period_s=p.period_s)
