"""Back-pressure: fetching cannot run ahead of link extraction.

A real Crawler with the fakes of tests/test_overflow.py and an extractor that
is slow on purpose: the number of fetched pages waiting for extraction never
exceeds `[extract] backlog_max`, and every page is still fetched once.
"""

from __future__ import annotations

import asyncio

import pytest
from test_overflow import HOSTS, _config, _crawler, _web

from courtly.core.links import Link, PageLinks


class _SlowExtractor:
    def __init__(self, web: dict[str, list[str]]) -> None:
        self.web = web
        self.waiting = 0
        self.waiting_max = 0

    async def submit(self, content: bytes, url: str, ctype: str, xrt: str, error_print: bool = True):
        self.waiting += 1
        self.waiting_max = max(self.waiting_max, self.waiting)
        try:
            await asyncio.sleep(0.01)
        finally:
            self.waiting -= 1
        return PageLinks(links=tuple(Link(u, "a", False) for u in self.web.get(url, ())))


@pytest.mark.parametrize("backlog_max", [1, 3])
def test_fetched_pages_waiting_for_extraction_stay_within_the_backlog(tmp_path, backlog_max):
    web = _web(seed=11)
    cfg = _config(memory_max=1000, key_memory_max=100).replace("extract", backlog_max=backlog_max)
    c, fetcher = _crawler(tmp_path, web, cfg)
    slow = _SlowExtractor(web)
    c.extractor = slow
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    assert sorted(fetcher.pages) == sorted(web)
    assert slow.waiting_max == backlog_max      # reached, never exceeded
    c.store.close()
