"""A distributed worker's per-key memory is bounded like one machine's (issue 16, item 5).

A real Worker (its engine, tenancy and the single machine's KeyMemory sweep)
on a fake PostgreSQL store that keeps the `hosts` and `robots` rows of the
batches it is given: idle keys beyond `frontier.key_states_max` leave memory
at each cut, are written with the batch, and are read back (delay, robots.txt
copy) before a claim of their URLs is queued (runtime/keyreadback.py); a
partition released takes its keys' state with it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace

from courtly.config import Config
from courtly.core.lease import PartitionView
from courtly.core.robots import Phase, RobotsFetched, RobotsState
from courtly.ports import Batch, StoreUnavailableError
from courtly.runtime.worker import Worker
from courtly.shell.store.postgres import PostgresStore
from clock_support import ManualClock
from pg_support import pg_fixture
from worker_fakes import OneRegionStore

T0 = 1_700_000_000.0
KEYS_MAX = 3
CRAWL_DELAY_S = 20.0


class _Pg(OneRegionStore):
    """The shared store's host and robots rows, written by `apply`, read by key."""

    def __init__(self) -> None:
        self.hosts: dict[str, dict] = {}
        self.robots_rows: dict[str, dict] = {}
        self.to_claim: list[tuple] = []
        self.reads: list[tuple[str, list[str]]] = []
        self.down = False

    async def apply(self, batch: Batch, *, partition_epochs, batch_id) -> None:
        if self.down:
            raise StoreUnavailableError("away")
        self.hosts.update(batch.hosts)
        self.robots_rows.update(batch.robots)

    async def hosts_of(self, keys):
        self.reads.append(("hosts", list(keys)))
        return {k: self.hosts[k] for k in keys if k in self.hosts}

    async def robots_for(self, origins):
        self.reads.append(("robots", list(origins)))
        return {o: self.robots_rows[o] for o in origins if o in self.robots_rows}

    async def claim_new(self, epochs, limit):
        rows, self.to_claim = self.to_claim, []
        return rows


def _worker(keys_max: int = KEYS_MAX) -> tuple[Worker, _Pg, ManualClock]:
    cfg = Config()
    cfg = dataclasses.replace(cfg, frontier=dataclasses.replace(cfg.frontier, key_states_max=keys_max))
    pg, clock = _Pg(), ManualClock(T0)
    w = Worker(cfg, clock=clock, resolver=None, fetcher=None, warc=SimpleNamespace(flush=lambda: None),
               store=pg, extractor=None, worker_id="w1")
    for p in range(pg.partitions):   # every partition held and adopted
        w.own.views[p] = PartitionView.granted(p, 1, T0, w.own.terms)
        w._claimed[p] = set()
    return w, pg, clock


def _visit(w: Worker, key: str, t: float) -> None:
    """One request to `key` at `t` (robots.txt with a Crawl-delay first), as the engine records it."""
    e, origin = w.engine, f"https://{key}"
    e.robots.fetch_started(origin, t)
    e.robots.fetch_finished(origin, t, RobotsFetched(200, b"User-agent: *\nCrawl-delay: 20\nDisallow: /x\n"))
    e.politeness.set_crawl_delay(key, CRAWL_DELAY_S, t)
    e.politeness.started(key, t)
    e.politeness.finished(key, t + 0.5, response_s=0.5, status=200)
    e.batch.hosts[key] = e.politeness.key(key).snapshot()


def _claim(w: Worker, pg: _Pg, key: str) -> None:
    pg.to_claim = [(f"https://{key}/page", key, 4, 1, 0, None, 0, False)]
    asyncio.run(w._claim())


def test_a_worker_touching_many_keys_keeps_at_most_key_states_max_in_memory():
    w, pg, clock = _worker()
    pol, robots = w.engine.politeness, w.engine.robots
    for i in range(40):
        _visit(w, f"k{i}.example", clock.t)
        clock.t += CRAWL_DELAY_S + 1    # every key visited so far is idle now
        assert asyncio.run(w.flush())
        assert pol.key_count <= KEYS_MAX and len(robots) <= KEYS_MAX
        assert w.engine.key_memory.unwritten == 0   # written: no copy of an evicted state stays behind
    assert w.engine.key_memory.evicted >= 2 * (40 - KEYS_MAX)
    # every evicted state is in the store: all hosts (written at each visit too), robots.txt copies once evicted
    assert len(pg.hosts) == 40 and set(pg.robots_rows) | {o for o in (f"https://k{i}.example" for i in range(40))
                                                         if robots.phase(o) is not Phase.ABSENT} == \
        {f"https://k{i}.example" for i in range(40)}
    assert sum(len(ks) for ks in w.parts._keys_of.values()) <= KEYS_MAX


