"""courtly.core.urlyield: URL families and templates, and the yield rule's
states, driven fetch by fetch through TrapGuard."""

from __future__ import annotations

import json
import random

import pytest

from courtly.core.trap_state import TrapConfig
from courtly.core.traps import TrapGuard
from courtly.core.urlyield import (FamilyState, FamilyYield, Outcome, YieldRule, family_of, judge, value_class)

NOW = 1_764_547_200.0
KEY = "site.test"


@pytest.mark.parametrize("value, cls", [
    ("", "{empty}"), ("42", "{n}"), ("2024-05", "{date}"), ("20240531", "{date}"), ("2024-05-31", "{date}"),
    ("9f86d081884c7d65", "{hex}"), ("123e4567-e89b-12d3-a456-426614174000", "{hex}"),
    ("x7k2p9q8r4t6zz", "{id}"), ("month", "{word}"), ("red shoes & more", "{text}"),
])
def test_value_class_names_the_kind_of_a_parameter_value(value, cls):
    assert value_class(value) == cls


@pytest.mark.parametrize("url, family", [
    ("http://site.test/news/2024/05/story-12.html", "/news/{n}/{n}/story-{n}.html"),
    ("http://site.test/s/k3j4h5g6f7d8s9a0q1w2/item/3.html", "/s/{id}/item/{n}.html"),
    ("http://x7k2p9q8r4t6.site.test/", "{id}.|/"),
    ("http://www.site.test:8080/a/", "www.|/a/"),
    ("http://other.test/a/", "/a/"),
])
def test_family_is_the_classed_host_labels_below_the_key_and_the_path_template(url, family):
    path = "/" + url.split("/", 3)[3]
    assert family_of(url, KEY, path) == family


def test_template_lists_parameters_in_sorted_order_with_few_valued_ones_as_enumerations():
    fam = FamilyYield()
    for month in range(1, 13):
        for view in ("day", "month"):
            query = f"view={view}&month=2024-{month:02d}"
            fam.note_url(f"http://site.test/events?{query}", query)
    assert fam.template("/events") == "/events?month={date}&view={enum:day|month}"
    assert fam.combos == {"month&view": 24}


def _fetches(guard: TrapGuard, urls: list[str], outcome: Outcome, start: float = NOW) -> None:
    for i, url in enumerate(urls):
        assert guard.check_new_url(KEY, url, 1, start + i).allowed
    for i, url in enumerate(urls):
        guard.note_fetch(KEY, url, outcome is Outcome.NEAR_DUP, start + i, outcome=outcome)


def test_family_yielding_nothing_is_slowed_after_12_fetches_then_suspended_after_24():
    guard = TrapGuard(TrapConfig(), random.Random(1))
    urls = [f"http://site.test/list?page={n}" for n in range(1, 60)]
    for n, url in enumerate(urls[:-1]):
        assert guard.check_new_url(KEY, url, 1, NOW + n).allowed
    states = []
    for n, url in enumerate(urls[:24]):
        guard.note_fetch(KEY, url, True, NOW + n)
        states.append(guard._hosts[KEY].families["/list"].state)
    assert states[10] is FamilyState.OK and states[11] is FamilyState.SLOWED
    assert states[22] is FamilyState.SLOWED and states[23] is FamilyState.SUSPENDED
    (suspect,) = guard.suspects()
    assert (suspect.rule, suspect.scope) == ("yield", "family:/list")
    assert "24 fetched (24 near_dup)" in suspect.evidence
    denied = sum(not guard.check_queued(KEY, u, NOW + 100).allowed for u in urls[24:58])
    assert denied >= 30


def test_fetches_that_bring_urls_outside_their_family_are_productive():
    guard = TrapGuard(TrapConfig(), random.Random(1))
    for n in range(1, 40):
        url = f"http://site.test/list?page={n}"
        assert guard.check_new_url(KEY, url, 1, NOW + n).allowed
        guard.note_fetch(KEY, url, True, NOW + n)   # a listing that looks like the last one...
        assert guard.check_new_url(KEY, f"http://site.test/article/{n}.html", 1, NOW + n).allowed  # ...but new
    fam = guard._hosts[KEY].families["/list"]
    assert fam.state is FamilyState.OK and fam.outside == 39 and guard.suspects() == []


