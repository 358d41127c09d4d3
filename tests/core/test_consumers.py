"""core/consumers: quotas per UTC day, host shares, the bill, weighted fair turns."""

from __future__ import annotations

import pytest

from courtly.config import ConfigError, config_from_dict
from courtly.core.consumers import DAY_S, FairTurns, Ledger, Quota, day_of

NOON = 20_000 * DAY_S + DAY_S / 2


def test_a_consumer_is_denied_once_its_fetches_per_day_are_used_and_served_again_the_next_day():
    ledger = Ledger([Quota("a", fetches_per_day=3)])
    for _ in range(3):
        assert ledger.denial("a", "k", 1.0, NOON) == ""
        ledger.charge(["a"], "k", NOON)
    assert "fetches_per_day 3" in ledger.denial("a", "k", 1.0, NOON)
    assert ledger.denial("a", "k", 1.0, NOON + DAY_S / 2) == ""


def test_a_consumer_without_a_quota_is_never_denied():
    ledger = Ledger([Quota("a")])
    for _ in range(1000):
        ledger.charge(["a"], "k", NOON)
    assert ledger.denial("a", "k", 1.0, NOON) == ""
    assert ledger.denial("unknown", "k", 1.0, NOON) == ""


def test_host_share_caps_a_consumers_requests_on_one_key_to_its_share_of_the_days_capacity():
    # a delay of 864 s allows 100 requests a day; a share of 0.05 is 5 of them
    ledger = Ledger([Quota("a", host_share=0.05)])
    for _ in range(5):
        assert ledger.denial("a", "k", 864.0, NOON) == ""
        ledger.charge(["a"], "k", NOON)
    assert "host_share" in ledger.denial("a", "k", 864.0, NOON)
    assert ledger.denial("a", "other", 864.0, NOON) == ""


def test_a_shared_request_counts_against_each_quota_and_bills_each_consumer_its_part():
    ledger = Ledger([Quota("a", 10), Quota("b", 10), Quota("c", 10)])
    assert ledger.charge(["a", "b", "c"], "k", NOON) == pytest.approx(1 / 3)
    assert ledger.used == {"a": 1, "b": 1, "c": 1}


def test_requests_restored_from_an_earlier_day_do_not_count_today():
    ledger = Ledger([Quota("a", 1)])
    ledger.restore("a", "k", NOON - DAY_S, NOON)
    assert ledger.denial("a", "k", 1.0, NOON) == ""
    ledger.restore("a", "k", NOON - 60, NOON)
    assert ledger.denial("a", "k", 1.0, NOON) != ""
    assert day_of(NOON) == 20_000


def test_fair_turns_interleave_a_keys_batch_by_weight():
    turns = FairTurns({"a": 2.0, "b": 1.0})
    items = [("a", i) for i in range(6)] + [("b", i) for i in range(3)]
    order = turns.order("k", items, lambda it: (it[0],))
    whos = [who for who, _ in order]
    assert sorted(order) == sorted(items)
    for n in range(1, len(whos) + 1):   # every prefix: a has had twice b's turns, give or take one
        assert abs(whos[:n].count("a") - 2 * whos[:n].count("b")) <= 2, whos
    assert [i for who, i in order if who == "a"] == list(range(6))   # a consumer's own order is kept


def test_fair_turns_put_the_consumer_behind_on_a_key_first():
    turns = FairTurns({"a": 1.0, "b": 1.0})
    for _ in range(3):
        turns.served_turn("k", ["a"])
    order = turns.order("k", [("a", 0), ("b", 0), ("b", 1)], lambda it: (it[0],))
    assert [who for who, _ in order] == ["b", "b", "a"]


def test_fair_turns_keep_unowned_urls_after_the_consumers_ones_in_their_order():
    turns = FairTurns({"a": 1.0})
    order = turns.order("k", [("", 0), ("a", 1), ("", 2)], lambda it: (it[0],) if it[0] else ())
    assert order == [("a", 1), ("", 0), ("", 2)]


def test_fair_turns_forget_the_oldest_key_past_their_limit():
    turns = FairTurns({"a": 1.0}, keys_max=2)
    for key in ("k1", "k2", "k3"):
        turns.served_turn(key, ["a"])
    assert turns.tag("k1", "a") == 0.0 and turns.tag("k3", "a") == 1.0


@pytest.mark.parametrize("entry, words", [
    ({"name": "a b"}, "consumers.name"),
    ({"name": "a", "weight": 0}, "consumers.weight"),
    ({"name": "a", "priority_min": 3, "priority_max": 2}, "priority_min"),
    ({"name": "a", "priority_min": 2, "priority": 1}, "priority 1"),
    ({"name": "a", "host_share": 1.5}, "host_share"),
    ({"name": "a", "sink": "https://exa mple.org/hook"}, "is not a webhook URL"),
    ({"name": "a", "quota": 3}, "unknown key consumers[0].quota"),
])
def test_a_bad_consumer_entry_is_a_one_line_config_error(entry, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        config_from_dict({"consumers": [entry]})


def test_two_consumers_of_one_name_are_refused_and_an_unknown_one_is_named():
    with pytest.raises(ConfigError, match="declared twice"):
        config_from_dict({"consumers": [{"name": "a"}, {"name": "a"}]})
    cfg = config_from_dict({"consumers": [{"name": "a", "fetches_per_day": 5}]})
    assert cfg.consumer("a").fetches_per_day == 5
    with pytest.raises(ConfigError, match="declared: a"):
        cfg.consumer("b")
