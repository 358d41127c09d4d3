"""The frontier: priority bands, one back queue per politeness key, leases.

Theory of operation
-------------------
Every queued URL belongs to exactly one politeness key. A key owns one back
queue, split by priority band (0 = highest .. 7 = lowest). A key that has
queued URLs and is not leased sits in exactly one *ready heap*: the heap of its
best (lowest-numbered) non-empty band, keyed on the instant it may next be
fetched (the caller computes it as max(key next_fetch_at, IP next_fetch_at)).

`lease(now)` looks at the bands whose heap top is due, picks one of them at
random with weights biased toward high priority (every band keeps a positive
weight, so low bands are slowed, never starved), pops that key and hands out
a batch of up to `batch_max` of its URLs, best band first. While leased, a key
is in no heap, so **no key ever has two leases**: that is how invariant 1
(one request in flight per key) is structural rather than checked.

The lease holder returns the key with `complete(...)`, giving the key's next
ready instant and any URLs it did not get to (they go back to the front of
their band, in order). A lease that is neither renewed nor completed by its
`expires_at` is expired by `expire(now)`: all its URLs return to the queue
(fetching is at-least-once) and the key becomes ready again, unless the
caller names it in `held` (its holder is alive: a clock leap is no reason to
lease the key twice), in which case it is extended.

`next_wakeup()` says when the frontier next has something to hand out or to
expire, so the driver sleeps until then instead of polling.

Rules: pure and synchronous; `now` is an argument; randomness comes from the
injected `random.Random`. Heaps use lazy deletion (a per-key token).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Container, Iterable, Sequence

from courtly.core.types import UrlItem

__all__ = ["BANDS", "Lease", "Frontier", "FrontierFull"]

BANDS = 8
DEFAULT_BAND_WEIGHTS: tuple[float, ...] = tuple(float(2 ** (BANDS - 1 - b)) for b in range(BANDS))


class FrontierFull(Exception):
    """A key's queue reached `key_queue_max`."""


@dataclass(frozen=True, slots=True)
class Lease:
    lease_id: int
    key: str
    items: tuple[UrlItem, ...]
    expires_at: float


@dataclass(slots=True)
class _KeyQueue:
    bands: dict[int, deque[UrlItem]] = field(default_factory=dict)
    size: int = 0
    ready_at: float = 0.0
    lease_id: int = 0          # 0 = not leased
    token: int = 0             # version of the key's live heap entry

    def best_band(self) -> int:
        # `bands` never holds an empty deque: `Frontier.lease` deletes the
        # bands it empties, and every other change appends to one.
        return min(self.bands)