def test_new_text_close_to_the_familys_recent_pages_is_not_new():
    rule = YieldRule()
    fam = FamilyYield(urls=100)
    base = 0x0123456789ABCDEF
    for i in range(24):
        fam.note_fetch(Outcome.NEW, base ^ (1 << (i % 8)), rule)   # 1-2 bits from the others: same page
    assert fam.ring_good == 1 and judge(fam, rule) is FamilyState.SUSPENDED
    far = FamilyYield(urls=100)
    r = random.Random(3)
    for _ in range(24):
        far.note_fetch(Outcome.NEW, r.getrandbits(64), rule)      # unrelated texts: ~32 bits apart
    assert far.ring_good == 24 and judge(far, rule) is FamilyState.OK


def test_family_that_stopped_growing_is_slowed_but_never_suspended():
    rule = YieldRule()
    fam = FamilyYield(urls=24)
    for _ in range(24):
        fam.note_fetch(Outcome.EXACT_DUP, None, rule)
    assert judge(fam, rule) is FamilyState.SLOWED


def test_refetches_are_left_out_of_the_yield_rule():
    guard = TrapGuard(TrapConfig(), random.Random(1))
    url = "http://site.test/page"
    guard.check_new_url(KEY, url, 1, NOW)
    for n in range(40):
        guard.note_fetch(KEY, url, True, NOW + n, refetch=True)
    assert guard._hosts[KEY].families["/page"].fetched == 0


def test_family_resolved_as_legit_is_neither_slowed_nor_suspended_again():
    guard = TrapGuard(TrapConfig(), random.Random(1))
    _fetches(guard, [f"http://site.test/list?page={n}" for n in range(1, 30)], Outcome.NEAR_DUP)
    assert guard.resolve_suspect(KEY, "legit", NOW + 50, rule="yield") == 1
    _fetches(guard, [f"http://site.test/list?page={n}" for n in range(30, 80)], Outcome.NEAR_DUP, NOW + 60)
    assert guard.suspects() == []
    assert guard._hosts[KEY].families["/list"].state is FamilyState.OK
    assert guard.check_new_url(KEY, "http://site.test/list?page=999", 1, NOW + 200).band is None


def test_disabled_yield_rule_keeps_no_families():
    guard = TrapGuard(TrapConfig(yield_rule=YieldRule(enabled=False)), random.Random(1))
    _fetches(guard, [f"http://site.test/list?page={n}" for n in range(1, 60)], Outcome.NEAR_DUP)
    assert guard._hosts[KEY].families == {}
    assert all(s.rule != "yield" for s in guard.suspects())


def test_snapshot_keeps_the_families_and_their_state():
    guard = TrapGuard(TrapConfig(), random.Random(1))
    _fetches(guard, [f"http://site.test/list?page={n}" for n in range(1, 30)], Outcome.NEAR_DUP)
    back = TrapGuard.restore(json.loads(guard.snapshot_json()), TrapConfig(), random.Random(1))
    before, after = guard._hosts[KEY].families, back._hosts[KEY].families
    assert after.keys() == before.keys()
    assert after["/list"] == before["/list"]
    assert back.suspects() == guard.suspects()


def test_families_per_host_are_bounded_by_an_overflow_family():
    guard = TrapGuard(TrapConfig(families_max=8), random.Random(1))
    for n in range(50):
        guard.check_new_url(KEY, f"http://site.test/w{'abcdefghijklmnopqrstuvwxyz'[n % 26]}{n // 26}x/", 1, NOW)
    assert len(guard._hosts[KEY].families) == 9 and "{overflow}" in guard._hosts[KEY].families


def test_yield_rule_thresholds_are_checked():
    with pytest.raises(ValueError):
        YieldRule(slow_after=30, window=24)
    with pytest.raises(ValueError):
        YieldRule(share_min=1.0)
