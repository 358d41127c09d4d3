"""The distributed worker: the single-machine `Crawler` on a shared PostgreSQL store.

Theory of operation
-------------------
`Worker` is a `Crawler` (same frontier, politeness, robots, network policy,
fetcher, WARC writer, result handling); only ownership and state move:

* **Who fetches what.** `Ownership` (runtime/ownership.py) keeps this
  worker's partition leases. The crawler's last check before every request
  (`_may_send`) is the lease gate: the partition of the request's key must be
  held under the epoch its host batch started with, before the stop instant
  on this worker's clock.
* **Where work comes from.** Discovered URLs are routed, not queued here:
  they go to the store in the batch (`new_urls`, the exact seen test), and the
  owner of their partition claims them from its inbox (`claim_new`, every
  `claim_s`, at most `claim_max`, while the local frontier holds fewer than
  `local_queue_max`). On taking a partition over the worker adopts it
  (inbox rebuilt from its queued URLs), restores its keys' politeness state
  and holds every key one delay plus one commit interval: the previous
  owner's last requests may not be in the store.
* **Per-IP limits** hold cluster-wide: every request also takes a slot from
  the store (`ip_acquire`, database clock) and gives it back when it ends.
* **Commits** are the crawler's batches, cut every `commit_interval_s` and
  written in order with the epochs of the partitions this worker holds
  (`apply(..., partition_epochs=..., batch_id=...)`). A refused batch
  (`StaleEpochError`) loses those partitions: their work is dropped (queued
  URLs and the owner-side rows of pending batches), the URLs it discovered
  are kept (routing is not fenced) and the batch is tried again. When the
  store is unreachable batches wait in memory and are retried with the same
  `batch_id` (applied once); fetching goes on only while the leases last.
* **Stopping.** `stop()` (SIGTERM): no new requests, in-flight ones finish,
  everything is committed, the partitions are released and the worker
  deregisters. With `exit_when_done` the worker stops by itself once the
  store has no queued URL left (a URL stays queued until the batch that
  fetched it commits, so that means the crawl is complete).

Rules: no shell imports (the store, fetcher and WARC writer are injected by
runtime/cluster.py); every wait is bounded; a URL dropped here is still
queued in the store, so someone fetches it (at-least-once).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field

from courtly.core.types import UrlItem
from courtly.core.urls import partition_of, politeness_key, split_origin
from courtly.ports import Batch, StaleEpochError, StoreUnavailableError
from courtly.runtime.admission import Admission
from courtly.runtime.crawler import Crawler
from courtly.runtime.ownership import Ownership
from courtly.runtime.results import Results

__all__ = ["Worker", "WorkerStats", "owned_rows_only"]

log = logging.getLogger("courtly")

FINAL_FLUSH_S = 60.0      # how long a stopping worker keeps trying to commit
RELEASE_RETRIES = 3
SWEEP_S = 5.0             # the quiet-time inbox check runs at most this often


@dataclass(slots=True)
class WorkerStats:
    claimed: int = 0
    claims: int = 0
    batches: int = 0
    stale_batches: int = 0
    dropped_urls: int = 0       # queued locally when their partition was lost
    not_owner_hops: int = 0     # robots.txt redirects into a partition held elsewhere
    store_errors: int = 0
    ip_waits: int = 0
    readopted: int = 0          # partitions adopted again by the safety net (see Worker._sweep)
    not_sent: int = 0           # requests the last-moment gate stopped
    extra: dict = field(default_factory=dict)


class _Unshared:
    """The crawler's synchronous store seat: a worker has none (it writes
    through the async store in `flush`); purges are not in the shared store."""

    def has_url(self, url: str) -> bool:
        return False

    def get_meta(self, k: str) -> None:
        return None


class _RoutedAdmission(Admission):
    """Admission that routes: a new URL goes to the store (the batch's
    `new_urls`) and reaches its owner through the inbox; the exact seen test is
    the store's primary key, the Bloom filter and the recent set skip repeats."""

    def enqueue(self, item: UrlItem, now: float) -> bool:
        return True

    def _is_seen(self, url: str) -> bool:
        return url in self.c.seen and (url in self._pending or url in self._recent)


class _TrackedResults(Results):
    """Extraction of a page counts as work for its partition (it writes later)."""

    async def extract(self, item: UrlItem, result, record_id: str = "") -> None:
        w: Worker = self.c   # type: ignore[assignment]
        p = w.partition(item.key)
        w.busy_begin(p)
        try:
            await super().extract(item, result, record_id)
        finally:
            w.busy_end(p)


