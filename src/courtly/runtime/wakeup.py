"""The crawler main loop's wake-up call.

`Wakeup` is `asyncio.Event` plus `asyncio.wait_for` for one waiter, without
the task and the cancellation `wait_for` makes per wait: the main loop waits
once per event-loop turn in which something changed, so that cost was paid
per fetched page (9-19 % of the crawler process in py-spy). Its timeout is a
timer of the crawl's clock (`Clock.timer`), so it runs in virtual time when
the clock does (sim/vloop.py).
"""

from __future__ import annotations

import asyncio

__all__ = ["Wakeup"]


class Wakeup:
    """The main loop's wake-up call: `set()` ends the current or next `wait`.

    Like `asyncio.Event` with `asyncio.wait_for`, for one waiter, without the
    task and the cancellation that `wait_for` costs on every wait (the main
    loop waits once per event-loop turn in which something changed)."""

    __slots__ = ("_clock", "_flag", "_waiter")

    def __init__(self, clock) -> None:
        self._clock = clock
        self._flag = False
        self._waiter: asyncio.Future | None = None

    def set(self) -> None:
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    async def wait(self, timeout: float | None = None) -> None:
        """Until `set()` is called or `timeout` seconds have passed."""
        if self._flag:
            return
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        clock = self._clock
        timer = None if timeout is None else clock.timer(clock.now() + timeout, _wake_up, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


def _wake_up(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)
