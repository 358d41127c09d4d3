"""The faults of a runtime simulation that sit beside the web: the crawl's
store unavailable, and the crawler's process frozen (sim/rtsim.py).

Theory of operation
-------------------
`FlakyStore` wraps the real `SqliteStore` of a seeded run: from
`web.store_down_at_s` for `web.store_down_s` seconds of virtual time, every
call (writes and reads alike) raises what the real store raises when its
database is locked past its busy timeout or its disk is full: an
`sqlite3.OperationalError` with SQLite's result code (SQLITE_BUSY, 5;
SQLITE_FULL, 13), before touching the database, as a rolled-back
transaction leaves it. Outside the window it is the real store.

`Freeze` stalls the process once: the first store commit (`apply`) or fetch
answer (sim/rtweb.SimFetcher) at or after `web.freeze_at_s` moves virtual
time `web.freeze_s` forward *inside* that call, synchronously, so no other
callback runs meanwhile and every timer due falls late, as when a process is
paused by a long GC, a blocking disk or swapping. The code around the call
goes on with instants it read before the stall.

Rules: the windows are drawn from the seed (sim/rtweb.draw_web); nothing here
reads the wall clock.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from courtly.sim.rtweb import RuntimeWeb

__all__ = ["FlakyStore", "Freeze", "store_error"]

_ERRORS = {"locked": ("database is locked", 5), "full": ("database or disk is full", 13)}


def store_error(kind: str) -> sqlite3.OperationalError:
    """The error the sqlite3 driver raises for `kind` (locked | full), with its result code."""
    text, code = _ERRORS[kind]
    e = sqlite3.OperationalError(text)
    e.sqlite_errorcode = code    # as the driver sets it (runtime/exits reads it)
    return e


class Freeze:
    """One stall of the process, at the first chance in `web.freeze_in` from `web.freeze_at_s`."""

    def __init__(self, web: RuntimeWeb, loop, t0: float) -> None:
        self.at = None if web.freeze_at_s is None else t0 + web.freeze_at_s
        self.seconds = web.freeze_s
        self.where = web.freeze_in
        self.loop = loop
        self.done_at: float | None = None     # when the stall ended (None: it has not happened)

    def __call__(self, where: str) -> None:
        if self.at is None or self.done_at is not None or where != self.where or self.loop.time() < self.at:
            return
        self.loop.advance(self.seconds)   # inside the caller's callback: nothing else runs meanwhile
        self.done_at = self.loop.time()


class FlakyStore:
    """The real store, failing every call within the web's outage window."""

    def __init__(self, inner: Any, web: RuntimeWeb, clock, t0: float, freeze: Freeze | None = None) -> None:
        self._inner = inner
        self._clock = clock
        self._freeze = freeze
        down = web.store_down_at_s
        self._window = None if down is None else (t0 + down, t0 + down + web.store_down_s)
        self._kind = web.store_error
        self.failures = 0

    def _check(self) -> None:
        w = self._window
        if w is not None and w[0] <= self._clock.now() < w[1]:
            self.failures += 1
            raise store_error(self._kind)

    def apply(self, batch) -> None:
        if self._freeze is not None:
            self._freeze("commit")
        self._check()
        self._inner.apply(batch)

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._check()
            return attr(*args, **kwargs)

        return call
