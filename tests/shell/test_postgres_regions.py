"""PostgresStore with home regions (shell/store/pg_region.py) against a
throwaway PostgreSQL: each region owns a contiguous partition range, a key's
URLs land in its home region's range, a worker sees only its region's
workers and queue, and a key moves home only while no worker holds it."""

from __future__ import annotations

import asyncpg
import pytest

from courtly.core.region import Probe, RegionLayout
from courtly.shell.store.postgres import PostgresStore, StoreError
from pg_store_support import _new, run

P = 8
REGIONS = ("us", "eu")
LAYOUT = RegionLayout(REGIONS, P)


async def _crawl(dsn: str, region: str = "") -> PostgresStore:
    s = await PostgresStore.open(dsn, partitions=P, region=region)
    if s.layout is None:
        await s.create_regions(REGIONS, {"us": "/data/us", "eu": "/data/eu"})
    return s


async def _rows(dsn: str, sql: str, *args) -> list:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


def test_each_region_owns_a_contiguous_range_and_its_storage_is_recorded(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _crawl(dsn, "eu")
        assert s.region_range() == range(4, 8) and s.storage == {"us": "/data/us", "eu": "/data/eu"}
        await s.create_regions(REGIONS, {})          # the same list again: nothing changes
        with pytest.raises(StoreError, match="regions us,eu, not eu,us"):
            await s.create_regions(("eu", "us"), {})
        await s.close()
        other = await PostgresStore.open(dsn, region="us")   # a later process reads the layout
        assert other.region_range() == range(0, 4) and other.layout == LAYOUT
        await other.close()

    run(body())


def test_new_urls_land_in_their_home_regions_range_and_every_key_gets_a_home_row(postgres):
    dsn = postgres.create_database()

    async def body():
        s = await _crawl(dsn)
        await s.set_homes({"far.test": "eu"})
        await s.insert_urls([_new("http://a.test/", "a.test"), _new("http://far.test/", "far.test"),
                             _new("http://far.test/x", "far.test")])
        await s.close()

    run(body())
    rows = {r["url"]: r["partition"] for r in run(_rows(dsn, "SELECT url, partition FROM urls"))}
    assert rows["http://a.test/"] == LAYOUT.partition_of("a.test", "us") and rows["http://a.test/"] in range(4)
    assert rows["http://far.test/"] == rows["http://far.test/x"] == LAYOUT.partition_of("far.test", "eu")
    homes = {r[0]: (r[1], r[2]) for r in run(_rows(dsn, "SELECT key, region, reason FROM homes"))}
    assert homes == {"a.test": ("us", "default"), "far.test": ("eu", "override")}
    inbox = {r["url"]: r["partition"] for r in run(_rows(dsn, "SELECT url, partition FROM inbox"))}
    assert inbox == rows


def test_a_crawl_of_one_region_keeps_the_plain_partition_of_a_key(postgres):
    from courtly.core.urls import partition_of

    dsn = postgres.create_database()

    async def body():
        s = await PostgresStore.open(dsn, partitions=P)
        await s.insert_urls([_new(f"http://k{i}.test/", f"k{i}.test") for i in range(6)])
        assert s.layout is None and s.region_range() is None
        await s.close()

    run(body())
    for url, p in run(_rows(dsn, "SELECT url, partition FROM urls")):
        assert p == partition_of(url.split("/")[2], P)
    assert run(_rows(dsn, "SELECT count(*) FROM homes"))[0][0] == 0


def test_workers_are_seen_per_region_and_the_queue_as_a_whole(postgres):
    dsn = postgres.create_database()

    async def body():
        us, eu = await _crawl(dsn, "us"), await _crawl(dsn, "eu")
        await us.register("u1")
        await eu.register("e1")
        assert await us.live_workers(60) == ["u1"] and await eu.live_workers(60) == ["e1"]
        await us.insert_urls([_new("http://a.test/", "a.test")])     # homed in us
        assert await us.queue_state() == (True, True)
        assert await eu.queue_state() == (True, True)   # eu is not done: us may still forward links to it
        p = LAYOUT.partition_of("a.test", "us")
        got = await us.claim_new(await us.acquire_many([p], "u1", 60), 10)
        assert [r[0] for r in got] == ["http://a.test/"] and len(got[0]) == 8
        assert us.partition_of_key("a.test") == p
        assert await eu.acquire_many([p, 5], "e1", 60) == {5: 1}   # never a partition of another region
        await us.close()
        await eu.close()

    run(body())


def test_a_key_moves_home_with_its_queue_only_while_no_worker_holds_it(postgres):
    dsn = postgres.create_database()
    old, new = LAYOUT.partition_of("b.test", "us"), LAYOUT.partition_of("b.test", "eu")

    async def body():
        s = await _crawl(dsn)
        await s.insert_urls([_new("http://b.test/", "b.test"), _new("http://b.test/2", "b.test")])
        held = await s.acquire_many([old], "u1", 60)
        assert await s.rehome("b.test", "eu", "geo_block", ("us",)) is False     # its owner fetches it
        await s.release_many("u1", held)
        assert await s.rehome("b.test", "eu", "geo_block", ("us",)) is True
        assert s.partition_of_key("b.test") == new
        await s.insert_urls([_new("http://b.test/3", "b.test")])   # found later: goes to the new home
        other = await PostgresStore.open(dsn)       # a process of no region: the default home until it reads
        assert other.partition_of_key("b.test") == old
        await other.ensure_homes([("b.test", "http://b.test/")])
        assert other.partition_of_key("b.test") == new
        await other.close()
        eu = await _crawl(dsn, "eu")
        got = await eu.claim_new(await eu.acquire_many([new], "e1", 60), 10)
        assert sorted(r[0] for r in got) == ["http://b.test/", "http://b.test/2", "http://b.test/3"]
        assert eu._part_cache["b.test"] == new                                          # learnt from the claim
        await s.close()
        await eu.close()

    run(body())
    assert {r[0] for r in run(_rows(dsn, "SELECT partition FROM urls"))} == {new}
    assert run(_rows(dsn, "SELECT region, reason, blocked FROM homes"))[0][:] == ("eu", "geo_block", "us")


def test_one_probe_per_key_is_in_flight_whatever_the_region(postgres):
    dsn = postgres.create_database()

    async def body():
        us, eu = await _crawl(dsn, "us"), await _crawl(dsn, "eu")
        await us.insert_urls([_new("http://c.test/", "c.test")])
        assert await us.probe_slot("c.test", 30.0) is None
        wait = await eu.probe_slot("c.test", 30.0)
        assert wait is not None and 25.0 < wait <= 30.0           # held for the request's longest time
        await us.probe_done("c.test", Probe("us", 0.01, 200, "d"), gap_s=5.0)
        wait = await eu.probe_slot("c.test", 30.0)
        assert wait is not None and wait <= 5.0                   # then free one delay after the answer
        assert await us.probes_of(["c.test"]) == {"c.test": [Probe("us", 0.01, 200, "d")]}
        assert await eu.probe_targets("eu", 3, 10) == {"c.test": "http://c.test/"}
        assert await us.probe_targets("us", 1, 10) == {}
        await us.close()
        await eu.close()

    run(body())
