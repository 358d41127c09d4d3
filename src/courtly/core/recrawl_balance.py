"""The recrawl scheduler's price: solving mu and placing the queue again.

Theory of operation
-------------------
`RecrawlScheduler` (core/recrawl) keeps its URLs in a queue keyed on their
due instants; where each is placed depends on mu, the budget's Lagrange
multiplier, and on its rate estimate. This module owns when and how those
move. An average of the recrawl fetch rate is kept (over the scheduler's age
while it is younger than a day: the first plans share the budget with
discovery, and a day-long average started there would plan that small rate
for hours after discovery ends), and of the share of it hinted grants took
(they are served first, so the solve plans the rest, at most
`HINT_SHARE_MAX` left to them). mu is solved on a sample (`budget_multiplier`)
for that rate less a `headroom` (kept for pulling forward) every `rebalance_s`, and more often while the scheduler is young (every
period at first, then at a quarter of its age) so a cold start spends its
budget from the first rates it observes; then URLs with fewer than
`_FEW_SAMPLES` samples are first estimated again from the prior, which
learns fast, and placed again when their rate moved by `_REESTIMATE_MOVE`.
When mu has drifted by `REPLACE_DRIFT` since the queue was placed, the whole
queue is placed again; URLs parked at their tier's max age come back as soon
as mu falls below their revival value (a heap by that value); and a slow
round-robin (`replace_cycle_s`) re-places the rest with the current mu and
prior.

Rules: pure; `now` is an argument; a mixin of `RecrawlScheduler`, whose
state (entries, queues, mu, averages) it reads and moves: it has none of its
own.
"""

from __future__ import annotations

import heapq
import math
import random
from typing import TYPE_CHECKING

from courtly.core.changerate import DAY_S, budget_multiplier, freshness_index, staleness_priority
from courtly.core.duequeue import QUEUED, DueQueue
from courtly.core.recrawl_policy import RecrawlPolicy, Tier

if TYPE_CHECKING:
    from courtly.core.recrawl import _Entry

__all__ = ["Rebalancing", "REPLACE_DRIFT", "HINT_SHARE_MAX"]

_QUEUED, _IN_FLIGHT, _REMOVED = QUEUED, 1, 2
_FEW_SAMPLES = 4            # below this, a re-placement re-reads the (moving) prior
REPLACE_DRIFT = 1.5         # mu moved this factor since the queue was placed: place it again
HINT_SHARE_MAX = 0.5        # the most of the budget the solve leaves to hinted refetches
_REESTIMATE_MOVE = math.log(1.2)   # a young URL's re-read prior moved this much (log): place it again


