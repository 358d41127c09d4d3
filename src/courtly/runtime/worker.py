"""The distributed worker: the crawl engine configured for a shared PostgreSQL store.

Theory of operation
-------------------
`Worker` runs the same `Crawler` as one machine (frontier, politeness, robots,
network policy, fetcher, WARC writer, result handling), built with the cluster
strategies of runtime/distribution.py, beside its own claim and lease loops.
It is a composition, not a subclass: nothing of the engine is replaced after
it is built. Only ownership and state move:

* **Who fetches what** (`Partitions` of runtime/partitions.py, the engine's
  tenancy). `Ownership`
  (runtime/ownership.py) keeps this worker's partition leases. A host batch
  takes the `Tenure` (partition, epoch) of its key when it starts and every
  request of it carries that tenure: the engine's last check before the
  request leaves, and the fetcher's send gate once the connection is ready,
  ask whether the partition is still held under that epoch, before the stop
  instant on this worker's clock.
* **Where work comes from.** Discovered URLs are routed, not queued here:
  they go to the store in the batch (`new_urls`, the exact seen test), and the
  owner of their partition claims them from its inbox (`claim_new`, every
  `claim_s`, at most `claim_max`, while the local frontier holds fewer than
  `local_queue_max`). On taking a partition over the worker adopts it
  (inbox rebuilt from its queued URLs), restores its keys' politeness state
  and holds every key one delay plus one commit interval: the previous
  owner's last requests may not be in the store.
* **Budget defence** (runtime/shared_defence.py): the trap guard and the
  soft-404 book are saved with a batch every 10 s; a partition adopted
  brings its trap flags, soft-404 book and near-duplicate prints from the
  store; one lost or released is saved once more and dropped here. A payload
  another worker stored first becomes a revisit here (the engine asks the
  store on a miss of its exact index, `SharedPayloads`).
* **Per-IP limits** hold cluster-wide (`IpLeases`, the engine's send
  policy, runtime/ip_leases.py): a worker sends to an IP only while it holds
  the IP's lease in the store, so the engine's own per-IP limits are
  complete; busy workers that share an IP take turns.
* **Commits** (the worker is the engine's writer) are the engine's batches,
  cut every `commit_interval_s` and
  written in order with the epochs of the partitions this worker holds
  (`apply(..., partition_epochs=..., batch_id=...)`). A refused batch
  (`StaleEpochError`) loses those partitions: their work is dropped (queued
  URLs and the owner-side rows of pending batches), the URLs it discovered
  are kept (routing is not fenced) and the batch is tried again. When the
  store is unreachable batches wait in memory and are retried with the same
  `batch_id` (applied once); fetching goes on only while the leases last.
* **Takedowns and complaints.** Every commit first takes up the purges
  recorded since the last one (`courtly purge`, table `purges`): from then on
  nothing in their scope is requested by this worker (runtime/takedown), and
  once the batch is written the rows in scope are marked purged again. The
  open abuse complaints are read too (`courtly abuse`): their keys are slowed
  (runtime/slowdown). So both hold on every worker within one commit
  interval.
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
from collections import deque
from dataclasses import dataclass

from courtly.core.types import UrlItem
from courtly.ports import Batch, StaleEpochError, StoreUnavailableError
from courtly.runtime.cluster_monitor import ClusterWatches
from courtly.runtime.crawler import Crawler, CrawlStats
from courtly.runtime.distribution import Deployment
from courtly.runtime.keyreadback import KeyReadBack
from courtly.runtime.ownership import Ownership
from courtly.runtime.ip_leases import IpLeases
from courtly.runtime.partitions import Partitions, WorkerStats
from courtly.runtime.shared_defence import GATHER_S, SharedDefence, SharedPayloads
from courtly.runtime.worker_figures import published

__all__ = ["Worker", "WorkerStats", "owned_rows_only"]

log = logging.getLogger("courtly")

FINAL_FLUSH_S = 60.0      # how long a stopping worker keeps trying to commit
SWEEP_S = 5.0             # the quiet-time inbox check runs at most this often


class _Unshared:
    """The engine's synchronous store seat: a worker has none (it writes
    through the async store in `flush` and hands the engine the purges and
    complaints it reads there, `take_up_shared`)."""

    def has_url(self, url: str) -> bool:
        return False

    def get_meta(self, k: str) -> None:
        return None

    # the engine's synchronous reads of evicted keys (runtime/keymemory): the
    # worker reads them ahead instead, before a claim is queued (runtime/keyreadback)
    def host(self, key: str) -> None:
        return None

    def robots_of(self, origin: str) -> None:
        return None

    def robots(self, limit: int = -1) -> dict[str, dict]:
        return {}


@dataclass(frozen=True, slots=True)
class _Histories:
    """Change histories of adopted partitions, as `Recrawl.load` reads a store."""

    rows: list

    def iter_histories(self):
        return iter(self.rows)

    def get_meta(self, k: str) -> None:
        return None     # the recrawl report is a single machine's (`courtly report`)


class Worker:
    """A crawl engine with the cluster strategies, its claim loop and its leases."""

    def __init__(self, cfg, *, clock, resolver, fetcher, warc, store, extractor, worker_id: str,
                 exit_when_done: bool = False, watches=None, change_sinks=()) -> None:
        if store.partitions is None:
            raise ValueError("the database has no crawl: run `courtly submit` first")
        self.cfg = cfg
        self.clock = clock
        self.warc = warc
        self.pg = store
        self.worker_id = worker_id
        self.exit_when_done = exit_when_done
        self.dist = cfg.distributed
        self.nparts = store.partitions
        self.wstats = WorkerStats()
        self.own = Ownership(store, worker_id, store.region_range() or self.nparts, self.dist, clock, self)
        self.parts = Partitions(self.own, self.nparts, cfg, clock, self.wstats, part_of_key=store.partition_of_key)
        self.slots = IpLeases(store, cfg, self.parts, self.wstats, clock, worker_id)
        self.payloads = SharedPayloads(store, clock, GATHER_S)
        self.engine = Crawler(cfg, clock=clock, resolver=resolver, fetcher=fetcher, warc=warc, store=_Unshared(),
                              extractor=extractor,
                              deployment=Deployment(tenancy=self.parts, sending=self.slots, commits=self,
                                                    payloads=self.payloads))
        e = self.engine    # idle keys evicted at each cut, read back when claimed again
        self.readback = KeyReadBack(store, e.key_memory, e.politeness, e.robots)
        self.defence = SharedDefence(store, self.engine.budget, self.parts.partition, self.parts.partition_of_url)
        # intent monitor: the watches of the partitions held here (runtime/cluster_monitor)
        self.watching = None if watches is None else ClusterWatches(
            watches, self.engine.monitor, held=self._adopted, part_of_url=self.parts.partition_of_url,
            know=self._know)
        if self.watching is not None:
            self.engine.monitor.attach(self.watching, list(change_sinks))   # the webhook deliverer's counts
        self._pending: deque[tuple[str, Batch]] = deque()
        self._flush_lock = asyncio.Lock()
        self._commit_now = asyncio.Event()
        self._claimed: dict[int, set[str]] = {}
        self._unadopted: dict[int, int] = {}      # taken, not yet restored and adopted
        self._claim_now = asyncio.Event()
        self._hold_s = cfg.politeness.delay_s + cfg.store.commit_interval_s
        self._hold_until = 0.0
        self._next_sweep = 0.0

    @property
    def stopping(self) -> bool:
        return self.engine.stopping

    @property
    def fatal(self) -> BaseException | None:
        return self.engine.fatal

    def stop(self) -> None:
        self.engine.stop()

    # ---- the ownership loop's listener (runtime/ownership.Listener) ------------------

    def busy(self, partition: int) -> bool:
        return self.parts.busy(partition)

    def stop_fetching(self, partition: int) -> None:
        """The gate of `partition` closed: drop its URLs from the frontier (they
        stay queued in the store for the next owner)."""
        for key in self.parts.forget(partition):
            self.wstats.dropped_urls += self.engine.frontier.drop_key(key)
        pol = self.engine.politeness    # the partition's idle key state goes too (its next owner reads it)
        self.engine.drop_keys([k for k in pol.known_keys() if self.parts.partition(k) == partition],
                              self.clock.now())
        self.defence.forget(partition)    # saved at the next cut, for its next owner, then dropped here
        self._claimed.pop(partition, None)
        self._unadopted.pop(partition, None)
        self.engine.wake()

    def forget_writes(self, partition: int) -> None:
        """Drop the owner-side rows of `partition` from the batches not yet written."""
        def drop(b: Batch) -> Batch:
            return owned_rows_only(b, self.parts.partition_of_url, self.parts.partition, keep=None,
                                   drop={partition})

        self.engine.rewrite_batch(drop)
        for i, (bid, b) in enumerate(self._pending):
            self._pending[i] = (bid, drop(b))

    async def gained(self, granted: dict[int, int], asked_at: float) -> None:
        """Partitions just acquired (called by the lease loop, so it only takes
        note: the claim loop restores them and rebuilds their inboxes)."""
        for p, epoch in granted.items():
            self._unadopted[p] = epoch
            self._claimed.setdefault(p, set())
        self._hold_until = max(self._hold_until, asked_at + self._hold_s)
        self.parts.hold(self._hold_until)
        self._claim_now.set()

    async def _sync_watches(self) -> None:
        """Intent monitor: take up the watch list of the partitions held now;
        the engine's main loop then looks again (it may sleep with no wake-up
        set when no watch was due)."""
        if self.watching is not None:
            await self.watching.sync(self.clock.now())
            self.engine.wake()

    def _adopted(self) -> dict[int, int]:
        """Partitions held and adopted (their keys' politeness restored), with epochs."""
        return {p: e for p, e in self.own.fetching().items() if p not in self._unadopted}

    def _know(self, url: str) -> None:
        """A watched URL of a held partition: its checks are queued here as recrawls."""
        self.engine.seen.add(url)
        self.engine.admission.remember(url)

    async def _adopt_pending(self) -> None:
        """Restore the keys' politeness state of newly taken partitions (each key
        held one delay past the take-over) and rebuild their inboxes; only then
        are they claimed from."""
        todo = {p: e for p, e in self._unadopted.items() if self.own.epoch(p) == e}
        for p in set(self._unadopted) - set(todo):
            self._unadopted.pop(p, None)
        if not todo:
            return
        politeness = self.engine.politeness
        hosts = await self.pg.hosts(partitions=sorted(todo))
        for key, snap in hosts.items():
            politeness.restore(key, snap)
            politeness.hold_key_until(key, self._hold_until + float(snap.get("delay_s", 0.0)))
        await self.defence.adopt(sorted(todo))    # trap flags, soft-404 book, near-duplicate prints
        for p in [p for p, e in todo.items() if self.own.epoch(p) != e]:
            self.defence.forget(p)                # lost while it was read
        if self.engine.recrawl.enabled:    # search: the partitions' change histories, planned from here on
            rows = [r async for r in self.pg.iter_histories(sorted(todo))]
            self.engine.recrawl.load(_Histories(rows), self.clock.now())
        for p, epoch in sorted(todo.items()):
            if self.own.epoch(p) == epoch:
                try:
                    await self.pg.adopt(p, epoch)
                except StaleEpochError:
                    self.own.refused({p}, self.clock.now())
            self._unadopted.pop(p, None)
        await self._sync_watches()        # their watches, with what they learned

    # ---- claiming -----------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self.stopping:
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
        e = self.engine
        epochs = self._adopted()
        room = self.dist.local_queue_max - len(e.frontier)
        if not epochs or room <= 0:
            return 0
        limit = min(room, self.dist.claim_max)
        rows = await self.pg.claim_new(epochs, limit)
        self.wstats.claims += 1
        await self.readback.before_queue((r[1], r[0]) for r in rows)   # keys evicted here come back first
        now = self.clock.now()
        for url, key, band, depth, redirects, via, attempts, judged in rows:
            p = self.parts.partition(key)
            claimed = self._claimed.get(p)
            if claimed is None or self.own.epoch(p) is None or url in claimed:
                continue
            claimed.add(url)
            e.seen.add(url)
            e.admission.remember(url)
            item = UrlItem(url=url, key=key, band=band, depth=depth, via=via or "", redirects=redirects)
            if not (judged or attempts):    # routed in unjudged: the owner's trap guard and budget first
                item = e.admission.judge_claimed(item, now)
                if item is None:
                    self.wstats.refused_claims += 1    # its decision is in the batch
                    continue
            if attempts:
                e.attempts[url] = attempts
            e.queue(item, now)
            self.wstats.claimed += 1
        return len(rows)

    def _quiet(self) -> bool:
        """Nothing queued, in flight or unwritten here."""
        return self.engine.quiet() and not (self._pending or self._unadopted)

    async def _sweep(self) -> None:
        """Safety net, at most every SWEEP_S while quiet: a queued URL of a held
        partition must be in its inbox then (everything claimed was fetched or
        decided and committed), so a partition that has one but gave nothing to
        claim is adopted again, with its claimed set forgotten."""
        now = self.clock.now()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_S
        held = self._adopted()
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

    # ---- commits (the engine's writer: runtime/distribution.Commits) --------------------

    def commit(self, *, final: bool = False) -> None:
        """Cut the batch; the committer writes it (now, not at the next tick)."""
        self._cut()
        self._commit_now.set()

    def _cut(self) -> None:
        now = self.clock.now()
        self.engine.sweep_keys(now, self.parts.evicted)   # idle keys beyond the bound: into this batch
        self.defence.save(self.engine.batch, now)   # every 10 s, and partitions gone since
        batch = self.engine.take_batch()
        if len(batch):
            batch.meta.update(published(self))    # this worker's counters, for `courtly status --db`
            self._pending.append((uuid.uuid4().hex, batch))

    async def loop(self) -> None:
        while True:
            timeout = self.cfg.store.commit_interval_s
            if self._pending and self.own.store_down:
                timeout = min(self.dist.store_retry_s_max, 1.0)
            await self.clock.wait_until(self._commit_now.wait(), self.clock.now() + timeout)
            self._commit_now.clear()
            try:
                await self.take_up_shared()
                await self._sync_watches()   # list edits, and watches of partitions lost
            except StoreUnavailableError:
                self.wstats.store_errors += 1
            await self.flush()

    async def take_up_shared(self) -> None:
        """What every worker takes up at each commit, so that it holds across the
        cluster within one commit interval: purges recorded since the last poll
        (`courtly purge`; nothing in their scope is requested from here on,
        runtime/takedown) and the open abuse complaints (`courtly abuse`; their
        keys are slowed, runtime/slowdown)."""
        e, now = self.engine, self.clock.now()
        e.takedowns.take_up(await self.pg.purges(e.takedowns.last_id), now)
        e.complaints.take_up(await self.pg.complaints(open_only=True), now)

    async def flush(self) -> bool:
        """Write every pending batch in order. False when the store is away."""
        async with self._flush_lock:
            takedowns = self.engine.takedowns
            takedowns.filter_batch(self.engine.batch, self.clock.now())   # pages fetched in scope end purged
            self._cut()
            if not self._pending and takedowns.to_settle() is None:
                return True
            self.warc.flush()      # raw bytes are durable before the store says "fetched"
            self.engine.monitor.save()   # nothing awaited since: its events name written bytes only
            while self._pending:
                bid, batch = self._pending[0]
                epochs = self.own.write_epochs()
                batch = owned_rows_only(batch, self.parts.partition_of_url, self.parts.partition, keep=set(epochs))
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
            self.engine.admission.committed()
            self.engine.key_memory.written()   # evicted states are in the store: read back from there
            if self.watching is not None:
                try:
                    await self.watching.write()
                except StoreUnavailableError:
                    self.wstats.store_errors += 1
                    return False
            due = takedowns.to_settle()
            if due is not None:   # rows written in scope meanwhile (by any worker) are marked again
                try:
                    takedowns.settled(await self.pg.apply_purges(*due))
                except StoreUnavailableError:
                    self.wstats.store_errors += 1
                    return False
            return True

    def _settled(self, b: Batch) -> None:
        """URLs whose outcome (fetched, or a decision) is now in the store may be
        claimed again: a decided URL can be queued again later (a nofollow
        refusal revived by a followed link), and its new inbox row must not be
        taken for a repeat."""
        for rows, i in ((b.fetched, 2), (b.decisions, 0)):
            for row in rows:
                claimed = self._claimed.get(self.parts.partition_of_url(row[i]))
                if claimed:
                    claimed.discard(row[i])

    # ---- lifecycle ------------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Crawl id, seeds (scope), robots state: what every worker shares."""
        e = self.engine
        e.name_crawl(await self.pg.get_meta("crawl_id") or "")
        seeds = await self.pg.get_meta("seeds")
        if seeds:
            import json

            e.admission.set_seeds(json.loads(seeds))
        e.key_memory.take_robots(await self.pg.robots_first(e.key_memory.keys_max + 1), e.robots)   # rest: read back
        e.takedowns.take_up(await self.pg.purges(0), self.clock.now(), at_start=True)
        await self.defence.start()
        await self.pg.register(self.worker_id)

    async def run(self) -> CrawlStats:
        owner = asyncio.create_task(self.own.run())
        claimer = asyncio.create_task(self._claim_loop())
        renewer = asyncio.create_task(self.slots.run())
        for t in (owner, claimer, renewer):
            t.add_done_callback(self._loop_ended)
        try:
            stats = await self.engine.run()
        finally:
            for t in (claimer, renewer):
                t.cancel()
            await asyncio.gather(claimer, renewer, return_exceptions=True)
            await self._final_flush()
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
            await self.own.close()      # partitions first: their next owners wait for them
            await self.slots.close()
        return stats

    def _loop_ended(self, t: asyncio.Task) -> None:
        """The lease or claim loop ended on its own: a bug; stop loudly."""
        error = None if t.cancelled() else t.exception()
        if error is not None:
            self.engine.fail(error)

    async def _final_flush(self) -> None:
        deadline = self.clock.now() + FINAL_FLUSH_S
        self.defence.save(self.engine.batch, self.clock.now(), final=True)
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
        defence=b.defence,
    )
