"""The recrawl scheduler: spend a fixed fetch budget where pages change.

Theory of operation
-------------------
Every known URL has a `ChangeHistory`: what the last fetch saw (hash, ETag,
Last-Modified) and the last `history_max` revisit intervals, each with a
changed/unchanged flag; samples pushed out of that window are folded into
decaying counts (`older`). `observe` updates it from an answer (a 304, or a
body with the stored hash, is "unchanged"); `conditional_headers` gives the
If-None-Match / If-Modified-Since validators.

Change rate. Changes are a Poisson process of rate lambda, so a revisit after
an interval I sees a change with probability 1 - e^(-lambda I). `estimate_rate`
is the maximum-likelihood rate of Cho & Garcia-Molina ("Estimating frequency
of change", TOIT 2003) with pseudo-observations at the mean interval. With no
prior that is their half unchanged observation, giving for regular intervals
exactly their improved estimator
    lambda = -log((n - X + 0.5) / (n + 0.5)) / mean(I),
which is 0 for X = 0, finite for X = n and far less biased than -log(1 - X/n).
With a prior lambda0, the half observation is replaced by `prior_weight`
observations that changed with probability 1 - e^(-lambda0 mean(I)): the prior
weighs like m revisits of the page itself, dominates for a new URL, fades as
evidence comes, and settles X = n (which only says "at least ~log(2n)/I") on
the prior's side instead of saturating. Intervals more than a factor 2 apart
make the mean-interval form biased (1 - e^(-lambda I) is concave), so then a
few Newton steps in log lambda solve the likelihood equation
    sum_changed I/(e^(lambda I) - 1) = sum_unchanged I.
The prior is the URL's path template's pooled rate (its URLs' samples, binned
by interval, as if they were one URL), shrunk to its host's, to the crawl's
(`PriorModel`). Estimates are clamped to the tier's rate bounds.

Which URLs to refetch. "importance x P(changed) = w (1 - e^(-lambda age))" is
the value of a fetch now, but refetching greedily by it equalises lambda x age
over pages: frequency proportional to lambda, which Cho & Garcia-Molina show
is worse than uniform (fast pages eat the budget and are stale again at once).
The Lagrangian of "maximise sum w_i F(lambda_i, f_i) subject to sum f_i = B"
(F = f/lambda (1 - e^(-lambda/f)), the time-averaged freshness of a page
revisited every 1/f) gives the index policy used here: refetch page i once
    psi_i(age) = (w_i / lambda_i) (1 - (1 + lambda_i age) e^(-lambda_i age)) >= mu,
i.e. after I_i = x*(mu lambda_i / w_i) / lambda_i, x* the root of
1 - (1 + x) e^(-x) = c; a page with w/lambda < mu is not worth chasing and
waits for its tier's max age. `index="staleness"` keeps the greedy rule for
comparison (interval -log(1 - theta/w) / lambda).

The queue. Each URL sits in a heap keyed on its due instant (forced and
hinted ones in a second heap served first). `plan(now)` grants what is due
within the period up to its recrawl budget (after the discovery floor); what
is left waits and is counted `late` when granted; leftover budget pulls the
next-due URLs forward; nothing is granted inside a URL's minimum interval.
mu is solved on a sample every `rebalance_s` so the planned rate is the budget
less a `headroom` (kept for pulling forward, so the due work does not queue);
when mu has drifted by `REPLACE_DRIFT` the whole queue is placed again, URLs
parked at their max age come back as soon as mu falls below their revival
value, and a slow round-robin (`replace_cycle_s`) re-places the rest.

Rules: pure; `now` is an argument; the one `random.Random` is injected (it
spreads first revisits and picks the solve sample); heaps use lazy deletion
(a per-entry token).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from courtly.core.types import Decision, Reason

__all__ = [
    "DAY_S", "Tier", "RecrawlPolicy", "policy_for_intent", "ChangeHistory", "conditional_headers",
    "observe", "estimate_rate", "solve_score", "path_template", "optimal_x", "revisit_interval",
    "staleness_priority", "freshness_index", "PriorModel", "RecrawlPlan", "DayTierStats",
    "RecrawlScheduler",
]

DAY_S = 86400.0
_HOUR = 3600.0
DENIED_LISTED_MAX = 1000      # Decisions listed per plan; the counts are always complete


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


def policy_for_intent(intent: str, daily_budget: int, **overrides) -> RecrawlPolicy:
    """The intent profiles: archive (discovery only), search, monitor (watch list)."""
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


# ---- history, conditional GET --------------------------------------------------

@dataclass(slots=True)
class ChangeHistory:
    """What the fetches of one URL saw. `intervals[i]` ended with `changed[i]`.

    Samples pushed out of the bounded window are not forgotten at once: they
    are folded into `older` = (samples, changed, sum of intervals), which
    decays with a half-life of `memory_s` (so a page whose rate drifts is
    relearned), and which the estimator reads as pseudo-observations."""

    history_max: int = 16
    memory_s: float = 30 * DAY_S
    last_fetched_at: float | None = None
    last_changed_at: float | None = None
    content_hash: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    fetches: int = 0
    changes: int = 0
    failures: int = 0
    intervals: deque = field(default_factory=deque)
    changed: deque = field(default_factory=deque)
    older: tuple[float, float, float] = (0.0, 0.0, 0.0)
    older_at: float = 0.0

    def add_sample(self, now: float, interval: float, changed: bool) -> None:
        if len(self.intervals) == self.history_max:
            n, x, total = self.older
            keep = 0.5 ** (max(0.0, now - self.older_at) / self.memory_s)
            self.older = (n * keep + 1.0, x * keep + self.changed[0], total * keep + self.intervals[0])
            self.older_at = now
        self.intervals.append(interval)
        self.changed.append(changed)

    def __post_init__(self) -> None:
        if self.intervals.maxlen != self.history_max:
            self.intervals = deque(self.intervals, maxlen=self.history_max)
            self.changed = deque(self.changed, maxlen=self.history_max)


def conditional_headers(history: ChangeHistory) -> dict[str, str]:
    """If-None-Match / If-Modified-Since validators from the last fetch (RFC 9110 13.1)."""
    headers = {}
    if history.etag:
        headers["If-None-Match"] = history.etag
    if history.last_modified:
        headers["If-Modified-Since"] = history.last_modified
    return headers


def observe(history: ChangeHistory, now: float, status: int, content_hash: str | None = None,
            etag: str | None = None, last_modified: str | None = None) -> bool:
    """Record a fetch answer; True when the content differs from what we held.

    304 is "unchanged". 2xx compares `content_hash`; 404/410 count as content
    ("gone"). Other statuses (5xx, 429, other 4xx, network errors as 0) carry
    no change information: a failure is counted and no sample is added. The
    first successful fetch returns True (new content) and adds no sample."""
    if status == 304:
        new_hash = history.content_hash
    elif 200 <= status < 300:
        new_hash = content_hash
    elif status in (404, 410):
        new_hash = f"gone:{status}"
    else:
        history.failures += 1
        return False
    prev_at = history.last_fetched_at
    changed = new_hash != history.content_hash or history.fetches == 0
    if prev_at is not None and history.fetches and now > prev_at:
        history.add_sample(now, now - prev_at, changed)
    if changed:
        history.changes += history.fetches > 0
        history.last_changed_at = now
    history.fetches += 1
    history.last_fetched_at = now
    history.content_hash = new_hash
    if status != 304 or etag:
        history.etag = etag
    if status != 304 or last_modified:
        history.last_modified = last_modified
    return changed


# ---- the change-rate estimator ---------------------------------------------------

def estimate_rate(intervals: Sequence[float], changed: Sequence[bool], *,
                  prior_rate: float | None = None, prior_weight: float = 0.0,
                  older: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> float:
    """Poisson change rate (per second) from revisits; see the module docstring.

    The maximum-likelihood rate of the sample plus pseudo-observations: older
    samples folded into `older` = (n, changed, sum of intervals), and at the
    sample's mean interval either half an unchanged one (no prior: Cho &
    Garcia-Molina's improved estimator, 0 when X = 0 and finite when X = n) or
    `prior_weight` of them that changed with the prior's probability
    1 - e^(-prior_rate mean). Closed form when the intervals are within a
    factor 2 of each other, Newton steps on the likelihood equation otherwise."""
    n = len(intervals)
    if len(changed) != n:
        raise ValueError("intervals and changed differ in length")
    o_n, o_x, o_total = older
    if n == 0 and o_n <= 0.0:
        return prior_rate if prior_rate is not None else 0.0
    total = sum(intervals)
    mean = (total + o_total) / (n + o_n)
    x = sum(changed) + o_x
    if prior_rate and prior_weight > 0.0:
        m = prior_weight
        stay0 = math.exp(-prior_rate * mean)           # prior P(unchanged over a mean interval)
        x_extra, u_extra = m * (1.0 - stay0), m * stay0
    else:
        x_extra, u_extra = 0.0, 0.5
    samples = n + o_n
    unchanged_n = (samples - x) + u_extra
    if unchanged_n > 1e-12:
        rate = math.log((samples + x_extra + u_extra) / unchanged_n) / mean
    else:  # X = n and a prior so fast its unchanged share underflows
        rate = prior_rate + math.log((samples + prior_weight) / prior_weight) / mean
    lo = min(intervals) if n else mean
    hi = max(intervals) if n else mean
    if o_n > 0.0:
        o_mean = o_total / o_n
        lo, hi = min(lo, o_mean), max(hi, o_mean)
    if 0.0 < x + x_extra and unchanged_n > 1e-12 and hi > 2.0 * lo:
        ch = [(i, 1.0) for i, c in zip(intervals, changed) if c]
        unchanged_s = total - sum(i for i, _ in ch) + u_extra * mean
        if o_n > 0.0:
            ch.append((o_total / o_n, o_x))
            unchanged_s += (o_n - o_x) * o_total / o_n
        if x_extra > 0.0:
            ch.append((mean, x_extra))
        if unchanged_s > 0.0 and rate > 0.0:
            rate = solve_score(ch, unchanged_s, 0.0, 0.0, rate)
    return rate


def solve_score(changed: Sequence[tuple[float, float]], unchanged_s: float, a: float, b: float,
                start: float) -> float:
    """Root in r of  sum_changed w I/(e^(rI) - 1) - unchanged_s + a/r - b = 0.

    The likelihood (plus a Gamma prior r^a e^(-br)) equation of revisits where
    `changed` holds (interval, weight) pairs that saw a change. Decreasing in
    r, so the root is unique; Newton steps in log r, capped, from `start`."""
    theta = math.log(start)
    for _ in range(12):
        r = math.exp(theta)
        s = a / r - b - unchanged_s
        d = -a / r
        for i, w in changed:
            q = 1.0 / math.expm1(min(r * i, 700.0))
            s += w * i * q
            d -= w * r * i * i * q * (1.0 + q)
        if d == 0.0:
            break
        step = s / d
        step = 2.0 if step > 2.0 else -2.0 if step < -2.0 else step
        theta -= step
        if -1e-3 < step < 1e-3:  # 0.1 %: far below the estimate's own noise
            break
    return math.exp(theta)


_DIGITS = frozenset("0123456789")


def path_template(url: str) -> str:
    """host + the first three path segments, any segment with a digit as '{n}'."""
    rest = url.partition("://")[2] or url
    for sep in "?#":
        rest = rest.partition(sep)[0]
    authority, _, path = rest.partition("/")
    host = authority.rpartition("@")[2].lower()
    if not host.startswith("["):
        host = host.partition(":")[0]
    segs = [s for s in path.split("/") if s][:3]
    shape = "/".join("{n}" if _DIGITS.intersection(s) else s for s in segs)
    return f"{host}/{shape}"


# ---- revisit intervals and indexes ------------------------------------------------

_U_MIN, _U_MAX, _U_STEPS = -36.0, 36.0, 2880
_U_STEP = (_U_MAX - _U_MIN) / _U_STEPS
_LOGX: list[float] = []


def _x_exact(c: float) -> float:
    """Root of 1 - (1 + x) e^(-x) = c, 0 < c < 1, by Newton (log forms keep it conditioned)."""
    if c < 0.5:
        x = math.sqrt(2.0 * c)
        for _ in range(50):
            h = -math.expm1(-x) - x * math.exp(-x)
            step = (math.log(h) - math.log(c)) * h / (x * math.exp(-x))
            x = max(x - step, x / 4.0)
            if abs(step) <= 1e-14 * x:
                break
        return x
    target = math.log1p(-c)
    x = -target + math.log1p(-target)
    for _ in range(50):
        step = (math.log1p(x) - x - target) / (1.0 / (1.0 + x) - 1.0)
        x = max(x - step, 1e-3)
        if abs(step) <= 1e-14 * x:
            break
    return x


def _table() -> list[float]:
    if not _LOGX:
        for k in range(_U_STEPS + 1):
            u = _U_MIN + k * _U_STEP
            _LOGX.append(math.log(_x_exact(1.0 / (1.0 + math.exp(-u)))))
    return _LOGX


def optimal_x(c: float) -> float:
    """x*(c): the optimal revisit interval in units of 1/lambda (inf when c >= 1)."""
    if c <= 0.0:
        return 0.0
    if c >= 1.0:
        return math.inf
    u = math.log(c) - math.log1p(-c)
    if u <= _U_MIN:
        return math.sqrt(2.0 * c)
    if u >= _U_MAX:
        big = -math.log1p(-c)
        return big + math.log1p(big)
    t = (u - _U_MIN) / _U_STEP
    k = int(t)
    table = _LOGX or _table()
    return math.exp(table[k] + (t - k) * (table[k + 1] - table[k]))


def revisit_interval(index: str, multiplier: float, rate: float, importance: float) -> float:
    """Interval after which a URL's index reaches `multiplier` (inf: never by the index)."""
    if index == "freshness":
        return optimal_x(multiplier * rate / importance) / rate
    q = multiplier / importance
    return math.inf if q >= 1.0 else -math.log1p(-q) / rate


