"""The URL-seen Bloom filter's fill alarm, raised and acted on.

`core/seen.SeenFilter` computes its fill ratio; past `fill_alarm` its
false-positive rate no longer holds (each false positive costs one store
lookup, never a lost URL). After each commit, when the store holds every URL
the filter holds, `BloomWatch.after_commit` checks the alarm:

* below `seen.bloom_capacity_max`, the filter is rebuilt from the store at
  twice its capacity, or twice what it holds if more (the same scan a
  resumed crawl makes when it loads), never above the maximum; a warning
  names the old and new capacity and how long the scan took;
* at the maximum, one warning says so and what to raise; the crawl goes on
  with more store lookups.

`SeenFilter.alarm` and `.fill_ratio` stay readable for the metrics.

Rules: no shell imports (the store is the crawler's port); time from the
crawler's clock; runs only right after a commit (nothing added since then is
missing from the store).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from courtly.runtime.roles import BloomHost

__all__ = ["BloomWatch"]

log = logging.getLogger("courtly")


class BloomWatch:
    def __init__(self, crawler: "BloomHost") -> None:
        self.c = crawler
        self.resizes = 0
        self.at_max_warned = False

    def after_commit(self) -> None:
        c = self.c
        seen = c.seen
        if not seen.alarm:
            return
        cap_max = c.cfg.seen.bloom_capacity_max
        # twice the capacity, or room for twice what it holds (a resumed crawl), within the maximum
        capacity = min(cap_max, max(seen.capacity * 2, int(seen.approx_items * 2)))
        if capacity <= seen.capacity:
            if not self.at_max_warned:
                self.at_max_warned = True
                log.warning("[%s] URL-seen Bloom filter past its fill alarm (%.2f > %.2f, about %d URLs) at "
                            "seen.bloom_capacity_max = %d: not resized; its false positives rise (each costs "
                            "one store lookup, no URL is lost); raise seen.bloom_capacity_max to resize",
                            c.crawl_id, seen.fill_ratio, seen.fill_alarm, seen.approx_items, cap_max,
                            extra={"event": "bloom_alarm", "crawl_id": c.crawl_id, "fill_ratio": seen.fill_ratio,
                                   "capacity": seen.capacity, "resized": False})
            return
        started, old, fill = c.clock.now(), seen.capacity, seen.fill_ratio
        new = seen.resized(capacity)
        new.update(c.store.iter_urls())
        c.swap_seen(new)
        self.resizes += 1
        log.warning("[%s] URL-seen Bloom filter past its fill alarm (%.2f > %.2f): rebuilt from the store "
                    "with capacity %d (was %d) in %.1f s", c.crawl_id, fill, seen.fill_alarm, new.capacity,
                    old, c.clock.now() - started,
                    extra={"event": "bloom_alarm", "crawl_id": c.crawl_id, "fill_ratio": fill,
                           "capacity": new.capacity, "resized": True})
