"""A worker's partition leases (runtime/ownership.py) against an in-memory
store that follows core/lease.py, on a clock the test moves: the gate, renewals,
the stop instant when the store is away, draining before a release, and a
refused write. The real store and real processes: tests/e2e/test_distributed.py.
"""

from __future__ import annotations

import asyncio

from courtly.config import DistributedSection
from courtly.core.lease import LeaseRecord, extend, give_up, grant
from courtly.ports import StoreUnavailableError
from courtly.runtime.ownership import Ownership

P = 8
CFG = DistributedSection(lease_ttl_s=10.0, renew_before_s=6.0, stop_margin_s=2.0, renew_retry_s=1.0,
                         heartbeat_s=1.0, live_s=3.0, rebalance_s=1.0)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


class Store:
    """The lease table of core/lease.py in memory; `down` makes every call fail."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.recs = {p: LeaseRecord(p) for p in range(P)}
        self.live: set[str] = set()
        self.down = False
        self.released: list[dict[int, int]] = []

    def _up(self) -> None:
        if self.down:
            raise StoreUnavailableError("down")

    async def heartbeat(self, w: str) -> None:
        self._up()
        self.live.add(w)

    async def live_workers(self, ttl_s: float) -> list[str]:
        self._up()
        return sorted(self.live)

    async def acquire_many(self, ps, w: str, ttl_s: float) -> dict[int, int]:
        self._up()
        out = {}
        for p in ps:
            rec = grant(self.recs[p], w, self.clock.now(), ttl_s)
            if rec is not None:
                self.recs[p] = rec
                out[p] = rec.epoch
        return out

    async def renew_many(self, w: str, pe: dict[int, int], ttl_s: float) -> set[int]:
        self._up()
        ok = set()
        for p, e in pe.items():
            rec = extend(self.recs[p], w, e, self.clock.now(), ttl_s)
            if rec is not None:
                self.recs[p] = rec
                ok.add(p)
        return ok

    async def release_many(self, w: str, pe: dict[int, int]) -> set[int]:
        self._up()
        self.released.append(dict(pe))
        gone = set()
        for p, e in pe.items():
            rec = give_up(self.recs[p], w, e)
            if rec is not None:
                self.recs[p] = rec
                gone.add(p)
        return gone

    async def deregister(self, w: str) -> None:
        self._up()
        self.live.discard(w)

    async def leases(self) -> list[LeaseRecord]:
        self._up()
        return [self.recs[p] for p in sorted(self.recs)]


class Listener:
    def __init__(self) -> None:
        self.busy_parts: set[int] = set()
        self.stopped: list[int] = []
        self.forgotten: list[int] = []
        self.gained_parts: dict[int, int] = {}
        self.flushes = 0

    def busy(self, p: int) -> bool:
        return p in self.busy_parts

    def stop_fetching(self, p: int) -> None:
        self.stopped.append(p)

    def forget_writes(self, p: int) -> None:
        self.forgotten.append(p)

    async def gained(self, granted, asked_at) -> None:
        self.gained_parts.update(granted)

    async def flush(self) -> bool:
        self.flushes += 1
        return True


def _setup(worker: str = "a"):
    clock = Clock()
    store = Store(clock)
    lis = Listener()
    own = Ownership(store, worker, P, CFG, clock, lis)
    return clock, store, lis, own


def run(coro):
    return asyncio.run(coro)


def test_a_lone_worker_takes_every_partition_and_the_gate_follows_its_leases():
    clock, store, lis, own = _setup()
    run(store.heartbeat("a"))
    run(own._rebalance())
    assert own.fetching() == {p: 1 for p in range(P)} and lis.gained_parts == {p: 1 for p in range(P)}
    assert own.may_fetch(3, 1, clock.t) and not own.may_fetch(3, 0, clock.t)   # other epoch: no
    clock.t += 4.0                                   # renew due (10 - 6)
    run(own._renew_due(clock.t))
    clock.t += 7.0                                   # past the first stop instant (8): renewed, still ours
    run(own._renew_due(clock.t))
    assert own.may_fetch(3, 1, clock.t) and lis.stopped == []


def test_store_away_gates_close_at_the_stop_instant_and_leases_are_released_later():
    clock, store, lis, own = _setup()
    run(store.heartbeat("a"))
    run(own._rebalance())
    store.down = True
    clock.t += 4.0
    try:
        run(own._renew_due(clock.t))
    except StoreUnavailableError:
        pass
    assert own.may_fetch(0, 1, clock.t)              # still before the stop instant
    clock.t += 4.0                                   # 8 s after the acquire was sent: stop
    run(own._renew_due(clock.t))
    assert not own.may_fetch(0, 1, clock.t) and own.fetching() == {}
    assert sorted(lis.stopped) == sorted(lis.forgotten) == list(range(P))
    lis.busy_parts = {5}                             # a request of partition 5 is still on the wire
    store.down = False
    run(own._release_idle())
    assert set(store.released[-1]) == set(range(P)) - {5}
    lis.busy_parts = set()
    run(own._release_idle())
    assert set(store.released[-1]) == {5}
    clock.t += 3.0                                   # the old leases expired anyway; acquire again
    run(own._rebalance())
    assert set(own.fetching()) == set(range(P)) and all(e == 2 for e in own.fetching().values())


def test_a_joining_worker_gets_partitions_only_after_the_owner_drained_them():
    clock, store, lis, own = _setup("a")
    run(store.heartbeat("a"))
    run(own._rebalance())
    store.live.add("b")
    lis.busy_parts = set(range(P))                   # every partition has a task running
    run(own._rebalance())
    moving = set(own.draining)
    assert moving and set(lis.stopped) == moving
    assert all(not own.may_fetch(p, 1, clock.t) for p in moving)
    assert all(own.write_epochs()[p] == 1 for p in moving)   # its writes still commit with the epoch
    b = Ownership(store, "b", P, CFG, clock, Listener())
    run(b._rebalance())
    assert b.fetching() == {}                        # not released yet: b cannot take them
    run(own._release_idle())
    assert own.draining and lis.flushes == 0         # still busy: nothing released
    lis.busy_parts = set()
    run(own._release_idle())
    assert lis.flushes == 1 and not own.draining and set(lis.forgotten) == moving
    run(b._rebalance())
    assert set(b.fetching()) == moving and all(e == 2 for e in b.fetching().values())


def test_a_refused_write_loses_the_partition_at_once():
    clock, store, lis, own = _setup()
    run(store.heartbeat("a"))
    run(own._rebalance())
    own.refused({2, 6}, clock.t)
    assert not own.may_fetch(2, 1, clock.t) and not own.may_fetch(6, 1, clock.t)
    assert own.may_fetch(1, 1, clock.t)
    assert sorted(lis.stopped) == [2, 6] and own.lost == 2


def test_closing_releases_a_lease_the_store_holds_in_the_workers_name_that_it_never_learned_of():
    """An acquire committed while the lease loop was being cancelled: the
    answer was never read, so the worker does not know it holds the partition.
    A graceful stop still gives it back (it wrote nothing under it)."""
    clock, store, lis, own = _setup()
    run(store.heartbeat("a"))
    run(own._rebalance())
    run(store.acquire_many([P - 1], "a", 10.0))         # already ours: nothing changes
    own.views.pop(P - 1)                              # ... but say its answer was lost
    run(own.close())
    assert all(r.owner is None for r in store.recs.values())
    assert store.released[-1] == {P - 1: store.recs[P - 1].epoch}