def test_a_returning_key_gets_its_delay_and_robots_copy_back_and_is_not_fetched_sooner():
    w, pg, clock = _worker()
    pol, robots = w.engine.politeness, w.engine.robots
    _visit(w, "back.example", clock.t)
    saved_next = pol.key("back.example").next_fetch_at
    assert saved_next >= T0 + CRAWL_DELAY_S
    for i in range(10):   # enough other keys to push it out
        clock.t += CRAWL_DELAY_S + 1
        _visit(w, f"k{i}.example", clock.t)
        assert asyncio.run(w.flush())
    assert not pol.holds("back.example") and robots.phase("https://back.example") is Phase.ABSENT
    _claim(w, pg, "back.example")
    assert ("hosts", ["back.example"]) in pg.reads
    st = pol.key("back.example")
    assert st.crawl_delay_s == CRAWL_DELAY_S and st.delay_s == CRAWL_DELAY_S and st.fetches == 1
    assert pol.ready_at("back.example", clock.t) >= saved_next
    assert w.engine.frontier.has_key("back.example")
    # its robots.txt copy is back too: no new robots.txt request
    assert robots.lookup("https://back.example", clock.t).state is RobotsState.READY
    # the next request after it waits the learned delay, not the default
    pol.started("back.example", clock.t)
    pol.finished("back.example", clock.t + 0.5, response_s=0.5, status=200)
    assert pol.ready_at("back.example", clock.t + 1) >= clock.t + 0.5 + CRAWL_DELAY_S


def test_a_key_with_urls_queued_keeps_its_robots_copy_in_memory_past_the_bound():
    w, pg, clock = _worker()
    robots = w.engine.robots
    _visit(w, "queued.example", clock.t)
    clock.t += CRAWL_DELAY_S + 1
    _claim(w, pg, "queued.example")     # a URL waits in the frontier: robots.txt is asked before it is fetched
    for i in range(10):
        _visit(w, f"k{i}.example", clock.t)
        clock.t += CRAWL_DELAY_S + 1
        assert asyncio.run(w.flush())
    assert robots.phase("https://queued.example") is Phase.FRESH and w.engine.politeness.holds("queued.example")
    assert len(robots) <= KEYS_MAX + 1


def test_a_key_evicted_into_a_batch_the_store_has_not_taken_is_read_back_from_that_batch():
    w, pg, clock = _worker()
    pol = w.engine.politeness
    _visit(w, "back.example", clock.t)
    assert asyncio.run(w.flush())
    pg.hosts["back.example"] = {**pg.hosts["back.example"], "delay_s": 1.0, "crawl_delay_s": None}   # older
    pg.down = True
    for i in range(10):
        clock.t += CRAWL_DELAY_S + 1
        _visit(w, f"k{i}.example", clock.t)
        assert not asyncio.run(w.flush())
    assert not pol.holds("back.example")
    _claim(w, pg, "back.example")
    assert pol.key("back.example").crawl_delay_s == CRAWL_DELAY_S
    assert ("hosts", ["back.example"]) not in pg.reads    # the newest copy was here


def test_a_worker_under_the_bound_reads_nothing_back():
    w, pg, clock = _worker(keys_max=100)
    for i in range(5):
        _visit(w, f"k{i}.example", clock.t)
        clock.t += CRAWL_DELAY_S + 1
        assert asyncio.run(w.flush())
    _claim(w, pg, "new.example")
    assert pg.reads == [] and w.engine.key_memory.evicted == 0


def _two_keys_in_one_partition(w: Worker) -> tuple[str, str, list[str]]:
    keys = [f"k{i}.example" for i in range(40)]
    p = w.parts.partition(keys[0])
    same = [k for k in keys[1:] if w.parts.partition(k) == p]
    return keys[0], same[0], keys


def test_a_partition_released_takes_its_idle_keys_state_with_it():
    w, pg, clock = _worker(keys_max=100)
    queued, in_flight, keys = _two_keys_in_one_partition(w)
    for k in keys:
        _visit(w, k, clock.t)
    clock.t += CRAWL_DELAY_S + 1
    _claim(w, pg, queued)                               # a URL queued: its frontier entry goes with the partition
    w.engine.politeness.started(in_flight, clock.t)     # a request on the wire: kept until it ends
    p = w.parts.partition(queued)
    w.stop_fetching(p)
    pol = w.engine.politeness
    assert {k for k in keys if pol.holds(k)} == {k for k in keys if w.parts.partition(k) != p} | {in_flight}
    assert not w.engine.frontier.has_key(queued)


postgres = pg_fixture()


def test_postgres_reads_saved_hosts_and_robots_by_key_and_bounds_the_robots_read(postgres):
    async def body():
        store = await PostgresStore.open(postgres.create_database(), partitions=8)
        try:
            b = Batch()
            b.hosts.update({"a.example": {"delay_s": 20.0}, "b.example": {"delay_s": 2.0}})
            b.robots.update({"https://a.example": {"v": 1}, "https://b.example": {"v": 2}})
            await store.register("w1")
            await store.apply(b, partition_epochs=await store.acquire_many(range(8), "w1", 60.0))
            return (await store.hosts_of(["a.example", "nope.example"]),
                    await store.robots_for(["https://b.example", "https://nope.example"]),
                    len(await store.robots_first(1)), len(await store.robots_first(10)))
        finally:
            await store.close()
    hosts, robots, one, every = asyncio.run(body())
    assert hosts == {"a.example": {"delay_s": 20.0}}
    assert robots == {"https://b.example": {"v": 2}}
    assert (one, every) == (1, 2)
