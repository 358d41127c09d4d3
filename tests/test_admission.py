"""Link admission's fast paths give the answers of the plain path.

`Admission.admit_links` and `admit_many` settle a repeated link with one
probe of the normalisation cache and the recent/pending sets before any call;
these tests run the same pages through them and through the plain loop of
`admit_link` (`admit` or `_refuse_nofollow`: admit_links before its fast path) in
two fresh crawlers and compare everything recorded: queued URLs, decisions,
the duplicate count and the frontier. No network: a real Crawler and a real
SqliteStore in a temporary folder.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

import courtly.runtime.admission as admission
from courtly.config import Config
from courtly.core.links import Link, PageLinks
from courtly.core.types import UrlItem
from courtly.runtime.admission import Admission
from courtly.runtime.crawler import Crawler
from courtly.shell.store.sqlite import SqliteStore
from clock_support import ManualClock

T0 = 1_700_000_000.0


def _crawler(folder) -> Crawler:
    folder.mkdir()
    c = Crawler(Config(), clock=ManualClock(T0), resolver=None, fetcher=None, warc=SimpleNamespace(flush=lambda: None),
                store=SqliteStore(folder / "crawl.db"), extractor=None)
    c.load()
    return c


def _plain_admit_links(adm: Admission, page, item: UrlItem, now: float, *, low_value: bool = False) -> None:
    """admit_links without its fast path: each link through `admit` or `_refuse_nofollow`."""
    for link in page.links:
        adm.admit_link(page, link, item, now, item.depth + 1, low_value)


def _recorded(c: Crawler) -> tuple:
    return (list(c.batch.new_urls), list(c.batch.decisions), c.stats.duplicates, c.stats.decisions,
            len(c.frontier))


_SPELLINGS = [
    "http://a.example/", "http://a.example/x", "http://A.example/x", "http://a.example/x#frag",
    "http://a.example:80/x", "http://a.example/y?b=2&a=1", "http://a.example/y?a=1&b=2",
    "http://a.example/./z", "http://b.example/p;jsessionid=1", "http://b.example/p",
    "http://b.example/%7Euser", "http://b.example/~user", "ftp://c.example/file", "http://[::1", "http://",
    "http://c.example/" + "a" * 5000, "https://c.example/q?utm_source=x", "https://c.example/q",
    "http://xn--nxasmq6b.example/", "http://münchen.example/", "http://d.example/calendar/2024/01",
]


def _pages(seed: int, n: int) -> list[tuple[UrlItem, PageLinks]]:
    rng = random.Random(seed)
    kinds = ["a", "a", "a", "canonical", "next", "refresh", "img"]
    out = []
    for i in range(n):
        links = tuple(dict.fromkeys(rng.choice(_SPELLINGS) + ("" if rng.random() < 0.7 else f"?n={rng.randrange(5)}")
                                    for _ in range(rng.randrange(1, 12))))
        page = PageLinks(links=tuple(Link(u, rng.choice(kinds), rng.random() < 0.15) for u in links),
                         nofollow=rng.random() < 0.05)
        out.append((UrlItem(url=f"http://a.example/page{i}", key="a.example", band=rng.randrange(8),
                            depth=rng.randrange(3)), page))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_admit_links_records_what_the_plain_loop_records(tmp_path, seed):
    fast, plain = _crawler(tmp_path / "fast"), _crawler(tmp_path / "plain")
    for i, (item, page) in enumerate(_pages(seed, 60)):
        low = i % 7 == 0
        fast.admission.admit_links(page, item, T0, low_value=low)
        _plain_admit_links(plain.admission, page, item, T0, low_value=low)
        assert _recorded(fast) == _recorded(plain)
        if i % 10 == 9:   # pending URLs become recent ones
            fast.commit()
            plain.commit()
    assert fast.stats.duplicates > 0 and fast.stats.decisions > 0


def test_admit_links_with_a_small_cache_still_records_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(admission, "NORMALIZED_MAX", 4)
    fast, plain = _crawler(tmp_path / "fast"), _crawler(tmp_path / "plain")
    for item, page in _pages(7, 80):
        fast.admission.admit_links(page, item, T0)
        _plain_admit_links(plain.admission, page, item, T0)
        assert _recorded(fast) == _recorded(plain)
        assert len(fast.admission._normalized) <= 4 and len(fast.admission._normalized_old) <= 4


def test_a_repeated_link_is_counted_a_duplicate_and_queued_once(tmp_path):
    c = _crawler(tmp_path / "c")
    item = UrlItem(url="http://a.example/", key="a.example")
    page = PageLinks(links=(Link("http://a.example/x#top", "a", False),))
    c.admission.admit_links(page, item, T0)
    c.commit()
    c.admission.admit_links(page, item, T0)
    c.admission.admit_links(PageLinks(links=(Link("http://a.example/x", "a", True),)), item, T0)
    assert [u[0] for u in c.batch.new_urls] == [] and c.stats.duplicates == 1
    assert c.store.has_url("http://a.example/x") and c.stats.decisions == 0


def test_admit_many_records_what_admit_one_by_one_records(tmp_path):
    fast, plain = _crawler(tmp_path / "fast"), _crawler(tmp_path / "plain")
    rng = random.Random(3)
    for _ in range(30):
        urls = [rng.choice(_SPELLINGS) for _ in range(rng.randrange(1, 20))]
        queued = fast.admission.admit_many(urls, via="http://a.example/sitemap.xml", band=3, depth=2, now=T0)
        plain_queued = sum(plain.admission.admit(u, via="http://a.example/sitemap.xml", band=3, depth=2, now=T0)
                           for u in urls)
        assert queued == plain_queued
        assert _recorded(fast) == _recorded(plain)
