"""SystemClock: the only reader of the wall clock in courtly.

`now()` is wall-clock seconds (time.time) so instants saved in the store
(next fetch times, robots expiry) stay meaningful across a restart.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["SystemClock"]


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep_until(self, at: float) -> None:
        delay = at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