class Frontier:
    def __init__(
        self,
        rng: random.Random,
        *,
        batch_max: int = 20,
        lease_s: float = 300.0,
        key_queue_max: int = 1_000_000,
        band_weights: Sequence[float] = DEFAULT_BAND_WEIGHTS,
    ) -> None:
        if batch_max < 1 or lease_s <= 0 or key_queue_max < 1:
            raise ValueError("batch_max, lease_s and key_queue_max must be positive")
        if len(band_weights) != BANDS or any(w <= 0 for w in band_weights):
            raise ValueError(f"band_weights needs {BANDS} positive weights")
        self._rng = rng
        self.batch_max = batch_max
        self.lease_s = lease_s
        self.key_queue_max = key_queue_max
        self._weights = tuple(band_weights)
        self._queues: dict[str, _KeyQueue] = {}
        self._heaps: list[list[tuple[float, int, int, str]]] = [[] for _ in range(BANDS)]
        self._leases: dict[int, Lease] = {}
        self._lease_heap: list[tuple[float, int]] = []
        self._seq = itertools.count(1)
        self._lease_ids = itertools.count(1)
        self._size = 0

    # ---- queries ------------------------------------------------------------

    def __len__(self) -> int:
        """URLs queued and not leased."""
        return self._size

    @property
    def leased_count(self) -> int:
        return sum(len(l.items) for l in self._leases.values())

    @property
    def key_count(self) -> int:
        return len(self._queues)

    def leases(self) -> list[Lease]:
        return list(self._leases.values())

    def has_key(self, key: str) -> bool:
        """Is `key` here (queued or leased)? Then `add` ignores its `ready_at`."""
        return key in self._queues

    def is_leased(self, key: str) -> bool:
        q = self._queues.get(key)
        return q is not None and q.lease_id != 0

    def queued_for(self, key: str) -> int:
        q = self._queues.get(key)
        return q.size if q else 0

    def urls_of(self, key: str) -> set[str]:
        """URLs of `key` held here: queued, and leased (in flight)."""
        q = self._queues.get(key)
        if q is None:
            return set()
        out = {it.url for band in q.bands.values() for it in band}
        lease = self._leases.get(q.lease_id) if q.lease_id else None
        if lease is not None:
            out.update(it.url for it in lease.items)
        return out

    def counts(self, now: float) -> tuple[int, int, int]:
        """(keys ready now, keys waiting for their time, keys leased)."""
        ready = waiting = leased = 0
        for q in self._queues.values():
            if q.lease_id:
                leased += 1
            elif q.size:
                if q.ready_at <= now:
                    ready += 1
                else:
                    waiting += 1
        return ready, waiting, leased

    def next_wakeup(self) -> float | None:
        """Earliest instant at which `lease` or `expire` has something to do."""
        best: float | None = None
        for b in range(BANDS):
            top = self._top(b)
            if top is not None and (best is None or top[0] < best):
                best = top[0]
        exp = self._live_expiry()
        if exp is not None and (best is None or exp < best):
            best = exp
        return best

    # ---- adding -------------------------------------------------------------

    def add(self, item: UrlItem, ready_at: float) -> None:
        """Queue `item`; `ready_at` is the key's next ready instant if the key is new."""
        if not 0 <= item.band < BANDS:
            raise ValueError(f"band {item.band} outside 0..{BANDS - 1}")
        q = self._queues.get(item.key)
        if q is None:
            q = _KeyQueue(ready_at=ready_at)
            self._queues[item.key] = q
        if q.size >= self.key_queue_max:
            raise FrontierFull(item.key)
        was_best = q.best_band() if q.size else None
        q.bands.setdefault(item.band, deque()).append(item)
        q.size += 1
        self._size += 1
        if q.lease_id == 0 and (was_best is None or item.band < was_best):
            self._push(item.key, q)

    def add_many(self, items: Iterable[UrlItem], ready_at_of: Callable[[str], float]) -> list[UrlItem]:
        """Queue many; returns the items refused because their key was full."""
        refused = []
        for it in items:
            try:
                self.add(it, ready_at_of(it.key))
            except FrontierFull:
                refused.append(it)
        return refused

    # ---- leasing ------------------------------------------------------------

    def lease(self, now: float, batch_of: Callable[[str], int] | None = None) -> Lease | None:
        """The next ready key with a batch of its URLs, best band first: up to
        `batch_max`, or `batch_of(key)` when that is smaller (at least one)."""
        due = [b for b in range(BANDS) if (t := self._top(b)) is not None and t[0] <= now]
        if not due:
            return None
        if len(due) == 1:
            band = due[0]
        else:
            band = self._rng.choices(due, weights=[self._weights[b] for b in due])[0]
        _, _, _, key = heapq.heappop(self._heaps[band])
        q = self._queues[key]
        size = self.batch_max if batch_of is None else max(1, min(self.batch_max, batch_of(key)))
        items: list[UrlItem] = []
        bands = q.bands
        for b in sorted(bands):
            dq = bands[b]
            while dq and len(items) < size:
                items.append(dq.popleft())
            if not dq:
                del bands[b]
            if len(items) >= size:
                break
        q.size -= len(items)
        self._size -= len(items)
        lease_id = next(self._lease_ids)
        q.lease_id = lease_id
        q.token += 1  # any other heap entry of this key is now stale
        lease = Lease(lease_id, key, tuple(items), now + self.lease_s)
        self._leases[lease_id] = lease
        heapq.heappush(self._lease_heap, (lease.expires_at, lease_id))
        return lease

    def renew(self, lease_id: int, now: float, *, held: bool = False) -> bool:
        """Extend a live lease; False if it expired or was never granted.

        `held`: the caller is the lease's live holder, so a lease past due but
        not yet taken back by `expire` is extended too (the clock leapt)."""
        lease = self._leases.get(lease_id)
        if lease is None or (lease.expires_at <= now and not held):
            return False
        renewed = Lease(lease.lease_id, lease.key, lease.items, now + self.lease_s)
        self._leases[lease_id] = renewed
        heapq.heappush(self._lease_heap, (renewed.expires_at, lease_id))
        return True

    def complete(self, lease_id: int, ready_at: float, returned: Iterable[UrlItem] = ()) -> bool:
        """Give the key back. Unfetched URLs return to the front of their band.

        Returns False (and changes nothing) when the lease had already expired."""
        lease = self._leases.pop(lease_id, None)
        if lease is None:
            return False
        self._release(lease, ready_at, list(returned))
        return True

    def expire(self, now: float, held: Container[int] = ()) -> list[Lease]:
        """Expire overdue leases: their URLs are queued again (at-least-once).

        A lease in `held` has a live holder (a task of this process): it is
        extended instead, as a clock leap past `lease_s` while it fetches must
        not lease its key again (a second request for the same URL)."""
        expired = []
        while self._lease_heap and self._lease_heap[0][0] <= now:
            exp, lid = heapq.heappop(self._lease_heap)
            lease = self._leases.get(lid)
            if lease is None or lease.expires_at != exp:
                continue  # completed, or renewed (a newer entry exists)
            if lid in held:
                self.renew(lid, now, held=True)
                continue
            del self._leases[lid]
            self._release(lease, now, list(lease.items))
            expired.append(lease)
        return expired

    def drop_key(self, key: str) -> int:
        """Forget `key` entirely (its partition moved to another worker): its
        queued URLs and its lease, if any, are dropped (a later `complete` of
        that lease changes nothing). Returns how many URLs were dropped."""
        q = self._queues.pop(key, None)
        if q is None:
            return 0
        dropped = q.size
        self._size -= q.size
        if q.lease_id:
            lease = self._leases.pop(q.lease_id, None)
            dropped += len(lease.items) if lease is not None else 0
        return dropped

    # ---- internals ----------------------------------------------------------

    def _release(self, lease: Lease, ready_at: float, returned: list[UrlItem]) -> None:
        q = self._queues[lease.key]
        q.lease_id = 0
        for it in reversed(returned):
            q.bands.setdefault(it.band, deque()).appendleft(it)
        q.size += len(returned)
        self._size += len(returned)
        q.ready_at = ready_at
        if q.size:
            self._push(lease.key, q)
        else:
            del self._queues[lease.key]

    def _push(self, key: str, q: _KeyQueue) -> None:
        q.token += 1
        heapq.heappush(self._heaps[q.best_band()], (q.ready_at, next(self._seq), q.token, key))

    def _top(self, band: int) -> tuple[float, int, int, str] | None:
        heap = self._heaps[band]
        while heap:
            entry = heap[0]
            q = self._queues.get(entry[3])
            if q is not None and q.lease_id == 0 and q.token == entry[2]:
                return entry
            heapq.heappop(heap)
        return None

    def _live_expiry(self) -> float | None:
        heap = self._lease_heap
        while heap:
            exp, lid = heap[0]
            lease = self._leases.get(lid)
            if lease is not None and lease.expires_at == exp:
                return exp
            heapq.heappop(heap)  # completed, or superseded by a renewal
        return None
