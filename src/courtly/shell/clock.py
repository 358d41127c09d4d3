"""The clocks the runtime waits on: every wait of the runtime goes through one.

`LoopClock` holds the waits, written once over the running event loop's
timers and the clock's own `now()`: `sleep_until(at)`, `timer(at, callback)`
(a cancellable call at an instant, the cheapest wait: no task, no future),
`wait_until(awaitable, at)` (until it completes or the instant comes, the
runtime's `asyncio.wait_for`) and `sleep(s)`. An instant is turned into a
delay from `now()` when the wait starts, so a clock whose `now()` runs with
the loop's time (sim/vloop's virtual clock) makes every wait virtual.

`SystemClock` is the only reader of the wall clock in courtly: `now()` is
wall-clock seconds (time.time) so instants saved in the store (next fetch
times, robots expiry) stay meaningful across a restart.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

__all__ = ["LoopClock", "SystemClock"]


class LoopClock:
    """The waits of the `Clock` port over the running loop; `now()` comes from the subclass."""

    def now(self) -> float:
        raise NotImplementedError

    async def sleep_until(self, at: float) -> None:
        delay = at - self.now()
        if delay > 0:
            await asyncio.sleep(delay)

    async def sleep(self, s: float) -> None:
        """`s` seconds of this clock (a period, e.g. the commit interval): a
        timer, so a test clock whose `sleep_until` jumps still waits here."""
        fut = asyncio.get_running_loop().create_future()
        timer = self.timer(self.now() + s, _done, fut)
        try:
            await fut
        finally:
            timer.cancel()

    def timer(self, at: float, callback: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
        """`callback(*args)` at the instant `at` (at once if it is past); `.cancel()` it."""
        return asyncio.get_running_loop().call_later(max(0.0, at - self.now()), callback, *args)

    async def wait_until(self, aw: Awaitable[Any], at: float | None) -> bool:
        """Until `aw` completes or the instant `at` comes (None: no limit).
        True when `aw` completed (its exception, if any, is raised). A coroutine
        still running at `at` is cancelled; a future given is left as it is
        (its owner decides)."""
        fut = asyncio.ensure_future(aw)
        ours = fut is not aw
        if at is None or fut.done():
            await fut
            return True
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()

        def wake(_: object = None) -> None:
            if not waiter.done():
                waiter.set_result(None)

        fut.add_done_callback(wake)
        timer = self.timer(at, wake)
        try:
            await waiter
        finally:
            timer.cancel()
            fut.remove_done_callback(wake)
            if ours and not fut.done():
                fut.cancel()
        if not fut.done():
            return False
        fut.result()   # its exception, if it ended with one
        return True


def _done(fut: "asyncio.Future[Any]") -> None:
    if not fut.done():
        fut.set_result(None)


class SystemClock(LoopClock):
    def now(self) -> float:
        return time.time()
