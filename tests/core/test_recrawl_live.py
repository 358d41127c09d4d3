"""The recrawl scheduler in the situations of a live crawl that the 30-day
simulation does not meet: URLs fetched before anything was known, sitemap and
feed hints competing with the solved schedule, short periods and intervals.

All pure: instants are arguments, randomness is a seeded `random.Random`.
"""

from __future__ import annotations

import math
import random

from courtly.core.recrawl import RecrawlScheduler, Tier, policy_for_intent

PERIOD_S = 10.0


def live_policy(budget_per_s: float = 4.0):
    """The live benchmark's setup: 10 s periods, one tier of 5 s .. 1 h."""
    return policy_for_intent("search", int(budget_per_s * 86_400), period_s=PERIOD_S,
                             tiers=(Tier("all", 5.0, 3600.0),))


class Pages:
    """Poisson pages answered at once, with a seeded generator."""

    def __init__(self, rates: dict[str, float], seed: int = 1) -> None:
        self.rates = rates
        self.rng = random.Random(seed)
        self.version = {u: 0 for u in rates}
        self.last = {u: 0.0 for u in rates}
        self.fetches = {u: 0 for u in rates}

    def fetch(self, s: RecrawlScheduler, url: str, at: float) -> bool:
        if self.rng.random() < -math.expm1(-self.rates[url] * (at - self.last[url])):
            self.version[url] += 1
        self.last[url] = at
        self.fetches[url] += 1
        if url not in s:
            s.add(url, at, host=url.split("/")[2])
        return s.record_fetch(url, at, status=200, content_hash=str(self.version[url]))


def run(s: RecrawlScheduler, pages: Pages, start: float, end: float) -> None:
    t = start
    while t < end:
        for u in s.plan(t).urls:
            pages.fetch(s, u, t + 1.0)
        t += PERIOD_S


def test_urls_fetched_before_the_prior_learned_are_placed_from_what_it_learned():
    # a cold start: 200 pages of one template changing about once a minute are
    # discovered over the first two minutes; the first ones are fetched when the
    # prior still says "once a day", and must not stay parked at the max age
    s = RecrawlScheduler(live_policy(), random.Random(1))
    urls = [f"http://a.test/p/{i}" for i in range(200)]
    pages = Pages({u: 1 / 60 for u in urls})
    early = urls[:20]
    for i, u in enumerate(early):
        pages.fetch(s, u, 0.5 * i)
    t = 10.0
    for u in urls[20:]:
        pages.fetch(s, u, t)
        t += 0.5
    run(s, pages, 10.0, 900.0)
    assert s.rate(early[0]) > 1 / 600          # not the default once a day
    assert all(pages.fetches[u] >= 3 for u in early), sorted(pages.fetches[u] for u in early)


def steady(n: int = 300, seed: int = 1, end: float = 1800.0):
    """n pages of three speeds, crawled for `end` seconds (a warm scheduler)."""
    s = RecrawlScheduler(live_policy(), random.Random(seed))
    rates = {f"http://h{i % 5}.test/p/{i}": (1 / 5, 1 / 120, 1 / 600)[i % 3] for i in range(n)}
    pages = Pages(rates, seed)
    for i, u in enumerate(rates):
        pages.fetch(s, u, 0.1 * i)
    run(s, pages, 30.0, end)
    return s, pages


def planned_rate_after_hints(per_period: int) -> float:
    """The revisit rate the solved schedule plans (fetches per second) after an
    hour in which `per_period` true hints a period were granted."""
    s, pages = steady()
    slow = [u for u in pages.rates if pages.rates[u] == 1 / 600]
    t, k = 1800.0, 0
    while t < 5400.0:
        for _ in range(per_period):
            u = slow[k % len(slow)]
            pages.version[u] += 1
            s.hint(u, lastmod_at=t - 1.0, now=t)
            k += 1
        for u in s.plan(t).urls:
            pages.fetch(s, u, t + 1.0)
        t += PERIOD_S
    return sum(1 / s.interval(u) for u in pages.rates)


def test_hinted_refetches_are_counted_in_the_budget_the_multiplier_is_solved_for():
    # hinted grants are served first: when they take a third of each period's 40
    # fetches, the schedule is solved for what they leave, not for the whole 4/s
    assert planned_rate_after_hints(0) > 0.88 * 4.0
    assert planned_rate_after_hints(14) < 0.8 * 4.0


def test_a_url_answering_404_is_not_refetched_at_its_hosts_pace():
    # the host's pages change every two minutes; its missing page never comes back
    s = RecrawlScheduler(live_policy(), random.Random(1))
    pages = Pages({f"http://a.test/p/{i}": 1 / 120 for i in range(100)})
    missing = "http://a.test/p/missing"
    s.add(missing, 0.0, host="a.test")
    s.record_fetch(missing, 0.0, status=404)
    for i, u in enumerate(pages.rates):
        pages.fetch(s, u, 0.1 * i)
    t, missing_fetches = 10.0, 0
    while t < 1800.0:
        for u in s.plan(t).urls:
            if u == missing:
                missing_fetches += 1
                s.record_fetch(u, t + 1.0, status=404)
            else:
                pages.fetch(s, u, t + 1.0)
        t += PERIOD_S
    assert min(pages.fetches.values()) >= 5
    assert missing_fetches <= 1


def test_the_budget_discovery_stops_using_is_planned_for_within_minutes():
    # the first two minutes share the budget with discovery (its 20 % floor is
    # spent); after that the whole budget is recrawl's and mu is solved for it
    s = RecrawlScheduler(live_policy(), random.Random(1))
    pages = Pages({f"http://h{i % 5}.test/p/{i}": (1 / 30, 1 / 120, 1 / 600)[i % 3] for i in range(300)})
    for i, u in enumerate(pages.rates):
        pages.fetch(s, u, 0.1 * i)
    t = 30.0
    while t < 900.0:
        discovering = t < 150.0
        plan = s.plan(t, discovery_pending=100 if discovering else 0, discovery_spent=8 if discovering else 0)
        for u in plan.urls:
            pages.fetch(s, u, t + 1.0)
        t += PERIOD_S
    assert sum(1 / s.interval(u) for u in pages.rates) > 0.88 * 4.0
