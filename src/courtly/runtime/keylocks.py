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
from typing import AsyncIterator

__all__ = ["KeyLocks"]


class KeyLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}     # holding or waiting, per key in `_locks`

    def __len__(self) -> int:
        return len(self._locks)

    def __contains__(self, key: object) -> bool:
        return key in self._locks

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """The key's lock for the duration of the block."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            left = self._users[key] - 1
            if left:
                self._users[key] = left
            else:
                del self._users[key], self._locks[key]
