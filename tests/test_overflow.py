"""The frontier's memory window: queued URLs beyond it wait in the store.

A real Crawler and SqliteStore with a fake clock, resolver, fetcher and link
extractor (no network). The window is made tiny so that nearly every URL
leaves memory and comes back from the store; the crawl must still fetch every
URL exactly once, keep the window, and survive a restart.
"""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace

import pytest

from courtly.config import Config
from courtly.core.links import Link, PageLinks
from courtly.runtime.crawler import Crawler
from courtly.shell.clock import LoopClock
from courtly.shell.store.sqlite import SqliteStore

T0 = 1_700_000_000.0
HOSTS = ("a.example", "b.example", "c.example")
PAGES = 60     # per host


def _web(seed: int = 7) -> dict[str, list[str]]:
    """URL -> the URLs it links to: every page links to its home page, the
    next page and a few random pages of its own and other hosts."""
    rng = random.Random(seed)
    urls = [f"https://{h}/p{i}" for h in HOSTS for i in range(PAGES)]
    web = {}
    for h in HOSTS:
        web[f"https://{h}/"] = [f"https://{h}/p{i}" for i in range(PAGES)]
    for u in urls:
        host = u.split("/")[2]
        i = int(u.rsplit("p", 1)[1])
        web[u] = [f"https://{host}/", f"https://{host}/p{(i + 1) % PAGES}", *rng.sample(urls, 4)]
    return web


class _Clock(LoopClock):
    """Real time from T0 (the main loop waits in real time for the next ready key)."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def now(self) -> float:
        return T0 + time.monotonic() - self.start


class _Resolver:
    async def resolve(self, host: str) -> list[str]:
        return ["127.0.0.1"]


class _Fetcher:
    def __init__(self, web: dict[str, list[str]], crawler_ref: list) -> None:
        self.web = web
        self.pages: list[str] = []
        self.memory_seen: list[int] = []
        self._crawler = crawler_ref

    async def fetch(self, url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        if url.endswith("/robots.txt"):
            status, body = 404, b""
        else:
            self.pages.append(url)
            c = self._crawler[0]
            self.memory_seen.append(len(c.frontier))
            status, body = (200, b"<html>x</html>") if url in self.web else (404, b"")
        return fake_result(url, ip, status, body)


def fake_result(url: str, ip: str, status: int, body: bytes = b"", headers: dict | None = None,
                truncated: str | None = None) -> SimpleNamespace:
    """A fetch result as the fakes' `fetch` returns it (text/html unless `headers` say)."""
    return SimpleNamespace(url=url, ip=ip, status=status, elapsed_s=0.0001,
                           headers={"content-type": "text/html"} if headers is None else headers,
                           body=body, content=body, truncated=truncated, error=None, request_head=b"",
                           response_head=b"", started_at=T0)


class _Extractor:
    """Links from the web map; each extraction takes a little real time so that
    pages are still being extracted when commits (and read-backs) happen."""

    def __init__(self, web: dict[str, list[str]]) -> None:
        self.web = web

    async def submit(self, content: bytes, url: str, ctype: str, xrt: str, error_print: bool = True):
        await asyncio.sleep(0.002)
        return PageLinks(links=tuple(Link(u, "a", False) for u in self.web.get(url, ())))


class _Warc:
    def __init__(self) -> None:
        self.n = 0

    def flush(self) -> None:
        pass

    def write_exchange(self, **kw):
        self.n += 1
        return SimpleNamespace(filename="f.warc.gz", offset=self.n, record_id=f"<urn:uuid:{self.n}>")


def _config(memory_max: int, key_memory_max: int, max_pages: int = 0) -> Config:
    return (Config()
            .replace("frontier", memory_max=memory_max, key_memory_max=key_memory_max)
            .replace("politeness", delay_s=0.0, ip_rate=10_000.0, ip_concurrency=64)
            .replace("store", commit_interval_s=0.01)
            .replace("budget", enabled=False)
            .replace("crawl", batch_max=3, fetch_tasks=4, max_pages=max_pages))


def _crawler(tmp_path, web, cfg: Config) -> tuple[Crawler, _Fetcher]:
    ref: list = []
    fetcher = _Fetcher(web, ref)
    c = Crawler(cfg, clock=_Clock(), resolver=_Resolver(), fetcher=fetcher, warc=_Warc(),
                store=SqliteStore(tmp_path / "crawl.db"), extractor=_Extractor(web))
    ref.append(c)
    c.load()
    return c, fetcher


