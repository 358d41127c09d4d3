"""Tests of the frontier: leases, batches, bands, ready times, limits, determinism.

Everything is pure: `now` is passed in and randomness is a seeded
`random.Random`, so no test depends on the clock and every run is the same.
The stateful test checks the frontier against a small reference model after
every step, and drains a copy of the frontier to prove no URL is lost or
duplicated.
"""

from __future__ import annotations

import copy
import math
import random
from collections import Counter, deque

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from courtly.core.frontier import BANDS, DEFAULT_BAND_WEIGHTS, Frontier, FrontierFull, Lease
from courtly.core.types import UrlItem

# Deterministic in CI: no example database, derandomized generation.
STATEFUL = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def item(key: str, n: int, band: int = 4) -> UrlItem:
    return UrlItem(url=f"https://{key}/{n}", key=key, band=band)


def urls(lease: Lease | None) -> list[str]:
    assert lease is not None
    return [it.url for it in lease.items]


def drain(f: Frontier) -> list[Lease]:
    """Hand out everything (expiring live leases first); completes each lease as done."""
    f.expire(math.inf)
    out = []
    while (lease := f.lease(math.inf)) is not None:
        out.append(lease)
        assert f.complete(lease.lease_id, math.inf)
    assert len(f) == 0 and f.leased_count == 0 and f.next_wakeup() is None
    return out


def fingerprint(f: Frontier) -> tuple:
    """Everything observable about `f`, computed on a copy so `f` is untouched."""
    probe = copy.deepcopy(f)
    return (
        len(probe),
        probe.leased_count,
        sorted((l.lease_id, l.key, l.items, l.expires_at) for l in probe.leases()),
        probe.next_wakeup(),
        [(l.key, l.items) for l in drain(probe)],
    )


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
    for step in range(400):
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


# ---- stateful model test ------------------------------------------------------

KEYS = ("a", "b", "c", "d")


