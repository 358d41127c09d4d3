"""Per-IP lease requests of one PostgresStore, sent together: one statement in flight.

What it owns: the round trips of `ip_lease`, `ip_slot` and `ip_release`. A
worker asks for an IP's lease when it first sends to it (at the start of a
crawl, or when many hosts come in at once, many IPs in the same moment);
an IP several workers share costs a slot and a release per request. Sent
one by one they would cost a pooled connection, a statement and an answer
each.

How it works: the first request of an event-loop turn schedules a flush
for the end of the turn (`call_soon`); every request made before it runs
joins it. At most one statement is in flight: requests made while one is
out wait for its answer and then go together in the next, so the busier the
worker, the more requests a statement carries (a request waits at most one
more round trip). The flush sends them as one statement calling the same
PL/pgSQL function once per request (`unnest ... WITH ORDINALITY`,
`LATERAL`), and each caller gets its own answer. A VOLATILE function sees
what the calls before it in the statement wrote, so two requests on one IP
in a flush are decided exactly as two statements in that order would be.

Rules: the requests waiting are bounded by the callers (each awaits its
answer); requests are ordered by IP inside a statement, so two workers'
statements lock IP rows in the same order and cannot deadlock each other (a
deadlock or serialization failure is retried anyway); a failed statement
fails every request in it with the same error; a caller that stops waiting
does not cancel the statement (a lease granted then is given back idle at
the holder's next renewal, or lapses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = ["Coalescer", "LEASE_SQL", "SLOT_SQL", "RELEASE_SQL"]

LEASE_SQL = (
    "SELECT r.answer, r.wait_s FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[],"
    " $5::float8[]) WITH ORDINALITY AS t(ip, owner, now, lease, hold, n),"
    " LATERAL courtly_ip_lease(t.ip, t.owner, t.now, t.lease, t.hold) AS r ORDER BY t.n")
SLOT_SQL = (
    "SELECT r.granted, r.wait_s, r.token FROM unnest($1::text[], $2::float8[], $3::int[], $4::int[],"
    " $5::float8[], $6::float8[], $7::float8[]) WITH ORDINALITY AS t(ip, now, conc, win, span, hold, shared, n),"
    " LATERAL courtly_ip_slot(t.ip, t.now, t.conc, t.win, t.span, t.hold, t.shared) AS r ORDER BY t.n")
RELEASE_SQL = (
    "SELECT count(courtly_ip_release(t.ip, t.token, t.now)) FROM unnest($1::text[], $2::float8[],"
    " $3::float8[]) WITH ORDINALITY AS t(ip, token, now, n)")


class Coalescer:
    """Collect the argument tuples submitted in one loop turn, or while the
    previous `send` was out, and run `send(rows)` once for them; `send`
    returns one answer per row, in order. `rows[i][0]` is the sort key
    (the IP); rows are sent sorted by it, answers go back to their callers."""

    def __init__(self, send: Callable[[list[tuple]], Awaitable[Sequence[Any]]]) -> None:
        self._send = send
        self._rows: list[tuple] = []
        self._waiters: list[asyncio.Future] = []
        self._tasks: set[asyncio.Task] = set()
        self._pending = False       # a flush is scheduled or its statement is in flight
        self.flushes = 0
        self.rows = 0

    def submit(self, row: tuple) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        if not self._pending:
            self._pending = True
            loop.call_soon(self._flush)
        fut = loop.create_future()
        self._rows.append(row)
        self._waiters.append(fut)
        return fut

    def _flush(self) -> None:
        rows, waiters = self._rows, self._waiters
        self._rows, self._waiters = [], []
        if not rows:
            self._pending = False
            return
        order = sorted(range(len(rows)), key=lambda i: rows[i][0])
        task = asyncio.get_running_loop().create_task(self._run([rows[i] for i in order],
                                                                [waiters[i] for i in order]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, rows: list[tuple], waiters: list[asyncio.Future]) -> None:
        self.flushes += 1
        self.rows += len(rows)
        try:
            answers = await self._send(rows)
        except asyncio.CancelledError:
            # only the loop's shutdown cancels a flush: every request still here ends with it
            for w in (*waiters, *self._waiters):
                w.cancel()
            self._rows, self._waiters, self._pending = [], [], False
            raise
        except Exception as e:
            for w in waiters:
                if not w.done():
                    w.set_exception(e)
                    w.exception()    # retrieved here: a caller that stopped waiting logs nothing
        else:
            for w, a in zip(waiters, answers, strict=True):
                if not w.done():
                    w.set_result(a)
        self._flush()           # what came meanwhile goes now, or nothing is pending any more
