"""Overflow: queued URLs that wait in the store, not in memory.

The frontier (core/frontier) holds its queued URLs as objects in memory, about
250 bytes each: ten million queued URLs would need 2.5 GB. So the in-memory
frontier is a window: at most `frontier.key_memory_max` URLs per politeness
key and `frontier.memory_max` in all. A URL admitted beyond the window is not
lost and not refused: admission has already put it in the batch as a queued
URL record, so it is in the store from the next commit on. It is only not held
in memory; its key is noted here with a count.

After each commit, when the store holds everything decided so far, keys whose
in-memory queue ran low are read back from the store in band order (an index
range scan per key, `urls_queued_key`). The read skips the URLs still held in
memory or in flight (`Frontier.urls_of`) and those whose page is being
extracted (their records say queued until their batch commits), so a URL is
never queued twice. A key leaves the overflow when the store has no more
queued URLs for it than that.

Work per commit is bounded: keys are visited round robin, at most
`VISIT_MAX` of them and at most `READS_MAX` store reads per commit.

Resume needs nothing special: every queued URL is a store record, `load`
reads them all through the same window, and the rest are noted here again.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from courtly.core.types import UrlItem

if TYPE_CHECKING:
    from courtly.runtime.roles import OverflowHost

__all__ = ["Overflow", "VISIT_MAX", "READS_MAX"]

VISIT_MAX = 20_000     # keys looked at per commit
READS_MAX = 2_000      # store reads per commit (each ~50 us on a warm index)


class Overflow:
    def __init__(self, crawler: "OverflowHost") -> None:
        self.c = crawler
        f = crawler.cfg.frontier
        self.memory_max = f.memory_max
        self.key_max = f.key_memory_max
        self._keys: dict[str, int] = {}   # key -> URLs in the store only (an estimate)
        self._total = 0
        self.spilled = 0                  # URLs ever left in the store only
        self.read_back = 0                # URLs read back into memory
        self.reads = 0                    # store reads made

    def __len__(self) -> int:
        """About how many queued URLs wait in the store only."""
        return self._total

    def __bool__(self) -> bool:
        return bool(self._keys)

    @property
    def key_count(self) -> int:
        return len(self._keys)

    def keep_out(self, item: UrlItem) -> bool:
        """True when `item` (already a queued record in the store or in the
        current batch) stays in the store only."""
        key = item.key
        n = self._keys.get(key)
        f = self.c.frontier
        if n is None and len(f) < self.memory_max and f.queued_for(key) < self.key_max:
            return False
        self._keys[key] = (n or 0) + 1
        self._total += 1
        self.spilled += 1
        return True

    def note(self, key: str, n: int) -> None:
        """`n` URLs of `key` became queued records in the store without passing
        through `queue` (turned away by a quota, queued again at a new day):
        read back like those kept out."""
        if n > 0:
            self._keys[key] = self._keys.get(key, 0) + n
            self._total += n
            self.c.wake()

    def refill(self, now: float) -> int:
        """Read URLs back for keys running low. Call right after a commit."""
        if not self._keys:
            return 0
        c = self.c
        f = c.frontier
        room = self.memory_max - len(f)
        low = self.key_max // 2
        extracting = c.results.extracting
        added = reads = 0
        changed = False
        for key in list(islice(self._keys, VISIT_MAX)):
            n = self._keys.pop(key)
            have = f.queued_for(key)
            if have > low or room <= 0 or reads >= READS_MAX:
                self._keys[key] = n          # to the back of the round
                continue
            want = min(self.key_max - have, room)
            held = f.urls_of(key)
            limit = want + len(held) + len(extracting)
            rows = c.store.queued_of_key(key, limit)
            reads += 1
            got = 0
            full = False                      # rows left unread: the key stays here
            for url, _key, band, depth, redirects, via, attempts in rows:
                if got >= want:
                    full = True
                    break
                if url in held or url in extracting:
                    continue
                item = UrlItem(url=url, key=key, band=band, depth=depth, via=via, redirects=redirects)
                if attempts:
                    c.attempts[url] = attempts
                c.queue(item, now)
                got += 1
            added += got
            room -= got
            changed = True
            exhausted = len(rows) < limit and not full   # the store has nothing more for this key
            left = 0 if exhausted else max(n - got, 1)
            self._total += left - n
            if left:
                self._keys[key] = left
        self.reads += reads
        self.read_back += added
        if changed:
            c.wake()                          # queued work, or the overflow may be empty now
        return added
