"""Takedowns in a running crawl: picking up purges and honouring them.

`courtly purge` records a purge in the store (table `purges`) and, in the same
transaction, marks every URL record in its scope skipped with reason
`purged`. It never takes the crawl folder lock, so it works while a crawl
runs. This module is the running crawl's side:

* `load` (at start) takes every recorded purge; one that no crawl has applied
  yet is applied to the store again (rows a killed crawl wrote after it).
* `poll` runs at every group commit (`store.commit_interval_s`): one indexed
  query for purges newer than the last seen id. A new one takes effect at
  once (the list used below is swapped); `settle`, right after that commit's
  batch is written, marks again the store rows in scope written since the
  purge was recorded, stores `applied_at` and logs the time from record to
  effect. That interval is the SLO: at most one commit interval plus one
  commit.
* From then on nothing in scope is fetched: admission refuses discovered URLs
  (decision PURGED), `drop` removes purged URLs from a lease the moment it is
  handed out (each with a decision), `HostBatches.serve` (runtime/host_batch) checks before any work
  and `Crawler.request` checks again right before the request is sent (the
  URL may have waited for its politeness slot across the poll). Requests
  already on the wire when a purge is taken up finish; they are named in the
  "applied" log line, and their content is never exported.
* `filter_batch` runs before each commit: a page fetched, a URL discovered or
  any other decision in scope ends the commit as skipped/purged.

Rules: no shell imports (the store is the crawler's port); `now` from the
crawler's clock; every URL dropped gets a decision.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from courtly.core.frontier import Lease
from courtly.core.purge import Purge, PurgeList, Scope
from courtly.core.types import Reason

if TYPE_CHECKING:
    from courtly.runtime.roles import TakedownHost

__all__ = ["Takedowns", "PurgedNow"]

log = logging.getLogger("courtly")


class PurgedNow(Exception):
    """Raised by the request path when its URL was purged while it waited."""

    def __init__(self, purge: Purge) -> None:
        super().__init__(purge.describe())
        self.purge = purge


class Takedowns:
    def __init__(self, crawler: "TakedownHost") -> None:
        self.c = crawler
        self.list = PurgeList()
        self._last_id = 0
        self._fresh: tuple | None = None   # (purges, taken up at, at start?, URLs in flight)
        self.applied: list[dict] = []      # one entry per purge applied by this process

    # ---- picking purges up ----------------------------------------------------

    def load(self, now: float) -> None:
        """At start: take every purge; re-apply to the store those no crawl took up."""
        self.take_up(self._rows(), now, at_start=True)
        self.settle()

    def poll(self, now: float) -> None:
        """Take up purges recorded since the last poll (one indexed query). From
        here on nothing in their scope is requested; `settle` (after this
        commit's batch is written) marks the store and logs the interval."""
        self.take_up(self._rows(), now)

    @property
    def last_id(self) -> int:
        """The id of the last purge taken up (a worker polls its store after it)."""
        return self._last_id

    def take_up(self, rows: list[tuple], now: float, *, at_start: bool = False) -> None:
        """Purge rows (id, scope, value, reason, at, applied_at) read from the
        store: in force at once. At start, those some crawl applied already
        need no settling. Purges taken up and not yet settled stay to settle."""
        if not rows:
            return
        purges = [_purge(r) for r in rows]
        self.list = self.list.with_purges(purges)
        self._last_id = self.list.last_id
        if at_start:
            purges = [_purge(r) for r in rows if r[5] is None]
            if not purges:
                return
        fresh = PurgeList(tuple(purges))
        in_flight = [] if at_start else sorted(u for u in self.c.in_flight_urls() if fresh.match(u))
        if self._fresh is not None:    # not settled yet (a worker's store was away): settle both
            old, at, old_start, old_flight = self._fresh
            purges, now, at_start, in_flight = old + purges, at, old_start and at_start, old_flight + in_flight
        self._fresh = (purges, now, at_start, in_flight)

    def settle(self) -> None:
        """Mark again the store rows in scope of the purges just taken up (the
        crawl may have written some after `courtly purge` marked them), store
        their applied_at, and log each one with its time to effect."""
        due = self.to_settle()
        if due is not None:
            self.settled(self.c.store.apply_purges(*due))

    def to_settle(self) -> tuple[list[Purge], float] | None:
        """The purges taken up and not settled yet, and when they were taken up."""
        return None if self._fresh is None else (self._fresh[0], self._fresh[1])

    def settled(self, marked: dict[str, int]) -> None:
        """The store marked the rows of `to_settle()`'s purges (`marked`: counts): log them."""
        if self._fresh is None:
            return
        purges, at, at_start, in_flight = self._fresh
        self._fresh = None
        c = self.c
        for p in purges:
            effect_s = max(0.0, at - p.at)
            entry = {"purge_id": p.id, "scope": str(p.scope), "value": p.value, "purge_reason": p.reason,
                     "recorded_at": p.at, "applied_at": at, "effect_s": effect_s, "at_start": at_start,
                     "in_flight": [u for u in in_flight if p.covers(u)],
                     "store_rows_marked": marked.get("queued", 0) + marked.get("other", 0)}
            self.applied.append(entry)
            extra = {"event": "purge_applied", "crawl_id": c.crawl_id, **entry}
            if at_start:
                log.info("[%s] %s (not yet taken up by a crawl) applied at start", c.crawl_id, p.describe(),
                         extra=extra)
            else:
                log.info("[%s] %s applied %.3f s after it was recorded; %d request(s) in flight finish, "
                         "nothing in its scope is fetched from now on", c.crawl_id, p.describe(), effect_s,
                         len(entry["in_flight"]), extra=extra)

    def _rows(self) -> list[tuple]:
        reader = getattr(self.c.store, "purges", None)
        return list(reader(self._last_id)) if reader is not None else []

    # ---- honouring them -------------------------------------------------------

    def match(self, url: str) -> Purge | None:
        return self.list.match(url) if self.list else None

    def drop(self, lease: Lease, now: float) -> Lease | None:
        """`lease` without its purged URLs (each gets a decision); None when
        nothing is left, in which case the key goes straight back."""
        if not self.list:
            return lease
        kept = []
        for item in lease.items:
            p = self.list.match(item.url)
            if p is None:
                kept.append(item)
            else:
                self.decide(item.url, item.key, item.via, p, now, item.depth)
        if len(kept) == len(lease.items):
            return lease
        if kept:
            return replace(lease, items=tuple(kept))
        # no request was made: the key's politeness state is untouched, and any
        # later lease of it still waits for its next fetch time in request
        self.c.frontier.complete(lease.lease_id, now, [])
        return None

    def decide(self, url: str, key: str, via: str, purge: Purge, now: float, depth: int = 0) -> None:
        self.c.decide(url, key, via, Reason.PURGED, purge.describe(), now, depth)
        rc = self.c.recrawl
        if rc.enabled and url in rc.scheduler:
            rc.scheduler.remove(url)

    def filter_batch(self, batch, now: float) -> None:
        """Pages fetched (requests in flight when the purge came), URLs queued
        and other decisions in scope end this commit skipped/purged: the purged
        decisions come last in the batch, and the store applies decisions in
        order, after new and fetched URLs."""
        if not self.list:
            return
        match = self.list.match
        hits = [(url, "", "", 0) for _at, _status, url in batch.fetched if match(url)]
        hits += [(row[0], row[1], row[5], row[3]) for row in batch.new_urls if match(row[0])]
        hits += [(row[0], row[1], row[2], row[7]) for row in batch.decisions
                 if row[5] != Reason.PURGED and match(row[0])]
        for url, key, via, depth in hits:
            self.decide(url, key, via, match(url), now, depth)


def _purge(row: tuple) -> Purge:
    pid, scope, value, reason, at, _applied = row
    return Purge(Scope(scope), value, reason, pid, at)
