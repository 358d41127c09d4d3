"""The recrawl policies: tiers, the intents' profiles, and what a plan returns.

Pure data and validation for `courtly.core.recrawl` (which re-exports every
name here): a `Tier` bounds how often its pages are fetched, a `RecrawlPolicy`
is an intent's budget and tiers, `RecrawlPlan` is what one planning period
grants, and `DayTierStats` is a row of `courtly report`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from courtly.core.changerate import DAY_S
from courtly.core.types import Decision

__all__ = ["Tier", "SEARCH_TIERS", "RecrawlPolicy", "policy_for_intent", "RecrawlPlan", "DayTierStats"]

_HOUR = 3600.0


# ---- policy -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Tier:
    """Revisit bounds of one importance tier; rates are clamped to its bounds."""

    name: str
    interval_s_min: float
    interval_s_max: float                 # the max age: a URL this old is forced
    rate_per_s_min: float = 1.0 / (365 * DAY_S)
    rate_per_s_max: float = 0.0           # 0 = 4 / interval_s_min

    def __post_init__(self) -> None:
        if not 0 < self.interval_s_min <= self.interval_s_max:
            raise ValueError(f"tier {self.name}: need 0 < interval_s_min <= interval_s_max")
        if self.rate_per_s_min <= 0 or (self.rate_per_s_max and self.rate_per_s_max < self.rate_per_s_min):
            raise ValueError(f"tier {self.name}: bad rate bounds")

    @property
    def rate_max(self) -> float:
        return self.rate_per_s_max or 4.0 / self.interval_s_min


SEARCH_TIERS = (
    Tier("top", 15 * 60.0, DAY_S),
    Tier("mid", _HOUR, 7 * DAY_S),
    Tier("rest", 6 * _HOUR, 90 * DAY_S),
)


@dataclass(frozen=True, slots=True)
class RecrawlPolicy:
    intent: str = "search"
    daily_budget: int = 100_000           # fetches per day, recrawl + discovery
    tiers: tuple[Tier, ...] = SEARCH_TIERS
    discovery_floor: float = 0.2          # share reserved for discovery when it has work
    recrawl_share_max: float = 1.0
    period_s: float = 300.0               # plan() is called this often
    index: str = "freshness"              # or "staleness" (greedy importance x P(changed))
    history_max: int = 16                 # revisit samples kept per URL
    prior_weight: float = 2.0             # revisits the prior is worth (pseudo-observations)
    rate_per_s_default: float = 1.0 / DAY_S
    rebalance_s: float = 6 * _HOUR        # re-solve mu this often
    replace_cycle_s: float = 7 * DAY_S    # every URL is re-placed with the current mu this often (0: never)
    solve_sample_max: int = 512
    headroom: float = 0.05                # plan this share of the budget as pull-ahead, not as due work
    retry_s: float = _HOUR                # after a failed fetch (capped by the interval)
    hint_trust_min: float = 0.2           # hints of a host whose hints rarely meant change are ignored
    hint_trust_after: int = 10

    def __post_init__(self) -> None:
        if self.intent not in ("archive", "search", "monitor"):
            raise ValueError(f"unknown intent {self.intent!r}")
        if self.daily_budget < 0 or not self.tiers:
            raise ValueError("daily_budget must be >= 0 and tiers non-empty")
        if not 0 <= self.discovery_floor <= 1 or not 0 <= self.recrawl_share_max <= 1:
            raise ValueError("discovery_floor and recrawl_share_max are shares in [0, 1]")
        if self.index not in ("freshness", "staleness"):
            raise ValueError("index must be 'freshness' or 'staleness'")
        if not 0.0 <= self.headroom < 1.0:
            raise ValueError("headroom is a share in [0, 1)")
        if self.period_s <= 0 or self.history_max < 1 or self.prior_weight < 0:
            raise ValueError("period_s, history_max must be positive, prior_weight >= 0")
        if self.solve_sample_max < 16 or self.rebalance_s <= 0 or self.replace_cycle_s < 0:
            raise ValueError("solve_sample_max >= 16; rebalance_s > 0; replace_cycle_s >= 0 (0 = off)")


def policy_for_intent(intent: str, daily_budget: int, **overrides: Any) -> RecrawlPolicy:
    """The intent profiles: archive (discovery only), search, monitor (watch list)."""
    base: dict[str, Any]
    if intent == "archive":
        base = dict(discovery_floor=1.0, recrawl_share_max=0.0)
    elif intent == "search":
        base = dict(discovery_floor=0.2, recrawl_share_max=1.0)
    elif intent == "monitor":
        base = dict(discovery_floor=0.0, recrawl_share_max=1.0,
                    tiers=(Tier("watch", 5 * 60.0, DAY_S),))
    else:
        raise ValueError(f"unknown intent {intent!r}")
    base.update(overrides)
    return RecrawlPolicy(intent=intent, daily_budget=daily_budget, **base)



@dataclass(frozen=True, slots=True)
class RecrawlPlan:
    """What one `plan` call grants for the next period, and what it had to defer."""

    at: float
    urls: tuple[str, ...]
    budget: int                   # the period's whole fetch budget
    recrawl_budget: int
    discovery_budget: int         # budget - len(urls): discovery's floor plus unused recrawl
    forced: int                   # granted because of the tier's max age
    hinted: int                   # granted because a sitemap/feed said it changed
    pulled_ahead: int             # granted before due, to spend budget left over
    late: int                     # granted more than a period after due (deferred by budget)
    backlog_s: float              # how overdue the oldest URL left waiting is (0: none)
    denied: tuple[Decision, ...] = ()  # the first DENIED_LISTED_MAX URLs left waiting, if asked
    discovery_spent: int = 0      # discovery fetches since the last plan (settled against its floor)
    flowed_back: int = 0          # the last plan's discovery floor that discovery left unused


@dataclass(frozen=True, slots=True)
class DayTierStats:
    """One row of `courtly report`: a day (since t = 0) and a tier."""

    day: int
    tier: int
    allocated: int
    forced: int
    hinted: int
    denied_budget: int
    denied_min_interval: int
    age_p50_s: float | None       # time since the last fetch, at the day's first plan
    age_p90_s: float | None
