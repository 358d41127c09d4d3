"""A calendar queue: items popped in due-instant order, as from a heap.

Used by the recrawl scheduler (`courtly.core.recrawl`) for its millions of
known URLs. Pure.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Any, Iterator

__all__ = ["DueQueue", "QUEUED"]

QUEUED = 0                   # the state of an entry that waits (others are skipped as stale)

_FAR_S = 1e300               # due instants past this (inf) share the last bucket

# (due_at, seq, token, entry): the entry has `token` and `state` (recrawl._Entry)
Item = tuple[float, int, int, Any]


class DueQueue:
    """(due_at, seq, token, entry) items, popped in (due_at, seq) order as from a
    heap. An item is live while its token equals `entry.token` and the entry's
    `state` is QUEUED; the others are dropped when met (lazy deletion).

    A calendar queue: an item is appended to the bucket of its due instant
    (`width_s` wide, bucket numbers in a small heap) and a bucket is sorted
    when it becomes the lowest: a heap's order, without sifting through log n
    levels of a large heap that is cold in the cache."""

    __slots__ = ("_width", "_buckets", "_keys", "_sorted", "size")

    def __init__(self, width_s: float) -> None:
        self._width = width_s
        self._buckets: dict[int, list[Item]] = {}
        self._keys: list[int] = []
        self._sorted: int | None = None     # the one bucket kept sorted, descending (popped from the end)
        self.size = 0

    def push(self, item: Item) -> None:
        k = int(item[0] // self._width) if item[0] < _FAR_S else 1 << 62
        bucket = self._buckets.get(k)
        if bucket is None:
            self._buckets[k] = [item]
            heapq.heappush(self._keys, k)
        else:
            bucket.append(item)
            if k == self._sorted:
                self._sorted = None
        self.size += 1

    def _front(self) -> list[Item]:
        k = self._keys[0]
        bucket = self._buckets[k]
        if self._sorted != k:
            bucket.sort(reverse=True)
            self._sorted = k
        return bucket

    def pop_due(self, horizon: float, n: int = 1) -> list[Item]:
        """Remove and return the first items due by `horizon`, at most `n` of them."""
        out: list[Item] = []
        while len(out) < n and self._keys:
            bucket = self._front()
            while bucket and len(out) < n and bucket[-1][0] <= horizon:
                out.append(bucket.pop())
            if bucket:
                break
            del self._buckets[heapq.heappop(self._keys)]
            self._sorted = None
        self.size -= len(out)
        return out

    def top(self) -> float | None:
        """Due instant of the first live item (stale ones met on the way are dropped)."""
        while self._keys:
            due, _, tok, e = self._front()[-1]
            if tok == e.token and e.state == QUEUED:
                return due
            self.pop_due(math.inf)
        return None

    def items(self) -> Iterator[Item]:
        return itertools.chain.from_iterable(self._buckets.values())

    def compact(self) -> None:
        """Drop the stale items."""
        for k, bucket in list(self._buckets.items()):
            bucket[:] = [x for x in bucket if x[2] == x[3].token and x[3].state == QUEUED]
            if not bucket:
                del self._buckets[k]
        self._keys = sorted(self._buckets)
        self.size = sum(map(len, self._buckets.values()))
        self._sorted = None
