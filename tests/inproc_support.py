"""A real Crawler and SqliteStore driven in this process, without a network:
a manual clock (tests/clock_support.py), a fetcher that answers 200 after
0.1 s of that clock and notes when each request left and was answered, and
no WARC writer. Requests go through `Crawler.request`, so the key's and the
IP's politeness limits apply as in a crawl; the gaps are read from the
fetcher's notes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from clock_support import ManualClock

from courtly.config import Config
from courtly.core.sitekey import politeness_key
from courtly.core.urls import split_origin
from courtly.runtime.crawler import Crawler
from courtly.shell.store.sqlite import SqliteStore

T0 = 1_700_000_000.0
RESPONSE_S = 0.1


class NotingFetcher:
    """Answers 200 after RESPONSE_S of the manual clock; notes (url, sent at, answered at)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.sent: list[tuple[str, float, float]] = []

    async def fetch(self, url: str, *, ip: str, headers: dict):
        start = self.clock.t
        self.clock.t += RESPONSE_S
        self.sent.append((url, start, self.clock.t))
        return SimpleNamespace(url=url, ip=ip, status=200, elapsed_s=RESPONSE_S, headers={}, body=b"",
                               content=b"", truncated=None, error=None, request_head=b"", response_head=b"",
                               started_at=start)


class NoWarc:
    def flush(self) -> None:
        pass


def crawler(out, cfg: Config | None = None, *, extractor=None) -> Crawler:
    """A loaded Crawler on `out`/crawl.db at T0."""
    clock = ManualClock(T0)
    c = Crawler(cfg or Config(), clock=clock, resolver=None, fetcher=NotingFetcher(clock), warc=NoWarc(),
                store=SqliteStore(out / "crawl.db"), extractor=extractor)
    c.load()
    return c


def fetch(c: Crawler, *urls: str) -> None:
    """Request each URL in turn under the crawl's limits (one IP per host)."""
    async def go():
        for url in urls:
            host = split_origin(url).host
            key = politeness_key(host, c.cfg.crawl.politeness_key)
            await c.requests.request(url, key, f"10.0.0.{1 + sum(map(ord, host)) % 250}", None, {})

    asyncio.run(go())


def gaps(c: Crawler, fragment: str) -> list[float]:
    """From each answer to the next request among the URLs holding `fragment`
    (the delay runs from completion)."""
    times = [(sent, done) for u, sent, done in c.fetcher.sent if fragment in u]
    return [round(b[0] - a[1], 6) for a, b in zip(times, times[1:])]


def extract_pages(out, pages: list[tuple[str, dict, bytes]]) -> Crawler:
    """Hand each (url, response headers, body) to the crawler's result path
    with a real extraction pool (test faults on: `courtly-fault:exit` in a
    body makes the worker exit), as if fetched with status 200; then commit."""
    from courtly.core.sitekey import politeness_key as key_of
    from courtly.core.types import UrlItem
    from courtly.shell.extract import ExtractPool

    async def go():
        async with ExtractPool(1, task_s_max=5.0, _test_faults=True) as pool:
            c = crawler(out, extractor=pool)
            for url, headers, body in pages:
                c.results.extracting.add(url)
                item = UrlItem(url=url, key=key_of(split_origin(url).host), band=1, depth=0)
                await c.results.extract(item, SimpleNamespace(status=200, headers=headers, content=body))
            c.commit()
            return c

    return asyncio.run(go())
