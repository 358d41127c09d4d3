"""URL-seen: a Bloom filter in front of the exact store (DESIGN "Stores").

The exact store (the `urls` table's primary key) is the authority for "seen".
The Bloom filter is only a negative cache: when it says *no*, the URL is
certainly new and the store lookup is skipped; when it says *maybe*, the
caller asks the store. A false positive therefore costs one lookup, never a
lost URL. The filter is sized from config, rebuilt from the store on open
(so it needs no file of its own), and reports its fill ratio; past
`fill_alarm` (0.5: the share of bits set when it holds `capacity` URLs) the
false-positive rate has degraded. `alarm` is that verdict for the metrics;
runtime/bloom.py tells the operator and rebuilds the filter from the store
at twice the capacity (`resized`), up to a maximum.

Counting the bits set is a pass over the whole filter and the alarm is asked
after every commit, so `alarm` counts only when the URLs added since the last
count could have raised the fill past the alarm. Below the alarm's share q of
bits set, one URL sets at most k bits and each bit raises the estimate
-(m/k) ln(1 - bits/m) by at most 1/(k (1 - q)), so n URLs raise it by at most
n/(1 - q); q is taken as 1 - (1 - alarm)^2, which holds while the filter's
own number of hashes is at most twice the one computed here. Its plain twin
(count every time) is held equal by tests/core/test_seen_alarm.py.

Pure: no I/O; the filter lives in memory.
"""

from __future__ import annotations

import math
from typing import Iterable

from rbloom import Bloom

__all__ = ["SeenFilter"]


class SeenFilter:
    def __init__(self, capacity: int, error_rate: float, *, fill_alarm: float = 0.5) -> None:
        if capacity < 1 or not 0 < error_rate < 1:
            raise ValueError("capacity must be >= 1 and error_rate in (0, 1)")
        self.capacity = capacity
        self.error_rate = error_rate
        self.fill_alarm = fill_alarm
        self._bloom = Bloom(capacity, error_rate)
        bits = self._bloom.size_in_bits
        self._hashes = max(1, round(bits / capacity * math.log(2)))
        self.lookups = 0
        self.negatives = 0          # lookups the filter answered alone
        self.false_positives = 0    # "maybe" answers the store said were new
        self._counted = 0.0         # approx_items at the last count of the bits
        self._added = 0             # add() calls since then
        self._uncounted = False     # update() since then: how many is unknown

    def __contains__(self, url: str) -> bool:
        self.lookups += 1
        hit = url in self._bloom
        if not hit:
            self.negatives += 1
        return hit

    def add(self, url: str) -> None:
        self._bloom.add(url)
        self._added += 1

    def update(self, urls: Iterable[str]) -> None:
        self._bloom.update(urls)
        self._uncounted = True

    def note_false_positive(self) -> None:
        self.false_positives += 1

    @property
    def approx_items(self) -> float:
        """The filter's estimate of the URLs it holds (counts the bits set)."""
        n = float(self._bloom.approx_items)
        self._counted, self._added, self._uncounted = n, 0, False
        return n

    @property
    def fill_ratio(self) -> float:
        """Estimated fraction of bits set: 1 - exp(-k n / m)."""
        return self._fill(self.approx_items)

    def _fill(self, items: float) -> float:
        return 1.0 - math.exp(-self._hashes * items / self._bloom.size_in_bits)

    @property
    def alarm(self) -> bool:
        if not self._could_alarm():
            return False
        return self.fill_ratio > self.fill_alarm

    def _could_alarm(self) -> bool:
        """False when the adds since the last count cannot have raised the fill
        past the alarm (see the module doc), so the bits need no count."""
        if self._uncounted or self.fill_alarm >= 1.0:
            return True
        bound = self._counted + self._added / (1.0 - self.fill_alarm) ** 2
        return self._fill(bound * (1.0 + 1e-9)) > self.fill_alarm

    @property
    def past_capacity(self) -> bool:
        """More URLs added than it was sized for (the error rate no longer holds)."""
        return self.approx_items > self.capacity

    def resized(self, capacity: int) -> "SeenFilter":
        """An empty filter of `capacity` with this one's error rate, alarm and
        counters; the caller fills it from the exact store."""
        new = SeenFilter(capacity, self.error_rate, fill_alarm=self.fill_alarm)
        new.lookups, new.negatives, new.false_positives = self.lookups, self.negatives, self.false_positives
        return new
