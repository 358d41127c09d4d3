"""Tests of the frontier: leases, batches, bands, ready times, limits, determinism.

Everything is pure: `now` is passed in and randomness is a seeded
`random.Random`, so no test depends on the clock and every run is the same.
The stateful test against a reference model is test_frontier_model.py.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from courtly.core.frontier import BANDS, DEFAULT_BAND_WEIGHTS, Frontier, FrontierFull, Lease
from courtly.core.types import UrlItem
from frontier_support import fingerprint, item

def urls(lease: Lease | None) -> list[str]:
    assert lease is not None
    return [it.url for it in lease.items]


# ---- batches ------------------------------------------------------------------


def test_lease_batch_is_at_most_batch_max_best_band_first_fifo_within_band():
    f = Frontier(random.Random(1), batch_max=3)
    plan = [(1, 4), (2, 2), (3, 4), (4, 2), (5, 0), (6, 7)]
    for n, band in plan:
        f.add(item("a", n, band), ready_at=0.0)
    first = f.lease(0.0)
    assert urls(first) == ["https://a/5", "https://a/2", "https://a/4"]
    assert f.complete(first.lease_id, ready_at=0.0)
    second = f.lease(0.0)
    assert urls(second) == ["https://a/1", "https://a/3", "https://a/6"]
    assert f.complete(second.lease_id, ready_at=0.0)
    assert f.lease(0.0) is None
    assert f.key_count == 0


def test_lease_takes_whole_queue_when_shorter_than_batch_max():
    f = Frontier(random.Random(1), batch_max=20)
    for n in range(5):
        f.add(item("a", n), ready_at=0.0)
    lease = f.lease(0.0)
    assert urls(lease) == [f"https://a/{n}" for n in range(5)]
    assert len(f) == 0 and f.leased_count == 5


def test_returned_items_come_back_at_front_of_their_band_in_order():
    f = Frontier(random.Random(1), batch_max=4)
    f.add(item("a", 1, band=1), 0.0)
    f.add(item("a", 2, band=3), 0.0)
    f.add(item("a", 3, band=3), 0.0)
    f.add(item("a", 4, band=3), 0.0)
    f.add(item("a", 5, band=3), 0.0)
    f.add(item("a", 6, band=1), 0.0)
    lease = f.lease(0.0)
    assert urls(lease) == ["https://a/1", "https://a/6", "https://a/2", "https://a/3"]
    # a/6 (band 1) and a/2, a/3 (band 3) were not fetched; a new band-3 URL arrived meanwhile.
    f.add(item("a", 7, band=3), 0.0)
    returned = [lease.items[1], lease.items[2], lease.items[3]]
    assert f.complete(lease.lease_id, ready_at=5.0, returned=returned)
    assert len(f) == 6
    again = f.lease(5.0)
    assert urls(again) == ["https://a/6", "https://a/2", "https://a/3", "https://a/4"]


def test_expired_lease_items_return_at_front_in_original_order():
    f = Frontier(random.Random(1), batch_max=2, lease_s=10.0)
    for n in range(4):
        f.add(item("a", n), 0.0)
    lease = f.lease(0.0)
    assert urls(lease) == ["https://a/0", "https://a/1"]
    assert f.expire(9.999) == []
    assert [l.lease_id for l in f.expire(10.0)] == [lease.lease_id]
    assert len(f) == 4 and f.leased_count == 0
    assert urls(f.lease(10.0)) == ["https://a/0", "https://a/1"]


# ---- leases -------------------------------------------------------------------


def test_key_never_has_two_leases_even_with_urls_added_while_leased():
    f = Frontier(random.Random(1), batch_max=1)
    f.add(item("a", 1), 0.0)
    f.add(item("a", 2), 0.0)
    lease = f.lease(0.0)
    assert f.is_leased("a")
    f.add(item("a", 3, band=0), 0.0)  # a better band must not re-queue a leased key
    assert f.lease(0.0) is None
    assert f.lease(1e9) is None
    assert f.complete(lease.lease_id, ready_at=1.0)
    assert not f.is_leased("a")
    assert urls(f.lease(1.0)) == ["https://a/3"]


def test_complete_of_expired_lease_returns_false_and_changes_nothing():
    f = Frontier(random.Random(1), batch_max=2, lease_s=10.0)
    for n in range(3):
        f.add(item("a", n), 0.0)
    old = f.lease(0.0)
    f.expire(10.0)
    new = f.lease(10.0)
    assert urls(new) == urls(old)
    before = fingerprint(f)
    assert f.complete(old.lease_id, ready_at=0.0, returned=old.items) is False
    assert fingerprint(f) == before
    assert f.is_leased("a")
    assert f.complete(new.lease_id, ready_at=20.0)


def test_complete_twice_returns_false_the_second_time():
    f = Frontier(random.Random(1))
    f.add(item("a", 1), 0.0)
    f.add(item("a", 2), 0.0)
    lease = f.lease(0.0)
    assert f.complete(lease.lease_id, 1.0, returned=lease.items[1:])
    assert f.complete(lease.lease_id, 1.0, returned=lease.items[1:]) is False
    assert len(f) == 1


def test_renew_extends_a_live_lease_and_refuses_an_expired_one():
    f = Frontier(random.Random(1), lease_s=10.0)
    f.add(item("a", 1), 0.0)
    lease = f.lease(0.0)
    assert lease.expires_at == 10.0
    assert f.renew(lease.lease_id, 5.0)
    assert f.expire(14.0) == []  # the entry for the old expiry (10) is not honoured
    assert f.next_wakeup() == 15.0
    assert f.renew(lease.lease_id, 15.0) is False  # expired by its own clock
    assert [l.expires_at for l in f.expire(15.0)] == [15.0]
    assert f.renew(lease.lease_id, 15.0) is False
    assert f.renew(12345, 0.0) is False


def test_a_lease_held_by_a_live_task_is_extended_not_expired_after_a_clock_leap():
    f = Frontier(random.Random(1), batch_max=2, lease_s=300.0)
    for n in range(3):
        f.add(item("a", n), 0.0)
        f.add(item("b", n), 0.0)
    held, idle = f.lease(0.0), f.lease(0.0)
    # the clock leaps 4000 s (a suspended machine) while both leases are out
    assert [l.lease_id for l in f.expire(4000.0, held={held.lease_id})] == [idle.lease_id]
    assert f.is_leased(held.key) and f.leased_count == len(held.items)
    assert [(l.lease_id, l.expires_at) for l in f.leases()] == [(held.lease_id, 4300.0)]
    # the held key is not leased a second time; the expired one is, with its URLs again
    again = f.lease(4000.0)
    assert again.key == idle.key and urls(again) == urls(idle)
    assert f.lease(4000.0) is None
    assert f.complete(held.lease_id, ready_at=4001.0, returned=held.items[1:])


def test_renew_by_the_holder_extends_a_lease_past_due_until_it_is_taken_back():
    f = Frontier(random.Random(1), lease_s=10.0)
    f.add(item("a", 1), 0.0)
    lease = f.lease(0.0)
    assert f.renew(lease.lease_id, 600.0) is False     # past due: refused to anyone else
    assert f.renew(lease.lease_id, 600.0, held=True)   # its live holder keeps it
    assert f.expire(609.0) == []
    assert [l.lease_id for l in f.expire(610.0)] == [lease.lease_id]
    assert f.renew(lease.lease_id, 610.0, held=True) is False   # taken back: never revived


def test_next_wakeup_reports_lease_expiry_when_nothing_is_queued():
    f = Frontier(random.Random(1), lease_s=30.0)
    assert f.next_wakeup() is None
    f.add(item("a", 1), 0.0)
    f.lease(2.0)
    assert len(f) == 0
    assert f.next_wakeup() == 32.0


# ---- ready times --------------------------------------------------------------


def test_key_is_not_leased_before_its_ready_at():
    f = Frontier(random.Random(1))
    f.add(item("a", 1), ready_at=10.0)
    f.add(item("a", 2), ready_at=0.0)  # ready_at of an existing key is ignored
    assert f.next_wakeup() == 10.0
    assert f.lease(math.nextafter(10.0, -math.inf)) is None
    lease = f.lease(10.0)
    assert urls(lease) == ["https://a/1", "https://a/2"]
    f.add(item("a", 3), ready_at=0.0)
    assert f.complete(lease.lease_id, ready_at=25.0)
    assert f.next_wakeup() == 25.0
    assert f.lease(24.9) is None
    assert urls(f.lease(25.0)) == ["https://a/3"]


def test_earlier_ready_key_goes_first_within_a_band():
    f = Frontier(random.Random(1))
    f.add(item("late", 1), ready_at=5.0)
    f.add(item("early", 1), ready_at=1.0)
    f.add(item("mid", 1), ready_at=3.0)
    got = [f.lease(10.0).key for _ in range(3)]
    assert got == ["early", "mid", "late"]


def test_counts_split_keys_into_ready_waiting_and_leased():
    f = Frontier(random.Random(1))
    f.add(item("a", 1), 0.0)
    f.add(item("b", 1), 0.0)
    f.add(item("c", 1), 50.0)
    f.lease(0.0)
    assert f.counts(10.0) == (1, 1, 1)


# ---- bands --------------------------------------------------------------------


def _band_shares(seed: int, leases: int, weights=DEFAULT_BAND_WEIGHTS) -> Counter:
    """Lease `leases` times with one always-ready key per band; count bands chosen."""
    f = Frontier(random.Random(seed), band_weights=weights)
    for b in range(BANDS):
        f.add(item(f"k{b}", 0, band=b), ready_at=0.0)
    chosen: Counter = Counter()
    now = 0.0
    for _ in range(leases):
        lease = f.lease(now)
        assert lease is not None
        chosen[lease.items[0].band] += 1
        assert f.complete(lease.lease_id, ready_at=now, returned=lease.items)
        now += 1.0
    return chosen


def test_band_choice_prefers_band_0_but_never_starves_band_7():
    n = 40_000
    chosen = _band_shares(seed=20240601, leases=n)
    total_w = sum(DEFAULT_BAND_WEIGHTS)
    for b in range(BANDS):
        expected = n * DEFAULT_BAND_WEIGHTS[b] / total_w
        assert 0.6 * expected <= chosen[b] <= 1.4 * expected, (b, chosen[b], expected)
    assert chosen[7] > 0
    assert chosen[0] > chosen[1] > chosen[2] > chosen[3]


def test_band_weights_are_honoured_when_given():
    weights = (1.0,) * BANDS
    chosen = _band_shares(seed=3, leases=8_000, weights=weights)
    for b in range(BANDS):
        assert 700 <= chosen[b] <= 1300, chosen


def test_only_due_bands_compete():
    f = Frontier(random.Random(5))
    f.add(item("hi", 1, band=0), ready_at=100.0)
    f.add(item("lo", 1, band=7), ready_at=0.0)
    assert f.lease(50.0).key == "lo"


def test_adding_a_better_band_moves_the_key_to_that_band():
    # the weights make the best due band win with odds of a million to one
    weights = (1e12, 1e6) + (1.0,) * (BANDS - 2)
    for seed in range(5):
        f = Frontier(random.Random(seed), band_weights=weights)
        f.add(item("a", 1, band=7), 0.0)
        f.add(item("b", 1, band=1), 0.0)
        f.add(item("a", 2, band=0), 0.0)
        lease = f.lease(0.0)
        assert lease.key == "a"
        assert urls(lease) == ["https://a/2", "https://a/1"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_max": 0},
        {"lease_s": 0.0},
        {"key_queue_max": 0},
        {"band_weights": (1.0,) * (BANDS - 1)},
        {"band_weights": (1.0,) * (BANDS - 1) + (0.0,)},
    ],
)
def test_frontier_refuses_non_positive_limits(kwargs):
    with pytest.raises(ValueError):
        Frontier(random.Random(1), **kwargs)


@pytest.mark.parametrize("band", [-1, BANDS])
def test_add_refuses_band_outside_range_and_keeps_nothing(band):
    f = Frontier(random.Random(1))
    with pytest.raises(ValueError):
        f.add(item("a", 1, band=band), 0.0)
    assert len(f) == 0 and f.key_count == 0


# ---- limits -------------------------------------------------------------------


def test_key_queue_max_raises_frontier_full_for_that_key_only():
    f = Frontier(random.Random(1), key_queue_max=2)
    f.add(item("a", 1), 0.0)
    f.add(item("a", 2), 0.0)
    with pytest.raises(FrontierFull):
        f.add(item("a", 3), 0.0)
    assert len(f) == 2 and f.queued_for("a") == 2
    f.add(item("b", 1), 0.0)
    assert f.queued_for("b") == 1


def test_add_many_returns_the_refused_items_in_order():
    f = Frontier(random.Random(1), key_queue_max=2)
    batch = [item("a", 1), item("b", 1), item("a", 2), item("a", 3), item("b", 2), item("a", 4), item("b", 3)]
    asked = []

    def ready_at_of(key: str) -> float:
        asked.append(key)
        return 7.0

    refused = f.add_many(batch, ready_at_of)
    assert refused == [item("a", 3), item("a", 4), item("b", 3)]
    assert len(f) == 4
    assert f.next_wakeup() == 7.0
    assert set(asked) == {"a", "b"}


# ---- determinism --------------------------------------------------------------


def _script(seed: int) -> list[tuple[str, tuple[str, ...]]]:
    f = Frontier(random.Random(seed), batch_max=3, lease_s=20.0)
    ops = random.Random(99)  # the operations are the same for every frontier seed
    out = []
    n = 0
    now = 0.0
    live: list[Lease] = []
    for _step in range(400):
        r = ops.random()
        if r < 0.45:
            key = f"k{ops.randrange(12)}"
            f.add(item(key, n, band=ops.randrange(BANDS)), ready_at=now + ops.random() * 3)
            n += 1
        elif r < 0.8:
            lease = f.lease(now)
            if lease is not None:
                live.append(lease)
                out.append((lease.key, tuple(urls(lease))))
        elif live:
            lease = live.pop(ops.randrange(len(live)))
            k = ops.randrange(len(lease.items) + 1)
            f.complete(lease.lease_id, now + ops.random() * 2, returned=lease.items[k:])
        now += ops.random()
        for lease in f.expire(now):
            out.append(("expired", (str(lease.lease_id),)))
    return out


def test_same_seed_and_operations_give_the_same_lease_sequence():
    first = _script(seed=42)
    assert len(first) > 50
    assert _script(seed=42) == first


def test_the_seed_matters_so_the_determinism_test_can_fail():
    assert _script(seed=42) != _script(seed=43)


def test_drop_key_forgets_queued_urls_and_the_lease_of_a_moved_partition():
    f = Frontier(random.Random(1), batch_max=2)
    for i in range(3):
        f.add(UrlItem(url=f"http://a.test/{i}", key="a.test"), 0.0)
    f.add(UrlItem(url="http://b.test/", key="b.test"), 0.0)
    lease = f.lease(0.0)
    other = "b.test" if lease.key == "a.test" else "a.test"
    dropped = f.drop_key(lease.key)
    assert dropped == (3 if lease.key == "a.test" else 1)
    assert not f.is_leased(lease.key) and f.queued_for(lease.key) == 0
    assert f.complete(lease.lease_id, 1.0, lease.items) is False   # a late completion changes nothing
    assert f.queued_for(lease.key) == 0 and f.drop_key("never.test") == 0
    nxt = f.lease(0.0)
    assert nxt is not None and nxt.key == other and f.lease(0.0) is None
    f.add(UrlItem(url="http://again.test/", key=lease.key), 5.0)   # the partition came back
    assert f.lease(4.0) is None and f.lease(5.0).key == lease.key


def test_batch_of_caps_a_lease_per_key_and_leaves_the_rest_queued():
    f = Frontier(random.Random(1), batch_max=5)
    for n in range(8):
        f.add(item("slow.test", n), ready_at=0.0)
        f.add(item("fast.test", n), ready_at=0.0)
    asked = []

    def batch_of(key: str) -> int:
        asked.append(key)
        return {"slow.test": 1, "fast.test": 50}[key]

    got = {}
    while (lease := f.lease(1.0, batch_of)) is not None:
        got.setdefault(lease.key, []).append(urls(lease))
    assert got["slow.test"] == [["https://slow.test/0"]]                # one URL, the first
    assert got["fast.test"] == [[f"https://fast.test/{n}" for n in range(5)]]   # never past batch_max
    assert sorted(asked) == ["fast.test", "slow.test"]
    assert len(f) == 7 + 3 and f.queued_for("slow.test") == 7
    assert f.lease(1.0, lambda key: 0) is None        # both keys are leased now
    slow = next(l for l in f.leases() if l.key == "slow.test")
    assert f.complete(slow.lease_id, 2.0)
    assert urls(f.lease(2.0, lambda key: 0)) == ["https://slow.test/1"]   # at least one


def test_has_key_while_queued_or_leased_and_add_keeps_the_first_ready_instant():
    f = Frontier(random.Random(1), batch_max=1)
    assert not f.has_key("a.test")
    f.add(item("a.test", 0), ready_at=5.0)
    f.add(item("a.test", 1), ready_at=0.0)          # ignored: the key is here already
    assert f.has_key("a.test") and f.next_wakeup() == 5.0
    lease = f.lease(5.0)
    assert f.has_key("a.test")                       # leased, one URL still queued
    assert f.complete(lease.lease_id, 9.0)
    lease = f.lease(9.0)
    assert f.complete(lease.lease_id, 10.0)
    assert not f.has_key("a.test")                   # nothing left: the key is gone
