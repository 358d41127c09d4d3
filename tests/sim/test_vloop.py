"""The virtual-time event loop (sim/vloop.py): timers jump, nothing waits in real time."""

from __future__ import annotations

import asyncio

import pytest

from courtly.sim.vloop import VirtualClock, VirtualStall, run_virtual

T0 = 1_700_000_000.0


def test_an_hour_of_sleep_moves_virtual_time_by_exactly_an_hour():
    async def main(loop):
        clock = VirtualClock(loop)
        await asyncio.sleep(3600)
        await clock.sleep_until(clock.now() + 0.25)
        return clock.now()

    assert run_virtual(main, start_at=T0) == T0 + 3600.25


def test_wait_until_ends_at_the_instant_when_nothing_comes():
    async def main(loop):
        clock = VirtualClock(loop)
        ev = asyncio.Event()
        done = await clock.wait_until(ev.wait(), T0 + 5.0)
        return done, clock.now()

    assert run_virtual(main, start_at=T0) == (False, T0 + 5.0)


def test_wait_until_ends_when_the_awaited_thing_completes_first():
    async def main(loop):
        clock = VirtualClock(loop)
        ev = asyncio.Event()
        loop.call_later(2.0, ev.set)
        done = await clock.wait_until(ev.wait(), T0 + 5.0)
        return done, clock.now()

    assert run_virtual(main, start_at=T0) == (True, T0 + 2.0)


def test_a_timer_from_the_clock_fires_at_its_instant_and_a_cancelled_one_never():
    async def main(loop):
        clock = VirtualClock(loop)
        fired = []
        clock.timer(T0 + 7.0, lambda: fired.append(clock.now()))
        clock.timer(T0 + 3.0, lambda: fired.append("cancelled")).cancel()
        await asyncio.sleep(10)
        return fired

    assert run_virtual(main, start_at=T0) == [T0 + 7.0]


def test_every_task_waiting_for_nothing_raises_a_stall_instead_of_hanging():
    async def main(loop):
        await asyncio.Event().wait()

    with pytest.raises(VirtualStall, match="every task waits"):
        run_virtual(main)


def test_a_loop_that_spins_at_one_instant_is_stopped_as_a_stall():
    async def main(loop):
        while True:
            await asyncio.sleep(0)

    with pytest.raises(VirtualStall, match="turns"):
        run_virtual(main, turns_max=1000)


def test_work_in_a_thread_is_awaited_while_virtual_time_stands_still():
    async def main(loop):
        result = await asyncio.to_thread(sum, range(1000))
        return result, loop.time()

    assert run_virtual(main, start_at=T0) == (499500, T0)


def test_a_leap_makes_waiting_timers_fire_late_at_the_new_time():
    async def main(loop):
        loop.call_later(1.0, loop.leap, 100.0)
        await asyncio.sleep(5.0)
        return loop.time()

    assert run_virtual(main, start_at=T0) == T0 + 101.0
