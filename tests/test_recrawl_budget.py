"""The recrawl `daily_budget` covers discovery and recrawl together (README):
the running crawl's discovery fetches are charged to it, and what the
discovery floor held back unused flows back to recrawls."""

from __future__ import annotations

import random
from types import SimpleNamespace

from courtly.config import config_from_dict
from courtly.runtime.recrawl import Recrawl

PERIOD_S = 300.0
PER_PERIOD = 300   # daily_budget 86,400: one fetch a second


def _recrawl(daily_budget: int = 86_400) -> Recrawl:
    cfg = config_from_dict({
        "crawl": {"intent": "search", "contact": "tests@example.org"},
        "recrawl": {"daily_budget": daily_budget, "period_s": PERIOD_S,
                    "tiers": [{"name": "top", "interval_s_min": 60.0, "interval_s_max": 86_400.0}]},
    })
    return Recrawl(cfg, random.Random(1))


def _answer(r: Recrawl, urls, now: float) -> None:
    batch = SimpleNamespace(histories={})
    for i, url in enumerate(urls):
        r.fetched(url, "site.test", 0, now + i * 0.1, status=200, content_hash=f"h{i}", etag=None,
                  last_modified=None, batch=batch)


def test_discovery_fetches_are_charged_to_the_daily_budget():
    r = _recrawl()
    assert r.plan(0.0, discovery_pending=1000) == []   # nothing known yet; 60 (20 %) held for discovery
    _answer(r, [f"http://site.test/p{i}" for i in range(250)], 1.0)   # discovery spent 250: 190 beyond
    granted = r.plan(PERIOD_S, discovery_pending=0)
    assert r.last_plan.discovery_spent == 250
    assert len(granted) == PER_PERIOD - (250 - 60)   # 250 pages could be refetched


def test_recrawl_answers_are_not_charged_as_discovery():
    r = _recrawl()
    r.plan(0.0, discovery_pending=0)
    urls = [f"http://site.test/p{i}" for i in range(100)]
    _answer(r, urls, 1.0)
    granted = [u for u, _ in r.plan(PERIOD_S, discovery_pending=0)]
    assert len(granted) == 100   # every page is past its 60 s minimum: pulled ahead
    _answer(r, granted, PERIOD_S + 1.0)
    r.plan(2 * PERIOD_S, discovery_pending=0)
    assert r.last_plan.discovery_spent == 0 and r.discovery_fetched == 100


def test_the_discovery_floor_left_unused_flows_back_to_recrawls():
    r = _recrawl()
    r.plan(0.0, discovery_pending=0)
    _answer(r, [f"http://site.test/p{i}" for i in range(400)], 1.0)   # known pages, over budget
    first = r.plan(PERIOD_S, discovery_pending=10_000)   # the floor (60, 20 %) is held back for discovery
    assert first == [] and r.last_plan.recrawl_budget == 0   # discovery spent more than the period's budget
    second = r.plan(2 * PERIOD_S, discovery_pending=0)   # discovery fetched nothing of its floor
    assert r.last_plan.flowed_back == 60
    # the first period's claims (400 discovery + the 60 floor) passed its budget by 160: owed, and
    # repaid evenly over the next day (160 x 300 s / 86,400 s = 0.56 of a fetch this period)
    assert len(second) == PER_PERIOD - 1 + 60


def test_an_overspend_is_repaid_evenly_over_the_next_day_so_the_day_total_holds():
    r = _recrawl(daily_budget=28_800)   # 100 fetches a period
    r.plan(0.0, discovery_pending=0)
    _answer(r, [f"http://site.test/p{i}" for i in range(5_000)], 1.0)   # far more than the period's budget
    first = r.plan(PERIOD_S, discovery_pending=0)
    assert first == []                                 # discovery took this period's budget and 4,900 more
    budgets = []
    for k in range(2, 2 + 288):                        # the next day, period by period
        r.plan(PERIOD_S * k, discovery_pending=0)
        budgets.append(r.last_plan.budget)
    assert sum(budgets) == 28_800 - 4_900              # the day's total holds: the overspend is repaid ...
    assert min(budgets) >= 100 - 18                    # ... evenly (4,900 / 288 = 17 a period), never starving one
    after = []
    for k in range(290, 300):
        r.plan(PERIOD_S * k, discovery_pending=0)
        after.append(r.last_plan.budget)
    assert sum(after) >= 999                           # and then no longer (a fraction of a fetch carried)


