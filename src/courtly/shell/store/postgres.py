"""PostgresStore: the shared crawl state of many workers, on PostgreSQL (asyncpg).

What it owns: the same data as SqliteStore (urls, fetches, hosts, robots,
dead_letters, flags, digests, simhashes, histories, meta), plus what many
workers share: `workers` (heartbeats), `partitions` (owner, fencing epoch,
lease_until), `inbox` (new queued URLs per partition, not yet claimed by its
owner), `ip_leases` (which worker holds each IP's per-IP limits whole, or
that it is shared), `ip_limits` (a shared IP's slots and recent starts) and
`applied_batches` (batch ids, so a retried commit is applied once). Takedowns,
complaints, the shared duplicate lookup and the trap guard's and soft-404
book's rows per key: shell/store/pg_shared.py. The reads: pg_reads.py.

How it works
------------
* Partitions. `urls` and `hosts` carry `partition = partition_of(key, P)`; P
  is fixed in `meta` when the crawl is created (`open(dsn, partitions=P)`).
  A crawl of several regions puts a key in its home region's range instead
  (shell/store/pg_region.py).
  Leases follow core/lease.py exactly (the SQL is the model's `grant`,
  `extend`, `give_up`) on the *database* clock, so workers' clocks never
  decide who owns what.
* Fencing. `apply(batch, partition_epochs=...)` is one transaction. Before it
  commits it reads the current epoch of every partition the batch wrote for,
  `FOR KEY SHARE`, and refuses the whole batch (`StaleEpoch`, rolled back) if
  one differs from the caller's or is not the caller's. `acquire` takes the
  partition row `FOR UPDATE`, which waits for such a batch to commit, so a
  zombie's write lands before the new owner's epoch exists or not at all.
  `renew` and `release` are plain updates and never wait for a batch.
* Routing. Discovered URLs (`Batch.new_urls`, `insert_urls`) may go to any
  partition: `INSERT ... ON CONFLICT DO NOTHING` on the primary key is the exact
  URL-seen test, and each row that became queued is pushed to `inbox` in the
  same statement. Decisions for a partition the caller does not hold are
  routing too: they only create a skipped record where none exists. Every
  other write for a partition (fetched, requeued, owned decisions, hosts)
  needs its epoch.
* Picking up work. `adopt(p, epoch)` (right after acquiring) rebuilds p's
  inbox from its queued URLs in one snapshot; `claim_new(epochs, limit)` then
  deletes and returns up to `limit` inbox rows of the held partitions (index on
  inbox.partition; no scan of urls), fenced like a write.
* Per-IP limits across workers (runtime/ip_leases.py): an IP one worker
  uses is held whole by it (`ip_lease`, one call of a PL/pgSQL function
  that locks the IP's row), which applies the per-IP limits itself, as one
  machine does: no statement per request. A worker asking for an IP held
  elsewhere marks it wanted; the holder gives it back at its next renewal,
  once its requests there are over, and the IP is then *shared*: free one
  rate window later, every request of every worker takes a slot
  (`ip_slot`: the window rule of core/politeness.py over `ip_limits`, on the
  database clock) and gives it back (`ip_release`), until no slot was taken
  for a lease term. A holder that stops renewing lapses `hold_s` after its
  term. Lease asks, slots and releases made in one event-loop turn go as
  one statement of each kind (pg_coalesce.py); renewals and give-backs are
  one statement for all of a worker's IPs. `ip_limits` is UNLOGGED (a
  database *crash* empties it, which only forgets requests in flight).
* Statement economy. Every write of a batch is one multi-row statement over
  `unnest(...)` arrays (or COPY for large append-only sets), never one per URL:
  a batch costs at most 18 statements whatever its size (more only when one
  URL repeats inside a batch). `statements` counts
  every round trip (BEGIN and COMMIT included).

Rules: a connection failure raises `StoreUnavailable` (pause, retry the same
batch with the same `batch_id`); deadlocks and serialization failures are
retried here; nothing is deleted except claimed inbox rows and what `prune` forgets. Schema changes append to `MIGRATIONS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import asyncpg

from courtly.ports import Batch
from courtly.shell.store.pg_cluster import RETRIES, RETRYABLE, ClusterMixin
from courtly.shell.store.pg_region import RegionMixin, key_hash
from courtly.ports import StaleEpochError, StoreUnavailableError
from courtly.shell.store.pg_schema import LOCK_ID as _LOCK_ID, MIGRATIONS, NOW_SQL as _NOW, SCHEMA_VERSION, SchemaError
from courtly.shell.store.pg_reads import ReadsMixin
from courtly.shell.store.pg_schema import migrate as _migrate
from courtly.shell.store.pg_shared import SHARED_META, SharedMixin
from courtly.shell.store.sqlite import StoreError

__all__ = ["PostgresStore", "StaleEpoch", "StoreUnavailable", "StoreError", "MIGRATIONS",
           "SCHEMA_VERSION", "migrate"]

COPY_ROWS_MIN = 500         # append-only sets this large go through COPY


_UNAVAILABLE = (OSError, asyncio.TimeoutError, asyncpg.PostgresConnectionError,
                asyncpg.exceptions.OperatorInterventionError, asyncpg.exceptions.ConnectionDoesNotExistError)
# a connection left in a broken protocol state (seen around a server restart):
# dropped from the pool, and the call counts as "unavailable"
_BROKEN = (asyncpg.exceptions.InternalClientError,)


class StaleEpoch(StoreError, StaleEpochError):
    """A write for partitions the caller no longer holds (or never held)."""

    def __init__(self, partitions: Iterable[int]) -> None:
        self.partitions = frozenset(partitions)
        super().__init__(f"stale epoch for partitions {sorted(self.partitions)}: writes refused")


class StoreUnavailable(StoreError, StoreUnavailableError):
    """The database cannot be reached now; pause and retry."""


async def migrate(conn, migrations: Sequence[tuple[int, str]] = MIGRATIONS) -> int:
    """Bring the schema to the last migration (see pg_schema); StoreError when
    the database was written by a newer courtly."""
    try:
        return await _migrate(conn, migrations)
    except SchemaError as e:
        raise StoreError(str(e)) from e


async def _keep_session(conn) -> None:
    """The pool's reset when a connection goes back: nothing beyond asyncpg's
    own (an open transaction is rolled back). Its default sends a reset
    query (unlock advisory locks, CLOSE ALL, UNLISTEN, RESET ALL), one more
    round trip per statement; this store leaves nothing of the kind behind:
    its advisory locks are transaction-scoped, it declares no cursor outside
    a transaction, listens to nothing and sets no session variable."""


def _closed(conn) -> bool:
    """The connection is gone. A lost connection may already have been taken
    back by the pool, whose proxy then refuses every call, `is_closed` too."""
    try:
        return conn.is_closed()
    except asyncpg.exceptions.InterfaceError:
        return True     # released back to the pool while still in use: it was lost


def _rounds(rows: Sequence[tuple], key: int) -> list[list[tuple]]:
    """Split rows so no round repeats a key (one statement may not touch a row
    twice); rounds keep the batch's order, so sequential semantics hold."""
    out: list[list[tuple]] = []
    seen: list[set] = []
    for r in rows:
        for i, s in enumerate(seen):
            if r[key] not in s:
                s.add(r[key])
                out[i].append(r)
                break
        else:
            seen.append({r[key]})
            out.append([r])
    return out