def staleness_priority(importance: float, rate: float, age_s: float) -> float:
    """importance x P(changed since the last fetch)."""
    return importance * -math.expm1(-rate * age_s)


def freshness_index(importance: float, rate: float, age_s: float) -> float:
    """The Lagrangian index: importance / rate x (1 - (1 + rate age) e^(-rate age))."""
    x = rate * age_s
    return importance / rate * (-math.expm1(-x) - x * math.exp(-x))


# ---- the prior -------------------------------------------------------------------

GROUP_OBS_MAX = 4096          # past this, a group's counts are halved (it forgets slowly)


class _Group:
    """Revisit samples pooled over the URLs of a host or template, binned by interval."""

    __slots__ = ("n", "bins", "rate", "log_rate", "stale")

    def __init__(self) -> None:
        self.n = 0.0
        self.bins: dict[int, list[float]] = {}   # bin -> [samples, changed, sum of intervals]
        self.rate: float | None = None
        self.log_rate = 0.0
        self.stale = 0

    def add(self, interval: float, changed: bool, k: int) -> None:
        """One sample; `k` is its bin (int(2 log2 interval))."""
        b = self.bins.get(k)
        if b is None:
            b = self.bins[k] = [0.0, 0.0, 0.0]
        b[0] += 1.0
        b[1] += changed
        b[2] += interval
        self.n += 1.0
        self.stale += 1
        if self.n > GROUP_OBS_MAX:
            for k, b in list(self.bins.items()):
                if b[0] < 1.0:
                    self.n -= b[0]
                    del self.bins[k]
                    continue
                b[0] *= 0.5
                b[1] *= 0.5
                b[2] *= 0.5
            self.n *= 0.5

    def refresh(self) -> None:
        """Re-estimate the group's rate as if it were one URL (Cho's estimator on the bins)."""
        self.stale = 0
        n = x = total = unchanged = 0.0
        changed = []
        for cnt, chg, tot in self.bins.values():
            n += cnt
            x += chg
            total += tot
            unchanged += (cnt - chg) * tot / cnt
            if chg:
                changed.append((tot / cnt, chg))
        mean = total / n
        if x == 0.0:
            self.rate = 0.5 / (total + mean)  # no change seen: half a change over the exposure
        else:
            start = -math.log1p(-x / (n + 0.5)) / mean
            self.rate = solve_score(changed, unchanged + 0.5 * mean, 0.0, 0.0, start)
        self.log_rate = math.log(max(self.rate, 1e-12))


