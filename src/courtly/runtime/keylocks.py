"""Per-key request locks that free themselves: memory for the keys in use only.

What it owns: the lock a request to a politeness key holds while it waits for
its turn and is on the wire (runtime/requests.py). The lease makes one fetch
loop per key, so the lock only matters for the rare request made for another
key (a robots.txt redirect to another site).

How it works: an entry is made when a key's first user arrives and removed
when its last user leaves, so the map holds the keys with a request waiting
or in flight, never every key the crawl has seen (one `asyncio.Lock` per key
ever seen was the issue 16 leak).

Rules: no waits of its own; `key in locks` is True while anyone holds or
waits for the key's lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import AsyncIterator

__all__ = ["KeyLocks"]


@dataclass(slots=True)
class _Held:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0      # holding or waiting


class KeyLocks:
    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: object) -> bool:
        return key in self._held

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """The key's lock for the duration of the block."""
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held()
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if not held.users:
                del self._held[key]