def test_discovery_spent_past_the_budget_is_owed_for_at_most_a_day():
    r = _recrawl(daily_budget=2880)   # 10 fetches a period
    r.plan(0.0, discovery_pending=0)
    _answer(r, [f"http://site.test/p{i}" for i in range(3 * 2880)], 1.0)   # three days' budget of discovery
    granted = [len(r.plan(PERIOD_S * k, discovery_pending=0)) for k in range(1, 2 * 288 + 1)]
    day = 288   # periods in a day
    assert sum(granted[:day - 1]) == 0            # a day's budget owed, repaid over a day: no recrawl for a day
    assert all(g > 0 for g in granted[day + 1:])  # but no longer: the budget is a daily one


def test_each_period_is_kept_with_what_was_granted_spent_left_and_why():
    r = _recrawl()
    r.plan(0.0, discovery_pending=1000)
    _answer(r, [f"http://site.test/p{i}" for i in range(100)], 1.0)
    r.plan(PERIOD_S, discovery_pending=0)
    first, second = r.periods
    assert (first["budget"], first["granted"], first["discovery_spent"]) == (PER_PERIOD, 0, 0)
    assert first["left"] == PER_PERIOD and first["why"].startswith("nothing due")
    assert (second["discovery_spent"], second["granted"], second["flowed_back"]) == (100, 100, 0)
    assert second["left"] == PER_PERIOD - 200 and second["why"].startswith("nothing due")


def test_periods_are_in_courtly_report_and_the_metrics(tmp_path):
    from courtly.ports import Batch
    from courtly.runtime.observe import _period_parts
    from courtly.runtime.report import daily_report
    from courtly.shell.metrics import families
    from courtly.shell.store.sqlite import SqliteStore

    r = _recrawl()
    r.plan(0.0, discovery_pending=1000)
    _answer(r, [f"http://site.test/p{i}" for i in range(100)], 1.0)
    r.plan(PERIOD_S, discovery_pending=0)
    batch = Batch()
    r.save(batch)
    store = SqliteStore(tmp_path / "crawl.db")
    store.apply(batch)
    store.close()
    text = daily_report(tmp_path)
    assert "recrawl budget, last 2 of 2 periods kept" in text
    row = next(line for line in text.splitlines() if line.strip().endswith("nothing due: every known page is "
                                                                            "inside its minimum interval or "
                                                                            "fresh enough") and " 100 " in line)
    assert row.split()[2:7] == ["300", "100", "100", "0", "100"]
    (fam,) = [f for f in families({"recrawl_period": _period_parts(r)}) if f.name == "courtly_recrawl_period_fetches"]
    assert {s.labels["part"]: s.value for s in fam.samples} == {
        "budget": 300, "discovery": 100, "recrawls": 100, "flowed_back": 0, "left": 100}


def test_a_cold_start_spends_its_budget_on_pages_it_knows_nothing_about():
    # 100 pages fetched once, nothing known of their rates (the 1/day prior): they
    # were parked at the tier's max age and left the budget unspent for hours
    r = _recrawl()
    r.plan(0.0, discovery_pending=0)
    _answer(r, [f"http://site.test/p{i}" for i in range(100)], 1.0)
    granted = [len(r.plan(PERIOD_S * k, discovery_pending=0)) for k in range(1, 4)]
    assert granted[0] == 100                  # every page is past its 60 s minimum
    _answer(r, [f"http://site.test/p{i}" for i in range(100)], PERIOD_S + 1.0)
    assert r.plan(PERIOD_S * 4, discovery_pending=0) and r.periods[-1]["left"] < PER_PERIOD

