"""PostgresWatchStore: the watch list of a distributed crawl, in its PostgreSQL.

What it owns: the same four things as `SqliteWatchStore` (watches, their
state, change events with their webhook delivery, the list's version), in the
tables of pg_schema migration 3, with the same methods, async. `courtly watch
... --db DSN` manages the list with it.

Beyond SqliteWatchStore, what many workers need (runtime/cluster_monitor,
shell/webhook_cluster):

* `write_checks(states, events, tenure)`: the states and change events a
  worker judged since its last commit, in one transaction fenced like a
  crawl batch (shell/store/postgres `_fence`): every watch's partition must
  still be at the epoch it was checked under, read `FOR KEY SHARE` (a
  take-over's `acquire ... FOR UPDATE` waits for it), or nothing is written
  (`StaleEpoch`). An event is inserted once per (watch, detected_at), so a
  write retried after a lost COMMIT answer records nothing twice.
* `claim_deliveries` / `finish_delivery`: the webhook queue. A worker claims
  the oldest pending event of each watch it holds (fenced by the partition's
  epoch) that is due (`not_before`) and not claimed by a live claim; the
  claim is a row lock (`FOR UPDATE SKIP LOCKED`, re-checked after a wait)
  plus `claimed_until` on the database clock, so two workers never send one
  event at once and a worker that dies mid-delivery leaves it to the next
  claim (at least once). Only the claimant's outcome is written.

Rules: as SqliteWatchStore (a removed watch keeps its row; re-adding its URL
brings it back and it learns afresh; every read has a limit). The version is a
sequence, so edits from many machines never collide.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import asyncpg

from courtly.core.watch import ChangeEvent, Watch, WatchState
from courtly.shell.store.pg_schema import NOW_SQL, migrate
from courtly.shell.store.postgres import StaleEpoch
from courtly.shell.store.sqlite import StoreError
from courtly.shell.store.watch_sqlite import (
    CHANGES_LIMIT_MAX, DELIVERY_STATES, WATCHES_MAX, ChangeRow, Delivery, change_row, watch_of, watch_rows, with_id,
)

__all__ = ["PostgresWatchStore", "CLAIM_MAX"]

CLAIM_MAX = 1000           # events one claim may take
DUE_SCAN_MAX = 10_000      # watches with a due delivery one claim looks at

_CHANGE_COLS = "seq, watch_id, url, detected_at, event::text, before::text, after::text, webhook, delivery, " \
               "attempts, last_error"

_SAVE_STATE = "INSERT INTO watch_state VALUES ($1, $2::jsonb) ON CONFLICT (id) DO UPDATE SET state = excluded.state"

# the database clock read once per statement (an initplan), not once per row
_NOW_ONCE = f"(SELECT {NOW_SQL})"

_DUE_WATCHES = f"""
SELECT DISTINCT watch_id FROM changes
 WHERE delivery = 'pending' AND not_before <= {_NOW_ONCE} AND claimed_until <= {_NOW_ONCE} LIMIT $1"""

# the due head of each held watch's pending deliveries: held = its partition at the
# caller's epoch; due = not_before passed and no live claim (re-checked on the
# newest row version after a lock wait, so a claim just committed is seen)
_CLAIM = f"""
WITH t AS (
    SELECT * FROM unnest($1::bigint[], $2::int[], $3::int8[]) AS t(watch_id, part, epoch)
), held AS MATERIALIZED (
    SELECT t.watch_id FROM t JOIN partitions p ON p.id = t.part AND p.epoch = t.epoch
), heads AS MATERIALIZED (   -- once, not once per pending row
    SELECT min(seq) AS seq FROM changes
     WHERE delivery = 'pending' AND watch_id = ANY((SELECT array_agg(watch_id) FROM held)::bigint[])
     GROUP BY watch_id
), due AS (   -- by primary key (= ANY of one array): no join the planner could loop over
    SELECT c.seq FROM changes c WHERE c.seq = ANY((SELECT array_agg(seq) FROM heads)::bigint[])
       AND c.delivery = 'pending' AND c.not_before <= {_NOW_ONCE} AND c.claimed_until <= {_NOW_ONCE}
     ORDER BY c.seq LIMIT $6 FOR UPDATE OF c SKIP LOCKED
), up AS (
    UPDATE changes c SET claimed_by = $4, claimed_until = {NOW_SQL} + $5 FROM due WHERE c.seq = due.seq
    RETURNING {_CHANGE_COLS.replace("seq,", "c.seq,", 1)}
)
SELECT * FROM up ORDER BY seq"""


async def _insert_change(conn, ev: ChangeEvent, webhook: str) -> int:  # type: ignore[no-untyped-def]
    """One event, once per (watch, detected_at): its sequence number."""
    seq = await conn.fetchval(
        "INSERT INTO changes (watch_id, url, detected_at, event, before, after, webhook, delivery) "
        "VALUES ($1, $2, $3, $4::json, $5::jsonb, $6::jsonb, $7, $8) "
        "ON CONFLICT (watch_id, detected_at) DO NOTHING RETURNING seq",
        ev.watch_id, ev.url, ev.detected_at, json.dumps(ev.to_json()), json.dumps(list(ev.before)),
        json.dumps(list(ev.after)), webhook, Delivery.PENDING if webhook else Delivery.NONE)
    if seq is None:
        seq = await conn.fetchval("SELECT seq FROM changes WHERE watch_id = $1 AND detected_at = $2",
                                  ev.watch_id, ev.detected_at)
    return int(seq)


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

    async def rows(self) -> list[dict]:
        """Each live watch with its state, as SqliteWatchStore.rows."""
        return watch_rows(await self.watches(), await self.states())

    async def change(self, seq: int) -> ChangeRow | None:
        rows = await self._fetch(f"SELECT {_CHANGE_COLS} FROM changes WHERE seq = $1", seq)
        return change_row(tuple(rows[0])) if rows else None

    async def states(self) -> dict[int, WatchState]:
        rows = await self._fetch("SELECT id, state::text FROM watch_state")
        return {r[0]: WatchState.from_json(json.loads(r[1])) for r in rows}

    async def save_states(self, states: dict[int, WatchState]) -> None:
        if not states:
            return
        async with self._pool.acquire() as conn:
            await conn.executemany(_SAVE_STATE, [(i, json.dumps(s.to_json())) for i, s in states.items()])

    async def record_change(self, ev: ChangeEvent, webhook: str) -> int:
        """Record `ev` (unfenced); its sequence number (the first one's, when
        it was recorded before)."""
        async with self._pool.acquire() as conn:
            return await _insert_change(conn, ev, webhook)

    async def write_checks(self, states: Mapping[int, WatchState], events: Sequence[tuple[ChangeEvent, str]],
                           tenure: Mapping[int, tuple[int, int]]) -> list[int]:
        """States and change events in one transaction, refused whole
        (StaleEpoch, naming the partitions) unless each watch's partition is
        at the epoch `tenure` (watch id -> (partition, epoch)) gives. Returns
        the events' sequence numbers, in order."""
        ids = set(states) | {ev.watch_id for ev, _ in events}
        missing = {i for i in ids if i not in tenure}
        if missing:
            raise ValueError(f"no tenure for watches {sorted(missing)}")
        epochs = {tenure[i][0]: tenure[i][1] for i in ids}
        if not ids:
            return []
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch("SELECT id, epoch FROM partitions WHERE id = ANY($1::int[])"
                                    " ORDER BY id FOR KEY SHARE", sorted(epochs))
            current = {r["id"]: r["epoch"] for r in rows}
            stale = {p for p, e in epochs.items() if current.get(p) != e}
            if stale:
                raise StaleEpoch(stale)
            seqs = [await _insert_change(conn, ev, webhook) for ev, webhook in events]
            if states:
                await conn.executemany(_SAVE_STATE, [(i, json.dumps(s.to_json())) for i, s in states.items()])
        return seqs

    async def claim_deliveries(self, worker_id: str, tenure: Mapping[int, tuple[int, int]], *,
                               hold_s: float, limit: int = 100) -> list[ChangeRow]:
        """Claim, for `hold_s` seconds, the due head of each held watch's
        pending deliveries (see the module doc); oldest first."""
        if not tenure:
            return []
        # the watches with a due delivery first (a small set, index changes_pending), so
        # the claim's arrays are those of them held here, not the whole list held
        due = await self._fetch(_DUE_WATCHES, DUE_SCAN_MAX)
        items = sorted((r[0], tenure[r[0]]) for r in due if r[0] in tenure)
        if not items:
            return []
        rows = await self._fetch(_CLAIM, [i for i, _ in items], [p for _, (p, _) in items],
                                 [e for _, (_, e) in items], worker_id, hold_s, max(1, min(limit, CLAIM_MAX)))
        return [change_row(tuple(r)) for r in rows]

    async def finish_delivery(self, seq: int, worker_id: str, delivery: str, attempts: int, error: str = "",
                              retry_in_s: float = 0.0) -> bool:
        """The outcome of one attempt, written only while the claim is ours;
        a pending event's next attempt is `retry_in_s` from now."""
        assert delivery in DELIVERY_STATES
        async with self._pool.acquire() as conn:
            done = await conn.fetchval(
                f"UPDATE changes SET delivery = $1, attempts = $2, last_error = $3, not_before = {NOW_SQL} + $4,"
                " claimed_by = '', claimed_until = 0 WHERE seq = $5 AND claimed_by = $6 RETURNING true",
                delivery, attempts, error[:500], retry_in_s, seq, worker_id)
        return bool(done)

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
