"""PostgresWatchStore: the watch list of a distributed crawl, in its PostgreSQL.

What it owns: the same four things as `SqliteWatchStore` (watches, their
state, change events with their webhook delivery, the list's version), in the
tables of pg_schema migration 3, with the same methods, async. `courtly watch
... --db DSN` manages the list with it.

Rules: as SqliteWatchStore (a removed watch keeps its row; re-adding its URL
brings it back and it learns afresh; every read has a limit). The version is a
sequence, so edits from many machines never collide.
"""

from __future__ import annotations

import json

import asyncpg

from courtly.core.watch import ChangeEvent, Watch, WatchState
from courtly.shell.store.pg_schema import migrate
from courtly.shell.store.sqlite import StoreError
from courtly.shell.store.watch_sqlite import (
    CHANGES_LIMIT_MAX, DELIVERY_STATES, WATCHES_MAX, ChangeRow, Delivery, change_row, watch_of, with_id,
)

__all__ = ["PostgresWatchStore"]

_CHANGE_COLS = "seq, watch_id, url, detected_at, event::text, before::text, after::text, webhook, delivery, " \
               "attempts, last_error"


class PostgresWatchStore:
    def __init__(self, pool) -> None:  # type: ignore[no-untyped-def]
        self._pool = pool

    @classmethod
    async def open(cls, dsn: str) -> "PostgresWatchStore":
        try:
            pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
        except (OSError, asyncpg.PostgresError) as e:
            raise StoreError(f"cannot open the watch list: {e}") from e
        async with pool.acquire() as conn:
            await migrate(conn)
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    async def _fetch(self, sql: str, *args):  # type: ignore[no-untyped-def]
        async with self._pool.acquire() as conn:
            return await conn.fetch(sql, *args)

    async def _bump(self, conn) -> None:  # type: ignore[no-untyped-def]
        await conn.execute("SELECT nextval('watch_list_version')")

    async def version(self) -> int:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow("SELECT last_value, is_called FROM watch_list_version")
        return int(row[0]) if row[1] else 0

    async def add(self, watch: Watch) -> Watch:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow("SELECT id, removed FROM watches WHERE url = $1 FOR UPDATE", watch.url)
            if row is not None and not row["removed"]:
                raise StoreError(f"{watch.url} is watched already (watch {row['id']})")
            if await conn.fetchval("SELECT count(*) FROM watches WHERE NOT removed") >= WATCHES_MAX:
                raise StoreError(f"the watch list is full ({WATCHES_MAX} watches)")
            if row is not None:
                w = with_id(watch, row["id"])
                await conn.execute("UPDATE watches SET spec = $1::jsonb, paused = $2, removed = false WHERE id = $3",
                                   json.dumps(w.to_json()), w.paused, w.id)
                await conn.execute("DELETE FROM watch_state WHERE id = $1", w.id)
            else:
                i = await conn.fetchval("INSERT INTO watches (url, spec, paused) VALUES ($1, '{}'::jsonb, $2) "
                                        "RETURNING id", watch.url, watch.paused)
                w = with_id(watch, i)
                await conn.execute("UPDATE watches SET spec = $1::jsonb WHERE id = $2", json.dumps(w.to_json()), w.id)
            await self._bump(conn)
        return w

    async def find(self, ref: str) -> Watch:
        col = "id" if ref.isdigit() else "url"
        rows = await self._fetch(f"SELECT spec::text, paused FROM watches WHERE {col} = $1 AND NOT removed",
                                 int(ref) if ref.isdigit() else ref)
        if not rows:
            raise StoreError(f"no watch {ref!r}")
        return watch_of(tuple(rows[0]))

    async def _set(self, ref: str, sql: str, *args) -> Watch:  # type: ignore[no-untyped-def]
        w = await self.find(ref)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(sql, w.id, *args)
            await self._bump(conn)
        return w

    async def remove(self, ref: str) -> Watch:
        return await self._set(ref, "UPDATE watches SET removed = true WHERE id = $1")

    async def set_paused(self, ref: str, paused: bool) -> Watch:
        w = await self._set(ref, "UPDATE watches SET paused = $2 WHERE id = $1", paused)
        return watch_of((json.dumps(w.to_json()), paused))

    async def watches(self) -> list[Watch]:
        rows = await self._fetch("SELECT spec::text, paused FROM watches WHERE NOT removed ORDER BY id")
        return [watch_of(tuple(r)) for r in rows]

    async def states(self) -> dict[int, WatchState]:
        rows = await self._fetch("SELECT id, state::text FROM watch_state")
        return {r[0]: WatchState.from_json(json.loads(r[1])) for r in rows}

    async def save_states(self, states: dict[int, WatchState]) -> None:
        if not states:
            return
        async with self._pool.acquire() as conn:
            await conn.executemany(
                "INSERT INTO watch_state VALUES ($1, $2::jsonb) ON CONFLICT (id) DO UPDATE SET state = excluded.state",
                [(i, json.dumps(s.to_json())) for i, s in states.items()])

    async def record_change(self, ev: ChangeEvent, webhook: str) -> int:
        async with self._pool.acquire() as conn:
            return int(await conn.fetchval(
                "INSERT INTO changes (watch_id, url, detected_at, event, before, after, webhook, delivery) "
                "VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb, $7, $8) RETURNING seq",
                ev.watch_id, ev.url, ev.detected_at, json.dumps(ev.to_json()), json.dumps(list(ev.before)),
                json.dumps(list(ev.after)), webhook, Delivery.PENDING if webhook else Delivery.NONE))

    async def changes(self, *, limit: int = 100, watch_id: int | None = None) -> list[ChangeRow]:
        limit = max(1, min(limit, CHANGES_LIMIT_MAX))
        if watch_id is None:
            rows = await self._fetch(f"SELECT {_CHANGE_COLS} FROM changes ORDER BY seq DESC LIMIT $1", limit)
        else:
            rows = await self._fetch(f"SELECT {_CHANGE_COLS} FROM changes WHERE watch_id = $1 "
                                     "ORDER BY seq DESC LIMIT $2", watch_id, limit)
        return [change_row(tuple(r)) for r in rows]

    async def dead_letters(self, limit: int = 1000) -> list[ChangeRow]:
        rows = await self._fetch(f"SELECT {_CHANGE_COLS} FROM changes WHERE delivery = 'dead' "
                                 "ORDER BY seq DESC LIMIT $1", limit)
        return [change_row(tuple(r)) for r in rows]

    async def set_delivery(self, seq: int, delivery: str, attempts: int, error: str = "") -> None:
        assert delivery in DELIVERY_STATES
        async with self._pool.acquire() as conn:
            await conn.execute("UPDATE changes SET delivery = $1, attempts = $2, last_error = $3 WHERE seq = $4",
                               delivery, attempts, error[:500], seq)
