"""A purge recorded in the store, taken up by a crawler in this process.

No network: a fake clock, resolver and fetcher around a real Crawler and a
real SqliteStore. The slow end-to-end version (another process purges a
running crawl of the simulated web) is tests/e2e/test_purge.py.
"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from courtly.config import Config
from courtly.core.purge import purge_of
from courtly.runtime.crawler import Crawler
from courtly.runtime.takedown import PurgedNow
from courtly.shell.store.sqlite import SqliteStore
from clock_support import ManualClock

T0 = 1_700_000_000.0


class _Fetcher:
    def __init__(self) -> None:
        self.urls: list[str] = []

    async def fetch(self, url: str, *, ip: str, headers: dict):
        self.urls.append(url)
        return SimpleNamespace(url=url, ip=ip, status=404, elapsed_s=0.1, headers={}, body=b"", content=b"",
                               truncated=None, error=None, request_head=b"", response_head=b"",
                               started_at=T0)


class _Warc:
    def flush(self) -> None:
        pass


def _crawler(tmp_path) -> Crawler:
    c = Crawler(Config(), clock=ManualClock(T0), resolver=None, fetcher=_Fetcher(), warc=_Warc(),
                store=SqliteStore(tmp_path / "crawl.db"), extractor=None)
    c.load()
    return c


def _states(store: SqliteStore) -> dict[str, tuple[str, str | None]]:
    return {u: (s, r) for u, s, r in store._db.execute("SELECT url, state, reason FROM urls")}


def test_a_purge_recorded_while_the_crawl_runs_is_taken_up_at_the_next_commit(tmp_path):
    c = _crawler(tmp_path)
    c.add_seeds(["https://www.a.example/", "https://news.a.example/x", "https://b.example/"])
    c.commit()
    purge, counts = SqliteStore(tmp_path / "crawl.db").add_purge(purge_of("domain", "a.example"), T0 + 1)
    assert counts == {"queued": 2, "other": 0}
    c.clock.t = T0 + 1.5
    c.commit()          # the poll: the purge is applied
    assert c.takedowns.applied[0]["effect_s"] == pytest.approx(0.5)
    assert c.store.purges(0)[0][5] == pytest.approx(T0 + 1.5)          # applied_at
    # the frontier drops the domain's URLs as they are leased, each with a decision
    leased = []
    while (lease := c.frontier.lease(T0 + 100)) is not None:
        lease = c.takedowns.drop(lease, T0 + 100)
        if lease is not None:
            leased += [i.url for i in lease.items]
    assert leased == ["https://b.example/"]
    # and discovery of the scope is refused from now on
    assert not c.admission.admit("https://deep.news.a.example/new", via="https://b.example/", band=4,
                                 depth=1, now=T0 + 2)
    c.commit()
    states = _states(c.store)
    assert states["https://deep.news.a.example/new"] == ("skipped", "purged")
    assert states["https://www.a.example/"] == ("skipped", "purged")
    assert states["https://b.example/"] == ("queued", None)


def test_a_url_purged_while_it_waited_for_its_slot_is_never_requested(tmp_path):
    c = _crawler(tmp_path)
    SqliteStore(tmp_path / "crawl.db").add_purge(purge_of("url_prefix", "https://a.example/private"), T0)
    c.commit()

    async def go():
        with pytest.raises(PurgedNow):
            await c.requests.request("https://a.example/private/1", "a.example", "10.0.0.1", None, {})
        await c.requests.request("https://a.example/public", "a.example", "10.0.0.1", None, {})

    asyncio.run(go())
    assert c.fetcher.urls == ["https://a.example/public"]


def test_a_page_fetched_in_scope_ends_its_commit_purged_not_fetched(tmp_path):
    c = _crawler(tmp_path)
    c.add_seeds(["https://a.example/"])
    c.commit()
    SqliteStore(tmp_path / "crawl.db").add_purge(purge_of("host", "a.example"), T0)
    c.batch.fetched.append((T0 + 1, 200, "https://a.example/"))   # its request was in flight
    c.commit()
    assert _states(c.store)["https://a.example/"] == ("skipped", "purged")


def test_decisions_are_logged_with_the_crawl_id_url_and_reason(tmp_path, caplog):
    c = _crawler(tmp_path)
    assert len(c.crawl_id) == 12 and c.store.get_meta("crawl_id") == c.crawl_id
    with caplog.at_level(logging.DEBUG, logger="courtly"):
        c.add_seeds(["ftp://a.example/"])
    (rec,) = [r for r in caplog.records if getattr(r, "event", "") == "decision"]
    assert (rec.crawl_id, rec.url, rec.reason) == (c.crawl_id, "ftp://a.example/", "scheme")
    assert c.crawl_id in rec.getMessage()
    again = _crawler(tmp_path)        # one id per crawl folder
    assert again.crawl_id == c.crawl_id


def test_a_purge_recorded_between_runs_is_applied_when_the_next_run_loads(tmp_path):
    c = _crawler(tmp_path)
    c.add_seeds(["https://a.example/", "https://b.example/"])
    c.commit()
    c.store.close()
    SqliteStore(tmp_path / "crawl.db").add_purge(purge_of("domain", "a.example", reason="court order"), T0 + 5)
    again = _crawler(tmp_path)
    assert len(again.frontier) == 1 and again.frontier.lease(T0 + 100).items[0].url == "https://b.example/"
    (applied,) = again.takedowns.applied
    assert applied["at_start"] and applied["purge_reason"] == "court order"
    assert again.store.purges(0)[0][5] is not None
