"""Helpers of the PostgresStore tests (tests/shell/test_postgres_*.py): a
bounded `run`, a store opened with `P` partitions, rows of new URLs."""

from __future__ import annotations

import asyncio

from courtly.core.urls import partition_of
from courtly.shell.store.postgres import PostgresStore

P = 8
ALL = range(P)


def run(coro, timeout_s: float = 60.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout_s)
    return asyncio.run(bounded())


def _new(url, key="a.test", at=1.0, band=4, via="http://a.test/"):
    return (url, key, band, 1, 0, via, at)


async def _open(dsn, **kw) -> PostgresStore:
    return await PostgresStore.open(dsn, partitions=P, **kw)


async def _hold_all(store: PostgresStore, worker="w") -> dict[int, int]:
    return await store.acquire_many(ALL, worker, 60.0)


def _key_in_other_partition(key: str) -> str:
    for i in range(100):
        k = f"other{i}.test"
        if partition_of(k, P) != partition_of(key, P):
            return k
    raise AssertionError
