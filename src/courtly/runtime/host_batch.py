"""One host batch (a lease of the frontier) served URL after URL: the fetch
task of the crawl engine (runtime/crawler.py).

What it owns: the steps between a leased URL and its request, in order:

    purged?                              (Decision PURGED; see runtime/takedown)
    key down past its horizon?           (Decision HOST_DOWN / BANNED; core/health)
    robots ready for the URL's origin?   (fetch robots.txt first, same rules)
    allowed by robots?                   (else Decision ROBOTS / ROBOTS_UNREACHABLE)
    resolve + SSRF check                 (else Decision DNS / NON_PUBLIC)
    wait for the key's next fetch time, then for the IP's limits
    fetch -> politeness.finished -> WARC record -> links -> store
    (a failure of the host backs the key off or parks it; its URL waits)

and the state of the batches being served: the lease ids a live task holds
(`held`: the main loop never expires them, so a clock leap past
`crawl.lease_s` cannot lease a key twice), the pages reserved against
`--max-pages` across the awaits (`reserved`), and a key held back after an
abandoned robots.txt fetch (`hold`).

How it works: `run_lease` serves the batch's URLs in the order the consumers
want until one must wait (a back-off, a turn further off than LEASE_HOLD_S,
fetching paused while the store is down), then hands the key back to the
frontier with the instant it is ready again and the URLs left.

Rules: politeness is the core's (only the lease holder fetches for a key);
every URL not fetched gets a decision with a reason, or stays queued.
"""

from __future__ import annotations

import logging

from courtly.core.frontier import Lease
from courtly.core.netpolicy import is_public_address
from courtly.core.robots import RobotsState
from courtly.core.types import Reason, UrlItem
from courtly.core.urls import origin_of_normalized, origin_text_of_normalized
from courtly.ports import ResolveFailed
from courtly.runtime.distribution import Tenure
from courtly.runtime.group_commit import UNAVAILABLE
from courtly.runtime.requests import path_of
from courtly.runtime.takedown import PurgedNow

__all__ = ["HostBatches", "LEASE_HOLD_S"]

log = logging.getLogger("courtly")

# A lease task gives its host back to the frontier, rest of the batch and
# all, when the host's next request is further off than this: a task that
# slept through the politeness delay held one of the `fetch_tasks` slots, so
# with a 1 s delay the crawl could not pass `fetch_tasks` pages/s however
# many hosts were ready (docs/performance.md, S2).
# Shorter waits are slept in the task: re-leasing costs more than they do.
LEASE_HOLD_S = 0.05

STORE_WAIT_S = 5.0     # a key whose robots.txt copy cannot be read back (the store is down) is handed back this long