@dataclass(frozen=True, slots=True)
class _Unsent:
    """The answer to a request this worker may not send (a robots.txt redirect
    into a partition another worker holds): a network failure, so robots.txt
    counts as unreachable and is retried later (RFC 9309: disallow meanwhile)."""

    url: str
    started_at: float
    status: int = 0
    ip: str = ""
    error: str = "not_owner"
    error_detail: str = "redirect target's partition is held by another worker"
    request_head: bytes = b""
    response_head: bytes = b""
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    content: bytes = b""
    truncated: str | None = None
    elapsed_s: float = 0.0


class _GatedFetcher:
    """The fetcher with the lease gate asked once more when the connection is
    ready (after any wait for a connection slot): the partition and epoch come
    from the `_may_send` that let this request go, in the same task with no
    await in between."""

    def __init__(self, inner, worker: "Worker") -> None:
        self.inner = inner
        self.w = worker

    async def fetch(self, url: str, *, ip: str | None = None, headers=None):
        w = self.w
        sending = w.take_sending()
        if sending is None:
            return await self.inner.fetch(url, ip=ip, headers=headers)
        p, epoch = sending

        def gate() -> bool:
            return not w.stopping and w.own.may_fetch(p, epoch, w.clock.now())

        return await self.inner.fetch(url, ip=ip, headers=headers, gate=gate)

    async def close(self) -> None:
        await self.inner.close()