class FrontierMachine(RuleBasedStateMachine):
    """Random add / lease / complete / renew / expire at advancing `now`.

    The model keeps, per key, one FIFO per band, the key's ready instant and
    whether it is leased; and per live lease, its key, items and expiry."""

    @initialize(
        seed=st.integers(0, 2**32 - 1),
        batch_max=st.integers(1, 4),
        lease_s=st.sampled_from([1.0, 5.0, 10.0]),
    )
    def setup(self, seed, batch_max, lease_s):
        self.f = Frontier(random.Random(seed), batch_max=batch_max, lease_s=lease_s)
        self.batch_max = batch_max
        self.lease_s = lease_s
        self.now = 0.0
        self.n = 0
        # model
        self.queues: dict[str, dict[int, deque[UrlItem]]] = {}
        self.ready: dict[str, float] = {}
        self.leased: dict[int, tuple[str, tuple[UrlItem, ...], float]] = {}  # id -> key, items, expires_at
        self.dead: dict[int, Lease] = {}  # expired or completed leases (for stale calls)
        self.alive: Counter = Counter()  # added minus completed-as-done

    # -- model helpers --

    def _key_leased(self, key: str) -> bool:
        return any(k == key for k, _, _ in self.leased.values())

    def _queued(self, key: str) -> int:
        return sum(len(q) for q in self.queues.get(key, {}).values())

    def _exists(self, key: str) -> bool:
        return self._queued(key) > 0 or self._key_leased(key)

    def _best_band(self, key: str) -> int:
        return min(b for b, q in self.queues[key].items() if q)

    def _waiting_keys(self) -> list[str]:
        return [k for k in self.queues if self._queued(k) and not self._key_leased(k)]

    def _release(self, key: str, ready_at: float, returned) -> None:
        bands = self.queues.setdefault(key, {})
        for it in reversed(list(returned)):
            bands.setdefault(it.band, deque()).appendleft(it)
        self.ready[key] = ready_at
        if not self._queued(key):
            self.queues.pop(key, None)
            self.ready.pop(key, None)

    # -- rules --

    @rule(key=st.sampled_from(KEYS), band=st.integers(0, BANDS - 1), offset=st.sampled_from([0.0, 0.5, 2.0, 7.0]))
    def add(self, key, band, offset):
        it = item(key, self.n, band)
        self.n += 1
        is_new = not self._exists(key)
        self.f.add(it, ready_at=self.now + offset)
        self.queues.setdefault(key, {}).setdefault(band, deque()).append(it)
        if is_new:
            self.ready[key] = self.now + offset
        self.alive[it.url] += 1

    @rule()
    def lease(self):
        due = [k for k in self._waiting_keys() if self.ready[k] <= self.now]
        lease = self.f.lease(self.now)
        if not due:
            assert lease is None
            return
        assert lease is not None
        key = lease.key
        # never a leased key, never a key before its ready instant
        assert key in due
        # the key is the earliest-ready one of its best band
        band = self._best_band(key)
        same_band = [k for k in due if self._best_band(k) == band]
        assert self.ready[key] == min(self.ready[k] for k in same_band)
        # the batch: up to batch_max, best band first, FIFO within a band
        expected = []
        for b in sorted(self.queues[key]):
            q = self.queues[key][b]
            while q and len(expected) < self.batch_max:
                expected.append(q.popleft())
        assert list(lease.items) == expected
        assert 1 <= len(lease.items) <= self.batch_max
        assert lease.expires_at == self.now + self.lease_s
        assert lease.lease_id not in self.leased and lease.lease_id not in self.dead
        if not self._queued(key):
            self.queues.pop(key)
        self.leased[lease.lease_id] = (key, lease.items, lease.expires_at)

    @precondition(lambda self: self.leased)
    @rule(data=st.data(), delay=st.sampled_from([0.0, 1.0, 3.0]))
    def complete(self, data, delay):
        lid = data.draw(st.sampled_from(sorted(self.leased)))
        key, items, _ = self.leased[lid]
        keep = data.draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
        returned = [it for it, k in zip(items, keep) if k]
        assert self.f.complete(lid, ready_at=self.now + delay, returned=returned)
        del self.leased[lid]
        self.dead[lid] = Lease(lid, key, items, 0.0)
        for it, k in zip(items, keep):
            if not k:
                self.alive[it.url] -= 1
                if not self.alive[it.url]:
                    del self.alive[it.url]
        self._release(key, self.now + delay, returned)

    @precondition(lambda self: self.dead)
    @rule(data=st.data())
    def complete_stale_lease_changes_nothing(self, data):
        lid = data.draw(st.sampled_from(sorted(self.dead)))
        old = self.dead[lid]
        before = fingerprint(self.f)
        assert self.f.complete(lid, ready_at=self.now, returned=old.items) is False
        assert fingerprint(self.f) == before

    @precondition(lambda self: self.leased)
    @rule(data=st.data())
    def renew(self, data):
        lid = data.draw(st.sampled_from(sorted(self.leased)))
        key, items, exp = self.leased[lid]
        ok = self.f.renew(lid, self.now)
        assert ok == (exp > self.now)
        if ok:
            self.leased[lid] = (key, items, self.now + self.lease_s)

    @rule()
    def expire(self):
        overdue = sorted(lid for lid, (_, _, exp) in self.leased.items() if exp <= self.now)
        got = self.f.expire(self.now)
        assert sorted(l.lease_id for l in got) == overdue
        for l in got:
            key, items, _ = self.leased.pop(l.lease_id)
            assert l.key == key and l.items == items
            self.dead[l.lease_id] = l
            self._release(key, self.now, items)

    @rule(dt=st.sampled_from([0.0, 0.25, 1.0, 2.5, 6.0]))
    def advance(self, dt):
        self.now += dt

    @rule()
    def sleep_until_next_wakeup(self):
        # what the driver does; it also runs the lazy heap clean-up on the real frontier
        w = self.f.next_wakeup()
        if w is not None:
            self.now = max(self.now, w)

    # -- invariants --

    @invariant()
    def sizes_match_model(self):
        assert len(self.f) == sum(self._queued(k) for k in self.queues)
        assert self.f.leased_count == sum(len(items) for _, items, _ in self.leased.values())
        assert self.f.key_count == len({*self.queues, *(k for k, _, _ in self.leased.values())})

    @invariant()
    def no_key_has_two_leases(self):
        keys = [l.key for l in self.f.leases()]
        assert len(keys) == len(set(keys))
        assert sorted(l.lease_id for l in self.f.leases()) == sorted(self.leased)
        for k in KEYS:
            assert self.f.is_leased(k) == self._key_leased(k)

    @invariant()
    def next_wakeup_is_the_earliest_instant_with_work(self):
        candidates = [self.ready[k] for k in self._waiting_keys()]
        expiries = [exp for _, _, exp in self.leased.values()]
        # query a copy: the lazy clean-up in next_wakeup must not hide stale entries from the rules
        w = copy.deepcopy(self.f).next_wakeup()
        if not candidates and not expiries:
            assert w is None
            return
        assert w == min(candidates + expiries)
        if candidates and min(candidates) == w:
            assert copy.deepcopy(self.f).lease(w) is not None
        # just before the wakeup nothing can be leased (a lease expiring is the only other work)
        probe = copy.deepcopy(self.f)
        assert probe.lease(math.nextafter(w, -math.inf)) is None
        assert probe.expire(math.nextafter(w, -math.inf)) == []

    @invariant()
    def no_url_is_lost_or_duplicated(self):
        handed = [it.url for lease in drain(copy.deepcopy(self.f)) for it in lease.items]
        assert Counter(handed) == self.alive
        # each key's URLs drain in the model's order: best band first, FIFO within a band
        per_key: dict[str, list[str]] = {}
        for u in handed:
            per_key.setdefault(u.split("/")[2], []).append(u)
        for key, got in per_key.items():
            # an expired lease's URLs go back to the front of their bands
            leased = [it for k, items, _ in self.leased.values() if k == key for it in items]
            queues = self.queues.get(key, {})
            bands = sorted({*queues, *(it.band for it in leased)})
            expected = [
                it.url
                for b in bands
                for it in [*(x for x in leased if x.band == b), *queues.get(b, ())]
            ]
            assert got == expected


TestFrontierMachine = FrontierMachine.TestCase
TestFrontierMachine.settings = STATEFUL


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
