"""A manual clock for tests that drive a Crawler without real time: `now()`
is `t`, and `sleep_until(at)` moves it to `at` at once. Its other waits
(`timer`, `sleep`, `wait_until`: shell/clock.LoopClock) run on the event loop's
own time from `t`."""

from __future__ import annotations

from courtly.shell.clock import LoopClock


class ManualClock(LoopClock):
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    async def sleep_until(self, at: float) -> None:
        self.t = max(self.t, at)