class PriorModel:
    """The prior rate of a URL: its template's pooled rate, shrunk to its host's, to the crawl's."""

    def __init__(self, default_rate: float, *, n_min: float = 8.0, shrink: float = 8.0) -> None:
        self.default_log = math.log(default_rate)
        self.n_min = n_min
        self.shrink = shrink
        self.crawl = _Group()
        self._groups: dict[str, _Group] = {}

    def groups(self, host: str, template: str) -> tuple[_Group, _Group, _Group]:
        h = self._groups.setdefault("h:" + host, _Group())
        return self.crawl, h, self._groups.setdefault("t:" + template, _Group())

    def observe(self, groups: tuple[_Group, ...], interval: float, changed: bool) -> None:
        k = int(2.0 * math.log2(interval)) if interval > 1.0 else 0
        for g in groups:
            g.add(interval, changed, k)

    def rate(self, groups: tuple[_Group, ...]) -> float:
        log_r, n_min, shrink = self.default_log, self.n_min, self.shrink
        for g in groups:
            n = g.n
            if n >= n_min:
                if g.rate is None or g.stale * 8 >= n:
                    g.refresh()
                log_r += n / (n + shrink) * (g.log_rate - log_r)
        return math.exp(log_r)


# ---- the scheduler -------------------------------------------------------------

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


