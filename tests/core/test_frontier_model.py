"""The frontier against a small reference model (hypothesis stateful test):
random add / lease / complete / renew / expire at advancing `now`, checked
after every step; a copy of the frontier is drained to prove no URL is lost
or duplicated. Pure: `now` is passed in and randomness is seeded.
"""

from __future__ import annotations

import copy
import math
import random
from collections import Counter, deque

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from courtly.core.frontier import BANDS, Frontier, Lease
from courtly.core.types import UrlItem
from frontier_support import drain, fingerprint, item

# Deterministic in CI: no example database, derandomized generation.
STATEFUL = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


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
