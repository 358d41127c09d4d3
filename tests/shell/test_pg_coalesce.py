"""The batcher of per-IP lease requests (shell/store/pg_coalesce.py), with a
fake statement: one statement in flight, what comes meanwhile goes together
in the next, each caller gets its own answer, and a failed statement fails
exactly the requests it carried."""

from __future__ import annotations

import asyncio

import pytest

from courtly.shell.store.pg_coalesce import Coalescer


def run(coro):
    async def bounded():
        return await asyncio.wait_for(coro, 10.0)
    return asyncio.run(bounded())


class _Statement:
    """`send`: records each batch, answers after `gate` opens (or fails)."""

    def __init__(self) -> None:
        self.batches: list[list[tuple]] = []
        self.gate = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self, rows: list[tuple]) -> list[str]:
        self.batches.append(rows)
        await self.gate.wait()
        if self.fail is not None:
            err, self.fail = self.fail, None
            raise err
        return [f"{ip}#{n}" for ip, n in rows]


async def _one_out(row: tuple) -> tuple[_Statement, Coalescer, asyncio.Future]:
    """A batcher whose first statement, carrying `row`, is out."""
    st = _Statement()
    c = Coalescer(st)
    fut = asyncio.ensure_future(c.submit(row))
    for _ in range(2):
        await asyncio.sleep(0)
    assert st.batches == [[row]]
    return st, c, fut


def test_requests_made_while_a_statement_is_out_go_together_in_the_next_sorted_by_ip():
    async def body():
        st, c, first = await _one_out(("10.0.0.9", 1))         # out, waiting for its answer
        later = [asyncio.ensure_future(c.submit(row)) for row in (("10.0.0.3", 2), ("10.0.0.1", 3))]
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(st.batches) == 1                              # nothing more while one is out
        st.gate.set()
        assert await first == "10.0.0.9#1"
        assert await asyncio.gather(*later) == ["10.0.0.3#2", "10.0.0.1#3"]
        assert st.batches[1] == [("10.0.0.1", 3), ("10.0.0.3", 2)]
        assert (c.flushes, c.rows) == (2, 3)

    run(body())


def test_a_failed_statement_fails_the_requests_it_carried_and_the_next_ones_still_go():
    async def body():
        st = _Statement()
        c = Coalescer(st)
        st.fail = ConnectionError("server gone")
        st.gate.set()
        carried = [asyncio.ensure_future(c.submit((ip, 0))) for ip in ("a", "b")]
        for fut in carried:
            with pytest.raises(ConnectionError):
                await fut
        assert await c.submit(("c", 7)) == "c#7"
        assert len(st.batches) == 2

    run(body())


def test_a_cancelled_statement_cancels_its_requests_and_those_queued_behind_it():
    async def body():
        st, c, out = await _one_out(("a", 1))
        queued = asyncio.ensure_future(c.submit(("b", 2)))
        await asyncio.sleep(0)
        (flush,) = c._tasks
        flush.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert out.cancelled() and queued.cancelled()
        st.gate.set()
        assert await c.submit(("c", 3)) == "c#3"                 # nothing left pending: the next goes

    run(body())