def _states(store: SqliteStore) -> dict[str, str]:
    return dict(store._db.execute("SELECT url, state FROM urls"))


def test_a_crawl_larger_than_the_window_fetches_every_url_exactly_once(tmp_path):
    web = _web()
    c, fetcher = _crawler(tmp_path, web, _config(memory_max=12, key_memory_max=4))
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    assert sorted(fetcher.pages) == sorted(web)            # each URL once, none missed
    assert c.overflow.spilled > 100 and c.overflow.read_back == c.overflow.spilled
    assert len(c.overflow) == 0 and not c.overflow and len(c.frontier) == 0
    assert max(fetcher.memory_seen) <= 12                   # the window held
    assert set(_states(c.store).values()) == {"fetched"}
    c.store.close()


def test_urls_in_the_store_only_are_fetched_after_a_restart(tmp_path):
    web = _web(seed=3)
    cfg = _config(memory_max=10, key_memory_max=3, max_pages=70)
    c, first = _crawler(tmp_path, web, cfg)
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    assert len(first.pages) == 70 and c.overflow.spilled > 0
    c.store.close()
    c2, second = _crawler(tmp_path, web, cfg.replace("crawl", max_pages=0))
    assert len(c2.frontier) <= 10 and len(c2.overflow) > 0   # resume loads through the window too
    asyncio.run(c2.run())
    assert sorted(first.pages + second.pages) == sorted(web)
    assert set(_states(c2.store).values()) == {"fetched"}
    c2.store.close()


@pytest.mark.parametrize("memory_max,key_memory_max", [(1, 1), (5, 100), (1000, 2)])
def test_the_window_in_any_shape_loses_nothing(tmp_path, memory_max, key_memory_max):
    web = _web(seed=memory_max + key_memory_max)
    c, fetcher = _crawler(tmp_path, web, _config(memory_max, key_memory_max))
    c.add_seeds([f"https://{h}/" for h in HOSTS])
    asyncio.run(c.run())
    assert sorted(fetcher.pages) == sorted(web)
    assert max(fetcher.memory_seen) <= memory_max
    c.store.close()


def test_the_read_back_is_in_band_order(tmp_path):
    store = SqliteStore(tmp_path / "crawl.db")
    from courtly.ports import Batch

    b = Batch()
    for i, band in enumerate([4, 1, 7, 1, 4]):
        b.new_urls.append((f"https://a.example/{i}", "a.example", band, 0, 0, "", T0 + i))
    b.new_urls.append(("https://b.example/x", "b.example", 0, 0, 0, "", T0))
    store.apply(b)
    got = [r[0] for r in store.queued_of_key("a.example", 10)]
    assert got == [f"https://a.example/{i}" for i in (1, 3, 0, 4, 2)]
    assert [r[0] for r in store.queued_of_key("a.example", 2)] == got[:2]
    store.close()


def test_seeds_are_fed_in_committed_chunks_through_the_window(tmp_path, monkeypatch):
    import courtly.runtime.seeds as seeds_mod

    monkeypatch.setattr(seeds_mod, "SEED_COMMIT_EVERY", 10)
    c, _ = _crawler(tmp_path, {}, _config(memory_max=15, key_memory_max=5))
    seeds = (f"https://{HOSTS[i % 3]}/s{i}" for i in range(95))    # a generator: read once
    assert asyncio.run(seeds_mod.feed_seeds(c, seeds)) == 95
    assert len(c.frontier) <= 15 and len(c.frontier) + len(c.overflow) == 95
    queued = c.store._db.execute("SELECT count(*) FROM urls WHERE state='queued'").fetchone()[0]
    assert queued == 90                                          # nine full chunks committed
    c.store.close()


def test_a_stop_while_seeding_ends_it_after_the_chunk(tmp_path, monkeypatch):
    import courtly.runtime.seeds as seeds_mod

    monkeypatch.setattr(seeds_mod, "SEED_COMMIT_EVERY", 10)
    c, _ = _crawler(tmp_path, {}, _config(memory_max=100, key_memory_max=50))

    def seeds():
        for i in range(1000):
            if i == 35:
                c.stop()                                         # Ctrl-C arrives mid-file
            yield f"https://a.example/s{i}"

    assert asyncio.run(seeds_mod.feed_seeds(c, seeds())) == 40
    c.store.close()
