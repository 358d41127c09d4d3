"""Tests of OPIC's cold start: a young crawl's importance is near uniform, an old one is OPIC's.

All pure: a small multi-seed web is crawled in discovery order the way the runtime
feeds OPIC (importance read when a page is recorded, then its links handed on), and
the importances go into the real `RecrawlScheduler` on a virtual clock.
"""

from __future__ import annotations

import random
import statistics

import pytest

from courtly.core.importance import Opic
from courtly.core.recrawl import ChangeHistory, RecrawlScheduler, Tier, policy_for_intent

SEEDS, PAGES = 10, 30
TIER_MIN_S = 5.0


def small_web() -> dict[str, list[str]]:
    """SEEDS sites: a home page linking to its pages, each page linking home and to the next."""
    web: dict[str, list[str]] = {}
    for h in range(SEEDS):
        home = f"https://h{h}.example/"
        pages = [f"https://h{h}.example/p{k}" for k in range(1, PAGES)]
        web[home] = pages
        for k, p in enumerate(pages):
            web[p] = [home, pages[(k + 1) % len(pages)]]
    return web


def crawl(opic: Opic, web: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """Fetch every page `rounds` times, seeds first (discovery order); the importance at each record."""
    seen: dict[str, float] = {}
    order = [u for u in web if u.endswith("/")] + [u for u in web if not u.endswith("/")]
    for _ in range(rounds):
        for u in order:
            seen[u] = opic.importance(u)   # the runtime reads it when the answer is recorded...
            opic.fetched(u, web[u])        # ...then hands the page's links on
    return seen


def intervals(importance: dict[str, float]) -> dict[str, float]:
    """The revisit intervals the scheduler gives these importances at 4 fetches/s, every rate equal."""
    policy = policy_for_intent("search", 4 * 86_400, tiers=(Tier("all", TIER_MIN_S, 3600.0),),
                               period_s=10.0, rate_per_s_default=1 / 120, discovery_floor=0.0)
    s = RecrawlScheduler(policy, random.Random(1))
    for u, w in importance.items():
        s.add(u, 0.0, host=u.split("/")[2], importance=w,
              history=ChangeHistory(last_fetched_at=0.0, content_hash="0", etag='"0"', fetches=1))
    s.plan(10.0)
    return {u: s.interval(u) for u in importance}


def test_a_young_crawls_importance_does_not_give_one_seeds_pages_the_minimum_interval():
    web = small_web()
    opic = Opic(prior_rounds=8.0)
    iv = intervals(crawl(opic, web, 2))
    first_seed = [u for u in iv if u.startswith("https://h0.")]
    others = [u for u in iv if not u.startswith("https://h0.")]
    assert min(iv.values()) > 2 * TIER_MIN_S
    # the first seed's pages are revisited about as often as everyone else's
    assert statistics.median(iv[u] for u in first_seed) == pytest.approx(
        statistics.median(iv[u] for u in others), rel=0.5)


def test_the_initial_cash_is_shared_by_every_page_known_at_the_first_fetch():
    opic = Opic()
    for h in range(4):
        opic.add(f"https://h{h}.example/")
    opic.fetched("https://h0.example/", ["https://h0.example/a"])
    values = [opic.value(f"https://h{h}.example/") for h in range(1, 4)]
    assert values == pytest.approx([1.0 / 5] * 3)   # not all of it to the first seed


def test_importance_is_uniform_before_any_history():
    opic = Opic(prior_rounds=8.0)
    opic.add("https://a.example/")
    opic.add("https://b.example/")
    assert opic.importance("https://a.example/") == opic.importance("https://b.example/") == 1.0


def test_importance_converges_to_opics_as_history_grows():
    web = small_web()
    shrunk, plain = Opic(prior_rounds=8.0), Opic()
    gaps = []
    for _ in range(4):
        crawl(shrunk, web, 25)
        crawl(plain, web, 25)
        gaps.append(max(abs(shrunk.importance(u) - plain.importance(u)) for u in web))
    assert gaps == sorted(gaps, reverse=True)          # closer with every 25 rounds
    assert shrunk.rounds() > 90 and gaps[-1] < 0.1     # k / (h + k) < 0.08 of the way from OPIC
    ranked = sorted(web, key=shrunk.importance, reverse=True)
    assert ranked[:SEEDS] == sorted(web, key=plain.importance, reverse=True)[:SEEDS]


def test_prior_rounds_must_not_be_negative():
    with pytest.raises(ValueError):
        Opic(prior_rounds=-1.0)
