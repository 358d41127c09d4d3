"""The crawl driver: leases host batches from the frontier and fetches them.

Theory of operation
-------------------
One `Crawler` is the engine of both deployments: on a single machine it owns
every key; a distributed worker (runtime/worker.py) builds it with the
cluster's strategies (runtime/distribution.py: who owns which key, the per-IP
slot shared by the cluster, who writes the batches). Its main loop expires
overdue leases (never one a live task holds: a clock leap past
`crawl.lease_s` must not lease its key twice), hands ready host batches
(leases) to fetch tasks up to `crawl.fetch_tasks`, and otherwise sleeps until
`frontier.next_wakeup()` or until something changes (a task ends, URLs are
queued). Nothing polls.

A fetch task serves one lease, i.e. one politeness key, URL after URL
(runtime/host_batch.py: purges, health, robots.txt first, resolve and SSRF
check, the key's and the IP's turn, fetch, results).

Politeness is structural: only the lease holder fetches for a key, a per-key
lock covers the rare request made for another key (a robots.txt redirect to
another site), and `Politeness.started` refuses a second request in flight.

Durability: WARC records are written as soon as a response is complete; the
store batch that acknowledges them is committed every `store.commit_interval_s`
after the WARC writer is flushed (invariant 5); each commit also polls for
purges (invariant 7), which take effect at once. A page counts as fetched in the
store only together with the links found on it, so `kill -9` loses nothing:
unacknowledged pages are fetched again (at-least-once). A store that cannot be
written is retried with back-off, fetching pauses past `store.unwritten_max`
unwritten requests, and past `store.down_s_max` the crawl stops
(runtime/group_commit.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from typing import Iterable

from courtly.config import Config
from courtly.core.ban import BanConfig, BanWatch
from courtly.core.frontier import Frontier, FrontierFull
from courtly.core.intent import profile_of
from courtly.core.politeness import AllowEntry, Politeness, PolitenessConfig
from courtly.core.robots import REDIRECTS_MAX, RobotsBook
from courtly.core.seen import SeenFilter
from courtly.core.types import ItemKind, Reason, UrlItem
from courtly.core.urls import (
    escape_raw_octets,
    politeness_key,
    split_origin,
)
from courtly.runtime.admission import Admission
from courtly.runtime.bloom import BloomWatch
from courtly.runtime.consumers import Consumers
from courtly.runtime.crawlstats import CrawlStats
from courtly.runtime.monitor import Monitor
from courtly.runtime.budget import BudgetDefence
from courtly.runtime.normalization import rules_of
from courtly.runtime.distribution import Deployment
from courtly.runtime.dns_ahead import DnsAhead
from courtly.runtime.group_commit import UNAVAILABLE, GroupCommit
from courtly.runtime.host_batch import HostBatches
from courtly.runtime.keymemory import KeyMemory
from courtly.runtime.overflow import Overflow
from courtly.runtime.recrawl import Recrawl
from courtly.runtime.requests import LeaseRequests
from courtly.runtime.results import Results
from courtly.runtime.resume import CLEAN_STOP_META, resume_from_store
from courtly.runtime.slowdown import Complaints
from courtly.runtime.takedown import Takedowns
from courtly.runtime.wakeup import Wakeup
from courtly.ports import Batch

__all__ = ["Crawler", "CrawlStats"]

log = logging.getLogger("courtly")

SEED_BAND = 1
LINK_BAND = 4
HINT_BAND = 5          # canonical / alternate / pagination links


class Crawler:
    """The crawl engine. `deployment` (runtime/distribution.py): who owns which
    key, the per-IP limits beyond this process and who writes the batches;
    one machine by default, a distributed worker's are runtime/worker.py's."""

    def __init__(self, cfg: Config, *, clock, resolver, fetcher, warc, store, extractor,
                 deployment: Deployment | None = None) -> None:
        deployment = deployment or Deployment()
        self.tenancy = deployment.tenancy
        self.sending = deployment.sending
        self._seat = deployment.commits     # None: this engine writes its own store
        self.payloads = deployment.payloads  # None: the exact index holds every capture
        self.cfg = cfg
        self.profile = profile_of(cfg.crawl.intent)   # the intent, resolved once into flags
        self.clock = clock
        self.resolver = resolver
        self.fetcher = fetcher
        self.warc = warc
        self.store = store
        self.extractor = extractor
        c = cfg.crawl
        self.rng = random.Random(c.seed)
        self.frontier = Frontier(self.rng, batch_max=c.batch_max, lease_s=c.lease_s)
        self.key_memory = KeyMemory(cfg.frontier.key_states_max, store, c.politeness_key)   # evicted, read back
        p = cfg.politeness
        self.politeness = Politeness(
            # the config section's keys of the same name (the rest keep core's defaults)
            PolitenessConfig(**{f.name: getattr(p, f.name) for f in dataclasses.fields(PolitenessConfig)
                                if hasattr(p, f.name)}),
            tuple(
                AllowEntry(a.key, a.delay_s, a.owner, a.expires_at(),
                           a.ip_concurrency or None, a.ip_rate or None)
                for a in p.allow
            ),
            rng=random.Random(c.seed + 1),   # back-off jitter: its own stream, reproducible
            load=self.key_memory.saved_host,
        )
        r = cfg.robots
        self.robots = RobotsBook(
            cache_s=r.cache_s, retry_s_min=r.retry_s_min, retry_s_max=r.retry_s_max,
            stale_s_max=r.reuse_s, fetch_timeout_s=cfg.fetch.total_s * (REDIRECTS_MAX + 1) + 60,
            load=self.key_memory.saved_robots,
        )
        self.seen = SeenFilter(cfg.seen.bloom_capacity, cfg.seen.bloom_error_rate)
        self.bloom_watch = BloomWatch(self)   # its fill alarm: rebuilt larger from the store
        self.rules = rules_of(cfg)   # recorded by the crawl folder (runtime/normalization)
        self.admission = Admission(self, routes=self.tenancy.routes, judges=self.tenancy.judges)
        self.budget = BudgetDefence(cfg, self.rng)
        self.recrawl = Recrawl(cfg, self.rng)
        # the watch list (intent monitor); wiring attaches its store
        self.monitor = Monitor(cfg, normalize=self.admission.normalized)
        self.results = Results(self)
        self.overflow = Overflow(self)
        self.takedowns = Takedowns(self)
        self.complaints = Complaints(self)   # open abuse complaints slow their keys
        self.consumers = Consumers(self)     # [[consumers]]; wiring attaches their store
        self.renders = None     # runtime/render.PageRenders when [render] is on (set by runtime/wiring)
        self.dns_ahead = DnsAhead(resolver)
        self.bans = BanWatch(BanConfig(run_403=p.ban_403_run, run_same_body=p.ban_same_body_run))
        self.crawl_id = ""      # one per crawl folder (store meta), on every decision log line
        self.requests = LeaseRequests(self)
        self.group = GroupCommit(self)   # its own store's commits, and its outages (runtime/group_commit)
        self.stats = CrawlStats()
        self.batch = Batch()
        self.attempts: dict[str, int] = {}   # URL -> tries so far (results and overflow count them)
        self.serving = HostBatches(self)   # the fetch tasks' host batches (runtime/host_batch)
        # Observers (the status server): on_decision(url, key, reason, detail, at),
        # on_request(url, ip) and on_response(result). Read-only watchers.
        self.observers: list = []      # key -> not before (robots fetch pending)
        # told of each seed-stage (depth 0) decision: url, via, reason, detail (runtime/refusal)
        self.on_seed_refused = None
        self._tasks: set[asyncio.Task] = set()
        self._processing: set[asyncio.Task] = set()
        self._pauses: set[asyncio.Future] = set()   # requests waiting for their turn (stop ends them)
        self._wake = Wakeup(clock)
        self._stopping = False
        self._aborted = False
        self._fatal: BaseException | None = None
        self.token = cfg.robots.token
        self.agent = cfg.crawl.agent()

    # ---- lifecycle ------------------------------------------------------------

    def load(self) -> int:
        """Resume from the store (runtime/resume.py); how many URLs were queued."""
        return resume_from_store(self)

    def name_crawl(self, crawl_id: str) -> None:
        """The crawl's id, when it comes from elsewhere (a distributed crawl's store)."""
        self.crawl_id = crawl_id

    def in_flight_urls(self) -> list[str]:
        return self.requests.in_flight_urls()

    def add_seeds(self, seeds: Iterable[str]) -> int:
        """Admit `seeds` at once (a short list; runtime/seeds.feed_seeds streams a long one)."""
        now = self.clock.now()
        if self.cfg.crawl.scope != "any":
            self.admission.set_seeds(seeds)
        added = sum(self.admission.admit(s, via=None, band=SEED_BAND, depth=0, now=now) for s in seeds)
        self._wake.set()
        return added

    def stop(self) -> None:
        """Graceful stop: no new requests; in-flight ones finish; state is saved.
        A request still waiting for its turn is not sent: its URL stays queued."""
        self._stopping = True
        for pause in list(self._pauses):
            pause.cancel()
        self.requests.stop()
        self._wake.set()

    def abort(self) -> None:
        """A stop that does not wait for the requests in flight (a second
        Ctrl-C): their tasks are cancelled, their URLs stay queued and are
        fetched by the next run; what is done is saved as at any stop."""
        self.stop()
        self._aborted = True    # requests on the wire are left unknown: the resume holds
        for t in list(self._tasks):
            t.cancel()

    async def pause_until(self, at: float) -> None:
        """`clock.sleep_until(at)`, cut short by `stop()` (the caller checks
        `_stopping` next): a stopping crawl sends nothing more, so it must not
        wait out a politeness delay or a back-off first."""
        if self._stopping:
            return
        pause = asyncio.ensure_future(self.clock.sleep_until(at))
        self._pauses.add(pause)
        try:
            await asyncio.wait((pause,))
        finally:
            self._pauses.discard(pause)
            pause.cancel()

    @property
    def stopping(self) -> bool:
        return self._stopping

    def budget_left(self) -> int | None:
        """Pages --max-pages still allows, counting those tasks have reserved."""
        m = self.cfg.crawl.max_pages
        if not m:
            return None
        return m - self.stats.fetched - self.serving.reserved

    async def run(self) -> CrawlStats:
        self.stats.started_at = self.clock.now()
        self.batch.meta["started"] = repr(self.stats.started_at)
        committer = asyncio.create_task(self._seat.loop() if self._seat is not None else self.group.loop())
        # the committer ending on its own is a bug: stop loudly (like a fetch
        # task), never go on fetching with nothing written (a distributed
        # worker would then wait forever for its own uncommitted pages)
        committer.add_done_callback(self._task_done)
        ended = False
        try:
            await self._main_loop()
            ended = True
        finally:
            for t in list(self._tasks):
                if not t.done():
                    await asyncio.wait({t})
            if self._processing:
                await asyncio.wait(set(self._processing))
            committer.cancel()
            self.dns_ahead.close()
            await asyncio.gather(committer, return_exceptions=True)   # a failure is in _fatal
            if ended and not self._aborted and self._fatal is None and not self.stats.in_flight:
                self.batch.meta[CLEAN_STOP_META] = "1"
            if self._seat is not None:
                self._seat.commit(final=True)
            else:   # retried while the store is down, up to store.down_s_max
                await self.group.finish(lambda: self._aborted)
        return self.stats

    async def _main_loop(self) -> None:
        c = self.cfg.crawl
        ends_at = self.stats.started_at + c.duration_s if c.duration_s else None
        while True:
            now = self.clock.now()
            if ends_at is not None and now >= ends_at and not self._stopping:
                self.stop()
            self.frontier.expire(now, self.serving.held)
            if not self._stopping and self.recrawl.due(now):
                self._plan_recrawls(now)
            if not self._stopping and self.monitor.enabled:
                self._queue_checks(now)
            while not self._stopping and len(self._tasks) < self.cfg.crawl.fetch_tasks:
                left = self.budget_left()
                if (left is not None and left <= 0) or self.group.paused():
                    break
                lease = self.frontier.lease(now, self.serving.batch_for)
                if lease is None:
                    break
                lease = self.takedowns.drop(lease, now)
                if lease is None:
                    continue   # every URL of it was purged: decisions made, key given back
                t = asyncio.create_task(self.serving.run_lease(lease))
                self._tasks.add(t)
                t.add_done_callback(self._task_done)
            if not self._tasks and not self._processing:
                left = self.budget_left()
                idle = self._idle()
                if self._stopping or idle or (left is not None and left <= 0):
                    return
            # with every fetch slot busy the frontier's ready keys wait for a task to end
            # (it sets _wake): waking for them spun the loop at 0 s waits (sim/rtsim found it)
            ready = self.frontier.next_wakeup() if len(self._tasks) < c.fetch_tasks else None
            wake = _earliest(ready, self.recrawl.next_wakeup(), self.monitor.next_wakeup(), ends_at)
            self._wake.clear()
            timeout = None if wake is None else max(0.0, wake - self.clock.now())
            left = self.budget_left()
            if self._stopping or (left is not None and left <= 0) or self.group.paused():
                timeout = None   # no new lease until a task ends or the store is back (both set _wake)
            await self._wake.wait(timeout)

    def _plan_recrawls(self, now: float) -> None:
        """Queue the recrawls the scheduler grants for the next period."""
        for url, depth in self.recrawl.plan(now, discovery_pending=len(self.frontier)):
            if self.monitor.owns(url):   # a watch: checked on its own schedule
                self.recrawl.released(url, now)
                continue
            key = politeness_key(split_origin(url).host, self.cfg.crawl.politeness_key)
            if not self.tenancy.owns(key):   # its partition moved on: the new owner plans it
                self.recrawl.released(url, now)
                self.recrawl.scheduler.remove(url)
                continue
            self.queue(UrlItem(url=url, key=key, band=2, depth=depth, kind=ItemKind.RECRAWL), now)

    def _queue_checks(self, now: float) -> None:
        """Queue the watches due now (runtime/monitor): a URL new to the crawl
        is admitted as a seed, a known one queued as a recrawl (conditional GET)."""
        for url in self.monitor.due(now):
            if url not in self.seen:
                if not self.admission.admit(url, via=None, band=SEED_BAND, depth=0, now=now):
                    self.monitor.released(url, now)
                continue
            key = politeness_key(split_origin(url).host, self.cfg.crawl.politeness_key)
            if not self.queue(UrlItem(url=url, key=key, band=2, depth=0, kind=ItemKind.RECRAWL), now):
                self.monitor.released(url, now)

    def wake(self) -> None:
        """Queued work or a finished task: the main loop looks again now."""
        self._wake.set()

    def track(self, t: asyncio.Task) -> None:
        """Work the crawl waits for before it ends (a page's extraction)."""
        self._processing.add(t)
        t.add_done_callback(self._task_done)

    def fail(self, error: BaseException) -> None:
        """A bug beside the crawl (a worker's lease or claim loop): stop loudly with it."""
        self._fatal = error
        self.stop()

    @property
    def fatal(self) -> BaseException | None:
        """The bug that stopped the crawl, if one did (the command raises it)."""
        return self._fatal

    def _task_done(self, t: asyncio.Task) -> None:
        self._tasks.discard(t)
        self._processing.discard(t)
        if not t.cancelled() and t.exception() is not None:
            # A bug, not a network problem: stop loudly instead of looping.
            self._fatal = t.exception()
            self._stopping = True
        self._wake.set()

    def commit(self, *, final: bool = False) -> None:
        """Write the batch now (runtime/group_commit; a worker's deployment writes its own)."""
        if self._seat is not None:
            self._seat.commit(final=final)
        else:
            self.group.commit(final=final)

    # ---- queueing -------------------------------------------------------------

    def queue(self, item: UrlItem, now: float, *, stored: bool = False) -> bool:
        """Queue `item`. `stored`: it is a queued record in the store or the
        current batch, so it may wait there when memory is full (runtime/overflow)."""
        hold = self.tenancy.take(item.key, now)
        if hold is None:
            return True    # another worker's key: still queued in the store for its owner
        if hold > now and not self.politeness.key(item.key).fetches:
            self.politeness.hold_key_until(item.key, hold)    # a take-over: the last owner's requests
        for o in self.observers:
            o.on_queued(item.url, now)
        # a worker's memory is bounded by its inbox claims: only one machine's URLs wait in its store
        if stored and not self.tenancy.routes and self.overflow.keep_out(item):
            self._wake.set()
            return True
        # the ready instant matters for a key new to the frontier only (most
        # links go to keys queued already: ~8 new URLs a page in S2)
        if self.frontier.has_key(item.key):
            ready = 0.0
        else:
            try:
                ready = self.politeness.ready_at(item.key, now)
            except UNAVAILABLE:   # an evicted key's state is in the store, which is down: queued once it is back
                self.group.park(item, stored)
                return True
            self.dns_ahead.ahead(item.url)
        try:
            self.frontier.add(item, ready)
        except FrontierFull:
            self.decide(item.url, item.key, item.via, Reason.BUDGET, "host queue full", now, item.depth)
            return False
        self._wake.set()
        return True

    def decide(self, url: str, key: str, via: str, reason: Reason, detail: str, now: float,
               depth: int = 0, state: str = "skipped") -> None:
        self.stats.decisions += 1
        if not (url.isascii() and via.isascii() and detail.isascii()):
            # raw text from a hostile page or header may hold lone surrogates: never stored as such
            url, via, detail = escape_raw_octets(url), escape_raw_octets(via), escape_raw_octets(detail)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("[%s] not fetched (%s) %s%s", self.crawl_id, reason, url, f": {detail}" if detail else "",
                      extra={"event": "decision", "crawl_id": self.crawl_id, "url": url, "reason": str(reason),
                             "detail": detail, "key": key, "via": via, "state": state})
        self.recrawl.released(url, now)
        self.monitor.released(url, now)
        for o in self.observers:
            o.on_decision(url, key, reason, detail, now)
        if depth == 0 and self.on_seed_refused is not None:
            self.on_seed_refused(url, via, reason, detail)
        self.batch.decisions.append((url, key, via, now, state, str(reason), detail, depth))

    def key_busy(self, key: str) -> bool:
        """The key has queued URLs or a request waiting: its state stays in memory."""
        return self.frontier.has_key(key) or self.requests.key_held(key)

    def _idle(self) -> bool:
        """Nothing left to do: the run ends (a worker waits for more instead)."""
        if self.tenancy.endless:
            return False
        return len(self.frontier) == 0 and not self.overflow and not self.recrawl.enabled

    # ---- for the deployment (runtime/worker.py: the distributed worker) ---------

    def quiet(self) -> bool:
        """Nothing queued, in flight or unwritten in this engine."""
        return not (self._tasks or self._processing or len(self.frontier) or len(self.batch))

    def sweep_keys(self, now: float, evicted=None) -> int:
        """Idle per-key state beyond `key_states_max` into the batch (runtime/keymemory)."""
        return self.key_memory.sweep(now, self.batch, self.politeness, self.robots, self.bans, self.key_busy,
                                     evicted)

    def drop_keys(self, keys, now: float) -> int:
        """Forget the idle per-key state of `keys` (their partition went elsewhere)."""
        return self.key_memory.drop(keys, now, self.politeness, self.bans, self.key_busy)

    def take_batch(self) -> Batch:
        """The batch so far, handed to the deployment's writer; a new one starts."""
        batch, self.batch = self.batch, Batch()
        return batch

    def rewrite_batch(self, rewrite) -> None:
        """Replace the batch not yet taken by `rewrite(batch)` (rows of a lost partition dropped)."""
        self.batch = rewrite(self.batch)

    def swap_seen(self, seen: SeenFilter) -> None:
        """A rebuilt URL-seen filter (runtime/bloom) replaces the full one."""
        self.seen = seen

    def use_renders(self, renders) -> None:
        """Page rendering (runtime/render.PageRenders), set up by the composition root."""
        self.renders = renders

    def tell_seed_refusals(self, on_seed_refused) -> None:
        """Who hears of each seed-stage decision (runtime/refusal)."""
        self.on_seed_refused = on_seed_refused

def _earliest(*instants: float | None) -> float | None:
    present = [t for t in instants if t is not None]
    return min(present) if present else None
