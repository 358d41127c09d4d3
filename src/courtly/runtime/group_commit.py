"""The single machine's group commit, and what it does while its store is down.

What it owns: writing the crawl engine's batch to its own store every
`store.commit_interval_s` (a distributed worker's batches go through its
`Commits` strategy instead, runtime/distribution.py), the steps around each
write (purges and complaints polled before it, key eviction, the WARC flush
before the store acknowledges a page, invariant 5; consumers, the watch list
and the overflow after it), and the store being unavailable: a database
locked by another process past its busy timeout, a full disk, an I/O error
(`sqlite3.OperationalError`, or the ports' `StoreUnavailableError`).

How it works: a batch taken from the engine joins `unwritten`, a list of
batches in the order they were made; a commit writes them oldest first, each
in its own transaction, and drops each only once the store took it. A commit
that fails keeps them all, and `StoreOutage` (pure: it takes `now`) says when
to try again: back-off from `RETRY_S_MIN` doubling to `RETRY_S_MAX`, through
the engine's clock (the commit loop's tick skips until then). Meanwhile:

- fetching pauses once the requests made since the last good commit reach
  `store.unwritten_max` (`paused`): a queue of unacknowledged work with a
  limit; the engine leases no host batch and sends no further request of one
  until a commit goes through (the requests already on the wire finish);
- a link whose seen-test must ask the store waits in the admission
  (runtime/admission) instead of being dropped or queued twice; the next
  commit admits it again first, and writes nothing while one still waits (a
  page is acknowledged only together with its links);
- idle keys are not evicted while batches wait (an evicted key's state
  waiting in a batch is read back from there, runtime/keymemory); a key
  whose saved state cannot be read back from the store waits, its URL
  queued after the next good commit (`park`), and so does a robots.txt copy
  (runtime/host_batch: the key is handed back for a while);
- a store down for longer than `store.down_s_max` stops the crawl: `StoreDown`
  (an environment error: one line, exit status 4, runtime/exits; the store's
  own error is its cause). What
  was not written is fetched again by the next run (at-least-once, as after
  `kill -9`): a page counts as fetched only with its links.

The end of a run (`finish`) retries the same way, until written or past the
horizon; an aborted run (a second Ctrl-C) tries once.

Rules: nothing unwritten is ever dropped while the crawl runs; every wait
goes through the engine's clock; the failure is logged once when it starts
and once when the store is back, not at every retry.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import Callable

from courtly.core.types import UrlItem
from courtly.ports import Batch, StoreUnavailableError

__all__ = ["GroupCommit", "StoreDown", "StoreOutage", "UNAVAILABLE", "RETRY_S_MIN", "RETRY_S_MAX"]

log = logging.getLogger("courtly")

# the errors of a store that cannot be written now (locked, full, I/O) but may be later
UNAVAILABLE = (sqlite3.OperationalError, StoreUnavailableError)
RETRY_S_MIN = 0.5
RETRY_S_MAX = 30.0
ABORT_LOOK_S = 1.0     # a stopping crawl waiting for its store looks this often for a second Ctrl-C


class StoreDown(Exception):
    """The crawl's store stayed unavailable past `store.down_s_max`: the crawl
    stopped (an environment error: exit status 4, state saved, resumable)."""

    environment = True

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.__cause__ = cause    # a full disk behind it stays visible (runtime/exits)


@dataclass(slots=True)
class StoreOutage:
    """When the store went down and when to try it again (pure: takes `now`)."""

    down_s_max: float
    since: float | None = None      # the first failure of this outage
    retry_at: float = 0.0
    retry_s: float = RETRY_S_MIN
    failures: int = 0
    last_error: str = ""

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, now: float, error: BaseException) -> None:
        if self.since is None:
            self.since, self.retry_s = now, RETRY_S_MIN
        else:
            self.retry_s = min(self.retry_s * 2, RETRY_S_MAX)
        self.failures += 1
        self.last_error = str(error) or type(error).__name__
        self.retry_at = now + self.retry_s

    def past_horizon(self, now: float) -> bool:
        return self.since is not None and now - self.since >= self.down_s_max

    def recovered(self, now: float) -> float:
        """The outage is over; how long it lasted (0 when there was none)."""
        lasted = now - self.since if self.since is not None else 0.0
        self.since, self.retry_at, self.retry_s, self.failures = None, 0.0, RETRY_S_MIN, 0
        return lasted


class GroupCommit:
    """The engine's periodic commit to its own store (see the module doc)."""

    def __init__(self, crawler) -> None:
        self.c = crawler
        s = crawler.cfg.store
        self.interval_s = s.commit_interval_s
        self.unwritten_max = s.unwritten_max
        self.outage = StoreOutage(s.down_s_max)
        self.unwritten: list[Batch] = []
        self.parked: list[tuple[UrlItem, bool]] = []   # URLs of evicted keys that could not be read back
        self._budget_saved_at = 0.0

    async def loop(self) -> None:
        clock = self.c.clock
        while True:
            await clock.sleep(self.interval_s)
            self.commit()

    def park(self, item: UrlItem, stored: bool) -> None:
        """`item`'s key state could not be read back from the store: queued
        after the next good commit (bounded as fetching is: see `paused`)."""
        self.parked.append((item, stored))

    def paused(self) -> bool:
        """Fetching waits: the store is down and the requests it has not
        acknowledged reached `store.unwritten_max`."""
        if not self.outage.down:
            return False
        made = len(self.c.batch.fetches) + sum(len(b.fetches) for b in self.unwritten)
        return made >= self.unwritten_max

    def commit(self, *, final: bool = False) -> None:
        """Write what the engine gathered (a no-op while backing off, but for the final one)."""
        c = self.c
        now = c.clock.now()
        if self.outage.down and now < self.outage.retry_at and not final:
            return
        try:
            self._write(now, final)
        except UNAVAILABLE as e:
            self._failed(now, e)
            return
        if self.outage.down:
            lasted = self.outage.recovered(now)
            log.warning("[%s] the crawl database is writable again after %.1f s; fetching resumes",
                        c.crawl_id, lasted)
            c.wake()

    async def finish(self, aborted: Callable[[], bool]) -> None:
        """The end of a run: commit, retrying while the store is down, until
        written, past the horizon, or `aborted()` (a second Ctrl-C, looked at
        every ABORT_LOOK_S of the wait)."""
        c = self.c
        self.commit(final=True)
        while self.outage.down and not aborted() and c.fatal is None:
            await c.clock.sleep_until(min(self.outage.retry_at, c.clock.now() + ABORT_LOOK_S))
            if c.clock.now() >= self.outage.retry_at:
                self.commit(final=True)
        if self.outage.down:
            made = len(c.batch.fetches) + sum(len(b.fetches) for b in self.unwritten)
            log.warning("[%s] the crawl database was not written: %d requests since the last commit are not "
                        "acknowledged, and the next run fetches those pages again", c.crawl_id, made)

    def _failed(self, now: float, e: BaseException) -> None:
        first = not self.outage.down
        self.outage.failed(now, e)
        c = self.c
        if first:
            log.warning("[%s] the crawl database cannot be written (%s): retrying, fetching pauses after %d "
                        "unwritten requests, the crawl stops after %g s (store.down_s_max)",
                        c.crawl_id, self.outage.last_error, self.unwritten_max, self.outage.down_s_max)
        if self.outage.past_horizon(now) and c.fatal is None:
            down = StoreDown(f"the crawl database could not be written for {now - self.outage.since:.0f} s "
                             f"(store.down_s_max = {self.outage.down_s_max:g} s): {self.outage.last_error}", e)
            c.fail(down)

    def _write(self, now: float, final: bool) -> None:
        c = self.c
        c.takedowns.poll(now)     # new purges take effect before this batch is written
        c.complaints.poll(now)    # and new abuse complaints slow their keys
        if c.admission.readmit(now):   # a page's links go with it: none may still wait for the store
            raise StoreUnavailableError("the store could not tell whether links were seen")
        c.takedowns.filter_batch(c.batch, now)
        for b in self.unwritten:  # a purge that came while they waited applies to them too
            c.takedowns.filter_batch(b, now)
        if not self.unwritten:    # an evicted key's state must reach the store before it is read back
            c.sweep_keys(now)
        if final or now - self._budget_saved_at >= 10.0:
            c.budget.save(c.batch)
            c.recrawl.save(c.batch)
            self._budget_saved_at = now
        if len(c.batch):
            self.unwritten.append(c.take_batch())
        if self.unwritten:
            c.warc.flush()            # raw bytes reach the disk before the store says "fetched"
            while self.unwritten:
                batch = self.unwritten[0]
                c.store.apply(batch)
                self.unwritten.pop(0)
                c.consumers.committed(batch)   # after the WARC flush: streams name written bytes
            c.admission.committed()
            c.key_memory.written()        # evicted states are in the store: read back from there
            c.bloom_watch.after_commit()   # the store now holds every URL the filter does
        c.consumers.poll(now)     # new submissions, like purges, at every commit
        c.monitor.save()          # after the WARC flush: a change event never names unwritten bytes
        c.monitor.poll(now)
        c.overflow.refill(now)    # the store now holds every queued URL decided so far
        c.takedowns.settle()      # after the batch: rows it wrote in scope are marked too
        parked, self.parked = self.parked, []
        for item, stored in parked:
            c.queue(item, now, stored=stored)
