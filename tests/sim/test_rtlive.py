"""The real runtime on the simulated web in virtual time (sim/rtlive.py)."""

from __future__ import annotations

import pytest

from courtly.config import config_from_dict
from courtly.sim.change import change_times
from courtly.sim.model import SimWeb
from courtly.sim.rtlive import crawl_virtual, measured_freshness
from courtly.sim.webconfig import profile_config

PORT = 8080
DURATION_S = 60.0


def _web() -> SimWeb:
    return SimWeb(profile_config("bench", seed=3, hosts=2, pages_per_host=10, ips=2, change_rate_per_s=1 / 30))


def _config():
    return config_from_dict({
        "crawl": {"contact": "t@example.invalid", "fetch_tasks": 8, "intent": "search", "duration_s": DURATION_S},
        "politeness": {"delay_s": 0.05, "crawl_delay_s_max": 0.05, "ip_rate": 100.0, "ip_concurrency": 8},
        "recrawl": {"daily_budget": 2 * 86400, "period_s": 10.0,
                    "tiers": [{"name": "all", "interval_s_min": 5.0, "interval_s_max": 3600.0}]},
    })


def _freshness(web: SimWeb, log) -> float:
    pages = {}
    for url in web.reachable_pages(web.seeds(PORT)):
        host, _, target = url.split("://", 1)[1].partition("/")
        lay = web.layout(host.rsplit(":", 1)[0])
        res = lay.resolve("/" + target)
        if res.kind == "page" and res.variant == "":
            pages[url] = change_times(lay.change_key(res.page), lay.change_rate(res.page), DURATION_S)
    syncs = {u: [r.t_s for r in log if r.url == u and r.status in (200, 304)] for u in pages}
    return measured_freshness(syncs, pages, 20.0, DURATION_S)


@pytest.fixture(scope="module")
def two_runs():
    web = _web()
    return web, crawl_virtual(web, _config(), web.seeds(PORT), port=PORT), \
        crawl_virtual(_web(), _config(), _web().seeds(PORT), port=PORT)


def test_same_seed_gives_the_same_request_log_and_the_same_freshness(two_runs):
    web, a, b = two_runs
    assert a == b
    assert _freshness(web, a) == _freshness(web, b)


def test_the_virtual_crawl_fetches_every_reachable_page_and_gets_304s_for_unchanged_ones(two_runs):
    web, log, _ = two_runs
    fetched = {r.url for r in log if r.status == 200}
    assert set(web.reachable_pages(web.seeds(PORT))) <= fetched
    assert any(r.status == 304 for r in log)
    assert 0.0 < _freshness(web, log) < 1.0


def test_freshness_counts_each_copy_until_the_next_change_or_sync_within_the_window():
    # window [10, 20]; page a: copy at 5 fresh until its change at 12 (2 s in the window), copy at 15 fresh
    # to the end (5 s); page b: never synced, stale throughout; page c: copy at 0, no change: 10 s
    syncs = {"a": [15.0, 5.0], "b": [], "c": [0.0]}
    changes = {"a": [12.0], "b": [1.0], "c": []}
    assert measured_freshness(syncs, changes, 10.0, 20.0) == pytest.approx((2 + 5 + 0 + 10) / 30)


def test_a_copy_taken_after_the_window_does_not_count():
    assert measured_freshness({"a": [25.0]}, {"a": []}, 10.0, 20.0) == 0.0


def test_print_views_copies_of_their_pages_are_fetched_less_often_than_any_page(two_runs):
    # a print view has its page's bytes: judged a copy, it waits for the tier's max age
    # (before: fetched 2-4 times in the minute, as often as the pages)
    web, log, _ = two_runs
    counts: dict[tuple[str, str], int] = {}
    for r in log:
        host, _, target = r.url.split("://", 1)[1].partition("/")
        res = web.layout(host.rsplit(":", 1)[0]).resolve("/" + target)
        kind = "print" if res.kind == "extra" and res.variant == "print" else res.kind if not res.variant else ""
        if kind in ("page", "print"):
            counts[(kind, r.url)] = counts.get((kind, r.url), 0) + 1
    prints = [n for (k, _), n in counts.items() if k == "print"]
    pages = [n for (k, _), n in counts.items() if k == "page"]
    assert prints and pages
    assert max(prints) < min(pages), (sorted(prints), sorted(pages))
