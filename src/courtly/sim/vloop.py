"""Virtual time for the real runtime: an asyncio event loop whose clock jumps.

Theory of operation
-------------------
`VirtualLoop` is a `SelectorEventLoop` whose `time()` is a number it keeps.
asyncio asks its selector to wait for I/O for as long as the next timer is
away; `_JumpSelector` first looks (without waiting) for real events (the
loop's self-pipe, a thread's result), and when there are none it moves the
virtual time to that timer instead of blocking. So `asyncio.sleep`,
`call_later`, `wait_for` and every `Clock` wait (shell/clock.LoopClock) run in
virtual time, in one thread, in an order fixed by the program alone: the same
program gives the same interleaving, bit for bit.

Rules:
- Work in a thread (`run_in_executor`, `asyncio.to_thread`) is waited for in
  real time; virtual time stands still meanwhile.
- Nothing ready, no timer and no thread working means every task waits for
  something nobody will do: `VirtualStall` is raised instead of hanging.
- `leap(s)` moves virtual time forward at once (a suspended machine, a clock
  step): timers that fall due run next, late.
- `turns_max` bounds the loop's turns: a livelock ends as `VirtualStall`.

`VirtualClock` is the `Clock` port over the loop: `now()` is the loop's
virtual time, which starts at a wall-clock instant (`start_at`), and the waits
of `LoopClock`. One scale for both matters: an instant turned into a delay
and back (`at - now()`, then `time() + delay`) comes back as the same float,
where an offset added on one side only would round it a little short, and a
wait for it would end a rounding error early, again and again.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any, Awaitable, Callable, TypeVar

from courtly.shell.clock import LoopClock

__all__ = ["VirtualLoop", "VirtualClock", "VirtualStall", "run_virtual"]

T = TypeVar("T")
REAL_WAIT_S = 1.0      # a thread's work is waited for in slices this long (real time)


class VirtualStall(RuntimeError):
    """Every task waits and nothing (timer, I/O, thread) will wake one."""


class _JumpSelector(selectors.BaseSelector):
    """The default selector, except that a wait with nothing to wait for jumps time."""

    def __init__(self, loop: "VirtualLoop") -> None:
        self._inner = selectors.DefaultSelector()
        self._loop = loop

    def register(self, fileobj, events, data=None):
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj):
        return self._inner.unregister(fileobj)

    def modify(self, fileobj, events, data=None):
        return self._inner.modify(fileobj, events, data)

    def get_map(self):
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: float | None = None):
        loop = self._loop
        loop.turns += 1
        if loop.turns > loop.turns_max:
            raise VirtualStall(f"more than {loop.turns_max} event loop turns (a livelock?)")
        events = self._inner.select(0)
        if events or timeout == 0:
            return events
        if loop.threads_busy:
            return self._inner.select(REAL_WAIT_S if timeout is None else min(timeout, REAL_WAIT_S))
        if timeout is None:
            raise VirtualStall(f"every task waits and nothing will wake one (virtual time {loop.time():.3f} s)")
        loop.advance(timeout)
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time (see the module doc)."""

    def __init__(self, start_at: float = 0.0, *, turns_max: int = 10_000_000) -> None:
        self._vnow = start_at
        self.turns = 0
        self.turns_max = turns_max
        self.threads_busy = 0
        super().__init__(_JumpSelector(self))
        # timers due within this are run in the same turn; coarser than the
        # monotonic clock's so that a jump landing a rounding error short of
        # a timer still runs it
        self._clock_resolution = 1e-6

    def time(self) -> float:
        return self._vnow

    def advance(self, s: float) -> None:
        if s > 0:
            self._vnow += s

    def leap(self, s: float) -> None:
        """Virtual time moves `s` seconds at once (a suspended machine)."""
        self.advance(s)

    def run_in_executor(self, executor, func, *args):
        fut = super().run_in_executor(executor, func, *args)
        self.threads_busy += 1

        def done(_: object) -> None:
            self.threads_busy -= 1

        fut.add_done_callback(done)
        return fut


class VirtualClock(LoopClock):
    """The Clock port on a `VirtualLoop`'s time (wall-clock seconds)."""

    def __init__(self, loop: VirtualLoop) -> None:
        self.loop = loop

    def now(self) -> float:
        return self.loop.time()


def run_virtual(main: Callable[[VirtualLoop], Awaitable[T]], *, start_at: float = 0.0,
                turns_max: int = 10_000_000) -> T:
    """Run `main(loop)` to its end on a new `VirtualLoop` whose time starts at
    `start_at`, then close the loop."""
    loop = VirtualLoop(start_at, turns_max=turns_max)
    try:
        asyncio.set_event_loop(loop)
        task = loop.create_task(_call(main, loop))
        return loop.run_until_complete(task)
    finally:
        try:
            _cancel_rest(loop)
        finally:
            asyncio.set_event_loop(None)
            loop.close()


async def _call(main: Callable[[VirtualLoop], Awaitable[Any]], loop: VirtualLoop) -> Any:
    return await main(loop)


def _cancel_rest(loop: VirtualLoop) -> None:
    rest = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in rest:
        t.cancel()
    if rest:
        loop.turns_max = loop.turns + 10_000   # the cancellations get their own bounded turns
        loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
