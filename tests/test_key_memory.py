"""Bounded memory per key in the running crawl (runtime/keymemory.py,
runtime/keylocks.py; issue 16, item 5): idle keys' politeness, robots.txt and
ban state leave memory beyond `frontier.key_states_max` at a commit and are
read back from crawl.db when the key returns, so a returning key keeps its
delay, back-off and robots.txt copy. A real Crawler and SqliteStore with the
fakes of tests/test_overflow.py (no network)."""

from __future__ import annotations

import asyncio
import json

import pytest
from test_overflow import _config, _crawler, fake_result

from courtly.core.ban import BanWatch
from courtly.core.politeness import Politeness, PolitenessConfig
from courtly.core.robots import RobotsBook, RobotsFetched, RobotsState
from courtly.ports import Batch
from courtly.runtime.keylocks import KeyLocks
from courtly.runtime.keymemory import KeyMemory
from courtly.shell.store.sqlite import SqliteStore

T0 = 1_700_000_000.0
HOSTS = 24


class CountingStore(SqliteStore):
    """A SqliteStore that counts the single-key reads."""

    reads = 0

    def host(self, key):
        self.reads += 1
        return super().host(key)

    def robots_of(self, origin):
        self.reads += 1
        return super().robots_of(origin)


def parts(store, keys_max: int):
    km = KeyMemory(keys_max, store)
    pol = Politeness(PolitenessConfig(), load=km.saved_host)
    robots = RobotsBook(load=km.saved_robots)
    return km, pol, robots, BanWatch()


def test_evicted_state_is_committed_and_read_back_equal_from_sqlite(tmp_path):
    store = CountingStore(tmp_path / "crawl.db")
    km, pol, robots, bans = parts(store, keys_max=2)
    for i in range(6):
        key, origin = f"k{i}.example", f"https://k{i}.example"
        pol.started(key, T0)
        pol.finished(key, T0 + 1, response_s=1.0 + i, status=200)
        robots.fetch_started(origin, T0)
        robots.fetch_finished(origin, T0 + 1, RobotsFetched(200, b"User-agent: *\nDisallow: /p%d\n" % i))
    before = {f"k{i}.example": pol.key(f"k{i}.example").snapshot() for i in range(6)}
    robots_before = {f"https://k{i}.example": robots.snapshot(f"https://k{i}.example") for i in range(6)}
    pol.key("k0.example")   # k0 is the oldest: evicted first all the same (age order is first seen)
    assert store.reads == 0   # nothing evicted yet: a miss asks nothing of the store
    batch = Batch()
    assert km.sweep(T0 + 100, batch, pol, robots, bans, busy=lambda k: k == "k1.example") == 8
    store.apply(batch)
    km.written()   # the committer says the batch is in the store (runtime/group_commit)
    assert pol.key_count == 2 and len(robots) == 2 and "k1.example" in pol.known_keys()
    for key, snap in before.items():
        assert pol.key(key).snapshot() == snap
    for origin, snap in robots_before.items():
        view = robots.lookup(origin, T0 + 3600)
        assert view.state is RobotsState.READY and robots.snapshot(origin) == snap
    assert km.read_back == 8 and store.reads == 8
    store.close()


def test_a_crawl_through_more_keys_than_the_bound_keeps_it_and_returning_keys_keep_their_state(tmp_path):
    web = {f"https://h{i}.example/": [] for i in range(HOSTS)}
    web.update({f"https://h{i}.example/two": [] for i in range(HOSTS)})
    cfg = _config(memory_max=1000, key_memory_max=100).replace("frontier", key_states_max=4)
    c, fetcher = _crawler(tmp_path, web, cfg.replace("politeness", delay_s=0.05))
    asked: list[tuple[str, float]] = []

    async def fetch(url: str, *, ip: str, headers: dict):
        asked.append((url, c.clock.now()))
        await asyncio.sleep(0)
        if url.endswith("/robots.txt"):
            return fake_result(url, ip, 200, b"User-agent: *\nCrawl-delay: 0.1\nDisallow: /private\n")
        return fake_result(url, ip, 200, b"<html>%s</html>" % url.encode())

    fetcher.fetch = fetch
    c.add_seeds([f"https://h{i}.example/" for i in range(HOSTS)])
    asyncio.run(c.run())
    c.clock.start -= 1.0   # a second later (test_overflow's clock): every key is past its delay
    c.commit()
    assert c.politeness.key_count <= 4 and len(c.robots) <= 4 and c.key_memory.evicted >= 2 * (HOSTS - 4)
    assert c.requests.waiting() == (0, 0)
    saved = {f"h{i}.example": c.store.host(f"h{i}.example") for i in range(HOSTS)}
    assert all(s is not None and s["delay_s"] == pytest.approx(0.1) for s in saved.values())

    c.add_seeds([f"https://h{i}.example/two" for i in range(HOSTS)])   # every key returns
    asyncio.run(c.run())
    pages = [u for u, _ in asked if not u.endswith("/robots.txt")]
    robots = [u for u, _ in asked if u.endswith("/robots.txt")]
    assert sorted(pages) == sorted(web)                       # each page once
    assert sorted(robots) == sorted({f"https://h{i}.example/robots.txt" for i in range(HOSTS)})   # once per origin
    assert c.key_memory.read_back >= HOSTS - 4
    by_key: dict[str, list[float]] = {}
    for url, at in asked:
        by_key.setdefault(url.split("/")[2], []).append(at)
    for times in by_key.values():   # the Crawl-delay read back with the key still applies
        assert all(b - a >= 0.1 for a, b in zip(times, times[1:]))
    c.store.close()


