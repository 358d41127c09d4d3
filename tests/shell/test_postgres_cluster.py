"""PostgresStore's coordination of workers against a throwaway PostgreSQL on
loopback: leases follow core/lease.py (acquire, renew, expiry, release,
epochs; one winner of two), workers register and drop out, routing inserts
are the exact seen test, owners pick up new rows of their partitions only
and a takeover loses nothing, and per-IP limits hold across workers.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from courtly.core.urls import partition_of
from courtly.shell.store.postgres import PostgresStore
from courtly.shell.store.sqlite import Batch
from pg_store_support import ALL, P, _hold_all, _key_in_other_partition, _new, _open, run


# ---- leases -----------------------------------------------------------------------------------

def test_acquire_renew_expiry_release_and_epochs(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        e = await s.acquire(3, "a", 0.5)
        assert e == 1
        assert await s.acquire(3, "b", 30.0) is None               # held
        assert await s.acquire(3, "a", 30.0) is None               # the owner renews, never re-acquires
        assert await s.renew(3, "a", e, 0.5)
        assert not await s.renew(3, "b", e, 30.0)
        assert not await s.renew(3, "a", e + 1, 30.0)
        await asyncio.sleep(0.6)
        assert not await s.renew(3, "a", e, 30.0)                  # expired: never revived
        e2 = await s.acquire(3, "b", 30.0)
        assert e2 == 2
        assert not await s.release(3, "a", e)
        assert await s.release(3, "b", e2)
        assert await s.acquire(3, "a", 30.0) == 3                  # released: free at once
        rec = {r.partition: r for r in await s.leases()}[3]
        assert rec.owner == "a" and rec.epoch == 3 and rec.lease_until > await s.db_now() + 29
        # many at once
        got = await s.acquire_many(range(P), "c", 30.0)
        assert set(got) == set(ALL) - {3}
        assert await s.renew_many("c", got, 30.0) == set(got)
        assert await s.release_many("c", {**got, 3: 3}) == set(got)
        await s.close()

    run(body())


def test_two_concurrent_acquirers_exactly_one_wins(postgres):
    dsn = postgres.create_database()

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        for _ in range(5):
            ga, gb = await asyncio.gather(a.acquire_many(ALL, "a", 30.0), b.acquire_many(ALL, "b", 30.0))
            assert not set(ga) & set(gb)
            assert set(ga) | set(gb) == set(ALL)
            assert await a.release_many("a", ga) | await b.release_many("b", gb) == set(ALL)
        for p in ALL:
            wins = await asyncio.gather(a.acquire(p, "a", 30.0), b.acquire(p, "b", 30.0))
            assert sum(w is not None for w in wins) == 1
        await a.close()
        await b.close()

    run(body())


def test_workers_register_heartbeat_and_drop_out(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        await s.register("w1")
        await s.register("w2")
        assert await s.live_workers(5.0) == ["w1", "w2"]
        await asyncio.sleep(0.3)
        await s.heartbeat("w2")
        assert await s.live_workers(0.2) == ["w2"]
        await s.deregister("w2")
        assert await s.live_workers(5.0) == ["w1"]
        await s.apply(Batch(meta={"k": "v"}), batch_id="old")
        await asyncio.sleep(0.3)
        await s.register("w3")
        await s.prune(older_than_s=0.2)                             # housekeeping
        assert await s.live_workers(5.0) == ["w3"]
        assert await s.apply(Batch(meta={"k": "v"}), batch_id="old")   # its id was forgotten
        await s.close()

    run(body())


# ---- routing and picking up ---------------------------------------------------------------------

def test_insert_urls_returns_only_the_new_ones(postgres):
    dsn = postgres.create_database()

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        u = [f"http://a.test/{i}" for i in range(6)]
        assert await a.insert_urls([_new(u[0]), _new(u[1]), _new(u[0])]) == u[:2]
        assert await a.insert_urls([_new(u[1]), _new(u[2])]) == [u[2]]
        # two workers discover overlapping sets at once: each URL is new exactly once
        many = [f"http://a.test/m{i}" for i in range(300)]
        ra, rb = await asyncio.gather(a.insert_urls([_new(x) for x in many[:200]]),
                                      b.insert_urls([_new(x) for x in many[100:]]))
        assert not set(ra) & set(rb) and set(ra) | set(rb) == set(many)
        # a refusal as nofollow does not hide a URL that is followed elsewhere
        await a.apply(Batch(decisions=[(u[5], "a.test", "", 1.0, "skipped", "nofollow", "", 1)]),
                      partition_epochs=await _hold_all(a))
        assert await a.insert_urls([_new(u[5])]) == [u[5]]
        await a.close()
        await b.close()

    run(body())


def test_owner_claims_new_rows_of_its_partitions_only_and_takeover_loses_nothing(postgres):
    dsn = postgres.create_database()
    p = partition_of("a.test", P)
    other = _key_in_other_partition("a.test")

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        before = [f"http://a.test/{i}" for i in range(25)]
        await b.insert_urls([_new(u) for u in before] + [_new(f"http://{other}/", key=other)])
        e = await a.acquire(p, "a", 0.5)
        assert await a.adopt(p, e) == 25
        got = []
        while page := await a.claim_new({p: e}, 10):
            got += page
        assert sorted(r[0] for r in got) == sorted(before)            # each once, none of the other key
        assert got[0][1:] == ("a.test", 4, 1, 0, "http://a.test/", 0, True)   # judged: an adoption's
        await b.insert_urls([_new("http://a.test/late")])            # routed by another worker
        assert [r[0] for r in await a.claim_new({p: e}, 10)] == ["http://a.test/late"]
        # a fetched some, then paused past its lease; b takes over
        await a.apply(Batch(fetched=[(2.0, 200, u) for u in before[:5]]), partition_epochs={p: e})
        await asyncio.sleep(0.6)
        await b.insert_urls([_new("http://a.test/later")])
        e2 = await b.acquire(p, "b", 30.0)
        assert await a.claim_new({p: e}, 10) == []                   # the zombie gets nothing
        assert await b.adopt(p, e2) == 22                              # 25 + late + later - 5 fetched
        taken = []
        while page := await b.claim_new({p: e2}, 7):
            taken += [r[0] for r in page]
        assert sorted(taken) == sorted(before[5:] + ["http://a.test/late", "http://a.test/later"])
        assert await b.queue_sizes() == {partition_of(other, P): 1}
        await a.close()
        await b.close()

    run(body())


# ---- per-IP limits ------------------------------------------------------------------------------

def test_ip_rate_and_concurrency_follow_the_window_rule(postgres):
    dsn = postgres.create_database()

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        ip = "192.0.2.1"
        t = 1000.0
        for i in range(5):                                         # 5 starts in the window, split over workers
            assert await (a if i % 2 else b).ip_acquire(ip, t + i * 0.1, 10, 5.0) is None
        # the window hinges on the oldest request, still in flight: wait for it to end
        assert await a.ip_acquire(ip, t + 2.0, 10, 5.0) == a.ip_busy_wait_s
        for s in (a, a, b, b, b):
            await s.ip_release(ip, t + 0.5)                        # all five end at t + 0.5
        wait = await a.ip_acquire(ip, t + 0.6, 10, 5.0)
        assert wait == pytest.approx(0.91, abs=1e-6)               # completion + 1 s + margin - now
        assert await b.ip_acquire(ip, t + 1.511, 10, 5.0) is None
        # concurrency: 2 slots, held by a; b waits; a slot of a dead worker lapses after hold_s
        ip2 = "192.0.2.2"
        assert await a.ip_acquire(ip2, t, 2, 100.0, hold_s=5.0) is None
        assert await a.ip_acquire(ip2, t, 2, 100.0, hold_s=5.0) is None
        assert await b.ip_acquire(ip2, t + 0.1, 2, 100.0) == b.ip_busy_wait_s
        await a.ip_release(ip2, t + 0.15)
        assert await b.ip_acquire(ip2, t + 0.2, 2, 100.0) is None
        assert await b.ip_acquire(ip2, t + 0.3, 2, 100.0) == b.ip_busy_wait_s
        assert await b.ip_acquire(ip2, t + 5.1, 2, 100.0) is None   # a's other slot lapsed
        # now=None: the database's clock decides
        assert await a.ip_acquire("192.0.2.3", None, 1, 1.0) is None
        assert await b.ip_acquire("192.0.2.3", None, 5, 1.0) == b.ip_busy_wait_s   # still in flight
        await a.ip_release("192.0.2.3")
        assert 0.9 < await b.ip_acquire("192.0.2.3", None, 5, 1.0) <= 1.01
        await a.close()
        await b.close()

    run(body())


def test_ip_requests_of_one_loop_turn_go_as_one_statement_with_the_sequential_answers(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        busy, free, t = "192.0.2.10", "192.0.2.9", 1000.0
        before = s.statements
        # three asks on an IP with two slots, one on another IP, all in one turn
        got = await asyncio.gather(*(s.ip_acquire(busy, t, 2, 100.0) for _ in range(3)),
                                   s.ip_acquire(free, t, 1, 100.0))
        assert s.statements == before + 1
        assert got == [None, None, s.ip_busy_wait_s, None]
        assert await s.ip_acquire(free, t + 0.1, 1, 100.0) == s.ip_busy_wait_s   # its one slot is taken
        before = s.statements
        await asyncio.gather(s.ip_release(busy, t + 0.2), s.ip_release(busy, t + 0.2), s.ip_release(free, t + 0.2))
        assert s.statements == before + 1
        assert await asyncio.gather(s.ip_acquire(busy, t + 0.3, 2, 100.0), s.ip_acquire(busy, t + 0.3, 2, 100.0),
                                    s.ip_acquire(free, t + 0.3, 1, 100.0)) == [None, None, None]
        await s.close()

    run(body())


def test_ip_limits_hold_across_two_workers_under_contention(postgres):
    dsn = postgres.create_database()
    conc, rate, ip = 3, 5.0, "198.51.100.7"
    starts: list[float] = []
    in_flight = [0]
    peak = [0]

    async def fetcher(store: PostgresStore, stop_at: float):
        while time.time() < stop_at:
            now = time.time()                                      # one clock for all, as with NTP
            wait = await store.ip_acquire(ip, now, conc, rate)
            if wait is not None:
                await asyncio.sleep(min(wait, 0.05))
                continue
            starts.append(now)
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            await asyncio.sleep(0.35)
            in_flight[0] -= 1
            await store.ip_release(ip)

    async def body():
        a, b = await _open(dsn, pool_max=4), await _open(dsn, pool_max=4)
        stop_at = time.time() + 3.0
        await asyncio.gather(*(fetcher(s, stop_at) for s in (a, b, a, b, a, b)))
        await a.close()
        await b.close()

    run(body())
    starts.sort()
    assert len(starts) >= 10
    assert peak[0] <= conc
    for i in range(len(starts) - int(rate)):
        assert starts[i + int(rate)] - starts[i] >= 1.0, "more than 5 starts in one second"
