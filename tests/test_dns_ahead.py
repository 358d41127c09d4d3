"""DNS ahead and stale (issue 17): a host is resolved when its key enters the
frontier, and a host whose resolver fails intermittently is still crawled from
its last good answer.

A real Crawler and SqliteStore with the fakes of tests/test_overflow.py; the
second test uses the real SafeResolver with an injected flaky lookup.
"""

from __future__ import annotations

import asyncio

from test_overflow import _Clock, _config, _crawler, _Extractor, _Fetcher, _Warc

from courtly.core.netpolicy import NetPolicy
from courtly.core.types import Reason
from courtly.runtime.crawler import Crawler
from courtly.shell.resolver import ResolveFailed, SafeResolver
from courtly.shell.store.sqlite import SqliteStore

HOSTS = ("a.example", "b.example", "c.example")


class _CountingResolver:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def resolve(self, host: str) -> list[str]:
        self.calls.append(host)
        await asyncio.sleep(0)
        return ["127.0.0.1"]


def test_hosts_are_resolved_when_their_key_enters_the_frontier_before_any_request(tmp_path):
    c, fetcher = _crawler(tmp_path, {}, _config(memory_max=100, key_memory_max=10))
    resolver = c.resolver = _CountingResolver()
    c.dns_ahead.resolver = resolver

    async def go() -> None:
        c.add_seeds([f"https://{h}/" for h in HOSTS] + ["https://a.example/other"])
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(go())
    assert sorted(resolver.calls) == sorted(HOSTS)      # one per new key, none for a known key
    assert fetcher.pages == []                           # the crawl has not started
    c.store.close()


def test_a_host_whose_resolver_fails_every_other_lookup_is_crawled_from_the_last_good_answer(tmp_path):
    web = {"https://a.example/": [f"https://a.example/p{i}" for i in range(12)],
           **{f"https://a.example/p{i}": [] for i in range(12)}}
    lookups = []

    async def flaky(host: str):
        lookups.append(host)
        if len(lookups) % 2 == 0:
            raise ResolveFailed(Reason.DNS, f"{host}: SERVFAIL")
        return [("127.0.0.1", 0.0)]

    # every answer expires at once (TTL 0, no negative caching): each URL's turn is a lookup
    resolver = SafeResolver(NetPolicy.allowing(["127.0.0.0/8"]), lookup=flaky, ttl_s_min=0,
                            negative_ttl_s=0, stale_s_max=3600)
    ref: list = []
    fetcher = _Fetcher(web, ref)
    c = Crawler(_config(memory_max=100, key_memory_max=10), clock=_Clock(), resolver=resolver, fetcher=fetcher,
                warc=_Warc(), store=SqliteStore(tmp_path / "crawl.db"), extractor=_Extractor(web))
    ref.append(c)
    c.load()
    c.add_seeds(["https://a.example/"])
    asyncio.run(asyncio.wait_for(c.run(), 30.0))
    assert sorted(fetcher.pages) == sorted(web)
    assert c.store._db.execute("SELECT count(*) FROM urls WHERE reason IS NOT NULL").fetchone()[0] == 0
    s = resolver.stats
    assert s.failures >= 5 and s.stale == s.failures       # it did fail, and every failure was served
    c.store.close()
