"""Tests for the crawler main loop's wake-up call (runtime/wakeup.py), in
virtual time (sim/vloop.py): its timeout is a timer of the crawl's clock."""

from courtly.runtime.wakeup import Wakeup
from courtly.sim.vloop import VirtualClock, run_virtual

T0 = 1_700_000_000.0


def test_set_ends_a_wait_without_a_timeout():
    async def go(loop):
        w = Wakeup(VirtualClock(loop))
        loop.call_later(0.01, w.set)
        await w.wait(None)
        return w.is_set(), loop.time()

    assert run_virtual(go, start_at=T0) == (True, T0 + 0.01)


def test_wait_returns_at_once_when_set_before_and_blocks_after_clear():
    async def go(loop):
        w = Wakeup(VirtualClock(loop))
        w.set()
        await w.wait(None)          # already set: no sleep
        w.clear()
        t0 = loop.time()
        await w.wait(0.05)          # nothing sets it: the timeout ends the wait
        return loop.time() - t0, w.is_set()

    waited, flag = run_virtual(go, start_at=T0)
    assert abs(waited - 0.05) < 1e-6 and not flag


def test_a_set_after_a_timed_out_wait_does_not_fail():
    async def go(loop):
        w = Wakeup(VirtualClock(loop))
        await w.wait(0.0)
        w.set()                      # no waiter any more
        await w.wait(10.0)
        return w.is_set(), loop.time()

    assert run_virtual(go, start_at=T0) == (True, T0)

