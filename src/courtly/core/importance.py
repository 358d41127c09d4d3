"""Page importance: online OPIC, optionally blended with a user-supplied map.

Theory of operation
-------------------
OPIC (Abiteboul, Preda & Cobena, "Adaptive on-line page importance
computation", WWW 2003; Nutch's scoring filter) computes importance while
crawling, without the link matrix. Every page holds *cash*; the crawl's total
cash is fixed (`total_cash`, 1.0). When page p is fetched its cash is added
to its *history* and handed on: `damping` of it in equal parts to its distinct
out-links (new pages become known with no cash of their own), the rest to a
virtual page V that links to every page (a page with no out-links gives all of
it to V). V keeps the graph strongly connected, like PageRank's teleport.

V pays out at once and evenly to every known page, lazily: a running "cash per
page paid by V" (`_v_acc`) and, per page, the value it had when the page was
last settled, so paying V out is O(1) and a page settles its share when it is
next touched. Cash is conserved exactly (up to float rounding): the sum of all
pages' cash, their unsettled V share and V's own cash is `total_cash`.

A page's *value* is history + cash. It never decreases (fetching moves cash
into history, receiving adds), so the largest value is a running maximum and
`opic(url) = value / max value` lies in (0, 1] with no O(N) pass. Abiteboul et
al. show value / (sum of histories + total cash) converges to the page's
importance; dividing by the maximum only rescales it.

Cold start. V's initial `total_cash` is not paid out when a page becomes
known but at the first fetch, to every page known by then (all the seeds and
the first page's links), so the first seed alone does not get it. Even so, a
young estimate rests on a few fetches: one unit of cash against the histories
of only a round or two, so a handful of pages would look far more important
than the rest and the weighted recrawl objective would refetch them at their
tier's minimum interval. `prior_rounds` (k) shrinks the estimate toward
uniform importance (every page weighs 1, the maximum) by how much history
there is: with h = (sum of histories) / total_cash, about the number of crawl
rounds so far, the weight is (h x opic + k x 1) / (h + k). With no history it
is 1 for every page (uniform); as h grows it converges to OPIC. k = 0 (the
class default) is plain OPIC.

`importance(url)` blends (shrunk) OPIC with a user map (`user_map`, any positive
scores, scaled by its maximum) geometrically: user^w x opic^(1-w); URLs not in
the map get OPIC alone. Results are floored at `floor` so they stay > 0.

Rules: pure and deterministic; out-links are taken in the order given.
"""

from __future__ import annotations

from typing import Iterable, Mapping

__all__ = ["Opic"]


class Opic:
    def __init__(self, *, total_cash: float = 1.0, damping: float = 0.85,
                 user_map: Mapping[str, float] | None = None, user_weight: float = 0.5,
                 floor: float = 1e-6, pages_max: int = 50_000_000, prior_rounds: float = 0.0) -> None:
        if prior_rounds < 0:
            raise ValueError("prior_rounds >= 0")
        if total_cash <= 0 or not 0.0 <= damping <= 1.0 or not 0.0 <= user_weight <= 1.0:
            raise ValueError("total_cash > 0, damping and user_weight in [0, 1]")
        if not 0.0 < floor <= 1.0 or pages_max < 1:
            raise ValueError("floor in (0, 1], pages_max >= 1")
        self.total_cash = total_cash
        self.damping = damping
        self.user_weight = user_weight
        self.floor = floor
        self.pages_max = pages_max
        self.prior_rounds = prior_rounds
        user = dict(user_map or {})
        if any(v <= 0 for v in user.values()):
            raise ValueError("user importance values must be positive")
        top = max(user.values(), default=1.0)
        self._user = {u: v / top for u, v in user.items()}
        self._cash: dict[str, float] = {}
        self._history: dict[str, float] = {}
        self._seen: dict[str, float] = {}    # _v_acc when the page last settled
        self._v_cash = total_cash             # V starts with everything
        self._v_acc = 0.0
        self._top = 0.0                       # max over pages of history + cash - seen
        self._h_sum = 0.0                     # sum of histories, kept as it grows (O(1) shrinkage)

    def __len__(self) -> int:
        return len(self._cash)

    def __contains__(self, url: str) -> bool:
        return url in self._cash

    # ---- updates ------------------------------------------------------------------

    def add(self, url: str) -> bool:
        """Make a page known (no cash of its own); False if known or at `pages_max`."""
        if url in self._cash or len(self._cash) >= self.pages_max:
            return False
        self._cash[url] = 0.0
        self._history[url] = 0.0
        self._seen[url] = self._v_acc
        # no pay-out here: V holds cash only before the first fetch (`fetched` pays it all
        # out), and that initial cash is for every page known then, not the first one alone
        return True

    def fetched(self, url: str, out_links: Iterable[str] = ()) -> None:
        """Page `url` was fetched with these out-links: move its cash on."""
        self.add(url)
        self._settle(url)
        cash = self._cash[url]
        self._history[url] += cash
        self._h_sum += cash
        self._cash[url] = 0.0
        links = [u for u in dict.fromkeys(out_links) if u != url]
        for u in links:
            self.add(u)
        known = [u for u in links if u in self._cash]
        if known and self.damping > 0.0:
            share = cash * self.damping / len(known)
            for u in known:
                self._cash[u] += share
                self._raise_top(u)
            self._v_cash += cash - share * len(known)
        else:
            self._v_cash += cash
        self._pay_out_v()

    # ---- queries --------------------------------------------------------------------

    def value(self, url: str) -> float:
        """history + cash of a page (0 for an unknown page)."""
        if url not in self._cash:
            return 0.0
        return self._history[url] + self._cash[url] + self._v_acc - self._seen[url]

    def opic(self, url: str) -> float:
        """OPIC importance scaled to (0, 1] by the largest value."""
        top = self._top + self._v_acc
        if top <= 0.0:
            return 1.0
        return min(1.0, max(self.floor, self.value(url) / top))

    def rounds(self) -> float:
        """Sum of histories / total_cash: about how many crawl rounds OPIC has seen."""
        return self._h_sum / self.total_cash

    def shrunk(self, url: str) -> float:
        """OPIC shrunk toward uniform (1) by `prior_rounds` against the history so far."""
        o = self.opic(url)
        k = self.prior_rounds
        if k <= 0.0:
            return o
        h = self.rounds()
        return (h * o + k) / (h + k)

    def importance(self, url: str) -> float:
        """(Shrunk) OPIC blended with the user map, in (0, 1]."""
        o = self.shrunk(url)
        u = self._user.get(url)
        if u is None:
            return o
        w = self.user_weight
        return min(1.0, max(self.floor, float(u ** w) * float(o ** (1.0 - w))))

    def cash_total(self) -> float:
        """Sum of all cash (pages, unsettled V shares, V): `total_cash` by conservation. O(N)."""
        pages = sum(self._cash.values())
        pending = sum(self._v_acc - s for s in self._seen.values())
        return pages + pending + self._v_cash

    def history_total(self) -> float:
        return sum(self._history.values())

    # ---- internals -----------------------------------------------------------------

    def _settle(self, url: str) -> None:
        owed = self._v_acc - self._seen[url]
        if owed:
            self._cash[url] += owed
            self._seen[url] = self._v_acc

    def _raise_top(self, url: str) -> None:
        v = self._history[url] + self._cash[url] - self._seen[url]
        if v > self._top:
            self._top = v

    def _pay_out_v(self) -> None:
        if self._v_cash > 0.0 and self._cash:
            self._v_acc += self._v_cash / len(self._cash)
            self._v_cash = 0.0
