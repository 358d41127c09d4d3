"""PostgresStore against a throwaway PostgreSQL on loopback: the schema
migrates once, batches read back exactly as from SqliteStore, stale epochs are
refused, a batch costs a bounded number of statements, and the store rides
out a server restart. Leases, routing, picking up work and per-IP limits:
test_postgres_cluster.py.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from courtly.core.urls import partition_of
from courtly.shell.store.postgres import (
    COPY_ROWS_MIN,
    MIGRATIONS,
    SCHEMA_VERSION,
    PostgresStore,
    StaleEpoch,
    StoreError,
    StoreUnavailable,
    migrate,
)
from courtly.shell.store.sqlite import Batch, SqliteStore
from pg_support import pg_server
from pg_store_support import ALL, P, _hold_all, _key_in_other_partition, _new, _open, run

# ---- schema -------------------------------------------------------------------------------

def test_schema_migration_is_idempotent_and_serialised(postgres):
    dsn = postgres.create_database()

    async def body():
        stores = await asyncio.gather(*(_open(dsn) for _ in range(3)))   # concurrent first opens
        for s in stores:
            await s.close()
        s = await _open(dsn)
        assert await s.get_meta("schema_version") == str(SCHEMA_VERSION) and s.partitions == P
        await s.close()
        nxt = SCHEMA_VERSION + 1
        extra = MIGRATIONS + ((nxt, "CREATE TABLE extra (x int)"),)
        conn = await asyncpg.connect(dsn)
        try:
            assert await migrate(conn, extra) == nxt
            assert await migrate(conn, extra) == nxt      # applied once: no "already exists"
            assert await conn.fetchval("SELECT count(*) FROM extra") == 0
        finally:
            await conn.close()
        with pytest.raises(StoreError, match="newer courtly"):
            await _open(dsn)

    run(body())


def test_partitions_are_fixed_when_the_crawl_is_created(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        assert [r.partition for r in await s.leases()] == list(ALL)
        await s.close()
        with pytest.raises(StoreError, match="8 partitions"):
            await PostgresStore.open(dsn, partitions=16)
        s = await PostgresStore.open(dsn)             # joining workers read P from the crawl
        assert s.partitions == P
        await s.close()

    run(body())


# ---- batches read back like SqliteStore ------------------------------------------------------------

def _batches() -> list[Batch]:
    a1, a2, child = "http://a.test/1", "http://a.test/2", "http://a.test/child"
    nofollow = ("http://a.test/n", "", "http://a.test/", 1.0, "skipped", "nofollow", "rel=nofollow", 1)
    bulk = [f"http://c.test/p{i}" for i in range(COPY_ROWS_MIN + 20)]
    return [
        Batch(new_urls=[_new(a1), _new(a2), _new(a1, band=0)], hosts={"a.test": {"delay_s": 2.0}},
              robots={"http://a.test": {"v": 1}}, meta={"started": "1.0"}),
        Batch(new_urls=[_new(child, via=a1)], fetched=[(2.0, 200, a1)], requeued=[(1, a2), (2, a2)],
              fetches=[(a1, "page", 2.0, 200, 1234, 0.1, "127.0.0.1", "f.warc.gz:0", ""),
                       ("http://a.test/robots.txt", "robots", 1.5, 404, 0, 0.01, "127.0.0.1", "", "")],
              flags=[(a1, 2.0, "exact_dup", "same as x")], digests=[("sha1:X", a1, 2.0, "<urn:1>"),
                                                                   ("sha1:X", a2, 3.0, "<urn:2>")],
              simhashes=[("d1", -5, "a.test"), ("d2", 2 ** 62, "a.test"), ("d0", 7, "b.test")],
              histories={a1: (a1, "a.test", 1, 0, "[1, 2]")},
              dead_letters=[(a2, 2.0, "extract failed")], hosts={"a.test": {"delay_s": 3.0}}),
        Batch(decisions=[nofollow, ("http://a.test/nf",) + nofollow[1:],   # stays a nofollow refusal
                         ("http://b.test/p", "b.test", a1, 3.0, "skipped", "robots", "Disallow: /p", 1),
                         ("http://b.test/q", "b.test", a1, 3.0, "skipped", "robots", "Disallow: /q", 1),
                         ("http://b.test/r", "b.test", a1, 3.0, "skipped", "robots", "other", 1),
                         ("http://b.test/p", "b.test", a1, 3.5, "skipped", "robots", "Disallow: /p", 1)],
              new_urls=[_new("http://a.test/m")],
              histories={a1: (a1, "a.test", 2, 0, "[1, 2, 3]")}, meta={"started": "1.5", "x": "y"}),
        Batch(new_urls=[_new("http://a.test/n")],
              decisions=[("http://a.test/m",) + nofollow[1:]]),  # queued first, refused later
        Batch(new_urls=[_new(u, key="c.test") for u in bulk],
              fetches=[(u, "page", 4.0 + i, 200, 10, 0.2, "10.0.0.1", f"w.warc.gz:{i}", "")
                       for i, u in enumerate(bulk)],
              flags=[(u, 4.0, "near_dup", "d") for u in bulk],
              simhashes=[(f"s{i}", i - 300, "c.test") for i in range(COPY_ROWS_MIN + 1)]),
    ]


async def _reads(s, sync: bool) -> dict:
    async def a(x):
        return x if sync else await x

    async def items(it):
        if sync:
            return list(it)
        return [r async for r in it]

    urls = sorted(await items(s.iter_urls()))
    out = {
        "urls": urls,
        "queued": sorted(await items(s.iter_queued())),
        "records": [{k: v for k, v in (await a(s.url_record(u))).items() if k != "partition"} for u in urls],
        "fetches": [[{k: v for k, v in f.items() if k != "id"} for f in await a(s.url_fetches(u))] for u in urls],
        "flags": [await a(s.url_flags(u)) for u in urls],
        "hosts": await a(s.hosts()),
        "robots": await a(s.robots()),
        "digests": sorted(await items(s.iter_digests())),
        "histories": sorted(await items(s.iter_histories())),
        "simhashes": await items(s.iter_simhashes()),
        "by_day": await a(s.fetches_by_day()),
        "denied": await a(s.count_denied("b.test", "robots")),
        "meta": [await a(s.get_meta(k)) for k in ("started", "x", "nope")],
        "linked": sorted(await a(s.linked_from("http://a.test/1"))),
        "has": [await a(s.has_url(u)) for u in ("http://a.test/1", "http://nowhere.test/", "http://a.test/nf")],
        "counts": await a(s.counts()),
    }
    return out


def test_apply_round_trips_batches_with_the_same_reads_as_sqlite(postgres, tmp_path):
    dsn = postgres.create_database()
    lite = SqliteStore(tmp_path / "c.db")

    async def body():
        s = await _open(dsn)
        epochs = await _hold_all(s)
        for b in _batches():
            lite.apply(b)
            assert await s.apply(b, partition_epochs=epochs)
        assert lite.requeue_denied("b.test", "robots", "Disallow") == 2
        assert await s.requeue_denied("b.test", "robots", "Disallow") == 2
        want, got = await _reads(lite, sync=True), await _reads(s, sync=False)
        for k in want:
            assert got[k] == want[k], k
        assert got["counts"]["fetches"] == COPY_ROWS_MIN + 22
        await s.close()

    run(body())


def test_failed_batch_rolls_back_entirely(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        bad = Batch(new_urls=[_new("http://a.test/x")], fetches=[("u", "page", 1.0)])   # wrong arity
        with pytest.raises((ValueError, TypeError, asyncpg.PostgresError)):
            await s.apply(bad, partition_epochs=await _hold_all(s))
        assert not await s.has_url("http://a.test/x")
        await s.close()

    run(body())


def test_robots_and_host_state_from_a_server_that_is_not_utf8_go_into_jsonb(postgres):
    # a robots.txt Sitemap line and a Retry-After with raw octets (lone surrogates
    # once decoded): jsonb refused their JSON escapes, and the worker's batch with them
    from courtly.core.politeness import Politeness, PolitenessConfig
    from courtly.core.robots import RobotsBook, RobotsFetched

    book, origin = RobotsBook(), "http://a.test"
    book.fetch_started(origin, 1.0)
    book.fetch_finished(origin, 1.5, RobotsFetched(200, b"User-agent: *\nSitemap: http://a.test/s\xe5.xml\n", 0))
    pol = Politeness(PolitenessConfig())
    pol.finished("a.test", 2.0, response_s=0.1, status=429, retry_after=b"\xff".decode("utf-8", "surrogateescape"))
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        await s.apply(Batch(robots={origin: book.snapshot(origin)}, hosts={"a.test": pol.key("a.test").snapshot()}),
                      partition_epochs=await _hold_all(s))
        robots, hosts = await s.robots(), await s.hosts()
        await s.close()
        assert robots[origin]["good"]["sitemaps"] == ["http://a.test/s%E5.xml"]
        assert hosts["a.test"]["backoff_reason"] == "429 Retry-After %FF"

    run(body())


# ---- fencing ----------------------------------------------------------------------------------

def test_writes_with_a_stale_epoch_are_refused_whole(postgres):
    dsn = postgres.create_database()
    p = partition_of("a.test", P)

    async def body():
        a, b = await _open(dsn), await _open(dsn)
        e1 = await a.acquire(p, "a", 0.3)
        await a.apply(Batch(new_urls=[_new("http://a.test/")]), partition_epochs={p: e1})
        await asyncio.sleep(0.4)                                    # a is paused past its lease
        e2 = await b.acquire(p, "b", 30.0)
        assert e2 == e1 + 1
        zombie = Batch(fetched=[(5.0, 200, "http://a.test/")], new_urls=[_new("http://z.test/")],
                       hosts={"a.test": {"delay_s": 9.0}})
        with pytest.raises(StaleEpoch) as err:
            await a.apply(zombie, partition_epochs={p: e1})
        assert err.value.partitions == {p}
        assert not await a.has_url("http://z.test/")                # nothing of the batch landed
        assert (await a.url_record("http://a.test/"))["state"] == "queued"
        assert await a.hosts() == {}
        assert await b.apply(zombie, partition_epochs={p: e2})      # the owner's write goes in
        assert (await b.url_record("http://a.test/"))["state"] == "fetched"
        await a.close()
        await b.close()

    run(body())


def test_writes_for_a_partition_not_held_are_refused_but_routing_is_free(postgres):
    dsn = postgres.create_database()
    p = partition_of("a.test", P)
    other = _key_in_other_partition("a.test")
    q = partition_of(other, P)

    async def body():
        s = await _open(dsn)
        e = await s.acquire(p, "w", 30.0)
        # discovered URLs and refusals for someone else's partition: routing
        await s.apply(Batch(new_urls=[_new(f"http://{other}/", key=other)],
                            decisions=[(f"http://{other}/x", other, "", 1.0, "skipped", "filtered", "", 1)]),
                      partition_epochs={p: e})
        assert (await s.url_record(f"http://{other}/"))["partition"] == q
        # a refusal from a non-owner never overwrites the owner's record
        await s.apply(Batch(decisions=[(f"http://{other}/", other, "", 2.0, "skipped", "filtered", "", 1)]),
                      partition_epochs={p: e})
        assert (await s.url_record(f"http://{other}/"))["state"] == "queued"
        for bad in (Batch(fetched=[(2.0, 200, f"http://{other}/")]),
                    Batch(requeued=[(1, f"http://{other}/")]),
                    Batch(hosts={other: {"delay_s": 1.0}})):
            with pytest.raises(StaleEpoch) as err:
                await s.apply(bad, partition_epochs={p: e})
            assert err.value.partitions == {q}
        await s.close()

    run(body())


def test_acquire_waits_for_a_fenced_batch_and_renew_does_not(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        e = await s.acquire(0, "a", 0.2)
        await asyncio.sleep(0.3)                                    # expired, not yet taken
        conn = await asyncpg.connect(dsn)
        tx = conn.transaction()
        await tx.start()                                            # a batch in flight holds the fence
        await conn.fetch("SELECT epoch FROM partitions WHERE id = 0 FOR KEY SHARE")
        other = await _open(dsn)
        e1 = await other.acquire(1, "a", 30.0)
        # renewals never wait: a renew that waited for the batch would wait until the commit
        # below, so the bound is on an event (the open batch), not on the machine's speed
        assert await asyncio.wait_for(other.renew(1, "a", e1, 30.0), 60)
        take = asyncio.create_task(other.acquire(0, "b", 30.0))
        await asyncio.sleep(0.5)
        assert not take.done()                                      # the new epoch waits for the batch
        await tx.commit()
        assert await asyncio.wait_for(take, 5) == e + 1
        await conn.close()
        await s.close()
        await other.close()

    run(body())


# ---- cost ------------------------------------------------------------------------------------------

def test_statements_per_batch_are_bounded_not_per_url(postgres):
    dsn = postgres.create_database()

    def batch(n: int, tag: str) -> Batch:
        urls = [f"http://a.test/{tag}{i}" for i in range(n)]
        return Batch(new_urls=[_new(u) for u in urls],
                     fetched=[(2.0, 200, u) for u in urls],
                     decisions=[(u + "x", "a.test", u, 2.0, "skipped", "robots", "", 1) for u in urls],
                     fetches=[(u, "page", 2.0, 200, 10, 0.1, "10.0.0.1", "w:0", "") for u in urls],
                     hosts={"a.test": {"delay_s": 1.0}},
                     flags=[(u, 2.0, "soft404", "") for u in urls])

    async def body():
        s = await _open(dsn)
        epochs = await _hold_all(s)
        counts = []
        for n, tag in ((10, "s"), (5000, "l")):
            before = s.statements
            await s.apply(batch(n, tag), partition_epochs=epochs, batch_id=f"b-{tag}")
            counts.append(s.statements - before)
        assert counts[0] == counts[1] <= 12, counts
        before = s.statements
        assert not await s.apply(batch(10, "s"), partition_epochs=epochs, batch_id="b-s")   # a retry
        assert s.statements - before == 3                          # BEGIN, batch id, ROLLBACK
        assert len([u async for u in s.iter_urls()]) == 10_020
        await s.close()

    run(body())


# ---- server restart ------------------------------------------------------------------------------

def test_a_connection_goes_back_to_the_pool_without_a_reset_round_trip_but_rolled_back(postgres):
    # the pool's default reset (RESET ALL, ...) would cost one more round trip
    # per statement; a session setting surviving the release shows none ran,
    # and an open transaction is still rolled back (asyncpg's own reset)
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn, pool_min=1, pool_max=1)
        try:
            async with s._conn() as conn:
                await conn.execute("SET statement_timeout = '123s'")
                tx = conn.transaction()
                await tx.start()
                await conn.execute("INSERT INTO meta VALUES ('left', 'open')")
            async with s._conn() as conn:
                assert await conn.fetchval("SHOW statement_timeout") == "123s"
                assert not conn.is_in_transaction()
            assert await s.get_meta("left") is None
        finally:
            await s.close()

    run(body())


def test_store_rides_out_a_server_restart_and_retries_once(tmp_path):
    from pg_support import missing_reason
    if missing_reason():
        pytest.skip(missing_reason())

    async def until_up(coro_fn, seconds=20.0):
        deadline = time.monotonic() + seconds
        failures = 0
        while True:
            try:
                return await coro_fn(), failures
            except StoreUnavailable:
                failures += 1
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    with pg_server() as server:
        dsn = server.create_database()

        async def before():
            s = await _open(dsn)
            epochs = await _hold_all(s)
            await s.apply(Batch(new_urls=[_new("http://a.test/1")]), partition_epochs=epochs, batch_id="1")
            return s, epochs

        async def after(s, epochs, mode):
            b = Batch(new_urls=[_new(f"http://a.test/{mode}")], fetched=[(2.0, 200, "http://a.test/1")])
            ok, failures = await until_up(lambda: s.apply(b, partition_epochs=epochs, batch_id=mode))
            assert ok
            # the commit answer was lost? the retry with the same id is a no-op
            assert not await s.apply(b, partition_epochs=epochs, batch_id=mode)
            assert (await s.url_record("http://a.test/1"))["state"] == "fetched"
            assert await s.has_url(f"http://a.test/{mode}")
            return failures

        async def down_then_up(s, epochs, mode):
            server.stop(mode)
            with pytest.raises(StoreUnavailable):
                await s.has_url("http://a.test/1")
            server.start()
            return await after(s, epochs, mode)

        async def body():
            s, epochs = await before()
            for mode in ("fast", "immediate"):
                await down_then_up(s, epochs, mode)
            await s.close()

        run(body(), timeout_s=120)


class _Pool:
    def __init__(self, conn) -> None:
        self.conn = conn

    def acquire(self, timeout=None):
        return self

    async def __aenter__(self):
        return self.conn

    async def __aexit__(self, *exc):
        return False


class _ResetFails(_Pool):
    """A pool whose connection cannot be reset when it goes back: after a
    server restart asyncpg can find the protocol still mid-operation and
    raises InternalClientError from the release (it drops the connection)."""

    async def __aexit__(self, *exc):
        raise asyncpg.exceptions.InternalClientError("cannot switch to state 15; another operation (2)"
                                                     " is in progress")


class _Conn:
    def __init__(self, answer) -> None:
        self.answer = answer

    async def fetchval(self, sql, *args):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def test_a_connection_the_pool_cannot_reset_is_unavailable_not_a_crash():
    # the call failed (server gone mid-statement) and the release failed too:
    # the caller sees StoreUnavailable and retries, as for any lost connection
    lost = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    store = PostgresStore(_ResetFails(_Conn(lost)), P)
    with pytest.raises(StoreUnavailable):
        run(store.heartbeat("w"))
    with pytest.raises(StoreUnavailable):
        run(store.get_meta("crawl_id"))
    # the call completed (its answer is in hand) and only the release failed:
    # nothing is lost, the answer is kept
    store = PostgresStore(_ResetFails(_Conn("abc")), P)
    assert run(store.get_meta("crawl_id")) == "abc"


class _Lost:
    """A connection the server dropped in the middle of a batch: the statement
    fails, the rollback finds the connection closed, and the pool has already
    taken the connection back (its proxy refuses every call, `is_closed` too)."""

    def transaction(self):
        return self

    async def start(self):
        pass

    async def rollback(self):
        raise asyncpg.exceptions.InterfaceError("cannot call Transaction.rollback(): the underlying connection"
                                                " is closed")

    async def fetchval(self, sql, *args):
        raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")

    def is_closed(self):
        raise asyncpg.exceptions.InterfaceError("cannot call Connection.is_closed(): connection has been"
                                                " released back to the pool")


def test_a_batch_cut_off_by_a_server_restart_is_unavailable_and_retried():
    store = PostgresStore(_Pool(_Lost()), P)
    with pytest.raises(StoreUnavailable):
        run(store.apply(Batch(meta={"k": "v"}), batch_id="b1"))


def test_a_keys_remembered_partition_is_its_hash_before_and_after_the_memory_is_emptied(postgres, monkeypatch):
    """The fast path of `partition_of_key` (one region: the hash, remembered)
    equals its plain twin, `partition_of(key, P)`, however full its memory."""
    import courtly.shell.store.pg_region as pg_region

    monkeypatch.setattr(pg_region, "CACHE_MAX", 50)
    dsn = postgres.create_database()

    async def body():
        s = await _open(dsn)
        keys = [f"h{i}.example" for i in range(300)]
        got = [s.partition_of_key(k) for k in keys + keys[::-1]]
        size = len(s._part_cache)
        await s.close()
        return keys, got, size

    keys, got, size = run(body())
    assert got == [partition_of(k, P) for k in keys + keys[::-1]] and size <= 50
