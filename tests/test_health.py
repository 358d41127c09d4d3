"""runtime/health: the seeds' E.1 and failure-table figures of a live crawler
(coverage sample, budget denied by tier, status ratios, new-URL rate per key,
body sizes, takedown propagation, disk share, abuse complaints, parser
restarts), read through CrawlObserver's snapshot and exposed by
shell/metrics. No network: a manual clock and fakes."""

from __future__ import annotations

import os
import sqlite3
from types import SimpleNamespace

import pytest

pytest.importorskip("prometheus_client")

from clock_support import ManualClock
from courtly.config import Config, ConfigError
from courtly.runtime import health
from courtly.shell import metrics

T0 = 1_760_000_000.0


def _crawler(tmp_path, cfg=None, extractor=None):
    from courtly.runtime.crawler import Crawler
    from courtly.shell.store.sqlite import SqliteStore

    resolver = SimpleNamespace(stats=SimpleNamespace(hit_ratio=1.0))
    return Crawler(cfg or Config(), clock=ManualClock(T0), resolver=resolver, fetcher=None, warc=None,
                   store=SqliteStore(tmp_path / "crawl.db"), extractor=extractor)


def _response(url, status=200, body=b""):
    return SimpleNamespace(url=url, ip="10.0.0.1", status=status, elapsed_s=0.1, headers={}, body=body)


def _observer(c):
    from courtly.runtime.observe import CrawlObserver

    return CrawlObserver(c)


def test_coverage_sample_counts_queued_urls_and_their_fetches(tmp_path):
    c = _crawler(tmp_path, Config().replace("coverage", sample_size=3))
    obs = _observer(c)
    c.add_seeds([f"https://a{i}.example/" for i in range(10)])
    sampled = [u for u in (f"https://a{i}.example/" for i in range(10)) if u in obs.health.sample]
    assert len(sampled) == 3
    obs.on_response(_response(sampled[0]))
    obs.on_response(_response(sampled[1], status=0))          # no answer: not a hit
    c.clock.t = T0 + 30
    snap = obs.snapshot(T0 + 30)
    assert snap["coverage_sample"]["hit_ratio"] == pytest.approx(1 / 3)
    assert snap["coverage_sample"]["urls"] == {"fetched": 1, "unfetched": 2}
    assert snap["coverage_sample"]["age_s"]["waiting"]["0.9"] == pytest.approx(30.0)
    assert snap["freshness_age_s"]["sample"]["0.5"] == pytest.approx(30.0)     # fetched at T0
    obs.on_parsed(sampled[0], T0 + 10)                      # the crawler's hook after extraction
    c.clock.t = T0 + 40
    assert obs.snapshot(T0 + 40)["coverage_sample"]["age_s"]["parsed"] == {"0.5": 30.0, "0.9": 30.0}


def test_canaries_file_is_the_sample_and_a_bad_one_is_a_one_line_error(tmp_path):
    f = tmp_path / "canaries.txt"
    f.write_text("# volatile pages\nhttps://A.example/news\n\nhttps://b.example/live\n")
    assert health.read_canaries(str(f)) == ("https://a.example/news", "https://b.example/live")
    c = _crawler(tmp_path, Config().replace("coverage", canaries_file=str(f)))
    obs = _observer(c)
    obs.on_response(_response("https://b.example/live"))
    assert obs.snapshot(T0)["coverage_sample"]["hit_ratio"] == 0.5
    f.write_text("https://a.example/\nnot a url\n")
    with pytest.raises(ConfigError, match=r"canaries.txt:2: not a URL"):
        health.read_canaries(str(f))
    with pytest.raises(ConfigError, match="cannot read coverage.canaries_file"):
        health.read_canaries(str(tmp_path / "absent.txt"))


def test_status_ratio_and_budget_denied_and_body_sizes(tmp_path):
    from courtly.core.types import Reason

    c = _crawler(tmp_path)
    obs = _observer(c)
    c.stats.status.update({200: 6, 404: 1, 503: 3})
    c.decide("https://a.example/x", "a.example", "", Reason.BUDGET, "daily new-URL budget", T0)
    c.decide("https://a.example/y", "a.example", "", Reason.ROBOTS, "", T0)
    for size in (10, 2000, 5_000_000):
        obs.on_response(_response("https://a.example/", body=b"x" * size))
    snap = obs.snapshot(T0)
    assert snap["http_status_ratio"] == {"200": 0.6, "404": 0.1, "503": 0.3}
    assert snap["budget_denied"] == {"discovery": 1}
    body = snap["fetch_body_bytes"]
    assert body["count"] == 3 and body["sum"] == 5_002_010
    assert body["counts"][0] == 1 and body["counts"][1] == 2 and body["counts"][-2] == 3


