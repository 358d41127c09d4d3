"""Copies in the recrawl budget (runtime/recrawl.py `judged`): a page that is a
near or exact copy of another weighs `DUPLICATE_WEIGHT` of its importance and
waits for its tier's max age; the page it copies keeps the text fresh."""

from __future__ import annotations

import random
from types import SimpleNamespace

from courtly.config import config_from_dict
from courtly.runtime.recrawl import DUPLICATE_WEIGHT, Recrawl

PAGE, PRINT = "http://a.test/news/story-1.html", "http://a.test/news/story-1.html?print=1"


def _recrawl(importance: str = "uniform") -> tuple[Recrawl, SimpleNamespace]:
    cfg = config_from_dict({
        "crawl": {"intent": "search", "contact": "tests@example.org"},
        "recrawl": {"daily_budget": 86_400, "period_s": 10.0, "importance": importance,
                    "tiers": [{"name": "all", "interval_s_min": 5.0, "interval_s_max": 3600.0}]},
    })
    return Recrawl(cfg, random.Random(1)), SimpleNamespace(histories={})


def _fetch(r: Recrawl, batch, url: str, at: float, version: str) -> None:
    r.fetched(url, "a.test", 1, at, status=200, content_hash=version, etag=None, last_modified=None, batch=batch)


def test_a_print_view_with_its_pages_bytes_weighs_the_duplicate_share():
    r, batch = _recrawl()
    _fetch(r, batch, PAGE, 0.0, "v0")
    _fetch(r, batch, PRINT, 1.0, "v0")
    r.judged(PAGE, None)
    r.judged(PRINT, PAGE)
    s = r.scheduler
    assert s._entries[PAGE].importance == 1.0
    assert s._entries[PRINT].importance == DUPLICATE_WEIGHT


def test_copies_changing_as_often_as_their_pages_are_refetched_far_less_often():
    # 20 pages and their 20 print views, all changing every 2 minutes, 1 fetch/s for 20 minutes
    r, batch = _recrawl()
    pages = [f"http://a.test/news/story-{i}.html" for i in range(20)]
    for i, u in enumerate(pages):
        _fetch(r, batch, u, 0.1 * i, "v0")
        _fetch(r, batch, u + "?print=1", 0.1 * i + 0.05, "p0")
        r.judged(u + "?print=1", u)   # the budget defence found it a near-duplicate of its page
    counts = {"page": 0, "print": 0}
    for k in range(1, 121):
        for u, _ in r.plan(10.0 * k, discovery_pending=0):
            counts["print" if u.endswith("?print=1") else "page"] += 1
            _fetch(r, batch, u, 10.0 * k + 1.0, f"{u}@{k // 12}")
    assert counts["page"] > 10 * counts["print"], counts


def test_a_page_near_its_own_earlier_copy_or_unjudged_is_not_a_copy():
    r, batch = _recrawl("opic")
    r.fetched(PAGE, "a.test", 1, 0.0, status=200, content_hash="v", etag=None, last_modified=None, batch=batch)
    before = r.scheduler._entries[PAGE].importance
    r.judged(PAGE, PAGE)      # a changed page is a near-duplicate of its own earlier copy
    r.judged(PAGE, None)
    r.judged("http://a.test/untracked", PAGE)   # a URL the scheduler does not track: nothing to weigh
    assert r.scheduler._entries[PAGE].importance == before
    assert "http://a.test/untracked" not in r.scheduler


def test_a_copy_of_a_copy_is_not_one_and_a_page_no_longer_copied_weighs_in_full():
    r, batch = _recrawl()
    _fetch(r, batch, PAGE, 0.0, "v0")
    _fetch(r, batch, PRINT, 1.0, "v0")
    r.judged(PRINT, PAGE)            # the print view: the same bytes as the page
    r.judged(PAGE, PRINT)            # the page refetched, the same bytes as the print view's copy
    assert r.scheduler._entries[PAGE].importance == 1.0
    r.judged(PRINT, None)            # judged again: no longer a copy
    assert r.scheduler._entries[PRINT].importance == 1.0


def test_copies_the_scheduler_dropped_are_forgotten_once_they_outnumber_the_tracked_urls():
    r, batch = _recrawl()
    _fetch(r, batch, PAGE, 0.0, "v0")
    copies = [f"{PAGE}?print={i}" for i in range(3)]
    for i, u in enumerate(copies):
        _fetch(r, batch, u, 1.0 + i, "v0")
        r.judged(u, PAGE)
    for u in copies[:2]:
        r.scheduler.remove(u)   # as a takedown does
    assert r._duplicates == set(copies)   # 3 copies known, 2 URLs tracked: forgotten at the next copy
    extra = "http://a.test/news/story-1.html?print=9"
    _fetch(r, batch, extra, 9.0, "v0")
    r.judged(extra, PAGE)
    assert r._duplicates == {copies[2], extra}
