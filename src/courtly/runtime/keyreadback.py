"""A distributed worker's returning keys: their evicted state read back, ahead, from PostgreSQL.

What it owns: the one step the worker adds to the single machine's bounded
per-key memory (runtime/keymemory.py: the same sweep, the same snapshots in
the same `hosts` and `robots` rows). The core reads an evicted key's snapshot
synchronously, when the key is first touched again; the shared store is
async, so the worker reads it before: `before_queue` is given the (key, URL)
pairs of a claim, before they are queued, and puts back into memory the
saved politeness state of their keys that are not in memory and the saved
robots.txt state of their origins.

How it works: nothing is read until this worker has evicted something (a
worker under the bound makes no extra query). The newest snapshot wins: a
key evicted into a batch not yet written (the store away, or the batch
still being cut) is read from the key memory's copy of it, else from the store (`hosts_of`,
`robots_for`: one query each per claim). So a returning key keeps its
delay, back-off, health and robots.txt copy, and is not fetched before its
saved next-fetch instant.

Rules: at most two queries per claim, only for keys and origins not in
memory; no state of its own (what is read goes straight into the engine's
politeness and robots book).
"""

from __future__ import annotations

from typing import Iterable

from courtly.core.origin import origin_text_of_normalized
from courtly.core.politeness import Politeness
from courtly.core.robots import Phase, RobotsBook
from courtly.ports import SharedHostState
from courtly.runtime.keymemory import KeyMemory

__all__ = ["KeyReadBack"]


class KeyReadBack:
    def __init__(self, store: SharedHostState, memory: KeyMemory, politeness: Politeness, robots: RobotsBook) -> None:
        self._store = store
        self._memory = memory
        self._politeness = politeness
        self._robots = robots

    async def before_queue(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Read back the evicted state of the keys and origins of (key, URL)
        `pairs` about to be queued; returns how many entries came back."""
        if not self._memory.may_be_saved():
            return 0
        pairs = list(pairs)
        keys = sorted({k for k, _ in pairs if not self._politeness.holds(k)})
        origins = sorted({o for o in (origin_text_of_normalized(u) for _, u in pairs)
                          if self._robots.phase(o) is Phase.ABSENT})
        if not keys and not origins:
            return 0
        hosts, robots = self._memory.take_unwritten(keys, origins)
        keys = [k for k in keys if k not in hosts]
        origins = [o for o in origins if o not in robots]
        stored_hosts = await self._store.hosts_of(keys) if keys else {}
        stored_robots = await self._store.robots_for(origins) if origins else {}
        return self._memory.restore({**stored_hosts, **hosts}, {**stored_robots, **robots},
                                    self._politeness, self._robots)