class Worker(Crawler):
    def __init__(self, cfg, *, clock, resolver, fetcher, warc, store, extractor, worker_id: str,
                 exit_when_done: bool = False) -> None:
        super().__init__(cfg, clock=clock, resolver=resolver, fetcher=fetcher, warc=warc, store=_Unshared(),
                         extractor=extractor)
        if store.partitions is None:
            raise ValueError("the database has no crawl: run `courtly submit` first")
        self.pg = store
        self.worker_id = worker_id
        self.exit_when_done = exit_when_done
        self.dist = cfg.distributed
        self.nparts = store.partitions
        self.admission = _RoutedAdmission(self)
        self.fetcher = _GatedFetcher(fetcher, self)
        self._sending: tuple[int, int | None] | None = None
        self.results = _TrackedResults(self)
        self.own = Ownership(store, worker_id, self.nparts, self.dist, clock, self)
        self.wstats = WorkerStats()
        self._pending: deque[tuple[str, Batch]] = deque()
        self._flush_lock = asyncio.Lock()
        self._commit_now = asyncio.Event()
        self._keys_of: dict[int, set[str]] = {}
        self._claimed: dict[int, set[str]] = {}
        self._unadopted: dict[int, int] = {}      # taken, not yet restored and adopted
        self._claim_now = asyncio.Event()
        self._busy: Counter[int] = Counter()
        self._lease_epoch: dict[int, int | None] = {}
        self._slots: dict[str, str] = {}          # key -> IP of the shared slot its request holds
        self._part_of_host: dict[str, int] = {}
        self._bg: set[asyncio.Task] = set()
        self._hold_s = cfg.politeness.delay_s + cfg.store.commit_interval_s
        self._hold_until = 0.0                    # keys first seen before this wait (take-over)
        self._next_sweep = 0.0

    # ---- partitions ---------------------------------------------------------------------

    def partition(self, key: str) -> int:
        return partition_of(key, self.nparts)

    def partition_of_url(self, url: str) -> int:
        try:
            host = split_origin(url).host
        except Exception:
            return self.partition("")
        p = self._part_of_host.get(host)
        if p is None:
            if len(self._part_of_host) > 100_000:
                self._part_of_host.clear()
            p = self._part_of_host[host] = self.partition(politeness_key(host, self.cfg.crawl.politeness_key))
        return p

    def busy(self, partition: int) -> bool:
        return self._busy.get(partition, 0) > 0

    def busy_begin(self, p: int) -> None:
        """Work of partition `p` started (a lease, an extraction): it writes later."""
        self._busy[p] += 1

    def busy_end(self, p: int) -> None:
        self._busy[p] -= 1
        if self._busy[p] <= 0:
            del self._busy[p]

    def stop_fetching(self, partition: int) -> None:
        """The gate of `partition` closed: drop its URLs from the frontier (they
        stay queued in the store for the next owner)."""
        for key in self._keys_of.pop(partition, ()):
            self.wstats.dropped_urls += self.frontier.drop_key(key)
        self._claimed.pop(partition, None)
        self._unadopted.pop(partition, None)
        self._wake.set()

    def forget_writes(self, partition: int) -> None:
        """Drop the owner-side rows of `partition` from the batches not yet written."""
        self.batch = owned_rows_only(self.batch, self.partition_of_url, self.partition,
                                     keep=None, drop={partition})
        for i, (bid, b) in enumerate(self._pending):
            self._pending[i] = (bid, owned_rows_only(b, self.partition_of_url, self.partition,
                                                     keep=None, drop={partition}))

    async def gained(self, granted: dict[int, int], asked_at: float) -> None:
        """Partitions just acquired (called by the lease loop, so it only takes
        note: the claim loop restores them and rebuilds their inboxes)."""
        for p, epoch in granted.items():
            self._unadopted[p] = epoch
            self._claimed.setdefault(p, set())
        self._hold_until = max(self._hold_until, asked_at + self._hold_s)
        self._claim_now.set()

    async def _adopt_pending(self) -> None:
        """Restore the keys' politeness state of newly taken partitions (each key
        held one delay past the take-over) and rebuild their inboxes; only then
        are they claimed from."""
        todo = {p: e for p, e in self._unadopted.items() if self.own.epoch(p) == e}
        for p in set(self._unadopted) - set(todo):
            self._unadopted.pop(p, None)
        if not todo:
            return
        hosts = await self.pg.hosts(partitions=sorted(todo))
        for key, snap in hosts.items():
            self.politeness.restore(key, snap)
            self.politeness.hold_key_until(key, self._hold_until + float(snap.get("delay_s", 0.0)))
        for p, epoch in sorted(todo.items()):
            if self.own.epoch(p) == epoch:
                try:
                    await self.pg.adopt(p, epoch)
                except StaleEpochError:
                    self.own.refused({p}, self.clock.now())
            self._unadopted.pop(p, None)

    # ---- queueing -----------------------------------------------------------------------

    def queue(self, item: UrlItem, now: float, *, stored: bool = False) -> bool:
        # `stored` is ignored: a worker's memory is bounded by its inbox claims,
        # so nothing waits in the store only (runtime/overflow is the embedded mode's)
        p = self.partition(item.key)
        if self.own.epoch(p) is None:
            return True    # not ours (any more): still queued in the store for its owner
        keys = self._keys_of.setdefault(p, set())
        if item.key not in keys:
            keys.add(item.key)
            if now < self._hold_until and not self.politeness.key(item.key).fetches:
                self.politeness.hold_key_until(item.key, self._hold_until)
        return super().queue(item, now)

    def _idle(self) -> bool:
        return False     # a worker waits for more work; it stops on stop()

    async def _claim_loop(self) -> None:
        while not self._stopping:
            got = 0
            try:
                if self._unadopted:
                    await self._adopt_pending()
                got = await self._claim()
                if got == 0 and self._quiet():
                    await self._sweep()
                if self.exit_when_done and got == 0:
                    await self._stop_if_done()
            except StoreUnavailableError:
                self.wstats.store_errors += 1
            if got < self.dist.claim_max:
                self._claim_now.clear()
                await self.clock.wait_until(self._claim_now.wait(), self.clock.now() + self.dist.claim_s)

    async def _claim(self) -> int:
        epochs = {p: e for p, e in self.own.fetching().items() if p not in self._unadopted}
        room = self.dist.local_queue_max - len(self.frontier)
        if not epochs or room <= 0:
            return 0
        limit = min(room, self.dist.claim_max)
        rows = await self.pg.claim_new(epochs, limit)
        self.wstats.claims += 1
        now = self.clock.now()
        for url, key, band, depth, redirects, via, attempts in rows:
            p = self.partition(key)
            claimed = self._claimed.get(p)
            if claimed is None or self.own.epoch(p) is None or url in claimed:
                continue
            claimed.add(url)
            self.seen.add(url)
            self.admission.remember(url)
            if attempts:
                self.attempts[url] = attempts
            self.queue(UrlItem(url=url, key=key, band=band, depth=depth, via=via, redirects=redirects), now)
            self.wstats.claimed += 1
        return len(rows)

    def _quiet(self) -> bool:
        """Nothing queued, in flight or unwritten here."""
        return not (self._tasks or self._processing or len(self.frontier) or len(self.batch) or self._pending
                    or self._unadopted)

    async def _sweep(self) -> None:
        """Safety net, at most every SWEEP_S while quiet: a queued URL of a held
        partition must be in its inbox then (everything claimed was fetched or
        decided and committed), so a partition that has one but gave nothing to
        claim is adopted again, with its claimed set forgotten."""
        now = self.clock.now()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_S
        held = {p: e for p, e in self.own.fetching().items() if p not in self._unadopted}
        if not held:
            return
        stranded = await self.pg.queued_partitions(held)
        if not self._quiet() or not stranded or await self._claim():
            return
        p0, url0 = next(iter(stranded.items()))
        log.warning("re-adopting %d partition(s) whose queued URLs were in no inbox (e.g. %s of partition %d,"
                    " %s by this worker)", len(stranded), url0, p0,
                    "claimed" if url0 in self._claimed.get(p0, ()) else "never claimed",
                    extra={"event": "readopt", "partitions": sorted(stranded)})
        self.wstats.readopted += len(stranded)
        for p in stranded:
            self._claimed[p] = set()
            self._unadopted[p] = held[p]

    async def _stop_if_done(self) -> None:
        if not self._quiet():
            return
        any_url, any_queued = await self.pg.queue_state()
        if any_url and not any_queued:
            log.info("crawl complete: no URL is queued any more; stopping",
                     extra={"event": "crawl_complete", "worker": self.worker_id})
            self.stop()

    # ---- the request path hooks ---------------------------------------------------------------

    async def _run_lease(self, lease) -> None:
        p = self.partition(lease.key)
        self._lease_epoch[lease.lease_id] = self.own.epoch(p)
        self.busy_begin(p)
        try:
            await super()._run_lease(lease)
        finally:
            self.busy_end(p)
            self._lease_epoch.pop(lease.lease_id, None)

    async def request(self, url: str, key: str, ip: str, lease, headers: dict):
        if lease is None and self.own.epoch(self.partition(key)) is None:
            self.wstats.not_owner_hops += 1
            return _Unsent(url=url, started_at=self.clock.now())
        result = await super().request(url, key, ip, lease, headers)
        if result is not None and result.error == "not_sent":
            self.wstats.not_sent += 1
            return None       # the lease ended while it waited for a connection: nothing left
        return result

    def _may_send(self, key: str, lease, now: float) -> bool:
        if self._stopping or not super()._may_send(key, lease, now):
            return False
        p = self.partition(key)
        epoch = self._lease_epoch.get(lease.lease_id) if lease is not None else self.own.epoch(p)
        if not self.own.may_fetch(p, epoch, now):
            return False
        self._sending = (p, epoch)     # the fetcher asks the gate again (see _GatedFetcher)
        return True

    def take_sending(self) -> tuple[int, int | None] | None:
        """The partition and epoch `_may_send` just let go, once (the fetcher's gate)."""
        sending, self._sending = self._sending, None
        return sending

    async def _shared_ip_slot(self, ip: str, key: str) -> bool:
        if self._slots.get(key) == ip:
            return True
        if self._stopping or self.own.epoch(self.partition(key)) is None:
            return True     # the gate refuses next: no slot needed
        p = self.cfg.politeness
        try:
            wait = await self.pg.ip_acquire(ip, None, p.ip_concurrency, p.ip_rate,
                                            hold_s=self.cfg.fetch.total_s + 10.0)
        except StoreUnavailableError:
            self.wstats.store_errors += 1
            await self.clock.sleep(min(1.0, self.dist.store_retry_s_max))
            return False
        if wait is None:
            self._slots[key] = ip
            return False    # held: check the local limits again, then go
        self.wstats.ip_waits += 1
        await self.clock.sleep(min(wait, 1.0))
        return False

    def _shared_ip_done(self, ip: str, key: str, now: float) -> None:
        if self._slots.pop(key, None) is None:
            return
        t = asyncio.get_running_loop().create_task(self._ip_release(ip))
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    async def _ip_release(self, ip: str) -> None:
        for attempt in range(RELEASE_RETRIES):
            try:
                await self.pg.ip_release(ip, None)
                return
            except StoreUnavailableError:
                await self.clock.sleep(0.5 * (attempt + 1))

    # ---- commits ------------------------------------------------------------------------------

    def commit(self, *, final: bool = False) -> None:
        """Cut the batch; the committer writes it (now, not at the next tick)."""
        self._cut()
        self._commit_now.set()

    def _cut(self) -> None:
        if len(self.batch):
            self._pending.append((uuid.uuid4().hex, self.batch))
            self.batch = Batch()

    async def _commit_loop(self) -> None:
        while True:
            timeout = self.cfg.store.commit_interval_s
            if self._pending and self.own.store_down:
                timeout = min(self.dist.store_retry_s_max, 1.0)
            await self.clock.wait_until(self._commit_now.wait(), self.clock.now() + timeout)
            self._commit_now.clear()
            await self.flush()

    async def flush(self) -> bool:
        """Write every pending batch in order. False when the store is away."""
        async with self._flush_lock:
            self._cut()
            if not self._pending:
                return True
            self.warc.flush()      # raw bytes are durable before the store says "fetched"
            while self._pending:
                bid, batch = self._pending[0]
                epochs = self.own.write_epochs()
                batch = owned_rows_only(batch, self.partition_of_url, self.partition, keep=set(epochs))
                self._pending[0] = (bid, batch)
                try:
                    await self.pg.apply(batch, partition_epochs=epochs, batch_id=bid)
                except StaleEpochError as e:
                    self.wstats.stale_batches += 1
                    self.own.refused(e.partitions, self.clock.now())
                    continue
                except StoreUnavailableError:
                    self.wstats.store_errors += 1
                    return False
                self._pending.popleft()
                self.wstats.batches += 1
                self._settled(batch)
            self.admission.committed()
            return True

    def _settled(self, b: Batch) -> None:
        """URLs whose outcome (fetched, or a decision) is now in the store may be
        claimed again: a decided URL can be queued again later (a nofollow
        refusal revived by a followed link), and its new inbox row must not be
        taken for a repeat."""
        for rows, i in ((b.fetched, 2), (b.decisions, 0)):
            for row in rows:
                claimed = self._claimed.get(self.partition_of_url(row[i]))
                if claimed:
                    claimed.discard(row[i])

    # ---- lifecycle ------------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Crawl id, seeds (scope), robots state: what every worker shares."""
        self.crawl_id = await self.pg.get_meta("crawl_id") or ""
        seeds = await self.pg.get_meta("seeds")
        if seeds:
            import json

            self.admission.set_seeds(json.loads(seeds))
        for origin, snap in (await self.pg.robots()).items():
            self.robots.restore(origin, snap)
        await self.pg.register(self.worker_id)

    async def run(self):
        owner = asyncio.create_task(self.own.run())
        claimer = asyncio.create_task(self._claim_loop())
        for t in (owner, claimer):
            t.add_done_callback(self._loop_ended)
        try:
            stats = await super().run()
        finally:
            claimer.cancel()
            await asyncio.gather(claimer, return_exceptions=True)
            await self._final_flush()
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
            if self._bg:
                await self.clock.wait_until(asyncio.wait(set(self._bg)), self.clock.now() + 5.0)
            await self.own.close()
        return stats

    def _loop_ended(self, t: asyncio.Task) -> None:
        """The lease or claim loop ended on its own: a bug; stop loudly."""
        if not t.cancelled() and t.exception() is not None:
            self._fatal = t.exception()
            self.stop()

    async def _final_flush(self) -> None:
        deadline = self.clock.now() + FINAL_FLUSH_S
        while not await self.flush():
            if self.clock.now() > deadline:
                log.warning("stopping with %d batch(es) not written: those pages will be fetched again",
                            len(self._pending))
                return
            await self.clock.sleep(1.0)


