"""When a simulated page changes: a seeded Poisson process per page.

Time is split into blocks of length `EVENTS_PER_BLOCK / rate`; block b holds
Poisson(EVENTS_PER_BLOCK) events placed uniformly inside it, drawn from a
generator seeded by (page key, b). So the events of any page up to any time
are a pure function of (key, rate, t): no state, nothing pre-generated, and
the cost of `epoch_at` grows with rate * t / 8, not with the size of the web.

The *epoch* of a page at time t (seconds since the web started) is the number
of events in (0, t]; a page's content, ETag and Last-Modified are functions
of its epoch. Rate 0 means the page never changes.
"""

from __future__ import annotations

import math
import random

__all__ = ["epoch_at", "change_times", "last_change_s", "EVENTS_PER_BLOCK"]

EVENTS_PER_BLOCK = 8.0
_BLOCKS_MAX = 1_000_000  # bound on work per call (1M blocks = 8M expected events)


def _block_events(key: int, b: int, rate_per_s: float) -> list[float]:
    length = EVENTS_PER_BLOCK / rate_per_s
    rng = random.Random((key << 24) ^ b)
    limit = math.exp(-EVENTS_PER_BLOCK)
    count, p = 0, rng.random()
    while p > limit:
        count += 1
        p *= rng.random()
    start = b * length
    return sorted(start + rng.random() * length for _ in range(count))


def _block_count(key: int, b: int) -> int:
    rng = random.Random((key << 24) ^ b)
    limit = math.exp(-EVENTS_PER_BLOCK)
    count, p = 0, rng.random()
    while p > limit:
        count += 1
        p *= rng.random()
    return count


def _split(rate_per_s: float, t_s: float) -> tuple[int, float]:
    length = EVENTS_PER_BLOCK / rate_per_s
    b = int(t_s // length)
    if b > _BLOCKS_MAX:
        raise ValueError(f"t_s={t_s} too far for rate {rate_per_s}: more than {_BLOCKS_MAX} blocks")
    return b, length


def epoch_at(key: int, rate_per_s: float, t_s: float) -> int:
    """Number of changes of page `key` in (0, t_s]."""
    if rate_per_s <= 0.0 or t_s <= 0.0:
        return 0
    b, _ = _split(rate_per_s, t_s)
    done = sum(_block_count(key, i) for i in range(b))
    return done + sum(1 for e in _block_events(key, b, rate_per_s) if e <= t_s)


def change_times(key: int, rate_per_s: float, until_s: float) -> list[float]:
    """All change instants of page `key` in (0, until_s], ascending."""
    if rate_per_s <= 0.0 or until_s <= 0.0:
        return []
    b, _ = _split(rate_per_s, until_s)
    out: list[float] = []
    for i in range(b + 1):
        out.extend(e for e in _block_events(key, i, rate_per_s) if 0.0 < e <= until_s)
    return out


def last_change_s(key: int, rate_per_s: float, t_s: float) -> float | None:
    """The instant of the latest change at or before t_s, or None if none yet."""
    if rate_per_s <= 0.0 or t_s <= 0.0:
        return None
    b, _ = _split(rate_per_s, t_s)
    for i in range(b, -1, -1):
        events = [e for e in _block_events(key, i, rate_per_s) if 0.0 < e <= t_s]
        if events:
            return events[-1]
    return None