def _last_per(rows: Sequence[tuple], key: int) -> list[tuple]:
    return list({r[key]: r for r in rows}.values())


def _cols(rows: Sequence[tuple], n: int) -> list[list]:
    """Rows -> n column lists (the arrays a multi-row statement unnests)."""
    if any(len(r) != n for r in rows):
        raise ValueError(f"batch rows must have {n} fields: {next(r for r in rows if len(r) != n)!r}")
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


_NEW_URLS = """
WITH t AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::int[], $6::int[], $7::text[],
                         $8::float8[], $9::text[]) AS t(url, partition, key, band, depth, redirects, via, at, h)
), hm AS (   -- the key's home region (pg_region): read FOR SHARE, so a rehome is waited for, then seen
    SELECT h.key, r.first, r.count FROM homes h JOIN regions r ON r.name = h.region
     WHERE h.key IN (SELECT key FROM t) FOR SHARE OF h
), up AS (
    INSERT INTO urls AS u (url, partition, key, state, band, depth, redirects, via, discovered_at)
    SELECT t.url, coalesce(hm.first + mod(t.h::numeric, hm.count)::int, t.partition), t.key, 'queued', t.band,
           t.depth, t.redirects, t.via, t.at
      FROM t LEFT JOIN hm ON hm.key = t.key
    ON CONFLICT (url) DO UPDATE SET state = 'queued', partition = excluded.partition, key = excluded.key,
        band = excluded.band, depth = excluded.depth, via = excluded.via, reason = NULL, detail = NULL
     WHERE u.state = 'skipped' AND u.reason = 'nofollow'   -- refused as nofollow, followed elsewhere
    RETURNING u.url, u.partition
), q AS (INSERT INTO inbox (partition, url, judged) SELECT partition, url, false FROM up)   -- new: unjudged
SELECT url FROM up"""

