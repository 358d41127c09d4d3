"""Tests for the crawler main loop's wake-up call (runtime/wakeup.py)."""

import asyncio

from courtly.runtime.wakeup import Wakeup


def test_set_ends_a_wait_without_a_timeout():
    async def go():
        w = Wakeup()
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, w.set)
        await asyncio.wait_for(w.wait(None), 5.0)
        return w.is_set()

    assert asyncio.run(go())


def test_wait_returns_at_once_when_set_before_and_blocks_after_clear():
    async def go():
        w = Wakeup()
        w.set()
        await w.wait(None)          # already set: no sleep
        w.clear()
        t0 = asyncio.get_running_loop().time()
        await w.wait(0.05)          # nothing sets it: the timeout ends the wait
        return asyncio.get_running_loop().time() - t0, w.is_set()

    waited, flag = asyncio.run(go())
    assert waited >= 0.04 and not flag


def test_a_set_after_a_timed_out_wait_does_not_fail():
    async def go():
        w = Wakeup()
        await w.wait(0.0)
        w.set()                      # no waiter any more
        await w.wait(10.0)
        return w.is_set()

    assert asyncio.run(go())
