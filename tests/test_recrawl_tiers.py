"""Recrawl tiers the budget can keep (runtime/recrawl_tiers.py) and the
operator's importance used as given (runtime/recrawl.py)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from courtly.config import ConfigError, config_from_dict
from courtly.core.changerate import DAY_S
from courtly.runtime.recrawl import Recrawl
from courtly.runtime.recrawl_tiers import TierPlacer, importance_tier

TOP, MID, REST = DAY_S, 7 * DAY_S, 90 * DAY_S   # the search tiers' max ages


def _recrawl(tmp_path, daily_budget: int, scores: dict[str, float] | None = None, **recrawl) -> Recrawl:
    section = {"daily_budget": daily_budget, **recrawl}
    if scores is not None:
        path = tmp_path / "importance.tsv"
        path.write_text("".join(f"{u}\t{w}\n" for u, w in scores.items()))
        section["importance_file"] = str(path)
    cfg = config_from_dict({"crawl": {"intent": "search", "contact": "tests@example.org"}, "recrawl": section})
    return Recrawl(cfg, random.Random(1))


def _fetch_all(r: Recrawl, urls, depth: int = 0) -> dict[str, int]:
    """Each URL's tier as the store would keep it."""
    batch = SimpleNamespace(histories={})
    for i, url in enumerate(urls):
        r.fetched(url, "site.test", depth, float(i), status=200, content_hash="h", etag=None,
                  last_modified=None, batch=batch)
    return {url: row[2] for url, row in batch.histories.items()}


def test_a_tier_holds_only_the_pages_whose_max_age_the_budget_pays_for():
    p = TierPlacer([TOP, MID, REST], daily_budget=1000, share=0.5)
    assert p.caps[:2] == [250.0, 1750.0]   # half the budget, split between the two upper tiers
    for i in range(3000):
        p.place(f"u{i}", 0, 1.0)
    assert p.counts == [250, 1750, 1000]
    forced_per_day = p.counts[0] * DAY_S / TOP + p.counts[1] * DAY_S / MID
    assert forced_per_day <= 0.5 * 1000


def test_a_full_tier_sends_its_least_important_page_down():
    p = TierPlacer([TOP, REST], daily_budget=2, share=1.0)   # the top tier holds 2 pages
    p.place("a", 0, 0.5)
    p.place("b", 0, 0.9)
    moved = p.place("c", 0, 0.7)
    assert moved == [("c", 0, 0.7), ("a", 1, 0.5)]
    assert (p.tier("b"), p.tier("c"), p.tier("a")) == (0, 0, None)   # None: the last tier


def test_of_equally_important_pages_the_newest_moves_down():
    p = TierPlacer([TOP, REST], daily_budget=1, share=1.0)
    p.place("first", 0, 1.0)
    assert p.place("second", 0, 1.0) == [("second", 1, 1.0)]
    assert p.tier("first") == 0


def test_importance_asks_for_a_tier_down_per_tenfold_step():
    assert [importance_tier(w, 3) for w in (1.0, 0.5, 0.1, 0.05, 0.01, 1e-9)] == [0, 0, 1, 1, 2, 2]


def test_seeds_beyond_what_the_budget_can_promise_leave_the_top_tier(tmp_path):
    r = _recrawl(tmp_path, daily_budget=100)
    tiers = _fetch_all(r, [f"http://site.test/p{i}" for i in range(1000)], depth=0)
    top = sum(t == 0 for t in tiers.values())
    assert top == 25 and set(tiers.values()) == {0, 1, 2}


def test_an_operators_importance_is_used_as_given_and_sets_the_tier(tmp_path):
    scores = {"http://site.test/a": 200.0, "http://site.test/b": 20.0, "http://site.test/c": 2.0}
    r = _recrawl(tmp_path, daily_budget=100_000, scores=scores)
    assert [r.opic.importance(u) for u in scores] == [1.0, 0.1, 0.01]   # not blended with OPIC
    tiers = _fetch_all(r, [*scores, "http://site.test/unscored"], depth=0)
    assert tiers == {"http://site.test/a": 0, "http://site.test/b": 1, "http://site.test/c": 2,
                     "http://site.test/unscored": 0}   # no score: its depth's tier


def test_tiers_are_placed_again_from_the_store_on_restart(tmp_path):
    r = _recrawl(tmp_path, daily_budget=100)
    batch = SimpleNamespace(histories={})
    for i in range(100):
        r.fetched(f"http://site.test/p{i}", "site.test", 0, float(i), status=200, content_hash="h", etag=None,
                  last_modified=None, batch=batch)
    store = SimpleNamespace(iter_histories=lambda: list(batch.histories.values()), get_meta=lambda k: None)
    again = _recrawl(tmp_path, daily_budget=100)
    again.load(store, 200.0)
    assert again.placer.counts == r.placer.counts


def test_a_tier_budget_share_outside_0_1_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="tier_budget_share"):
        _recrawl(tmp_path, daily_budget=100, tier_budget_share=1.5)
