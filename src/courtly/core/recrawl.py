"""The recrawl scheduler: spend a fixed fetch budget where pages change.

Theory of operation
-------------------
This module owns the budget: the intents' policies and tiers, the queue of
known URLs, `plan` and the report. What a fetch saw and how fast a URL changes
(`ChangeHistory`, `observe`, `estimate_rate`, the `PriorModel`) and the maths
of revisit intervals live in `courtly.core.changerate`; the names the live
crawl and the tests use are re-exported from here. Each URL's rate estimate is
clamped to its tier's rate bounds.

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

The queue. Each URL sits in a queue keyed on its due instant (forced and
hinted ones in a second queue served first); a queue is a calendar of
period-wide buckets, sorted when reached, so it pops in a heap's order for the
cost of an append and a short sort. `plan(now)` grants what is due
within the period up to its recrawl budget (after the discovery floor); what
is left waits and is counted `late` when granted; leftover budget pulls
URLs forward (of the next-due ones, parked ones too, those furthest through
their interval first); nothing is granted inside a URL's minimum interval.
How mu is solved (on a sample, for the budget less a `headroom` kept for
pulling forward and less the share hinted grants took, more often while the
scheduler is young) and when the queue is placed again:
`courtly.core.recrawl_balance`.

Rules: pure; `now` is an argument; the one `random.Random` is injected (it
spreads first revisits and picks the solve sample); queues use lazy deletion
(a per-entry token). `record_fetch` runs once per fetch: keep it lean.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from typing import TYPE_CHECKING

from courtly.core.changerate import (
    DAY_S, ChangeHistory, PriorModel, conditional_headers, estimate_rate, freshness_index,
    is_gone, observe, optimal_x, path_template, revisit_interval, solve_score, staleness_priority, url_kind,
)
from courtly.core.duequeue import QUEUED, DueQueue as _DueQueue
from courtly.core.recrawl_balance import HINT_SHARE_MAX, REPLACE_DRIFT, Rebalancing
from courtly.core.recrawl_policy import (
    DayTierStats, RecrawlPlan, RecrawlPolicy, Tier, policy_for_intent,
)
from courtly.core.types import Decision, Reason

if TYPE_CHECKING:
    from courtly.core.changerate import _Group

__all__ = [
    "DAY_S", "Tier", "RecrawlPolicy", "policy_for_intent", "ChangeHistory", "conditional_headers",
    "observe", "estimate_rate", "solve_score", "path_template", "optimal_x", "revisit_interval",
    "staleness_priority", "freshness_index", "PriorModel", "RecrawlPlan", "DayTierStats",
    "RecrawlScheduler", "REPLACE_DRIFT", "HINT_SHARE_MAX",
]

_HOUR = 3600.0
DENIED_LISTED_MAX = 1000      # Decisions listed per plan; the counts are always complete


_QUEUED, _IN_FLIGHT, _REMOVED = QUEUED, 1, 2


class _Entry:
    __slots__ = ("url", "host", "tier", "importance", "min_interval_s", "history", "rate", "groups",
                 "due_at", "token", "state", "forced", "hinted", "first", "phase")

    def __init__(self, url: str, host: str, tier: int, importance: float, min_interval_s: float,
                 history: ChangeHistory, groups: tuple[_Group, ...], phase: float) -> None:
        self.url, self.host, self.tier, self.importance = url, host, tier, importance
        self.min_interval_s, self.history, self.groups = min_interval_s, history, groups
        self.rate = 0.0
        self.due_at = 0.0
        self.token = 0
        self.state = _QUEUED
        self.forced = self.hinted = False
        self.first = True          # no revisit yet: the first one is spread by `phase`
        self.phase = phase


class RecrawlScheduler(Rebalancing):
    """Known URLs, their change estimates, and the budgeted choice of what to refetch."""

    def __init__(self, policy: RecrawlPolicy, rng: random.Random) -> None:
        self.policy = policy
        self._rng = rng
        self._tiers = policy.tiers
        self._hi = [t.interval_s_max - policy.period_s for t in policy.tiers]  # forced before the max age
        self._index = policy.index
        self._freshness = policy.index == "freshness"
        self._prior_weight = policy.prior_weight
        self._rate_bounds = [(t.rate_per_s_min, t.rate_max) for t in policy.tiers]
        self._entries: dict[str, _Entry] = {}
        self._order: list[_Entry] = []
        self._cursor = 0
        self._queue = _DueQueue(policy.period_s)                   # by due instant
        self._urgent = _DueQueue(policy.period_s)                  # forced and hinted, by due instant
        self._revive_heap: list[tuple[float, int, int, _Entry]] = []  # forced, by -revival multiplier
        self._seq = itertools.count()
        self._prior = PriorModel(policy.rate_per_s_default)
        self._mu: float | None = None
        self._placed_mu: float | None = None          # mu when the whole queue was last placed
        self._solved_at = -math.inf
        self._first_plan_at: float | None = None
        self._last_plan_at: float | None = None
        self._carry = 0.0
        self._owed = 0.0             # discovery's overspend not repaid yet (at most a day's budget)
        self._repay_per_s = 0.0      # its repayment: evenly over the day after the last overspend
        self._reserved = 0          # discovery floor held back by the last plan
        self._replace_carry = 0.0
        self._rate_ewma: float | None = None
        self._hint_share = 0.0      # share of the recrawl budget hinted grants took lately
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
        tops = [t for t in (self._queue.top(), self._urgent.top()) if t is not None]
        return min(tops) if tops else None

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
        groups = self._prior.groups(host, path_template(url), url_kind(url))
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
                     etag: str | None = None, last_modified: str | None = None,
                     capture: tuple[str, float] | None = None) -> bool:
        """Feed a fetch answer back; returns `observe`'s changed flag and reschedules."""
        e = self._entries[url]
        hist = e.history
        fetches, prev_at = hist.fetches, hist.last_fetched_at
        changed = observe(hist, now, status, content_hash, etag, last_modified, capture)
        if hist.fetches == fetches:  # no change information: a failure
            self._retry(e, now)
            return False
        if fetches and prev_at is not None and now > prev_at:  # observe added a sample
            # a URL still gone says nothing of how its template's pages change: kept out of the prior
            gone = is_gone(hist) and not changed
            prior = None if gone else self._prior.observe(e.groups, now - prev_at, changed)
            e.first = False
        else:
            prior = None
        if e.hinted:
            trust = self._hint_trust.setdefault(e.host, [0, 0])
            trust[0] += 1
            trust[1] += changed
            e.hinted = False
        self._estimate(e, prior)
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

    def plan(self, now: float, *, discovery_pending: int = 0, discovery_spent: int | None = None,
             list_denied: bool = False) -> RecrawlPlan:
        """Grant the recrawl fetches for the period starting at `now`.

        Due URLs are granted forced/hinted first, then earliest-due first, up
        to the period's recrawl budget; what is due and left waits (counted as
        `late` when finally granted). Budget left over pulls the next-due URLs
        forward. A URL inside its minimum interval is never granted.

        `daily_budget` covers discovery and recrawl together. The floor
        held back for discovery is an advance; with `discovery_spent`
        (discovery fetches since the last plan) the advance is settled: what
        discovery spent beyond it is charged to this period's recrawls, what
        it left unused flows back to them, and what it spent past the whole
        period's budget is owed and repaid evenly over the next day (up to a
        day's budget): the budget holds over a day, and the hours after a burst
        of discovery still recrawl (their pages are the ones most likely to
        have changed).
        None: discovery is not counted (the floor is held back, never settled)."""
        p = self.policy
        self._roll_day(now)
        elapsed = p.period_s if self._last_plan_at is None else min(max(now - self._last_plan_at, 0.0),
                                                                  2.0 * p.period_s)
        self._last_plan_at = now
        if self._first_plan_at is None:
            self._first_plan_at = now
        repay = min(self._owed, self._repay_per_s * elapsed)
        self._owed -= repay
        total = p.daily_budget * elapsed / DAY_S + self._carry - repay
        budget = max(0, int(total))
        self._carry = total - budget     # the fraction of a fetch not granted yet
        reserved = min(discovery_pending, math.ceil(p.discovery_floor * budget), budget)
        spent = max(discovery_spent or 0, 0)
        charge = 0 if discovery_spent is None else spent - self._reserved   # < 0: the advance left unused
        self._reserved = reserved
        flowed = max(0, -charge)
        recrawl = max(0, min(budget - reserved - charge, int(p.recrawl_share_max * budget + 1e-9) + flowed))
        owed = reserved + charge - budget   # discovery spent past this period's whole budget: owed later
        if owed > 0:   # repaid evenly over the next day: the day's total holds, the next hour is not starved
            self._owed = min(self._owed + owed, float(p.daily_budget))
            self._repay_per_s = self._owed / DAY_S
        if p.recrawl_share_max == 0.0:
            return RecrawlPlan(now, (), budget, 0, budget, 0, 0, 0, 0, 0.0)
        self._track_rate(recrawl, elapsed, now)
        self._replace_some(elapsed)
        horizon = now + p.period_s
        granted: list[_Entry] = []
        skipped: list[_Entry] = []
        self._take(self._urgent, now, horizon, recrawl, granted, skipped)
        self._take(self._queue, now, horizon, recrawl, granted, skipped)
        due_count = len(granted)
        if len(granted) < recrawl:
            self._pull_ahead(now, recrawl - len(granted), granted, skipped)
        for e in skipped:
            self._push(e, e.due_at)
        forced = hinted = late = 0
        day = int(now // DAY_S)
        rows: list[list[int] | None] = [None] * len(self._tiers)   # this day's stats rows, by tier
        for e in granted:
            e.state = _IN_FLIGHT
            e.token += 1
            row = rows[e.tier]
            if row is None:
                row = rows[e.tier] = self._stats_row(day, e.tier)
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
        self._track_hints(hinted, recrawl, elapsed, now)
        waiting = [t for t in (self._urgent.top(), self._queue.top()) if t is not None and t <= horizon]
        backlog_s = max(0.0, now - min(waiting)) if waiting else 0.0
        denied = self._waiting(now, horizon) if list_denied and waiting else ()
        urls = tuple([e.url for e in granted])
        return RecrawlPlan(now, urls, budget, recrawl, budget - len(urls), forced, hinted,
                           len(granted) - due_count, late, backlog_s, denied, spent, flowed)

    def _take(self, queue: _DueQueue, now: float, horizon: float, budget: int, granted: list[_Entry],
              skipped: list[_Entry], scan_max: int | None = None) -> None:
        """Pop entries due by `horizon` into `granted` until the budget (or `scan_max` live ones) is spent.

        Popped in batches no larger than what is left of either limit, so
        exactly the entries a one-by-one pop would take are taken."""
        scanned = 0
        while True:
            want = budget - len(granted)
            if scan_max is not None and scan_max - scanned < want:
                want = scan_max - scanned
            items = queue.pop_due(horizon, want) if want > 0 else None
            if not items:
                return
            for _, _, tok, e in items:
                if tok != e.token or e.state != _QUEUED:
                    continue
                last = e.history.last_fetched_at
                if last is not None and last + e.min_interval_s > now:
                    skipped.append(e)
                else:
                    granted.append(e)
                scanned += 1

    def _pull_ahead(self, now: float, left: int, granted: list[_Entry], skipped: list[_Entry]) -> None:
        """Spend `left` on URLs not due yet: of the next-due ones (parked ones too, at
        most 4 x `left` + 16 of each queue), those furthest through their interval.
        Earliest-due first would hand the budget to the pages with the shortest
        intervals again and again; by share of the interval elapsed, every page
        comes a little early, as if mu were lower for all."""
        pool: list[tuple[float, int, _Entry]] = []
        for queue in (self._queue, self._urgent):
            for _, seq, tok, e in queue.pop_due(math.inf, 4 * left + 16):
                if tok != e.token or e.state != _QUEUED:
                    continue
                last = e.history.last_fetched_at
                if last is not None and last + e.min_interval_s > now:
                    skipped.append(e)
                    continue
                span = e.due_at - last if last is not None else 0.0
                pool.append((-(now - last) / span if span > 0 else -math.inf, seq, e))
        pool.sort(key=lambda x: (x[0], x[1]))
        granted.extend(e for _, _, e in pool[:left])
        skipped.extend(e for _, _, e in pool[left:])

    def _waiting(self, now: float, horizon: float) -> tuple[Decision, ...]:
        """Decisions for (up to DENIED_LISTED_MAX of) the due URLs left waiting, oldest first."""
        out: list[Decision] = []
        for queue in (self._urgent, self._queue):
            for due, _, tok, e in heapq.nsmallest(DENIED_LISTED_MAX, queue.items()):
                if due > horizon or len(out) >= DENIED_LISTED_MAX:
                    break
                if tok == e.token and e.state == _QUEUED:
                    out.append(Decision(e.url, Reason.BUDGET, f"recrawl deferred (tier {e.tier})", now))
        return tuple(out)

    # ---- scheduling internals --------------------------------------------------------

    def _estimate(self, e: _Entry, prior: float | None = None) -> None:
        h = e.history
        lo, hi = self._rate_bounds[e.tier]
        if is_gone(h):
            # a 404/410 is judged on its own samples: its host's pages changing every
            # minute does not make a missing page come back every minute
            rate = estimate_rate(h.intervals, h.changed, older=h.older)
            e.rate = min(max(rate, lo), hi) if rate == rate else lo
            return
        if prior is None:
            prior = self._prior.rate(e.groups)
        rate = estimate_rate(h.intervals, h.changed, prior_rate=prior, prior_weight=self._prior_weight,
                             older=h.older)
        if not rate > 0.0 or rate == math.inf:  # NaN or degenerate: fall back on the prior
            rate = prior
        rate = lo if lo > rate else rate
        e.rate = hi if hi < rate else rate

    def _interval(self, e: _Entry, mult: float) -> tuple[float, bool]:
        """(revisit interval, forced by the tier's max age)."""
        lo = e.min_interval_s
        hi = self._hi[e.tier]
        if hi < lo:
            hi = lo
        if self._freshness:  # revisit_interval("freshness", ...), inline
            iv = optimal_x(mult * e.rate / e.importance) / e.rate
        else:
            iv = revisit_interval(self._index, mult, e.rate, e.importance)
        if iv >= hi:
            return hi, True
        return (iv if iv > lo else lo), False

    def _schedule(self, e: _Entry) -> None:
        """Place a fetched URL at last fetch + its interval (the first revisit spread by phase)."""
        base = e.history.last_fetched_at
        assert base is not None  # only fetched URLs are scheduled
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
            self._urgent.push((due_at, next(self._seq), e.token, e))
            if e.forced and not e.hinted:
                heapq.heappush(self._revive_heap, (-self._revival(e), next(self._seq), e.token, e))
        else:
            self._queue.push((due_at, next(self._seq), e.token, e))

    def _retry(self, e: _Entry, now: float) -> None:
        iv = self._interval(e, self._mu)[0] if self._mu is not None else self.policy.retry_s
        self._push(e, now + max(e.min_interval_s, min(self.policy.retry_s, iv)))

    # ---- reporting -----------------------------------------------------------------

    def _count(self, now: float, tier: int, column: int) -> None:
        self._stats_row(int(now // DAY_S), tier)[column] += 1

    def _stats_row(self, day: int, tier: int) -> list[int]:
        row = self._stats.get((day, tier))
        if row is None:
            row = self._stats[(day, tier)] = [0, 0, 0, 0, 0]
        return row

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
        append = [a.append for a in ages]
        for e in self._entries.values():
            last = e.history.last_fetched_at
            if last is not None:
                append[e.tier](now - last)
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
