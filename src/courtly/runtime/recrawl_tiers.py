"""Recrawl tiers the budget can keep: which tier each tracked URL is in.

What it owns: the tier of every URL the recrawl scheduler tracks, for a
crawl with more than one tier (intent `search`).

How it works: a tier is a promise, its max age: a page of the top tier is
refetched at least once a day whatever it is worth. A promise costs
1 / interval_s_max fetches per second per page, and the scheduler serves the
promised (forced) fetches before any other. When the promises alone cost
more than the budget, every fetch is a forced one, taken oldest first: the
crawl turns into a uniform round robin over its pages and the importance and
change rates it learned choose nothing (every seed of a 2,000-page crawl at
depth 0 with a budget of 1,000 a day did exactly that).

So a URL asks for a tier (`wanted`: from its depth, or from the operator's
importance: a tenfold step down in importance is a tier down) and gets it as
long as the tier has room. The tiers above the last share `share` of the
daily budget evenly: tier t holds at most
    share x daily_budget x interval_s_max(t) / day / (tiers - 1)
pages. When a tier is full, the least important page in it (the newest of
equals, so that earlier and shallower pages keep their place) moves a tier
down, and so on; the last tier's promise is the loosest and holds every
page left.

Rules: pure; placement is at first sight (and again from the store on
restart), importance as known then; a URL keeps its tier until a more
important one pushes it down.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Sequence

from courtly.core.changerate import DAY_S

__all__ = ["TierPlacer", "importance_tier"]


def importance_tier(importance: float, tiers: int) -> int:
    """The tier an importance in (0, 1] (1 = the most important page) asks
    for: a tier down for each tenfold step below the top."""
    if importance >= 1.0:
        return 0
    return min(tiers - 1, int(-math.log10(max(importance, 1e-300))))


class TierPlacer:
    """Tiers within what the budget can promise (see the module doc)."""

    def __init__(self, intervals_s_max: Sequence[float], daily_budget: float, share: float) -> None:
        n = len(intervals_s_max)
        upper = max(1, n - 1)
        self.caps = [share * daily_budget * hi / DAY_S / upper for hi in intervals_s_max[:-1]] + [math.inf]
        self.counts = [0] * n
        self._heaps: list[list[tuple[float, int, str]]] = [[] for _ in range(n)]
        self._placed: dict[str, tuple[int, float, int]] = {}   # url -> (tier, importance, seq), upper tiers
        self._seq = itertools.count()

    def tier(self, url: str) -> int | None:
        got = self._placed.get(url)
        return None if got is None else got[0]

    def place(self, url: str, wanted: int, importance: float) -> list[tuple[str, int, float]]:
        """Place a URL seen for the first time in the highest tier from `wanted`
        down that has room; (url, tier, importance) of it and of every URL moved down."""
        last = len(self.counts) - 1
        tier = min(max(wanted, 0), last)
        moved = [(url, tier, importance)]
        self._put(url, tier, importance, next(self._seq))
        while tier < last and self.counts[tier] > self.caps[tier]:
            out, imp, seq = self._pop_least(tier)
            tier += 1
            self._put(out, tier, imp, seq)
            moved.append((out, tier, imp))
        # the placed URL may itself have moved down: its final tier is its last row
        last_row = {u: (u, t, w) for u, t, w in moved}
        return list(last_row.values())

    def _put(self, url: str, tier: int, importance: float, seq: int) -> None:
        self.counts[tier] += 1
        if tier < len(self.counts) - 1:
            self._placed[url] = (tier, importance, seq)
            heapq.heappush(self._heaps[tier], (importance, -seq, url))
        else:
            self._placed.pop(url, None)   # the last tier holds every page left: nothing to track

    def _pop_least(self, tier: int) -> tuple[str, float, int]:
        heap = self._heaps[tier]
        while True:
            imp, neg_seq, url = heapq.heappop(heap)
            if self._placed.get(url) == (tier, imp, -neg_seq):
                self.counts[tier] -= 1
                return url, imp, -neg_seq