def test_new_url_rate_names_the_busiest_keys_only(tmp_path):
    c = _crawler(tmp_path)
    obs = _observer(c)
    for i in range(health.TOP_KEYS + 5):
        for _ in range(i + 1):
            obs.on_admitted(f"k{i:02d}.example", T0 + 30)
    c.clock.t = T0 + 120
    rates = obs.snapshot(T0 + 120)["host_new_url_rate"]
    assert len(rates) == health.TOP_KEYS
    top = f"k{health.TOP_KEYS + 4:02d}.example"
    assert rates[top] == pytest.approx((health.TOP_KEYS + 5) / 2.0)     # per minute over 2 minutes
    later = T0 + 120 + health.RATE_WINDOW_S + 60
    c.clock.t = later
    assert obs.snapshot(later)["host_new_url_rate"] == {}                # a quiet window forgets them


def test_takedown_propagation_is_a_histogram_of_record_to_applied(tmp_path):
    c = _crawler(tmp_path)
    obs = _observer(c)
    c.takedowns.applied.extend([{"effect_s": 0.4}, {"effect_s": 7200.0}])
    h = obs.snapshot(T0)["takedown_propagation_age_s"]
    assert h["count"] == 2 and h["sum"] == pytest.approx(7200.4)
    assert h["counts"][0] == 1                                  # <= 1 s
    assert h["counts"][health.PROPAGATION_BUCKETS_S.index(14400.0)] == 2


def test_disk_share_is_the_crawl_folders_file_system(tmp_path):
    c = _crawler(tmp_path)
    pct = _observer(c).snapshot(T0)["frontier_disk_used_pct"]
    st = os.statvfs(tmp_path)
    used = st.f_blocks - st.f_bfree
    assert pct == pytest.approx(100.0 * used / (used + st.f_bavail), abs=1.0)
    assert 0.0 < pct <= 100.0


def test_abuse_complaints_open_counts_unresolved_complaints(tmp_path):
    from courtly.runtime import abuse

    c = _crawler(tmp_path)
    c.store.apply(c.batch)
    assert _observer(c).snapshot(T0)["abuse_complaints_open"] == 0
    for host in ("a.example", "b.example", "c.example"):
        abuse.record(tmp_path, host, "abuse@example.org", "too fast", now=T0)
    abuse.resolve(tmp_path, 2, now=T0)
    assert _observer(c).snapshot(T0 + 3600)["abuse_complaints_open"] == 2


def test_abuse_complaints_open_is_zero_without_the_table(tmp_path):
    c = _crawler(tmp_path)
    c.store.apply(c.batch)
    db = sqlite3.connect(tmp_path / "crawl.db")
    db.execute("DROP TABLE abuse_complaints")
    db.commit()
    db.close()
    assert _observer(c).snapshot(T0)["abuse_complaints_open"] == 0


def test_parser_restarts_are_the_extraction_workers_lost(tmp_path):
    extractor = SimpleNamespace(stats=lambda: SimpleNamespace(workers_lost=3))
    assert _observer(_crawler(tmp_path, extractor=extractor)).snapshot(T0)["parser_restarts"] == 3


def test_every_new_figure_becomes_a_prometheus_family(tmp_path):
    c = _crawler(tmp_path)
    obs = _observer(c)
    c.add_seeds(["https://a.example/"])
    obs.on_admitted("a.example", T0)
    obs.on_response(_response("https://a.example/", body=b"abc"))
    c.stats.status[200] = 1
    text = metrics.exposition(metrics.new_registry(lambda: obs.snapshot(T0))).decode()
    for line in ('courtly_coverage_sample_hit_ratio 1.0', 'courtly_http_status_ratio{status="200"} 1.0',
                 'courtly_budget_denied_total{tier="discovery"} 0.0', 'courtly_fetch_body_bytes_bucket{le="1024.0"} 1.0',
                 'courtly_policy_takedown_propagation_age_seconds_count 0.0', 'courtly_abuse_complaints_open 0.0',
                 'courtly_parser_restarts_total 0.0', 'courtly_host_new_url_rate{key="a.example"}'):
        assert line in text, line
    assert "courtly_frontier_disk_used_pct " in text


def test_host_dup_ratio_is_the_trap_guards_near_dup_window_for_keys_with_enough_pages(tmp_path):
    c = _crawler(tmp_path)
    obs = _observer(c)
    traps = c.budget.traps
    for i in range(health.DUP_PAGES_MIN):
        traps.note_fetch("shop.example", f"https://shop.example/item?id={i}", i % 5 != 0, T0)   # 4 in 5 near-dups
    for i in range(health.DUP_PAGES_MIN - 1):
        traps.note_fetch("small.example", f"https://small.example/{i}", True, T0)            # too few pages
    assert obs.snapshot(T0)["host_dup_ratio"] == {"shop.example": pytest.approx(0.8)}
    c2 = _crawler(tmp_path / "off", Config().replace("budget", enabled=False))
    assert _observer(c2).snapshot(T0)["host_dup_ratio"] == {}             # no budget defence, no judgement