class HostBatches:
    """The fetch tasks' work: one lease at a time each (see the module doc)."""

    def __init__(self, crawler) -> None:
        self.c = crawler
        self.held: set[int] = set()      # lease ids served by a live task: never expired
        self.hold: dict[str, float] = {}  # key -> not before (an abandoned robots.txt fetch)
        self.reserved = 0                # pages being served (for the --max-pages budget)
        self.warned_impolite = False

    async def run_lease(self, lease: Lease) -> None:
        c = self.c
        key = lease.key
        tenure = c.tenancy.tenure(key)    # every request of the batch is sent under it
        remaining = c.consumers.order(key, list(lease.items))
        lost = False
        c.tenancy.begin(key)
        self.held.add(lease.lease_id)
        try:
            while remaining and not c.stopping:
                left = c.budget_left()
                if (left is not None and left <= 0) or c.group.paused():
                    break
                item = remaining[0]
                self.reserved += 1   # hold a page of the budget across the awaits below
                try:
                    outcome = await self.serve(item, lease, tenure)
                finally:
                    self.reserved -= 1
                if outcome == "lost":
                    lost = True
                    return
                if outcome == "retry-later":
                    break       # back-off, or the host's turn is far off: the rest waits too
                remaining.pop(0)
        finally:
            if not lost:
                now = c.clock.now()
                ready_at = max(c.politeness.ready_at(key, now), self.hold.pop(key, 0.0))
                c.frontier.complete(lease.lease_id, ready_at, remaining)
                c.batch.hosts[key] = c.politeness.key(key).snapshot()
            self.held.discard(lease.lease_id)
            c.tenancy.end(key)
            c.wake()

    async def serve(self, item: UrlItem, lease: Lease, tenure: Tenure) -> str:
        """Fetch one URL of the lease. Returns 'done', 'retry-later' or 'lost'."""
        c = self.c
        now = c.clock.now()
        purge = c.takedowns.match(item.url)
        if purge is not None:
            c.takedowns.decide(item.url, item.key, item.via, purge, now, item.depth)
            return "done"
        if c.politeness.gives_up(item.key, now):   # down past the horizon, no probe due
            c.results.give_up(item, now)
            return "done"
        origin = origin_of_normalized(item.url)   # queued URLs are normalised
        origin_s = origin_text_of_normalized(item.url)
        # The address check comes first: a non-public target gets no request at
        # all, not even for its robots.txt.
        try:
            ip = (await c.resolver.resolve(origin.host))[0]
        except ResolveFailed as e:   # anything else is a bug, and propagates
            c.decide(item.url, item.key, item.via, e.reason, e.detail, now, item.depth)
            return "done"
        if not self.warned_impolite and c.politeness.delay_s_min(item.key, now) < 1.0 \
                and is_public_address(ip):
            self.warned_impolite = True
            log.warning("IMPOLITE: delay %.2f s (< 1 s) applies to %s, a public address (%s)",
                        c.politeness.delay_s_min(item.key, now), item.key, ip)
        # the trap guard first: a fenced trap's URL (a farm's new host name) costs no robots.txt
        verdict = c.budget.before_fetch(item.key, item.url, now)
        if not verdict.allowed:
            c.decide(item.url, item.key, item.via, verdict.reason,
                        f"{verdict.rule}: {verdict.detail}", now, item.depth)
            return "done"
        try:
            view = c.robots.lookup(origin_s, now)
        except UNAVAILABLE:   # an evicted robots.txt copy, in the store, which is down: the key waits
            self.hold[item.key] = now + STORE_WAIT_S
            return "retry-later"
        if view.state is RobotsState.NEED_FETCH:
            if not await c.requests.fetch_robots(origin_s, item.key, lease, tenure):
                return "lost"
            view = c.robots.lookup(origin_s, c.clock.now())
        if view.state is not RobotsState.READY:
            # an abandoned robots fetch: the book times it out; hold the key till then
            self.hold[item.key] = c.clock.now() + 5.0
            return "retry-later"
        rules = view.rules
        reason = view.skip_reason(c.token, path_of(item.url))
        if reason is Reason.ROBOTS_UNREACHABLE and c.politeness.unreachable(item.key):
            # the host is down (or banning us), not refusing: the URL waits; the next try is a probe.
            # (A robots.txt that fails while the host answers, 5xx included, is unreachable in
            # RFC 9309's sense: disallow all, whether the key is parked yet or not.)
            self.hold[item.key] = view.retry_at or c.clock.now() + 5.0
            return "retry-later"
        if reason is not None:
            c.decide(item.url, item.key, item.via, reason, origin_s + "/robots.txt", now, item.depth)
            return "done"
        c.politeness.set_crawl_delay(item.key, rules.crawl_delay(c.token), now)
        if self.turn_far_off(item.key):
            return "retry-later"
        if c.budget.probe_before(origin_s, item.url, now):
            if not await c.requests.probe_soft404(origin_s, rules, item.key, ip, lease, tenure):
                return "lost"
            if self.turn_far_off(item.key):
                return "retry-later"
        quota = c.consumers.before_fetch(item, c.clock.now())   # charges its consumers within quota
        if quota:
            c.decide(item.url, item.key, item.via, Reason.QUOTA, quota, c.clock.now(), item.depth)
            return "done"
        headers = c.recrawl.headers(item.url)   # If-None-Match / If-Modified-Since
        try:
            result = await c.requests.request(item.url, item.key, ip, lease, headers, tenure)
        except PurgedNow as e:    # purged while it waited for its slot
            c.takedowns.decide(item.url, item.key, item.via, e.purge, c.clock.now(), item.depth)
            return "done"
        if result is None:
            return "lost"
        c.consumers.answered(item.url, result)
        return await c.results.handle(item, result)

    def batch_for(self, key: str) -> int:
        """How many of the key's URLs a lease takes: one when the key's delay
        will hand it back after its first request (see LEASE_HOLD_S), else
        the batch; the rest stay queued instead of going out and back."""
        c = self.c
        n = 1 if c.politeness.key(key).delay_s > LEASE_HOLD_S else c.cfg.crawl.batch_max
        return c.consumers.lease_size(n)

    def turn_far_off(self, key: str) -> bool:
        """The key's next request must wait more than LEASE_HOLD_S: the lease
        task gives the key back (the frontier hands it out again when it is
        ready) instead of sleeping on one of the `fetch_tasks` slots."""
        c = self.c
        now = c.clock.now()
        return c.politeness.ready_at(key, now) > now + LEASE_HOLD_S
