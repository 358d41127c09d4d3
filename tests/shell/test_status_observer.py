"""The status page's adapter over a real Crawler (runtime/observe's
`CrawlObserver`), with no network: a fake clock, resolver and fetcher. It
reads the crawler's own state, reports freshness age per tier and fetches by
reason, and its snapshot feeds /metrics. The server itself: test_status.py."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("prometheus_client")

from courtly.runtime import observe
from courtly.shell import metrics
from courtly.shell.status import HOST_COLUMNS
from clock_support import ManualClock

T0 = 1_760_000_000.0


class _Fetcher:
    async def fetch(self, url: str, *, ip: str, headers: dict):
        from types import SimpleNamespace

        return SimpleNamespace(url=url, ip=ip, status=200, elapsed_s=0.2, headers={}, body=b"", content=b"",
                               truncated=None, error=None)


def _crawler(tmp_path):
    from types import SimpleNamespace

    from courtly.config import Config
    from courtly.runtime.crawler import Crawler
    from courtly.shell.store.sqlite import SqliteStore

    resolver = SimpleNamespace(stats=SimpleNamespace(hit_ratio=0.75))
    return Crawler(Config(), clock=ManualClock(T0), resolver=resolver, fetcher=_Fetcher(), warc=None,
                   store=SqliteStore(tmp_path / "crawl.db"), extractor=None)


def test_observer_reads_the_crawlers_own_state(tmp_path):
    from courtly.core.types import Reason
    from courtly.runtime.observe import CrawlObserver

    c = _crawler(tmp_path)
    c.add_seeds(["https://a.example/", "https://a.example/two", "https://b.example/x", "ftp://bad.example/"])
    fetcher = c.fetcher
    obs = CrawlObserver(c)                     # attached after the seeds: their decision still counts
    c.decide("https://b.example/private", "b.example", "https://b.example/x", Reason.ROBOTS,
             "https://b.example/robots.txt", T0 + 1)
    # the crawler calls these hooks around every request (Crawler.request)
    assert obs in c.observers
    obs.on_request("https://a.example/", "10.0.0.1")
    result = asyncio.run(c.fetcher.fetch("https://a.example/", ip="10.0.0.1", headers={}))
    obs.on_response(result)
    assert result.status == 200
    c.politeness.started("a.example", T0)
    c.politeness.finished("a.example", T0 + 0.2, response_s=0.2, status=429, retry_after="120")
    keys_before = sorted(c.politeness.known_keys())

    snap = obs.snapshot(T0 + 1)
    assert snap["frontier"]["queued_urls"] == 3
    assert snap["frontier"]["hosts"] == {"ready": 2, "waiting": 0, "leased": 0}
    assert snap["decisions"] == {"robots": 1, "scheme": 1}
    c.stats.robots_fetched, c.stats.probes_fetched = 2, 1
    assert obs.snapshot(T0 + 1)["fetches"] == {"page": 0, "robots": 2, "soft404_probe": 1}   # courtly_fetches_total{kind}
    assert snap["hosts_backing_off"] == 1
    assert snap["dns_cache_hit_ratio"] == 0.75
    assert snap["fetch_latency_s"]["count"] == 1 and snap["fetch_latency_s"]["sum"] == pytest.approx(0.2)
    assert snap["ip_request_rate_max"] == pytest.approx(1 / observe.IP_WINDOW_S)
    assert snap["frontier_disk_bytes"] > 0
    assert snap["host_delay_s"]["0.5"] >= 1.0
    assert [d["reason"] for d in obs.decisions(10)] == ["robots", "scheme"]

    total, rows = obs.hosts(0, 10, "queued", True, "")
    assert total == 2 and [r["key"] for r in rows] == ["a.example", "b.example"]
    assert set(HOST_COLUMNS) <= set(rows[0])
    assert rows[0]["ip"] == "10.0.0.1" and rows[0]["backoff"].startswith("429")
    assert rows[0]["next_fetch_at"] >= T0 + 120 and rows[0]["queued"] == 2
    assert obs.hosts(0, 10, "key", False, "10.0.0")[0] == 1            # search by IP
    for col in HOST_COLUMNS:
        assert obs.hosts(0, 10, col, True, "")[0] == 2
    assert sorted(c.politeness.known_keys()) == keys_before            # observing created no state

    fams = {f.name: f for f in metrics.families(snap)}
    assert {s.value for s in fams["courtly_decisions"].samples if s.name.endswith("_total")} == {1.0}

    c.store.apply(c.batch)                                             # what a commit does
    ex = asyncio.run(obs.explain("https://a.example/two"))
    assert ex["found"] and ex["record"]["state"] == "queued"
    ex = asyncio.run(obs.explain("https://b.example/private"))
    assert ex["recent_decisions"][0]["reason"] == "robots"

    obs.close()
    assert obs not in c.observers and c.fetcher is fetcher


def test_observer_reports_freshness_age_per_tier_and_fetches_by_reason(tmp_path):
    from types import SimpleNamespace

    from courtly.config import Config
    from courtly.ports import Batch
    from courtly.runtime.crawler import Crawler
    from courtly.runtime.observe import CrawlObserver
    from courtly.shell.store.sqlite import SqliteStore

    cfg = Config().replace("crawl", intent="search")
    resolver = SimpleNamespace(stats=SimpleNamespace(hit_ratio=1.0))
    c = Crawler(cfg, clock=ManualClock(T0), resolver=resolver, fetcher=_Fetcher(), warc=None,
                store=SqliteStore(tmp_path / "crawl.db"), extractor=None)
    obs = CrawlObserver(c)
    assert obs.snapshot(T0)["freshness_age_s"] == {}          # nothing fetched yet
    batch = Batch()
    c.recrawl.fetched("https://a.example/", "a.example", 0, T0 - 600, status=200, content_hash="h1",
                      etag=None, last_modified=None, batch=batch)
    c.recrawl.fetched("https://a.example/x", "a.example", 2, T0 - 60, status=200, content_hash="h2",
                      etag=None, last_modified=None, batch=batch)
    c.stats.by_reason.update({"discovery": 5, "recrawl": 2, "feed": 1})
    snap = obs.snapshot(T0 + 1000)   # past the memo's cache of the empty answer
    assert snap["freshness_age_s"]["0"]["0.5"] == pytest.approx(1600.0)
    assert snap["freshness_age_s"]["2"]["0.9"] == pytest.approx(1060.0)
    assert snap["fetches_by_reason"] == {"discovery": 5, "recrawl": 2, "feed": 1}