_DECISIONS = """
INSERT INTO urls AS u (url, partition, key, via, discovered_at, state, reason, detail, depth)
SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::float8[], $6::text[], $7::text[],
                     $8::text[], $9::int[])
ON CONFLICT (url) DO """
_DECISIONS_OWNED = _DECISIONS + """UPDATE SET state = excluded.state, reason = excluded.reason,
    detail = excluded.detail WHERE NOT (excluded.reason = 'nofollow' AND u.state IN ('queued', 'fetched'))"""
_DECISIONS_ROUTED = _DECISIONS + "NOTHING"

_APPEND = {  # table -> (columns, array types)
    "fetches": (("url", "kind", "at", "status", "bytes", "elapsed_s", "ip", "warc", "error"),
                ("text", "text", "float8", "int", "int8", "float8", "text", "text", "text")),
    "dead_letters": (("url", "at", "reason"), ("text", "float8", "text")),
    "flags": (("url", "at", "flag", "detail"), ("text", "float8", "text", "text")),
    "simhashes": (("doc_id", "fp", "scope", "partition"), ("text", "int8", "text", "int")),
}


class PostgresStore(ClusterMixin, SharedMixin, RegionMixin, ReadsMixin):
    """Crawl state shared by many workers. Open with `await PostgresStore.open(dsn)`."""

    def __init__(self, pool, partitions: int | None) -> None:
        self._pool = pool
        self.partitions = partitions
        self.statements = 0
        self.acquire_timeout_s = 30.0   # waiting for a pooled connection longer is "unavailable"
        self.ip_busy_wait_s = 0.05      # retry hint when a shared IP's slots are all in flight
        self._ip_tokens: dict[str, list[float]] = {}
        self._ip_leases, self._ip_slots, self._ip_releases = self._ip_coalescers()   # one statement a turn
        self.key_mode = "domain"        # the crawl's politeness_key (meta), for rows kept by host
        self._shared_cache: dict[tuple[str, str], object] = {}   # pg_shared: rows as last written
        self.storage: dict[str, str] = {}          # region -> WARC storage URL (pg_region)
        self._part_cache: dict[str, int] = {}

    @classmethod
    async def open(cls, dsn: str, *, partitions: int | None = None, pool_min: int = 1, pool_max: int = 8,
                   command_timeout_s: float = 60.0, region: str = "") -> "PostgresStore":
        """Connect, migrate, and (with `partitions`) create the crawl or check that
        the existing one has that many partitions."""
        try:
            pool = await asyncpg.create_pool(dsn, min_size=pool_min, max_size=pool_max,
                                             command_timeout=command_timeout_s, reset=_keep_session,
                                             server_settings={"application_name": "courtly"})
        except _UNAVAILABLE as e:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {e}") from e
        except asyncpg.PostgresError as e:
            raise StoreError(f"cannot open the crawl database: {e}") from e
        store = cls(pool, None)
        store.region = region
        try:
            async with store._conn() as conn:
                await migrate(conn)
                store.statements += 1
                if partitions is not None:
                    await store._create_crawl(conn, partitions)
                raw = await conn.fetchval("SELECT v FROM meta WHERE k = 'partitions'")
                store.partitions = int(raw) if raw is not None else None
                store.key_mode = await conn.fetchval("SELECT v FROM meta WHERE k = 'politeness_key'") or "domain"
                await store._load_regions(conn)
        except BaseException:
            await pool.close()
            raise
        return store

    async def _create_crawl(self, conn, partitions: int) -> None:
        if partitions < 1:
            raise StoreError("partitions must be at least 1")
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_ID)
            have = await conn.fetchval("SELECT v FROM meta WHERE k = 'partitions'")
            if have is not None and int(have) != partitions:
                raise StoreError(f"this crawl has {have} partitions, not {partitions} (fixed at creation)")
            if have is None:
                await conn.execute("INSERT INTO meta VALUES ('partitions', $1)", str(partitions))
                await conn.execute("INSERT INTO partitions (id) SELECT generate_series(0, $1 - 1)", partitions)
        self.statements += 4

    async def close(self) -> None:
        await self._pool.close()

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        """A pooled connection. Failures of the connection itself, including
        those of the pool's reset when the connection goes back (a server
        restart can leave the protocol mid-operation: asyncpg then raises
        InternalClientError from the release and drops the connection), are
        `StoreUnavailable`. A reset that fails after the work completed (the
        answer is in hand, a transaction committed) loses nothing: ignored."""
        done = False
        try:
            async with self._pool.acquire(timeout=self.acquire_timeout_s) as conn:
                try:
                    yield conn
                    done = True
                except _BROKEN as e:
                    conn.terminate()
                    raise StoreUnavailable(f"PostgreSQL connection broken: {e}") from e
                except asyncpg.exceptions.InterfaceError as e:
                    # e.g. a rollback after the server went away mid-statement
                    if not _closed(conn):
                        raise
                    raise StoreUnavailable(f"PostgreSQL connection closed: {e}") from e
        except (*_UNAVAILABLE, *_BROKEN) as e:
            if done:
                return    # only the release failed: the pool replaces the connection
            raise StoreUnavailable(f"PostgreSQL unavailable: {e}") from e

    async def _one(self, method: str, sql: str, *args):
        """One statement on a pooled connection, counted."""
        async with self._conn() as conn:
            self.statements += 1
            return await getattr(conn, method)(sql, *args)

    def _partition(self, key: str) -> int:
        return self.partition_of_key(key)     # the key's home region's partition (pg_region)

    # ---- writes ----------------------------------------------------------------------

    async def apply(self, batch: Batch, *, partition_epochs: Mapping[int, int] | None = None,
                    batch_id: str | None = None) -> bool:
        """Apply `batch` in one transaction, fenced by `partition_epochs` (partition
        -> epoch the caller holds). Returns False when `batch_id` was applied
        before (a retry after a lost COMMIT answer). Raises StaleEpoch."""
        epochs = dict(partition_epochs or {})
        if self.layout is not None:
            await self.ensure_homes([(r[1], r[0]) for r in (*batch.new_urls, *batch.decisions)])
        plan = self._plan(batch, epochs, fenced=partition_epochs is not None)
        for attempt in range(RETRIES):
            try:
                async with self._conn() as conn:
                    done = await self._apply_once(conn, batch, plan, epochs, batch_id)
                self._shared_done(plan["shared"])
                return done
            except RETRYABLE:
                if attempt == RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _plan(self, b: Batch, epochs: Mapping[int, int], *, fenced: bool = True) -> dict:
        """Pure preparation: partitions, rounds and column arrays. Unfenced
        (no `partition_epochs`), the trap and soft-404 rows of every partition
        are written; fenced, only those of the partitions held."""
        new = sorted(((u, self._partition(k), k, band, d, r, via, at, str(key_hash(k)))
                      for u, k, band, d, r, via, at in b.new_urls), key=lambda r: r[0])
        owned, routed = [], []
        for url, key, via, at, state, reason, detail, depth in b.decisions:
            p = self._partition(key)
            row = (url, p, key, via, at, state, reason, detail, depth)
            (owned if p in epochs else routed).append(row)
        hosts = sorted((k, self._partition(k), json.dumps(v)) for k, v in b.hosts.items())
        shared = self._plan_shared(b.meta, epochs if fenced else None, b.defence)
        touched = {r[1] for r in owned} | {r[1] for r in hosts}
        if fenced:
            touched |= {r[1] for rows in shared["rows"].values() for r in rows}
        not_held = {p for p in touched if p not in epochs}
        if not_held:
            raise StaleEpoch(not_held)
        meta = {k: v for k, v in b.meta.items() if k not in SHARED_META} | shared["meta"]
        return {"new": _rounds(new, 0), "owned": _rounds(owned, 0), "routed": routed,
                "hosts": hosts, "touched": touched, "shared": shared, "meta": meta,
                "simhashes": self._simhash_rows(b.simhashes), "histories": self._history_rows(b.histories.values())}

    async def _apply_once(self, conn, b: Batch, plan: dict, epochs: Mapping[int, int],
                          batch_id: str | None) -> bool:
        touched = set(plan["touched"])
        tx = conn.transaction()
        await tx.start()
        self.statements += 1
        try:
            if batch_id is not None:
                self.statements += 1
                first = await conn.fetchval(
                    f"INSERT INTO applied_batches VALUES ($1, {_NOW}) ON CONFLICT DO NOTHING RETURNING true",
                    batch_id)
                if not first:
                    await tx.rollback()
                    self.statements += 1
                    return False
            for rows in plan["new"]:
                self.statements += 1
                await conn.execute(_NEW_URLS, *_cols(rows, 9))
            if b.requeued:
                rows = sorted(_last_per(b.requeued, 1), key=lambda r: r[1])
                touched |= await self._updated_partitions(conn, (
                    "UPDATE urls u SET attempts = t.attempts FROM unnest($1::int[], $2::text[])"
                    " AS t(attempts, url) WHERE u.url = t.url RETURNING u.partition"), rows, 2)
            if b.fetched:
                rows = sorted(_last_per(b.fetched, 2), key=lambda r: r[2])
                touched |= await self._updated_partitions(conn, (
                    "UPDATE urls u SET state = 'fetched', fetched_at = t.at, status = t.status,"
                    " reason = NULL, detail = NULL FROM unnest($1::float8[], $2::int[], $3::text[])"
                    " AS t(at, status, url) WHERE u.url = t.url RETURNING u.partition"), rows, 3)
            for rows in plan["owned"]:
                self.statements += 1
                await conn.execute(_DECISIONS_OWNED, *_cols(rows, 9))
            if plan["routed"]:
                self.statements += 1
                await conn.execute(_DECISIONS_ROUTED, *_cols(plan["routed"], 9))
            await self._append(conn, "fetches", b.fetches)
            if plan["hosts"]:
                self.statements += 1
                await conn.execute(
                    "INSERT INTO hosts SELECT k, p, s::jsonb FROM unnest($1::text[], $2::int[], $3::text[])"
                    " AS t(k, p, s) ON CONFLICT (key) DO UPDATE SET state = excluded.state,"
                    " partition = excluded.partition", *_cols(plan["hosts"], 3))
            if b.robots:
                rows = sorted((k, json.dumps(v)) for k, v in b.robots.items())
                self.statements += 1
                await conn.execute(
                    "INSERT INTO robots SELECT k, s::jsonb FROM unnest($1::text[], $2::text[]) AS t(k, s)"
                    " ON CONFLICT (origin) DO UPDATE SET state = excluded.state", *_cols(rows, 2))
            await self._append(conn, "dead_letters", b.dead_letters)
            await self._append(conn, "flags", b.flags)
            if b.digests:
                self.statements += 1
                await conn.execute(
                    "INSERT INTO digests SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::text[])"
                    " ON CONFLICT (digest) DO NOTHING", *_cols(b.digests, 4))
            await self._append(conn, "simhashes", plan["simhashes"])
            if plan["histories"]:
                self.statements += 1
                await conn.execute(
                    "INSERT INTO histories (url, host, tier, depth, history, partition) SELECT * FROM unnest("
                    "$1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::int[]) ON CONFLICT (url)"
                    " DO UPDATE SET host = excluded.host, tier = excluded.tier, depth = excluded.depth,"
                    " history = excluded.history, partition = excluded.partition", *_cols(plan["histories"], 6))
            await self._write_shared(conn, plan["shared"])
            if plan["meta"]:
                self.statements += 1
                await conn.execute(
                    "INSERT INTO meta SELECT * FROM unnest($1::text[], $2::text[])"
                    " ON CONFLICT (k) DO UPDATE SET v = excluded.v", *_cols(sorted(plan["meta"].items()), 2))
            if touched:
                await self._fence(conn, touched, epochs)
        except BaseException:
            await tx.rollback()
            self.statements += 1
            raise
        await tx.commit()
        self.statements += 1
        return True

    async def _updated_partitions(self, conn, sql: str, rows: list[tuple], n: int) -> set[int]:
        self.statements += 1
        got = await conn.fetch(f"WITH up AS ({sql}) SELECT DISTINCT partition FROM up", *_cols(rows, n))
        return {r[0] for r in got}

    async def _append(self, conn, table: str, rows: list[tuple]) -> None:
        if not rows:
            return
        cols, types = _APPEND[table]
        self.statements += 1
        if len(rows) >= COPY_ROWS_MIN:
            await conn.copy_records_to_table(table, records=rows, columns=list(cols))
            return
        args = ", ".join(f"${i + 1}::{t}[]" for i, t in enumerate(types))
        await conn.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(cols)}"
            f" FROM unnest({args}) WITH ORDINALITY AS t({', '.join(cols)}, n) ORDER BY n",
            *_cols(rows, len(cols)))

    async def _fence(self, conn, partitions: set[int], epochs: Mapping[int, int]) -> None:
        """Refuse (StaleEpoch) unless every partition written for is held at its
        current epoch; the KEY SHARE locks keep it so until COMMIT."""
        not_held = {p for p in partitions if p not in epochs}
        if not_held:
            raise StaleEpoch(not_held)
        self.statements += 1
        rows = await conn.fetch("SELECT id, epoch FROM partitions WHERE id = ANY($1::int[])"
                                " ORDER BY id FOR KEY SHARE", sorted(partitions))
        current = {r["id"]: r["epoch"] for r in rows}
        stale = {p for p in partitions if current.get(p) != epochs[p]}
        if stale:
            raise StaleEpoch(stale)

    async def insert_urls(self, rows: Sequence[tuple]) -> list[str]:
        """Route discovered URLs (new_urls tuples: url, key, band, depth, redirects,
        via, at) in one statement; returns, in input order, those that became
        queued now (new, or revived after a nofollow refusal)."""
        seen: set[str] = set()
        first = [r for r in rows if not (r[0] in seen or seen.add(r[0]))]
        await self.ensure_homes((r[1], r[0]) for r in first)
        prepared = [(u, self._partition(k), k, band, d, r, via, at, str(key_hash(k)))
                    for u, k, band, d, r, via, at in first]
        got = await self._one("fetch", _NEW_URLS, *_cols(prepared, 9))
        new = {r[0] for r in got}
        return [r[0] for r in first if r[0] in new]

