"""A worker's partitions: which it holds, the lease gate, and the loop that keeps them.

Theory of operation
-------------------
One `PartitionView` (core/lease.py) per partition this worker took. The loop
(`run`) wakes at the earliest of: a view's renew or stop instant, the next
heartbeat, the next rebalance. Each pass

1. ticks every view: a stop that is due closes its gate at once (the worker
   drops that partition's work: `Listener.stop_fetching` and
   `Listener.forget_writes`); due renewals go out together in one statement,
   `asked_at` measured before sending, answers fed back with the time they
   arrived (an answer after the stop instant is never used);
2. heartbeats (every `heartbeat_s`);
3. rebalances (every `rebalance_s`): `plan_rebalance` over the live workers
   of this worker's region and the partitions it may lease (all of them, or
   its home region's range in a crawl of several regions: a worker never
   leases another region's partition, so it never fetches a key homed there).
   A partition to give away is *drained*: its gate closes, its fetch tasks
   end, the worker commits (its writes still carry the epoch), and only then
   is it released. A partition to take is acquired only when this worker has
   no task left for it from an earlier tenure; after `acquire_many` the worker
   adopts it (`Listener.gained`: inbox rebuilt, host state restored, every key
   held one delay);
4. releases what is drained or lost and idle (a lost lease is released too,
   so a renewal that came too late does not keep it from the next owner).

The gate (`may_fetch(p, epoch, now)`) is what the crawler checks right before
every request: the partition's view must be the one the host batch started
under (same epoch), owned, and before its stop instant on this worker's clock.

When the store is unreachable every call raises `StoreUnavailableError`: the
renewals count as failed (the views retry every `renew_retry_s` and close
their gates at the stop instant), the loop backs off up to
`store_retry_s_max`, and goes on when the store answers again.

Rules: `now` from the injected clock; the store is the port's shape (no shell
imports); the listener (the worker) owns the work, this module only the leases.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from courtly.core.lease import FETCHING, Effect, Input, LeaseTerms, PartitionView, ViewState, plan_rebalance
from courtly.ports import StoreUnavailableError

__all__ = ["Ownership", "Listener"]

log = logging.getLogger("courtly")


class Listener(Protocol):
    def busy(self, partition: int) -> bool: ...

    def stop_fetching(self, partition: int) -> None: ...

    def forget_writes(self, partition: int) -> None: ...

    async def gained(self, granted: dict[int, int], asked_at: float) -> None: ...

    async def flush(self) -> bool: ...


class Ownership:
    def __init__(self, store, worker_id: str, partitions: int | range, cfg, clock, listener: Listener) -> None:
        self.store = store
        self.worker_id = worker_id
        # the partitions this worker may lease: 0..P-1, or its region's range
        self.leasable = partitions if isinstance(partitions, range) else range(partitions)
        self.cfg = cfg
        self.clock = clock
        self.listener = listener
        self.terms = LeaseTerms(ttl_s=cfg.lease_ttl_s, renew_before_s=cfg.renew_before_s,
                                stop_margin_s=cfg.stop_margin_s, retry_s=cfg.renew_retry_s)
        self.views: dict[int, PartitionView] = {}
        self.draining: dict[int, int] = {}       # partition -> epoch: gate closed, writes still ours
        self._to_release: dict[int, int] = {}    # lost leases to hand back once idle
        self._next_heartbeat = 0.0
        self._next_rebalance = 0.0
        self._wake = asyncio.Event()
        self._down_since: float | None = None
        self._failures = 0
        self.acquired = 0                        # counters for status and tests
        self.lost = 0
        self.released = 0

    # ---- the gate -----------------------------------------------------------------

    def epoch(self, partition: int) -> int | None:
        """The epoch this worker fetches `partition` under, or None."""
        v = self.views.get(partition)
        return v.epoch if v is not None and v.state in FETCHING else None

    def may_fetch(self, partition: int, epoch: int | None, now: float) -> bool:
        v = self.views.get(partition)
        return v is not None and epoch is not None and v.epoch == epoch and v.may_fetch(now)

    def fetching(self) -> dict[int, int]:
        return {p: v.epoch for p, v in self.views.items() if v.state in FETCHING}

    def write_epochs(self) -> dict[int, int]:
        """Partitions whose writes this worker may commit, with their epochs."""
        out = self.fetching()
        out.update(self.draining)
        return out

    @property
    def store_down(self) -> bool:
        return self._down_since is not None

    # ---- events -----------------------------------------------------------------------

    def _fire(self, p: int, event: Input, now: float) -> None:
        v = self.views.get(p)
        if v is None:
            return
        v2, effects = v.on(event, now)
        self._effects(p, v, v2, effects)

    def _effects(self, p: int, before: PartitionView, after: PartitionView, effects) -> None:
        self.views[p] = after
        if Effect.STOP_FETCHING in effects and after.state is ViewState.LOST:
            self.lost += 1
            log.warning("partition %d lost (epoch %d): its work is dropped", p, after.epoch,
                        extra={"event": "partition_lost", "partition": p, "epoch": after.epoch})
            self.listener.stop_fetching(p)
            self.listener.forget_writes(p)
            self._to_release[p] = after.epoch
        if Effect.SEND_RELEASE in effects and after.state is ViewState.LOST:
            self._to_release[p] = after.epoch

    def refused(self, partitions, now: float) -> None:
        """A commit came back StaleEpoch for `partitions`."""
        for p in partitions:
            self._fire(p, Input.WRITE_REFUSED, now)
            self.draining.pop(p, None)

    def wake(self) -> None:
        self._wake.set()

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            now = self.clock.now()
            try:
                await self._renew_due(now)
                if now >= self._next_heartbeat:
                    await self.store.heartbeat(self.worker_id)
                    self._next_heartbeat = now + self.cfg.heartbeat_s
                if now >= self._next_rebalance:
                    await self._rebalance()
                    self._next_rebalance = self.clock.now() + self.cfg.rebalance_s
                await self._release_idle()
                self._store_back()
                delay = self._next_wakeup() - self.clock.now()
            except StoreUnavailableError as e:
                delay = self._store_trouble(e)
            self._wake.clear()
            await self.clock.wait_until(self._wake.wait(), self.clock.now() + max(0.0, delay))

    def _next_wakeup(self) -> float:
        at = min(self._next_heartbeat, self._next_rebalance)
        for v in self.views.values():
            w = v.next_wakeup()
            if w is not None:
                at = min(at, w)
        if self.draining or self._to_release:
            at = min(at, self.clock.now() + 0.1)   # poll for the tasks to end
        return at

    def _store_trouble(self, e: BaseException) -> float:
        self._failures += 1
        if self._down_since is None:
            self._down_since = self.clock.now()
            log.warning("PostgreSQL unavailable (%s): fetching goes on only while leases last; retrying", e,
                        extra={"event": "store_unavailable"})
        backoff = min(self.cfg.store_retry_s_max, 0.2 * 2 ** min(self._failures, 10))
        stop = [v.next_wakeup() for v in self.views.values() if v.next_wakeup() is not None]
        nxt = min([self.clock.now() + backoff, *stop])
        return max(0.05, nxt - self.clock.now())

    def _store_back(self) -> None:
        if self._down_since is not None:
            log.info("PostgreSQL reachable again after %.1f s", self.clock.now() - self._down_since,
                     extra={"event": "store_back"})
        self._down_since = None
        self._failures = 0

    async def _renew_due(self, now: float) -> None:
        due = []
        for p, v in list(self.views.items()):
            v2, effects = v.tick(now)
            self._effects(p, v, v2, effects)
            if Effect.SEND_RENEW in effects:
                due.append(p)
        if not due:
            return
        try:
            ok = await self.store.renew_many(self.worker_id, {p: self.views[p].epoch for p in due},
                                             self.terms.ttl_s)
        except StoreUnavailableError:
            after = self.clock.now()
            for p in due:
                self._fire(p, Input.RENEW_FAILED, after)
            raise
        after = self.clock.now()
        for p in due:
            self._fire(p, Input.RENEW_OK if p in ok else Input.RENEW_REFUSED, after)

    async def _rebalance(self) -> None:
        live = await self.store.live_workers(self.cfg.live_s)
        held = self.fetching()
        mine = self.leasable
        # the plan is over positions in `mine` (contiguous), mapped back to partitions
        plan = plan_rebalance(self.worker_id, len(mine), live, [p - mine.start for p in held if p in mine])
        release = [mine.start + i for i in plan.release] + [p for p in held if p not in mine]
        now = self.clock.now()
        for p in release:
            v = self.views[p]
            v2, _effects = v.on(Input.RELEASE, now)
            self.views[p] = v2
            self.draining[p] = v.epoch
            self.listener.stop_fetching(p)
        want = [p for p in (mine.start + i for i in plan.acquire)
                if p not in self.draining and p not in self._to_release and not self.listener.busy(p)]
        if not want:
            return
        asked = self.clock.now()
        got = await self.store.acquire_many(want, self.worker_id, self.terms.ttl_s)
        for p, epoch in got.items():
            self.views[p] = PartitionView.granted(p, epoch, asked, self.terms)
        if got:
            self.acquired += len(got)
            log.info("acquired %d partition(s): %s", len(got), _ranges(sorted(got)),
                     extra={"event": "partitions_acquired", "partitions": sorted(got),
                            "epochs": [got[p] for p in sorted(got)], "asked_at": asked})
            await self.listener.gained(got, asked)

    async def _release_idle(self) -> None:
        """Hand back drained partitions (after a commit) and lost leases, once no
        task of this worker serves them any more."""
        drained = {p: e for p, e in self.draining.items() if not self.listener.busy(p)}
        lost = {p: e for p, e in self._to_release.items() if not self.listener.busy(p)}
        if not drained and not lost:
            return
        if drained and not await self.listener.flush():
            return     # the store is unreachable: keep them (and their writes) for now
        gone = await self.store.release_many(self.worker_id, {**lost, **drained})
        for p in drained:
            self.draining.pop(p, None)
            self.views.pop(p, None)
            self.listener.forget_writes(p)
        for p in lost:
            self._to_release.pop(p, None)
            if p in self.views and self.views[p].state is not ViewState.OWNED \
                    and self.views[p].state is not ViewState.RENEWING:
                self.views.pop(p, None)
        self.released += len(gone)
        if drained:
            log.info("released %d partition(s): %s", len(drained), _ranges(sorted(drained)),
                     extra={"event": "partitions_released", "partitions": sorted(drained)})

    async def close(self) -> None:
        """Graceful stop (the worker stopped fetching and committed): release
        every partition and deregister. Best effort when the store is away."""
        epochs = self.write_epochs()
        epochs.update(self._to_release)
        for p in list(self.views):
            self.listener.stop_fetching(p)
        try:
            if epochs:
                await self.store.release_many(self.worker_id, epochs)
            # and any row still in this worker's name that it does not know it holds (an acquire
            # whose answer a cancelled lease loop never read): it wrote nothing under it
            stray = {r.partition: r.epoch for r in await self.store.leases()
                     if r.owner == self.worker_id and r.partition not in epochs}
            if stray:
                await self.store.release_many(self.worker_id, stray)
            await self.store.deregister(self.worker_id)
        except StoreUnavailableError as e:
            log.warning("could not release partitions (%s): they move when their leases expire", e)
        self.views.clear()
        self.draining.clear()


def _ranges(ps: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3,7' (log lines)."""
    out: list[str] = []
    for p in ps:
        if out and out[-1].split("-")[-1] == str(p - 1):
            out[-1] = out[-1].split("-")[0] + f"-{p}"
        else:
            out.append(str(p))
    return ",".join(out)
