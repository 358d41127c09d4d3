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


class _Stub:
    """Just enough of a Crawler for `Results`' back-pressure."""

    def __init__(self, backlog_max: int) -> None:
        self.cfg = type("Cfg", (), {"extract": type("Ex", (), {"backlog_max": backlog_max})()})()


def test_a_freed_slot_wakes_one_waiting_fetch_task_in_arrival_order():
    from courtly.runtime.results import Results

    async def scenario() -> list[str]:
        r = Results(_Stub(backlog_max=2))  # type: ignore[arg-type]
        r.extracting.update({"u1", "u2"})
        woke: list[str] = []

        async def waiter(name: str) -> None:
            while len(r.extracting) >= r.backlog_max:
                await r._wait_for_room()
            r.extracting.add(name)
            woke.append(name)

        tasks = [asyncio.create_task(waiter(f"w{i}")) for i in range(4)]
        await asyncio.sleep(0)
        assert woke == [] and len(r._waiting) == 4
        r.extracting.discard("u1")
        r._wake_one()
        assert r._woken == 1 and not any(f.done() for f in r._waiting)
        await asyncio.sleep(0)
        assert woke == ["w0"] and len(r._waiting) == 3   # one slot, one task woken
        # a woken task cancelled before it ran passes its turn to the next
        r.extracting.discard("u2")
        r._wake_one()
        tasks[1].cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert woke == ["w0", "w2"]
        assert len(r.extracting) == 2 and r._woken == 0
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return woke

    asyncio.run(scenario())
