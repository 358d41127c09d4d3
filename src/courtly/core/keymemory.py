"""Bounded memory per key: the sweep that keeps a per-key map under a count.

What it owns: the one eviction rule every long-lived per-key map of the core
uses (politeness keys and IPs, robots.txt entries, ban runs), so a crawl that
touches millions of hosts holds only about `keep` of each in memory.

How it works: a dict's insertion order is its age order. `sweep` looks at the
oldest entries first, while the map holds more than `keep`: an idle entry is
removed and handed back to the caller (who persists it, so it can be read
back when the key returns); a busy one is moved to the back, so the next
sweep looks at the others first. At most `scan_max` entries are looked at
per sweep, so its cost is bounded whatever the size of the map, and a map
whose entries are all busy simply stays above `keep` until they go idle (a
key is never evicted while anything of it is pending: the bound gives way,
politeness does not).

Rules: pure; the caller says what idle means (`idle(key, value)`), and only
the caller's store makes an eviction lossless.
"""

from __future__ import annotations

from itertools import islice
from typing import Callable, TypeVar

__all__ = ["sweep", "SCAN_MAX"]

K = TypeVar("K")
V = TypeVar("V")

SCAN_MAX = 5_000   # entries looked at per sweep (each sweep runs at a commit)


def sweep(entries: dict[K, V], keep: int, idle: Callable[[K, V], bool],
          scan_max: int = SCAN_MAX) -> list[tuple[K, V]]:
    """Remove idle entries, oldest first, until `entries` holds at most `keep`
    or `scan_max` were looked at; returns the removed (key, value) pairs."""
    if keep < 0 or scan_max < 1:
        raise ValueError("keep must be >= 0 and scan_max >= 1")
    over = len(entries) - keep
    if over <= 0:
        return []
    # the candidates are read first: popping from the front of a dict while
    # iterating it again from the start each time would be quadratic
    out: list[tuple[K, V]] = []
    for k in list(islice(entries, scan_max)):
        if len(out) >= over:
            break
        v = entries.pop(k)
        if idle(k, v):
            out.append((k, v))
        else:
            entries[k] = v   # busy: to the back
    return out
