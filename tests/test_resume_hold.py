"""A resume holds each key for its own delay, never every key for the longest.

Issue 23 item 3: the hold after a restart took the longest delay of any key
(a 30 s Crawl-delay, a back-off) and applied it to every key and every IP,
even after a clean Ctrl-C; three short resumes in a row fetched nothing.
Now a clean stop (recorded by the final commit) holds only the IP rate
window, and a crash or an abort holds each key for its own delay.

A real Crawler and SqliteStore with the fakes of tests/test_overflow.py; the
holds are read from the politeness state, on the clock the crawler reads.
"""

from __future__ import annotations

import asyncio

from clock_support import ManualClock
from test_overflow import _config, _crawler, _Extractor, _Resolver, _Warc, fake_result

from courtly.runtime.crawler import Crawler
from courtly.runtime.resume import CLEAN_STOP_META
from courtly.shell.store.sqlite import SqliteStore

SLOW_RESPONSE_S = 5.0       # x response_factor 10, smoothed: a delay of several seconds


def _cfg():
    # the last answer alone sets the response time: one slow page makes a long delay
    return _config(memory_max=100, key_memory_max=10).replace("politeness", response_window=1)
WEB = {
    "https://slow.example/": ["https://a.example/"],
    "https://a.example/": ["https://a.example/p1", "https://a.example/p2", "https://slow.example/p1"],
    "https://a.example/p1": [], "https://a.example/p2": [], "https://slow.example/p1": [],
}


class _ResolverPerHost:
    """Each host on its own address: slow.example's slowness is its own, not its IP's."""

    async def resolve(self, host: str) -> list[str]:
        return ["127.0.0.2" if host.startswith("slow.") else "127.0.0.3"]


def _first_run(tmp_path, *, hang_on: str | None) -> None:
    """Crawl until slow.example's first page is fetched, then stop (or, with
    `hang_on`, abort while a request to that URL is on the wire)."""
    c, fetcher = _crawler(tmp_path, WEB, _cfg()
                          .replace("crawl", fetch_tasks=1, batch_max=1))
    c.resolver = c.dns_ahead.resolver = _ResolverPerHost()
    hung = asyncio.Event()

    async def fetch(url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        if url == hang_on:
            hung.set()
            await asyncio.sleep(3600)
        if url.endswith("/robots.txt"):
            return fake_result(url, ip, 404)
        result = fake_result(url, ip, 200, b"<html>x</html>")
        if url == "https://slow.example/":
            result.elapsed_s = SLOW_RESPONSE_S
            if hang_on is None:
                c.stop()
        return result

    fetcher.fetch = fetch
    c.add_seeds(["https://slow.example/"])

    async def run() -> None:
        crawl = asyncio.create_task(c.run())
        if hang_on is not None:
            await asyncio.wait_for(hung.wait(), 60.0)   # bounded waits, generous for a loaded machine
            c.abort()
        await asyncio.wait_for(crawl, 60.0)

    asyncio.run(run())
    assert c.politeness.key("slow.example").delay_s > 2.0
    c.store.close()


def _resume(tmp_path, at: float) -> Crawler:
    cfg = _cfg()
    c = Crawler(cfg, clock=ManualClock(at), resolver=_Resolver(), fetcher=None, warc=_Warc(),
                store=SqliteStore(tmp_path / "crawl.db"), extractor=_Extractor(WEB))
    c.load()
    return c


def test_a_resume_after_a_clean_stop_holds_no_key_for_another_keys_long_delay(tmp_path):
    _first_run(tmp_path, hang_on=None)
    at = 2_000_000_000.0           # later than anything saved
    c = _resume(tmp_path, at)
    ip_window_s = 1.0 + c.politeness.config.ip_margin_s
    assert c.politeness.ready_at("a.example", at) == at + ip_window_s
    saved = c.store.hosts()["slow.example"]
    assert c.politeness.ready_at("slow.example", at) == max(saved["next_fetch_at"], at + ip_window_s)
    assert c.store.get_meta(CLEAN_STOP_META) == ""   # a crash of this run will not pass for clean
    c.store.close()


def test_a_resume_after_an_abort_holds_each_key_for_its_own_delay(tmp_path):
    _first_run(tmp_path, hang_on="https://a.example/p1")
    at = 2_000_000_000.0
    c = _resume(tmp_path, at)
    commit_s = c.cfg.store.commit_interval_s
    own = max(c.cfg.politeness.delay_s, 1.0 + c.politeness.config.ip_margin_s)   # delay 0: the IP window
    assert c.politeness.ready_at("a.example", at) == at + own + commit_s
    saved = c.store.hosts()["slow.example"]["delay_s"]
    assert c.politeness.ready_at("slow.example", at) == at + saved + commit_s
    c.store.close()


def test_a_clean_stop_is_recorded_only_by_a_run_that_ended_with_nothing_on_the_wire(tmp_path):
    _first_run(tmp_path, hang_on="https://a.example/p1")
    store = SqliteStore(tmp_path / "crawl.db")
    assert store.get_meta(CLEAN_STOP_META) != "1"
    store.close()


def test_three_short_resumes_after_clean_stops_each_fetch_pages(tmp_path):
    """Each resume stops itself after its first page: every run fetches one
    (a.example/, /p1, /p2), although slow.example's next turn is seconds away."""
    _first_run(tmp_path, hang_on=None)
    fetched_per_run = []
    for _ in range(3):
        c, fetcher = _crawler(tmp_path, WEB, _cfg()
                              .replace("crawl", fetch_tasks=1, batch_max=1))
        pages: list[str] = []

        async def fetch(url: str, *, ip: str, headers: dict, c=c, pages=pages):
            await asyncio.sleep(0)
            if not url.endswith("/robots.txt"):
                pages.append(url)
                c.stop()
            return fake_result(url, ip, 200 if not url.endswith("/robots.txt") else 404, b"<html>x</html>")

        fetcher.fetch = fetch
        asyncio.run(asyncio.wait_for(c.run(), 10.0))    # no key waits for slow.example's delay
        fetched_per_run.append(len(pages))
        c.store.close()
    assert fetched_per_run == [1, 1, 1]
