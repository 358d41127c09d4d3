"""A worker taking partitions over adopts their trap guard and soft-404 state
(read from the shared store) into its own: what it does not hold is taken,
what it holds stays, and the bounds hold."""

from __future__ import annotations

import json
import random

import pytest

from courtly.core.soft404 import Soft404Book
from courtly.core.traps import TrapConfig, TrapGuard

DAILY = 5


def _guard(hosts_max: int = 1_000) -> TrapGuard:
    return TrapGuard(TrapConfig(daily_new_urls_max=DAILY, hosts_max=hosts_max), rng=random.Random(1))


def _spend(guard: TrapGuard, key: str, n: int, now: float = 100.0) -> None:
    for i in range(n):
        guard.check_new_url(key, f"http://{key}/p{i}", 1, now)


def test_the_daily_budget_a_previous_owner_spent_still_holds_after_a_takeover():
    before = _guard()
    _spend(before, "a.test", DAILY)
    after = _guard()
    assert after.adopt(before.snapshot()) == 1
    assert after.check_new_url("a.test", "http://a.test/next", 1, 100.0).allowed is False
    assert _guard().check_new_url("a.test", "http://a.test/next", 1, 100.0).allowed is True


def test_a_guard_keeps_its_own_state_of_a_key_and_takes_the_others():
    mine, theirs = _guard(), _guard()
    _spend(mine, "a.test", 1)
    _spend(theirs, "a.test", DAILY)
    _spend(theirs, "b.test", 2)
    assert mine.adopt(theirs.snapshot()) == 1
    snap = mine.snapshot()["hosts"]
    assert snap["a.test"]["day_new"] == 1 and snap["b.test"] == theirs.snapshot()["hosts"]["b.test"]
    assert mine.snapshot_json() == json.dumps(mine.snapshot())   # adopted hosts are saved


def test_adopted_trap_hosts_are_bounded_by_hosts_max():
    theirs = _guard()
    for k in ("a.test", "b.test", "c.test"):
        _spend(theirs, k, 1)
    mine = _guard(hosts_max=2)
    assert mine.adopt(theirs.snapshot()) == 3
    assert sorted(mine.snapshot()["hosts"]) == ["b.test", "c.test"]


def test_a_book_keeps_its_own_origins_and_takes_the_others_within_origins_max():
    theirs = Soft404Book()
    theirs.record_probe("http://a.test", 200, 0xABC, 1.0)
    theirs.record_probe("http://b.test", 404, None, 2.0)
    theirs.record_probe("http://c.test", 404, None, 3.0)
    mine = Soft404Book(origins_max=2)
    mine.record_probe("http://a.test", 404, None, 5.0)
    assert mine.adopt(theirs.snapshot()) == 2
    assert not mine.is_soft("http://a.test")      # its own answer stays
    assert sorted(mine.snapshot()["hosts"]) == ["http://b.test", "http://c.test"]


@pytest.mark.parametrize("what", [lambda: _guard(), lambda: Soft404Book()])
def test_a_snapshot_of_an_unknown_version_is_refused(what):
    with pytest.raises(ValueError, match="version"):
        what().adopt({"version": 99, "hosts": {}})


def test_forgetting_a_lost_partitions_keys_lets_the_new_owners_state_in():
    mine, theirs = _guard(), _guard()
    _spend(mine, "a.test", 1)
    _spend(mine, "b.test", 1)
    _spend(theirs, "a.test", DAILY)
    assert mine.forget(lambda key: key == "a.test") == 1
    assert sorted(mine.snapshot()["hosts"]) == ["b.test"] == sorted(json.loads(mine.snapshot_json())["hosts"])
    assert mine.adopt(theirs.snapshot()) == 1
    assert mine.check_new_url("a.test", "http://a.test/next", 1, 100.0).allowed is False


def test_a_book_forgets_the_origins_selected():
    book = Soft404Book()
    book.record_probe("http://a.test", 200, 0xABC, 1.0)
    book.record_probe("http://b.test", 404, None, 2.0)
    assert book.forget(lambda origin: origin.endswith("a.test")) == 1
    assert list(book.snapshot()["hosts"]) == ["http://b.test"] and book.needs_probe("http://a.test")