class Rebalancing:
    """The solve of mu and the re-placements of `RecrawlScheduler` (see the module docstring).

    The scheduler's state this reads and moves, declared for the type checker
    (`RecrawlScheduler.__init__` sets it), and the placement it calls back."""

    policy: RecrawlPolicy
    _rng: random.Random
    _tiers: tuple[Tier, ...]
    _hi: list[float]
    _index: str
    _entries: dict[str, _Entry]
    _order: list[_Entry]
    _cursor: int
    _queue: DueQueue
    _urgent: DueQueue
    _revive_heap: list[tuple[float, int, int, _Entry]]
    _mu: float | None
    _placed_mu: float | None
    _solved_at: float
    _first_plan_at: float | None
    _replace_carry: float
    _rate_ewma: float | None
    _hint_share: float

    def _estimate(self, e: _Entry, prior: float | None = None) -> None:
        raise NotImplementedError

    def _interval(self, e: _Entry, mult: float) -> tuple[float, bool]:
        raise NotImplementedError

    def _schedule(self, e: _Entry) -> None:
        raise NotImplementedError

    def _push(self, e: _Entry, due_at: float) -> None:
        raise NotImplementedError

    def _revival(self, e: _Entry) -> float:
        """The multiplier below which a URL parked at its tier's max age gets a shorter interval."""
        hi = max(e.min_interval_s, self._hi[e.tier])
        if self._index == "freshness":
            return freshness_index(e.importance, e.rate, hi)
        return staleness_priority(e.importance, e.rate, hi)

    def _revive(self) -> None:
        """After mu fell: re-place the parked URLs whose revival multiplier is now above it."""
        heap, mu = self._revive_heap, self._mu
        assert mu is not None  # called after a solve
        while heap and -heap[0][0] > mu:
            _, _, tok, e = heapq.heappop(heap)
            if tok == e.token and e.state == _QUEUED and e.forced:
                self._schedule(e)

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
            assert self._mu is not None  # re-placing starts after the first solve
            iv, forced = self._interval(e, self._mu)
            if e.first:
                iv = e.min_interval_s + (iv - e.min_interval_s) * e.phase
            due = e.history.last_fetched_at + iv
            if forced != e.forced or abs(due - old) > 0.01 * iv + 1.0:
                e.forced = forced
                self._push(e, due)
        if self._queue.size + self._urgent.size + len(self._revive_heap) > 3 * len(self._entries) + 1024:
            self._queue.compact()
            self._urgent.compact()
            heap = self._revive_heap
            heap[:] = [x for x in heap if x[2] == x[3].token and x[3].state == _QUEUED]
            heapq.heapify(heap)

    def _track_rate(self, recrawl: int, elapsed: float, now: float) -> None:
        """Keep an average of the recrawl fetch rate; re-solve mu when due."""
        r = recrawl / elapsed if elapsed > 0 else 0.0
        if self._rate_ewma is None:
            self._rate_ewma = r
        else:
            # averaged over a day, or over the scheduler's age while it is younger: the
            # first plans of a crawl share the budget with discovery, and a day-long average
            # started there would plan that small rate for hours after discovery ends
            self._rate_ewma += (r - self._rate_ewma) * min(1.0, elapsed / self._span(now, DAY_S))
        first = self._first_plan_at if self._first_plan_at is not None else now
        # a young scheduler re-solves as soon as it has learned something (every period at
        # first, then at a quarter of its age), so a cold start spends its budget from the
        # first rates it observes, not from the default prior for `rebalance_s`
        every = min(self.policy.rebalance_s, max(self.policy.period_s, 0.25 * (now - first)))
        if now - self._solved_at >= every:
            self._rebalance(now, young=every < self.policy.rebalance_s)

    def _track_hints(self, hinted: int, recrawl: int, elapsed: float, now: float) -> None:
        """Average the share of the recrawl budget that hinted grants take. The
        solve plans the rest: hinted refetches are served first, so a solve for
        the whole budget would leave scheduled work waiting behind them."""
        if recrawl > 0:
            span = self._span(now, self.policy.rebalance_s)
            self._hint_share += (hinted / recrawl - self._hint_share) * min(1.0, elapsed / span)

    def _span(self, now: float, cap_s: float) -> float:
        """An averaging span: the scheduler's age (at least 10 periods), at most `cap_s`."""
        first = self._first_plan_at if self._first_plan_at is not None else now
        return min(cap_s, max(10.0 * self.policy.period_s, now - first))

    def _rebalance(self, now: float, young: bool = False) -> None:
        """Solve mu again and re-place what it moved. `young`: the prior is still
        learning fast, so URLs with few samples of their own are estimated again
        from it first (their rate was frozen at whatever the prior said when they
        were fetched: on a cold start, the default, which parks them at the max age)."""
        moved = self._refresh_young() if young else []
        planned = 1.0 - self.policy.headroom - min(self._hint_share, HINT_SHARE_MAX)
        self._mu = self._solve((self._rate_ewma or 0.0) * planned)
        self._solved_at = now
        placed = self._placed_mu
        if placed is None or abs(math.log(self._mu / placed)) > math.log(REPLACE_DRIFT):
            self._placed_mu = self._mu  # drifted far from what the queue was placed with: re-place all
            for e in self._entries.values():
                if e.state == _QUEUED and not e.hinted and e.history.last_fetched_at is not None:
                    self._schedule(e)
        else:
            for e in moved:
                self._schedule(e)
        self._revive()

    def _refresh_young(self) -> list[_Entry]:
        """Re-estimate the queued URLs with fewer than `_FEW_SAMPLES` samples from
        the current prior; returns those whose rate moved by more than `REESTIMATE_MOVE`."""
        moved = []
        for e in self._entries.values():
            if (e.state != _QUEUED or e.hinted or e.history.last_fetched_at is None
                    or len(e.history.intervals) >= _FEW_SAMPLES):
                continue
            old = e.rate
            self._estimate(e)
            if abs(math.log(e.rate / old)) > _REESTIMATE_MOVE:
                moved.append(e)
        return moved

    def _solve(self, rate_per_s: float) -> float:
        """mu such that the revisit rates of a sample of the URLs sum to their share of `rate_per_s`."""
        order = self._order
        live = order if len(order) == len(self._entries) else [e for e in order if e.state != _REMOVED]
        if not live:
            return 1.0
        stride = max(1, len(live) // self.policy.solve_sample_max)
        sample = live[self._rng.randrange(stride)::stride]
        period = self.policy.period_s
        rows = [(e.rate, e.importance, e.min_interval_s,
                 max(e.min_interval_s, self._tiers[e.tier].interval_s_max - period)) for e in sample]
        return budget_multiplier(rows, rate_per_s * len(sample) / len(live), self.policy.index, self._mu)
