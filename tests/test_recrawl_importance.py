"""`[recrawl] importance`: OPIC link importance (the default) or every page
weighing 1, when plain freshness is the objective (README, docs/freshness.md)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from courtly.config import ConfigError, config_from_dict
from courtly.runtime.recrawl import Recrawl


def _recrawl(importance: str) -> Recrawl:
    cfg = config_from_dict({
        "crawl": {"intent": "search", "contact": "tests@example.org"},
        "recrawl": {"daily_budget": 86_400, "period_s": 10.0, "importance": importance,
                    "tiers": [{"name": "all", "interval_s_min": 5.0, "interval_s_max": 3600.0}]},
    })
    return Recrawl(cfg, random.Random(1))


def _fetches(importance: str) -> tuple[int, int]:
    """Refetches in 10 minutes of a page every other page links to, and of one
    nobody links to, among 22 pages that change at every fetch (1 fetch/s)."""
    r = _recrawl(importance)
    batch = SimpleNamespace(histories={})
    hub, lone = "http://a.test/p/hub", "http://a.test/p/lone"
    others = [f"http://a.test/p/{i}" for i in range(20)]
    counts = {hub: 0, lone: 0}

    def fetch(u: str, at: float) -> None:
        r.fetched(u, "a.test", 1, at, status=200, content_hash=str(at), etag=None, last_modified=None,
                  batch=batch)
        r.links(u, [hub] if u != hub else others)

    for i, u in enumerate([hub, lone] + others):
        fetch(u, 0.1 * i)
    for k in range(1, 61):
        for u, _ in r.plan(10.0 * k, discovery_pending=0):
            counts[u] = counts.get(u, 0) + 1
            fetch(u, 10.0 * k + 1.0)
    return counts[hub], counts[lone]


def test_opic_importance_refetches_a_linked_page_more_often():
    hub, lone = _fetches("opic")
    assert hub >= 2 * lone + 2, (hub, lone)


def test_uniform_importance_weighs_every_page_the_same():
    hub, lone = _fetches("uniform")
    assert abs(hub - lone) <= 1 + 0.1 * hub, (hub, lone)


@pytest.mark.parametrize("section, message", [
    ({"importance": "pagerank"}, "recrawl.importance must be"),
    ({"importance": "uniform", "importance_file": "scores.txt"}, "needs importance = \"opic\""),
    ({"importance_prior_rounds": -1.0}, "recrawl.importance_prior_rounds"),
])
def test_bad_importance_settings_are_refused_with_one_line(section, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"crawl": {"contact": "tests@example.org"}, "recrawl": section})