def test_key_locks_hold_only_the_keys_in_use():
    locks = KeyLocks()
    order: list[str] = []

    async def user(name: str, key: str, gate: asyncio.Event) -> None:
        async with locks.hold(key):
            order.append(f"{name} in")
            await gate.wait()
            order.append(f"{name} out")

    async def go() -> None:
        gate = asyncio.Event()
        tasks = [asyncio.create_task(user(n, "a.example", gate)) for n in ("first", "second")]
        other = asyncio.create_task(user("other", "b.example", gate))
        for _ in range(3):
            await asyncio.sleep(0)
        assert "a.example" in locks and "b.example" in locks and len(locks) == 2
        assert order == ["first in", "other in"]   # the second waits for the first
        gate.set()
        await asyncio.gather(*tasks, other)

    asyncio.run(go())
    assert order.index("first out") < order.index("second in")
    assert len(locks) == 0


def test_the_status_observer_remembers_at_most_key_states_max_keys(tmp_path):
    pytest.importorskip("prometheus_client")
    from courtly.runtime.observe import CrawlObserver

    cfg = _config(memory_max=100, key_memory_max=10).replace("frontier", key_states_max=3)
    c, _ = _crawler(tmp_path, {}, cfg)
    obs = CrawlObserver(c)
    for i in range(10):
        obs.on_request(f"https://k{i}.example/", f"192.0.2.{i}")
    obs.on_request("https://k7.example/again", "192.0.2.7")
    assert list(obs._key_origins) == ["k8.example", "k9.example", "k7.example"]
    assert sorted(obs._key_ip) == ["k7.example", "k8.example", "k9.example"]
    obs.close()
    c.store.close()


def test_key_states_max_must_be_positive():
    from courtly.config import Config
    from courtly.config_checks import ConfigError

    with pytest.raises(ConfigError):
        Config().replace("frontier", key_states_max=0)
    assert json.loads(json.dumps(Config().frontier.key_states_max)) == 100_000


def test_a_resume_holds_at_most_the_bound_of_robots_copies_and_reads_the_rest_back(tmp_path):
    store = SqliteStore(tmp_path / "crawl.db")
    book = RobotsBook()
    batch = Batch()
    for i in range(10):
        origin = f"https://r{i}.example"
        book.fetch_started(origin, T0)
        book.fetch_finished(origin, T0 + 1, RobotsFetched(200, b"User-agent: *\nDisallow: /r%d\n" % i))
        batch.robots[origin] = book.snapshot(origin)
    store.apply(batch)
    km = KeyMemory(4, store)
    resumed = RobotsBook(load=km.saved_robots)
    assert km.load_robots(resumed) == 4 and len(resumed) == 4
    for i in range(10):   # every copy, in memory or not, is in force until it expires: none is fetched again
        view = resumed.lookup(f"https://r{i}.example", T0 + 60)
        assert view.state is RobotsState.READY and view.skip_reason("courtly", f"/r{i}") is not None
    assert km.read_back == 6
    store.close()


def test_before_any_eviction_the_store_is_never_asked_even_one_without_the_reads():
    km = KeyMemory(10, object())   # a distributed worker's store seat has no single-key reads
    pol = Politeness(PolitenessConfig(), load=km.saved_host)
    robots = RobotsBook(load=km.saved_robots)
    assert pol.ready_at("new.example", T0) == 0.0
    assert robots.lookup("https://new.example", T0).state is RobotsState.NEED_FETCH
    assert km.read_back == 0


def test_a_state_evicted_into_a_batch_the_store_refused_is_read_back_from_memory_not_stale_from_the_store(tmp_path):
    store = CountingStore(tmp_path / "crawl.db")
    km, pol, robots, bans = parts(store, keys_max=1)
    for i in range(3):
        pol.started(f"k{i}.example", T0)
        pol.finished(f"k{i}.example", T0 + 1, response_s=2.0 + i, status=200)
    first = Batch()
    km.sweep(T0 + 100, first, pol, robots, bans, busy=lambda k: False)
    store.apply(first)
    km.written()
    older = pol.key("k0.example").snapshot()   # read back from the store ...
    pol.started("k0.example", T0 + 200)        # ... and changed: a slower answer, a later turn
    pol.finished("k0.example", T0 + 209, response_s=9.0, status=200)
    newer = pol.key("k0.example").snapshot()
    assert newer != older
    refused = Batch()                           # the commit of this batch fails: the store is down
    km.sweep(T0 + 300, refused, pol, robots, bans, busy=lambda k: k == "k2.example")
    assert "k0.example" in refused.hosts and "k0.example" not in pol.known_keys()
    reads = store.reads
    assert pol.key("k0.example").snapshot() == newer and store.reads == reads
