"""PostgresStore's coordination of workers against a throwaway PostgreSQL on
loopback: leases follow core/lease.py (acquire, renew, expiry, release,
epochs; one winner of two), workers register and drop out, routing inserts
are the exact seen test, owners pick up new rows of their partitions only
and a takeover loses nothing, and one worker at a time holds an IP's lease.
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


# ---- per-IP leases ------------------------------------------------------------------------------

async def _lease_scenario(store) -> list:
    """One story of workers and IPs, on the caller's clock; every answer."""
    ip, t, lease, hold, span, shared = "192.0.2.1", 1000.0, 10.0, 5.0, 1.01, 12.0
    out: list = []
    out.append(await store.ip_lease(ip, "a", lease, hold, now=t))              # free: a holds it whole
    out.append(await store.ip_lease(ip, "a", lease, hold, now=t + 0.5))        # a again: renewed
    out.append(await store.ip_lease(ip, "b", lease, hold, now=t + 1.0))        # held: b waits, marks it wanted
    out.append(await store.ip_slot(ip, t + 1.1, 2, 2.0, hold_s=hold, shared_s=shared))   # no slot while held
    out.append(sorted(await store.ip_leases_renew("a", [ip], lease, now=t + 3.0)))   # wanted: not renewed
    await store.ip_leases_give("b", [ip], span, shared, now=t + 3.5)          # not b's: nothing happens
    out.append(await store.ip_lease(ip, "b", lease, hold, now=t + 3.6))
    await store.ip_leases_give("a", [ip], span, shared, now=t + 4.0)          # a's last request ended: shared
    out.append(await store.ip_lease(ip, "b", lease, hold, now=t + 4.5))        # one rate window first
    out.append(await store.ip_slot(ip, t + 4.6, 2, 2.0, hold_s=hold, shared_s=shared))
    out.append(await store.ip_lease(ip, "b", lease, hold, now=t + 5.02))       # shared now
    out.append(await store.ip_lease(ip, "a", lease, hold, now=t + 5.1))
    for dt in (5.1, 5.2, 5.3):                                                 # two in flight at most
        out.append(await store.ip_slot(ip, t + dt, 2, 2.0, hold_s=hold, shared_s=shared))
    await store.ip_release(ip, now=t + 5.4)
    out.append(await store.ip_slot(ip, t + 5.5, 2, 2.0, hold_s=hold, shared_s=shared))   # hinges on 5.1's
    out.append(await store.ip_lease(ip, "a", lease, hold, now=t + 5.2 + shared - 0.01))  # still shared
    out.append(await store.ip_lease(ip, "a", lease, hold, now=t + 5.2 + shared + 0.01))  # unused since: whole
    # a holder that stops renewing lapses hold_s after its term
    ip2 = "192.0.2.2"
    out.append(await store.ip_lease(ip2, "c", lease, hold, now=t))
    out.append(sorted(await store.ip_leases_renew("c", [ip2, "192.0.2.99"], lease, now=t + 2.0)))
    out.append(await store.ip_lease(ip2, "d", lease, hold, now=t + 2.0 + lease + hold - 0.01))
    out.append(await store.ip_lease(ip2, "d", lease, hold, now=t + 2.0 + lease + hold + 0.01))
    out.append(sorted(await store.ip_leases_renew("c", [ip2], lease, now=t + 20.0)))   # lost: not renewed
    return out


def test_ip_leases_follow_the_in_memory_rules_answer_for_answer(postgres):
    """The SQL (pg_schema version 8) and tests/ip_lease_support.LeaseTable, which
    the runtime's tests use, give the same answers to the same story."""
    from ip_lease_support import LeaseTable

    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        got = await _lease_scenario(s)
        model = await _lease_scenario(LeaseTable(clock=None))
        await s.close()
        return got, model

    def rounded(x):
        if isinstance(x, float):
            return round(x, 6)
        return type(x)(rounded(v) for v in x) if isinstance(x, (list, tuple)) else x

    got, model = run(body())
    assert rounded(got) == rounded(model)
    assert got[:3] == [("held", 10.0), ("held", 10.0), ("wait", pytest.approx(14.5))]
    assert got[3] == pytest.approx(14.4) and got[4] == [] and got[5][0] == "wait"
    assert got[6] == ("wait", pytest.approx(0.51)) and got[7] == pytest.approx(0.41)
    assert got[8][0] == "shared" and got[9][0] == "shared"
    assert got[10] is None and got[11] is None and got[12] == 0.05          # 2 in flight; then busy
    assert got[13] == 0.05          # the window's oldest start is a request still in flight
    assert got[14][0] == "shared" and got[15] == ("held", 10.0)
    assert got[-3][0] == "wait" and got[-2] == ("held", 10.0) and got[-1] == []


def test_ip_lease_asks_of_one_loop_turn_go_as_one_statement_with_the_sequential_answers(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        before = s.statements
        got = await asyncio.gather(s.ip_lease("192.0.2.10", "x", 10.0, 5.0), s.ip_lease("192.0.2.10", "y", 10.0, 5.0),
                                   s.ip_lease("192.0.2.9", "y", 10.0, 5.0))
        assert s.statements == before + 1
        assert [g[0] for g in got] == ["held", "wait", "held"]
        assert 14.0 < got[1][1] <= 15.0
        await s.ip_leases_give("x", ["192.0.2.10"], 1.0)
        await s.ip_leases_give("y", ["192.0.2.9"], 1.0)
        await s.prune(older_than_s=0.0)        # free rows are forgotten
        rows = await s._one("fetch", "SELECT ip FROM ip_leases")
        await s.close()
        return rows

    assert run(body()) == []


def test_ip_leases_keep_one_holder_across_two_workers_under_contention(postgres):
    """Two stores (two workers) ask for one IP in a loop, on the database clock;
    a worker holding it sends a few requests and gives it back: the holders'
    requests never overlap."""
    dsn = postgres.create_database()
    ip = "198.51.100.7"
    spans: list[tuple[str, float, float]] = []

    async def worker(store: PostgresStore, name: str, turns: int) -> None:
        while turns:
            answer, wait = await store.ip_lease(ip, name, 5.0, 5.0)
            if answer != "held":
                await asyncio.sleep(min(wait, 0.02))
                continue
            start = time.monotonic()
            await asyncio.sleep(0.01)
            spans.append((name, start, time.monotonic()))
            await store.ip_leases_give(name, [ip], 0.0)
            turns -= 1

    async def body():
        a, b = await _open(dsn, pool_max=4), await _open(dsn, pool_max=4)
        await asyncio.gather(worker(a, "a", 10), worker(b, "b", 10))
        await a.close()
        await b.close()

    run(body())
    spans.sort(key=lambda x: x[1])
    assert len(spans) == 20
    for (_, _, end), (_, start, _) in zip(spans, spans[1:]):
        assert start >= end
