"""Traps courtly was not written against (sim/wildtrap), crawled through the
trap guard with its default configuration (sim/wildcrawl), judged from the
site's own request log: every trap host is in review within 200 requests and
costs at most 500; the real deep site beside them is never flagged, slowed or
denied, and is fetched whole."""

from __future__ import annotations

import pytest

from courtly.core.trap_state import TrapConfig
from courtly.core.urlyield import YieldRule
from courtly.sim.wildcrawl import crawl_wild
from courtly.sim.wildtrap import REAL_PAGES, WILD_TRAPS, WildSite

REVIEW_WITHIN = 200
TRAP_REQUESTS_MAX = 500


@pytest.mark.parametrize("kind", WILD_TRAPS)
def test_wild_trap_host_is_in_review_within_200_requests_and_costs_at_most_500(kind):
    result = crawl_wild(WildSite(kind, "site.test"), TrapConfig(), requests_max=3000)
    assert result.review_at is not None and result.review_at <= REVIEW_WITHIN, (kind, result.review_at)
    assert result.count("trap") <= TRAP_REQUESTS_MAX, (kind, result.count("trap"))
    assert result.count("page") >= REAL_PAGES + 1   # the host's real pages were all fetched


@pytest.mark.parametrize("kind", WILD_TRAPS)
def test_wild_trap_review_names_the_yield_rule_its_template_and_examples(kind):
    result = crawl_wild(WildSite(kind, "site.test"), TrapConfig(), requests_max=3000)
    (mine,) = [s for s in result.suspects if s.rule == "yield"]
    assert mine.scope.startswith("family:")
    assert "template " in mine.evidence and "e.g. http://" in mine.evidence
    assert "fetched" in mine.evidence and "distinct URLs seen" in mine.evidence


def test_calendar_inside_the_date_window_is_left_to_run_without_the_yield_rule():
    # the guard of before: its calendar rule looks only at dates outside
    # 1900..next year, and these months are all inside
    site = WildSite("wild_calendar", "site.test")
    before = crawl_wild(site, TrapConfig(yield_rule=YieldRule(enabled=False)), requests_max=3000)
    after = crawl_wild(site, TrapConfig(), requests_max=3000)
    assert not any(s.rule == "calendar" for s in after.suspects)
    assert after.count("trap") < before.count("trap")


def test_link_farm_minting_host_names_is_caught_only_by_the_yield_rule():
    site = WildSite("wild_farm", "farm.test")
    before = crawl_wild(site, TrapConfig(yield_rule=YieldRule(enabled=False)), requests_max=1500)
    assert before.suspects == [] and before.count("trap") > 1000
    after = crawl_wild(site, TrapConfig(), requests_max=1500)
    assert [s.rule for s in after.suspects] == ["yield"]


def test_real_deep_site_is_never_flagged_slowed_or_denied_and_is_fetched_whole():
    result = crawl_wild(WildSite("wild_deep", "deep.test"), TrapConfig(), requests_max=6000)
    assert result.suspects == [] and result.denied == {} and result.low_band == 0
    assert result.count("missing") == 0 and result.count("trap") == 0
    assert result.count("page") > 3500   # 3,000 articles, 200 list pages, 341 category pages, 300 months
    assert len(result.log) < 6000        # it ran out of pages, not of requests