_QUEUED, _IN_FLIGHT, _REMOVED = 0, 1, 2
_FEW_SAMPLES = 4            # below this, a re-placement re-reads the (moving) prior
REPLACE_DRIFT = 1.5         # mu moved this factor since the queue was placed: place it again


class _Entry:
    __slots__ = ("url", "host", "tier", "importance", "min_interval_s", "history", "rate", "groups",
                 "due_at", "token", "state", "forced", "hinted", "first", "phase")

    def __init__(self, url: str, host: str, tier: int, importance: float, min_interval_s: float,
                 history: ChangeHistory, groups, phase: float) -> None:
        self.url, self.host, self.tier, self.importance = url, host, tier, importance
        self.min_interval_s, self.history, self.groups = min_interval_s, history, groups
        self.rate = 0.0
        self.due_at = 0.0
        self.token = 0
        self.state = _QUEUED
        self.forced = self.hinted = False
        self.first = True          # no revisit yet: the first one is spread by `phase`
        self.phase = phase


class RecrawlScheduler:
    """Known URLs, their change estimates, and the budgeted choice of what to refetch."""

    def __init__(self, policy: RecrawlPolicy, rng: random.Random) -> None:
        self.policy = policy
        self._rng = rng
        self._tiers = policy.tiers
        self._hi = [t.interval_s_max - policy.period_s for t in policy.tiers]  # forced before the max age
        self._index = policy.index
        self._entries: dict[str, _Entry] = {}
        self._order: list[_Entry] = []
        self._cursor = 0
        self._heap: list[tuple[float, int, int, _Entry]] = []     # by due instant
        self._urgent: list[tuple[float, int, int, _Entry]] = []   # forced and hinted, by due instant
        self._revive_heap: list[tuple[float, int, int, _Entry]] = []  # forced, by -revival multiplier
        self._seq = itertools.count()
        self._prior = PriorModel(policy.rate_per_s_default)
        self._mu: float | None = None
        self._placed_mu: float | None = None          # mu when the whole queue was last placed
        self._solved_at = -math.inf
        self._last_plan_at: float | None = None
        self._carry = 0.0
        self._replace_carry = 0.0
        self._rate_ewma: float | None = None
        self._stats: dict[tuple[int, int], list[int]] = {}
        self._ages: dict[tuple[int, int], tuple[float | None, ...]] = {}
        self._day: int | None = None
        self._hint_trust: dict[str, list[int]] = {}

    # ---- queries ----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, url: str) -> bool:
        return url in self._entries

    def history(self, url: str) -> ChangeHistory:
        return self._entries[url].history

    def rate(self, url: str) -> float:
        """The URL's current change-rate estimate (per second)."""
        return self._entries[url].rate

    def due_at(self, url: str) -> float:
        return self._entries[url].due_at

    def interval(self, url: str) -> float:
        """The revisit interval the URL would get now (needs a solved multiplier)."""
        if self._mu is None:
            raise RuntimeError("no multiplier yet: call plan() first")
        return self._interval(self._entries[url], self._mu)[0]

    @property
    def multiplier(self) -> float | None:
        """The budget's Lagrange multiplier (mu, or theta for "staleness") in force."""
        return self._mu

    def next_due_at(self) -> float | None:
        tops = [t for t in (self._top(self._heap), self._top(self._urgent)) if t is not None]
        return min(tops) if tops else None

    @staticmethod
    def _top(heap) -> float | None:
        while heap and (heap[0][2] != heap[0][3].token or heap[0][3].state != _QUEUED):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    # ---- adding and updating -------------------------------------------------------

    def add(self, url: str, now: float, *, host: str, tier: int = 0, importance: float = 1.0,
            min_interval_s: float = 0.0, history: ChangeHistory | None = None) -> None:
        """Track a URL. Never fetched (no history): due now. Known: refresh tier and importance."""
        if not 0 <= tier < len(self._tiers):
            raise ValueError(f"tier {tier} outside 0..{len(self._tiers) - 1}")
        if not 0.0 < importance <= 1.0:
            raise ValueError("importance must be in (0, 1]")
        lo = max(self._tiers[tier].interval_s_min, min_interval_s)
        e = self._entries.get(url)
        if e is not None:
            e.tier, e.importance, e.min_interval_s = tier, importance, lo
            return
        hist = history if history is not None else ChangeHistory(self.policy.history_max)
        groups = self._prior.groups(host, path_template(url))
        e = _Entry(url, host, tier, importance, lo, hist, groups, self._rng.random())
        self._entries[url] = e
        self._order.append(e)
        self._estimate(e)
        if hist.last_fetched_at is None:
            self._push(e, now)
        else:
            self._schedule(e)

    def set_importance(self, url: str, importance: float) -> None:
        """New importance (e.g. from OPIC); takes effect at the URL's next placement."""
        if not 0.0 < importance <= 1.0:
            raise ValueError("importance must be in (0, 1]")
        self._entries[url].importance = importance

    def remove(self, url: str) -> None:
        e = self._entries.pop(url, None)
        if e is not None:
            e.state = _REMOVED
            e.token += 1
            if len(self._order) > 2 * len(self._entries) + 64:
                self._order = [x for x in self._order if x.state != _REMOVED]
                self._cursor = 0

    # ---- answers ------------------------------------------------------------------

    def record_fetch(self, url: str, now: float, *, status: int, content_hash: str | None = None,
                     etag: str | None = None, last_modified: str | None = None) -> bool:
        """Feed a fetch answer back; returns `observe`'s changed flag and reschedules."""
        e = self._entries[url]
        hist = e.history
        fetches, prev_at = hist.fetches, hist.last_fetched_at
        changed = observe(hist, now, status, content_hash, etag, last_modified)
        if hist.fetches == fetches:  # no change information: a failure
            self._retry(e, now)
            return False
        if fetches and prev_at is not None and now > prev_at:  # observe added a sample
            self._prior.observe(e.groups, hist.intervals[-1], hist.changed[-1])
            e.first = False
        if e.hinted:
            trust = self._hint_trust.setdefault(e.host, [0, 0])
            trust[0] += 1
            trust[1] += changed
            e.hinted = False
        self._estimate(e)
        self._schedule(e)
        return changed

    def record_failure(self, url: str, now: float) -> None:
        """A granted fetch that failed without an HTTP answer (network, DNS, ...)."""
        e = self._entries[url]
        e.history.failures += 1
        self._retry(e, now)

    def release(self, url: str, now: float) -> None:
        """A granted URL that was not fetched (dropped by the frontier, robots, ...)."""
        self._retry(self._entries[url], now)

    def hint(self, url: str, lastmod_at: float, now: float) -> bool:
        """A sitemap/feed says `url` changed at `lastmod_at`: make it due as soon as allowed.

        Ignored (False) when not newer than the last fetch, when the URL is in
        flight, or when the host's hints have rarely meant a change."""
        e = self._entries.get(url)
        if e is None or e.state != _QUEUED or e.hinted:
            return False
        last = e.history.last_fetched_at
        if last is not None and lastmod_at <= last:
            return False
        trust = self._hint_trust.get(e.host)
        p = self.policy
        if trust and trust[0] >= p.hint_trust_after and trust[1] < p.hint_trust_min * trust[0]:
            return False
        e.hinted = True
        earliest = now if last is None else max(now, last + e.min_interval_s)
        if earliest > now:
            self._count(now, e.tier, 4)
        self._push(e, min(earliest, e.due_at))
        return True

    # ---- planning -----------------------------------------------------------------

    def plan(self, now: float, *, discovery_pending: int = 0, list_denied: bool = False) -> RecrawlPlan:
        """Grant the recrawl fetches for the period starting at `now`.

        Due URLs are granted forced/hinted first, then earliest-due first, up
        to the period's recrawl budget; what is due and left waits (counted as
        `late` when finally granted). Budget left over pulls the next-due URLs
        forward. A URL inside its minimum interval is never granted."""
        p = self.policy
        self._roll_day(now)
        elapsed = p.period_s if self._last_plan_at is None else min(max(now - self._last_plan_at, 0.0),
                                                                  2.0 * p.period_s)
        self._last_plan_at = now
        total = p.daily_budget * elapsed / DAY_S + self._carry
        budget = int(total)
        self._carry = total - budget
        reserved = min(discovery_pending, math.ceil(p.discovery_floor * budget), budget)
        recrawl = min(budget - reserved, int(p.recrawl_share_max * budget + 1e-9))
        if p.recrawl_share_max == 0.0:
            return RecrawlPlan(now, (), budget, 0, budget, 0, 0, 0, 0, 0.0)
        self._track_rate(recrawl, elapsed, now)
        self._replace_some(elapsed)
        horizon = now + p.period_s
        granted: list[_Entry] = []
        skipped: list[_Entry] = []
        self._take(self._urgent, now, horizon, recrawl, granted, skipped)
        self._take(self._heap, now, horizon, recrawl, granted, skipped)
        due_count = len(granted)
        self._take(self._heap, now, math.inf, recrawl, granted, skipped, scan_max=4 * recrawl + 16)
        for e in skipped:
            self._push(e, e.due_at)
        forced = hinted = late = 0
        day = int(now // DAY_S)
        stats = self._stats
        for e in granted:
            e.state = _IN_FLIGHT
            e.token += 1
            row = stats.get((day, e.tier))
            if row is None:
                row = stats[(day, e.tier)] = [0, 0, 0, 0, 0]
            row[0] += 1
            if e.hinted:
                hinted += 1
                row[2] += 1
            elif e.forced:
                forced += 1
                row[1] += 1
            if now - e.due_at > p.period_s:
                late += 1
                row[3] += 1
        waiting = [t for t in (self._top(self._urgent), self._top(self._heap)) if t is not None and t <= horizon]
        backlog_s = max(0.0, now - min(waiting)) if waiting else 0.0
        denied = self._waiting(now, horizon) if list_denied and waiting else ()
        urls = tuple(e.url for e in granted)
        return RecrawlPlan(now, urls, budget, recrawl, budget - len(urls), forced, hinted,
                           len(granted) - due_count, late, backlog_s, denied)

    def _take(self, heap, now: float, horizon: float, budget: int, granted: list[_Entry],
              skipped: list[_Entry], scan_max: int | None = None) -> None:
        """Pop entries due by `horizon` into `granted` until the budget is spent."""
        scanned = 0
        while heap and len(granted) < budget and heap[0][0] <= horizon:
            _, _, tok, e = heapq.heappop(heap)
            if tok != e.token or e.state != _QUEUED:
                continue
            last = e.history.last_fetched_at
            if last is not None and last + e.min_interval_s > now:
                skipped.append(e)
            else:
                granted.append(e)
            scanned += 1
            if scan_max is not None and scanned >= scan_max:
                break

    def _waiting(self, now: float, horizon: float) -> tuple[Decision, ...]:
        """Decisions for (up to DENIED_LISTED_MAX of) the due URLs left waiting, oldest first."""
        out = []
        for heap in (self._urgent, self._heap):
            for due, _, tok, e in heapq.nsmallest(DENIED_LISTED_MAX, heap):
                if due > horizon or len(out) >= DENIED_LISTED_MAX:
                    break
                if tok == e.token and e.state == _QUEUED:
                    out.append(Decision(e.url, Reason.BUDGET, f"recrawl deferred (tier {e.tier})", now))
        return tuple(out)

    # ---- scheduling internals --------------------------------------------------------

    def _estimate(self, e: _Entry) -> None:
        h = e.history
        prior = self._prior.rate(e.groups)
        rate = estimate_rate(h.intervals, h.changed, prior_rate=prior, prior_weight=self.policy.prior_weight,
                             older=h.older)
        if not rate > 0.0 or rate == math.inf:  # NaN or degenerate: fall back on the prior
            rate = prior
        tier = self._tiers[e.tier]
        e.rate = min(max(rate, tier.rate_per_s_min), tier.rate_max)

    def _interval(self, e: _Entry, mult: float) -> tuple[float, bool]:
        """(revisit interval, forced by the tier's max age)."""
        lo = e.min_interval_s
        hi = self._hi[e.tier]
        if hi < lo:
            hi = lo
        iv = revisit_interval(self._index, mult, e.rate, e.importance)
        if iv >= hi:
            return hi, True
        return (iv if iv > lo else lo), False

    def _schedule(self, e: _Entry) -> None:
        """Place a fetched URL at last fetch + its interval (the first revisit spread by phase)."""
        base = e.history.last_fetched_at
        if self._mu is None:  # placed by the first solve
            self._push(e, base)
            return
        iv, e.forced = self._interval(e, self._mu)
        if e.first:
            iv = e.min_interval_s + (iv - e.min_interval_s) * e.phase
        self._push(e, base + iv)

    def _push(self, e: _Entry, due_at: float) -> None:
        e.state = _QUEUED
        e.due_at = due_at
        e.token += 1
        if e.forced or e.hinted:
            heapq.heappush(self._urgent, (due_at, next(self._seq), e.token, e))
            if e.forced and not e.hinted:
                heapq.heappush(self._revive_heap, (-self._revival(e), next(self._seq), e.token, e))
        else:
            heapq.heappush(self._heap, (due_at, next(self._seq), e.token, e))

    def _revival(self, e: _Entry) -> float:
        """The multiplier below which a URL parked at its tier's max age gets a shorter interval."""
        hi = max(e.min_interval_s, self._tiers[e.tier].interval_s_max - self.policy.period_s)
        x = e.rate * hi
        if self.policy.index == "freshness":
            return e.importance / e.rate * (-math.expm1(-x) - x * math.exp(-x))
        return e.importance * -math.expm1(-x)

    def _revive(self) -> None:
        """After mu fell: re-place the parked URLs whose revival multiplier is now above it."""
        heap, mu = self._revive_heap, self._mu
        while heap and -heap[0][0] > mu:
            _, _, tok, e = heapq.heappop(heap)
            if tok == e.token and e.state == _QUEUED and e.forced:
                self._schedule(e)

    def _retry(self, e: _Entry, now: float) -> None:
        iv = self._interval(e, self._mu)[0] if self._mu is not None else self.policy.retry_s
        self._push(e, now + max(e.min_interval_s, min(self.policy.retry_s, iv)))

    def _replace_some(self, elapsed: float) -> None:
        """Re-place a slice of the URLs with the current mu and prior, a full round per cycle."""
        order, cycle = self._order, self.policy.replace_cycle_s
        if not cycle:
            return
        want = len(order) * elapsed / cycle + self._replace_carry
        count = min(int(want), len(order))
        self._replace_carry = want - count
        for _ in range(count):
            if self._cursor >= len(order):
                self._cursor = 0
            e = order[self._cursor]
            self._cursor += 1
            if e.state != _QUEUED or e.hinted or e.history.last_fetched_at is None:
                continue
            if len(e.history.intervals) < _FEW_SAMPLES:
                self._estimate(e)
            old = e.due_at
            iv, forced = self._interval(e, self._mu)
            if e.first:
                iv = e.min_interval_s + (iv - e.min_interval_s) * e.phase
            due = e.history.last_fetched_at + iv
            if forced != e.forced or abs(due - old) > 0.01 * iv + 1.0:
                e.forced = forced
                self._push(e, due)
        if len(self._heap) + len(self._urgent) + len(self._revive_heap) > 3 * len(self._entries) + 1024:
            for heap in (self._heap, self._urgent, self._revive_heap):
                heap[:] = [x for x in heap if x[2] == x[3].token and x[3].state == _QUEUED]
                heapq.heapify(heap)

    def _track_rate(self, recrawl: int, elapsed: float, now: float) -> None:
        """Keep an average of the recrawl fetch rate; re-solve mu when due."""
        r = recrawl / elapsed if elapsed > 0 else 0.0
        if self._rate_ewma is None:
            self._rate_ewma = r
        else:
            self._rate_ewma += (r - self._rate_ewma) * min(1.0, elapsed / DAY_S)
        if now - self._solved_at >= self.policy.rebalance_s:
            self._rebalance(now)

    def _rebalance(self, now: float) -> None:
        self._mu = self._solve((self._rate_ewma or 0.0) * (1.0 - self.policy.headroom))
        self._solved_at = now
        placed = self._placed_mu
        if placed is None or abs(math.log(self._mu / placed)) > math.log(REPLACE_DRIFT):
            self._placed_mu = self._mu  # drifted far from what the queue was placed with: re-place all
            for e in self._entries.values():
                if e.state == _QUEUED and not e.hinted and e.history.last_fetched_at is not None:
                    self._schedule(e)
        self._revive()

    def _solve(self, rate_per_s: float) -> float:
        """mu such that the sampled URLs' revisit rates sum to `rate_per_s` (bisection in log)."""
        live = [e for e in self._order if e.state != _REMOVED]
        if not live:
            return 1.0
        stride = max(1, len(live) // self.policy.solve_sample_max)
        sample = live[self._rng.randrange(stride)::stride]
        target = rate_per_s * len(sample) / len(live)
        period = self.policy.period_s
        rows = [(e.rate, e.importance, e.min_interval_s,
                 max(e.min_interval_s, self._tiers[e.tier].interval_s_max - period)) for e in sample]
        index = self.policy.index

        def total(log_mult: float) -> float:
            mult, acc = math.exp(log_mult), 0.0
            for rate, imp, lo, hi in rows:
                iv = revisit_interval(index, mult, rate, imp)
                acc += 1.0 / (lo if iv < lo else hi if iv > hi else iv)
            return acc

        if target <= 0.0:
            return math.exp(200.0)

        def gap(log_mult: float) -> float:
            return math.log(max(total(log_mult), 1e-300) / target)

        centre = math.log(self._mu) if self._mu else 0.0
        a, b = centre - 1.0, centre + 1.0
        ga, gb = gap(a), gap(b)
        for _ in range(14):  # widen until the root is bracketed (or the budget is out of reach)
            if ga < 0.0 and a > -200.0:
                a, b, gb = max(-200.0, a - 2.0 * (b - a)), a, ga
                ga = gap(a)
            elif gb > 0.0 and b < 200.0:
                a, b, ga = b, min(200.0, b + 2.0 * (b - a)), gb
                gb = gap(b)
            else:
                break
        if ga <= 0.0:
            return math.exp(a)
        if gb >= 0.0:
            return math.exp(b)
        for _ in range(30):  # Illinois regula falsi: gap is smooth and decreasing
            c = b - gb * (b - a) / (gb - ga)
            gc = gap(c)
            if abs(gc) < 1e-3 or b - a < 1e-6:
                return math.exp(c)
            if gc > 0.0:
                a, ga = c, gc
                gb *= 0.5
            else:
                b, gb = c, gc
                ga *= 0.5
        return math.exp(0.5 * (a + b))

    # ---- reporting -----------------------------------------------------------------

    def _count(self, now: float, tier: int, column: int) -> None:
        key = (int(now // DAY_S), tier)
        row = self._stats.get(key)
        if row is None:
            row = self._stats[key] = [0, 0, 0, 0, 0]
        row[column] += 1

    def _roll_day(self, now: float) -> None:
        day = int(now // DAY_S)
        if day != self._day:
            self._day = day
            for tier, qs in enumerate(self.age_quantiles(now)):
                if qs[0] is not None:
                    self._ages[(day, tier)] = qs

    def age_quantiles(self, now: float, qs: tuple[float, ...] = (0.5, 0.9)) -> list[tuple[float | None, ...]]:
        """Per tier, quantiles of the time since the last fetch (None: nothing fetched)."""
        ages: list[list[float]] = [[] for _ in self._tiers]
        for e in self._entries.values():
            if e.history.last_fetched_at is not None:
                ages[e.tier].append(now - e.history.last_fetched_at)
        out = []
        for a in ages:
            a.sort()
            out.append(tuple(a[min(len(a) - 1, int(q * len(a)))] if a else None for q in qs))
        return out

    def report(self) -> list[DayTierStats]:
        """Per day and tier: allocated, forced, hinted, denied, and the age p50/p90."""
        rows = []
        for k in sorted(set(self._stats) | set(self._ages)):
            c = self._stats.get(k, [0] * 5)
            p50, p90 = self._ages.get(k, (None, None))
            rows.append(DayTierStats(k[0], k[1], c[0], c[1], c[2], c[3], c[4], p50, p90))
        return rows