def owned_rows_only(b: Batch, part_of_url, part_of_key, *, keep: set[int] | None,
                    drop: set[int] = frozenset()) -> Batch:  # type: ignore[assignment]
    """`b` without the owner-side rows of partitions not in `keep` (or in
    `drop`): fetched, requeued, the fetch log, flags, digests, dead letters,
    histories and host state. Discovered URLs, decisions (those for partitions
    not held only fill in missing rows), robots and meta stay."""
    def ok(p: int) -> bool:
        return p not in drop and (keep is None or p in keep)

    def url_ok(row, i: int) -> bool:
        return ok(part_of_url(row[i]))

    return Batch(
        new_urls=b.new_urls,
        requeued=[r for r in b.requeued if url_ok(r, 1)],
        fetched=[r for r in b.fetched if url_ok(r, 2)],
        decisions=b.decisions,
        fetches=[r for r in b.fetches if url_ok(r, 0)],
        hosts={k: v for k, v in b.hosts.items() if ok(part_of_key(k))},
        robots=b.robots,
        dead_letters=[r for r in b.dead_letters if url_ok(r, 0)],
        flags=[r for r in b.flags if url_ok(r, 0)],
        digests=[r for r in b.digests if url_ok(r, 1)],
        simhashes=b.simhashes,
        histories={u: h for u, h in b.histories.items() if ok(part_of_url(u))},
        meta=b.meta,
    )
