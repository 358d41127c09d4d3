"""A stop (Ctrl-C, SIGTERM: `Crawler.stop`) sends no new request.

A real Crawler with the fakes of tests/test_overflow.py. Requests already on
the wire finish; a URL whose turn had not come, or whose robots.txt redirect
chain was half followed, stays queued for the next run. A stop does not wait
out a politeness delay first: with a long delay (or a 429 back-off) the
crawl used to sleep it out and then send the request anyway.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from test_overflow import T0, _config, _crawler


@pytest.mark.parametrize("hop", ["https://h.example/robots-hop", "https://o.example/robots-hop"])
def test_a_stop_during_a_robots_redirect_chain_sends_nothing_more(tmp_path, hop: str) -> None:
    web = {"https://h.example/": []}
    cfg = _config(memory_max=100, key_memory_max=10).replace("politeness", delay_s=30.0)
    c, fetcher = _crawler(tmp_path, web, cfg)
    asked: list[str] = []

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        asked.append(url)
        status, headers_out = 404, {"content-type": "text/plain"}
        if url == "https://h.example/robots.txt":
            c.stop()                                   # Ctrl-C while this request is on the wire
            status, headers_out["location"] = 301, hop
        return SimpleNamespace(url=url, ip=ip, status=status, elapsed_s=0.0001, headers=headers_out,
                               body=b"", content=b"", truncated=None, error=None, request_head=b"",
                               response_head=b"", started_at=T0)

    fetcher.fetch = fetch
    c.add_seeds(["https://h.example/"])

    async def run() -> None:
        await asyncio.wait_for(c.run(), 20.0)   # not the 30 s delay of h.example (20: room for a loaded machine)

    asyncio.run(run())
    assert asked == ["https://h.example/robots.txt"]     # the request on the wire, nothing after
    state = c.store._db.execute("SELECT state FROM urls WHERE url = 'https://h.example/'").fetchone()
    assert state == ("queued",)                          # the next run takes it up
    c.store.close()


def test_abort_abandons_the_requests_in_flight_and_keeps_their_urls_queued(tmp_path) -> None:
    """A second Ctrl-C: a request that hangs (a robots.txt that never answers,
    a server dripping bytes until fetch.total_s) is not waited for."""
    web = {"https://h.example/": []}
    c, fetcher = _crawler(tmp_path, web, _config(memory_max=100, key_memory_max=10))
    on_wire = asyncio.Event()

    async def fetch(url: str, *, ip: str, headers: dict):
        on_wire.set()
        await asyncio.sleep(3600)

    fetcher.fetch = fetch
    c.add_seeds(["https://h.example/"])

    async def run() -> None:
        crawl = asyncio.create_task(c.run())
        await on_wire.wait()
        c.stop()                                   # the first Ctrl-C waits for the request...
        await asyncio.sleep(0.1)
        assert not crawl.done()
        c.abort()                                  # ... the second does not
        await asyncio.wait_for(crawl, 60.0)   # bounded; the request on the wire sleeps an hour

    asyncio.run(run())
    state = c.store._db.execute("SELECT state FROM urls WHERE url = 'https://h.example/'").fetchone()
    assert state == ("queued",)
    c.store.close()
