"""What the single machine's store keeps beside the crawl data, kept by
PostgresStore for every worker: takedowns (`purges`), abuse complaints, the
shared exact-duplicate lookup, the trap guard's and the soft-404 book's
per-key state. A mixin of `PostgresStore` (shell/store/postgres.py); the
method names and arguments are SqliteStore's, so one engine calls either
(awaiting here). Tables: pg_schema version 4.

How it works
------------
* Takedowns. `add_purge` records a purge and marks the URL records in its
  scope skipped/purged in one transaction, as SqliteStore does; purges are
  numbered under an advisory lock, so ids commit in order and a worker
  polling `purges(after_id)` can never skip one that committed late. Marking
  pages through the URLs a cheap SQL filter keeps (`starts_with` for a
  prefix, `strpos` for a host or domain) and decides each with the core's
  `PurgeList.match`, so the store and the workers agree on every URL; a page
  is `PAGE_ROWS` URLs, so a purge of a million URLs never holds them all.
* Complaints: one statement each, like SqliteStore.
* Flags (exact_dup, near_dup, soft404, ...) read back in the order recorded
  (`iter_flags`: `courtly dups` and the refusal review), by their `id`.
* Exact duplicates. `digests` is keyed by digest: `digest_record(s)` is an
  index lookup, so a worker asks the store whether any worker stored a
  payload before (then it writes a revisit) without holding the crawl's
  whole index; `iter_digests` still reads it whole for those that want it.
* Trap guard and soft-404 book. The engine saves them as whole snapshots in
  `Batch.meta["traps"]` / `["soft404"]` (runtime/budget.py). Here `apply`
  splits them into one row per politeness key (`trap_hosts`) and per origin
  (`soft404_hosts`), each with its partition: a worker writes only the rows
  of partitions it holds (fenced like the rest of the batch) and only the
  rows that changed since it last wrote them (one parse and a dict
  comparison per save, no re-encoding of unchanged hosts; forgotten whenever
  partitions are granted, as another worker may have written them since). `trap_snapshot(partitions)`
  and `soft404_snapshot(partitions)` give back a snapshot the core's
  `restore` takes, of the partitions asked for (a worker taking one over),
  and `get_meta` answers those two keys from the tables. A database written
  before version 4 kept them whole in `meta`: its rows are read under the
  tables' rows until a worker writes the key again.

Rules: `now`-free (instants come from the caller); every statement counted in
`statements`; nothing is deleted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from courtly.core.fingerprint import FirstCapture
from courtly.ports import ComplaintRow, PurgeRow
from courtly.core.purge import Purge, PurgeList, Scope
from courtly.core.urls import UrlError, politeness_key, split_origin
from courtly.shell.store.pg_cluster import RETRIES, RETRYABLE
from courtly.shell.store.pg_schema import PURGE_LOCK_ID

__all__ = ["SharedMixin", "SHARED_META", "MARK_PAGE_ROWS"]

MARK_PAGE_ROWS = 10_000       # URLs a purge reads per page while marking
SHARED_META = ("traps", "soft404")   # meta keys kept as rows, not whole

_MARK = """
WITH old AS (
    SELECT url, state, reason FROM urls WHERE url = ANY($1::text[]) AND reason IS DISTINCT FROM 'purged'
     ORDER BY url FOR UPDATE
), up AS (
    UPDATE urls u SET detail = $2 || '; was ' || old.state || coalesce(' (' || old.reason || ')', ''),
           state = 'skipped', reason = 'purged'
      FROM old WHERE u.url = old.url RETURNING old.state
)
SELECT state = 'queued', count(*) FROM up GROUP BY 1"""

# meta key -> (table, its key column); the snapshot version when nothing is stored yet
_SHARED = {"traps": ("trap_hosts", "key"), "soft404": ("soft404_hosts", "origin")}
_VERSIONS = {"traps": 1, "soft404": 2}


class SharedMixin:
    """Takedowns, complaints, duplicate lookups and per-key defence state."""

    # set by PostgresStore, like `_one`, `_conn`, `_partition` and `_pages`
    statements: int
    partitions: int | None
    key_mode: str
    _shared_cache: dict[tuple[str, str], Any]

    if TYPE_CHECKING:
        def _one(self, method: str, sql: str, *args: Any) -> Awaitable[Any]: ...

        def _conn(self) -> AbstractAsyncContextManager[Any]: ...

        def _partition(self, key: str) -> int: ...

        def _pages(self, sql: str, key_col: int, *args: Any, start: Any = None) -> AsyncIterator[tuple]: ...

    # ---- takedowns ----------------------------------------------------------------------------

    async def add_purge(self, purge: Purge, at: float) -> tuple[Purge, dict[str, int]]:
        """Record `purge` and mark every URL record in its scope, in one
        transaction. Returns (the purge with its id, counts queued / other)."""
        async def body(conn):
            await conn.execute("SELECT pg_advisory_xact_lock($1)", PURGE_LOCK_ID)   # ids commit in order
            pid = await conn.fetchval("INSERT INTO purges (scope, value, reason, at) VALUES ($1, $2, $3, $4)"
                                      " RETURNING id", str(purge.scope), purge.value, purge.reason, at)
            self.statements += 2
            stored = replace(purge, id=pid, at=at)
            return stored, await self._mark_purged(conn, stored)
        return await self._transaction(body)

    async def purges(self, after_id: int = 0) -> list[PurgeRow]:
        """(id, scope, value, reason, at, applied_at) of the purges after `after_id`."""
        rows = await self._one("fetch", "SELECT id, scope, value, reason, at, applied_at FROM purges"
                               " WHERE id > $1 ORDER BY id", after_id)
        return [PurgeRow(*r) for r in rows]

    async def purges_max_id(self) -> int:
        return await self._one("fetchval", "SELECT coalesce(max(id), 0) FROM purges")

    async def apply_purges(self, purges: Iterable[Purge], applied_at: float | None) -> dict[str, int]:
        """Mark the URL records in scope of `purges` again (workers may have
        written some since they were recorded) and set their applied_at (the
        first worker to take one up sets it)."""
        wanted = list(purges)

        async def body(conn):
            total = {"queued": 0, "other": 0}
            for p in wanted:
                for k, v in (await self._mark_purged(conn, p)).items():
                    total[k] += v
            if applied_at is not None and wanted:
                self.statements += 1
                await conn.execute("UPDATE purges SET applied_at = $1 WHERE id = ANY($2::int8[])"
                                   " AND applied_at IS NULL", applied_at, [p.id for p in wanted])
            return total
        return await self._transaction(body)

    async def _mark_purged(self, conn, purge: Purge) -> dict[str, int]:
        """URL records in scope become skipped/purged; queued ones counted apart."""
        only = PurgeList((purge,))
        near = "starts_with(url, $2)" if purge.scope == Scope.URL_PREFIX else "strpos(url, $2) > 0"
        counts = {"queued": 0, "other": 0}
        last = ""
        while True:
            self.statements += 1
            rows = await conn.fetch(f"SELECT url FROM urls WHERE url > $1 AND {near}"
                                    " AND reason IS DISTINCT FROM 'purged' ORDER BY url LIMIT $3",
                                    last, purge.value, MARK_PAGE_ROWS)
            hits = [r[0] for r in rows if only.match(r[0]) is not None]
            if hits:
                self.statements += 1
                for queued, n in await conn.fetch(_MARK, hits, purge.describe()):
                    counts["queued" if queued else "other"] += n
            if len(rows) < MARK_PAGE_ROWS:
                return counts
            last = rows[-1][0]

    async def _transaction(self, body):
        """`body(conn)` in one transaction, retried on deadlock or serialization failure."""
        for attempt in range(RETRIES):
            try:
                async with self._conn() as conn:
                    async with conn.transaction():
                        self.statements += 2
                        return await body(conn)
            except RETRYABLE:
                if attempt == RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    # ---- abuse complaints ---------------------------------------------------------------------

    async def add_complaint(self, host: str, key: str, contact: str, note: str, at: float) -> int:
        """Record an open complaint (one statement); returns its id."""
        return await self._one("fetchval", "INSERT INTO abuse_complaints (host, key, contact, note, recorded_at)"
                               " VALUES ($1, $2, $3, $4, $5) RETURNING id", host, key, contact, note, at)

    async def resolve_complaint(self, complaint_id: int, at: float) -> bool:
        """Close an open complaint; False if there is no open one of that id."""
        status = await self._one("execute", "UPDATE abuse_complaints SET resolved_at = $1"
                                 " WHERE id = $2 AND resolved_at IS NULL", at, complaint_id)
        return status.split()[-1] == "1"

    async def complaints(self, *, open_only: bool = False) -> list[ComplaintRow]:
        """(id, host, key, contact, note, recorded_at, resolved_at), oldest first."""
        rows = await self._one("fetch", "SELECT id, host, key, contact, note, recorded_at, resolved_at"
                               " FROM abuse_complaints WHERE NOT $1 OR resolved_at IS NULL ORDER BY id", open_only)
        return [ComplaintRow(*r) for r in rows]

    # ---- exact duplicates, shared ----------------------------------------------------------------

    async def digest_record(self, digest: str) -> FirstCapture | None:
        """The first capture stored (by any worker) of the payload `digest`, or None."""
        row = await self._one("fetchrow", "SELECT url, at, record_id FROM digests WHERE digest = $1", digest)
        return None if row is None else FirstCapture(row[0], row[1], row[2])

    async def digest_records(self, digests: Sequence[str]) -> dict[str, FirstCapture]:
        """`digest_record` for many digests in one statement: those known."""
        if not digests:
            return {}
        rows = await self._one("fetch", "SELECT digest, url, at, record_id FROM digests"
                               " WHERE digest = ANY($1::text[])", sorted(set(digests)))
        return {r[0]: FirstCapture(r[1], r[2], r[3]) for r in rows}

    async def iter_flags(self, flags: tuple[str, ...]) -> AsyncIterator[tuple]:
        """(url, at, flag, detail) of the flags named, in the order recorded."""
        async for r in self._pages("SELECT url, at, flag, detail, id FROM flags WHERE id > $1"
                                   " AND flag = ANY($3::text[]) ORDER BY id LIMIT $2", 4, list(flags), start=0):
            yield r[:4]

    async def meta_prefixed(self, prefix: str) -> dict[str, str]:
        """The meta rows whose key starts with `prefix` (workers' published counters)."""
        rows = await self._one("fetch", "SELECT k, v FROM meta WHERE starts_with(k, $1) ORDER BY k", prefix)
        return {r[0]: r[1] for r in rows}

    # ---- trap guard and soft-404 book ----------------------------------------------------------

    def _partition_of_origin(self, origin: str) -> int:
        try:
            host = split_origin(origin).host
        except UrlError:
            host = origin
        return self._partition(politeness_key(host, self.key_mode))

    def _partition_of_host(self, host: str) -> int:
        return self._partition(politeness_key(host, self.key_mode))

    def _plan_shared(self, meta: Mapping[str, str], epochs: Mapping[int, int] | None,
                     defence: Mapping[str, Mapping[str, str]] | None = None) -> dict:
        """Rows of the trap guard and soft-404 book of the partitions held (all
        when `epochs` is None): those a worker's batch gives as changed
        (`defence`, written as they are), and those of whole snapshots in
        `meta` (one machine's, `courtly allow`) that changed since this store
        last wrote them. Pure; the cache is updated by `_shared_done` after
        COMMIT."""
        out: dict[str, list[tuple[str, int, str]]] = {}
        states: dict[tuple[str, str], Any] = {}   # what the cache takes once committed
        extra: dict[str, str] = {}
        for name, items in (defence or {}).items():
            where = self._partition if name == "traps" else self._partition_of_origin
            rows = out.setdefault(name, [])
            for k in sorted(items):
                p = where(k)
                if epochs is None or p in epochs:
                    rows.append((k, p, items[k]))
        for name in SHARED_META:
            raw = meta.get(name)
            if raw is None:
                continue
            data = json.loads(raw)
            items = data.get("hosts", {})
            where = self._partition if name == "traps" else self._partition_of_origin
            rows = []
            for k in sorted(items):
                state = items[k]
                if self._shared_cache.get((name, k)) == state:
                    continue
                p = where(k)
                if epochs is None or p in epochs:
                    rows.append((k, p, json.dumps(state)))
                    states[(name, k)] = state
            out[name] = out.get(name, []) + rows
            allow = json.dumps(data.get("allow", [])) if name == "traps" else None
            if allow is not None and self._shared_cache.get(("meta", "traps_allow")) != allow:
                extra["traps_allow"] = allow
        return {"rows": out, "meta": extra, "states": states}

    async def _write_shared(self, conn, plan: dict) -> None:
        for name, listed in plan["rows"].items():
            rows = list({r[0]: r for r in listed}.values())    # a key given twice: its last row
            if not rows:
                continue
            table, col = _SHARED[name]
            self.statements += 1
            await conn.execute(
                f"INSERT INTO {table} ({col}, partition, state) SELECT * FROM unnest($1::text[], $2::int[],"
                f" $3::text[]) ON CONFLICT ({col}) DO UPDATE SET partition = excluded.partition,"
                " state = excluded.state", [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])

    def _shared_acquired(self) -> None:
        """Partitions were granted: another worker may have written their rows
        since this store last did (it held them before), so nothing counts as
        unchanged until written again."""
        self._shared_cache.clear()

    def _shared_done(self, plan: dict) -> None:
        for k, v in plan["meta"].items():
            self._shared_cache[("meta", k)] = v
        self._shared_cache.update(plan["states"])

    async def _shared_snapshot(self, name: str, partitions: Iterable[int] | None) -> dict:
        table, col = _SHARED[name]
        ids = None if partitions is None else sorted(set(partitions))
        async with self._conn() as conn:
            rows = await conn.fetch(f"SELECT {col}, state FROM {table}"
                                    " WHERE $1::int[] IS NULL OR partition = ANY($1) ORDER BY "
                                    f"{col}", ids)
            legacy = await conn.fetchval("SELECT v FROM meta WHERE k = $1", name)
            allow = await conn.fetchval("SELECT v FROM meta WHERE k = 'traps_allow'")
            self.statements += 3
        data: dict[str, Any] = json.loads(legacy) if legacy else {"version": _VERSIONS[name], "hosts": {}}
        hosts = data.get("hosts", {})
        if ids is not None:
            where = self._partition if name == "traps" else self._partition_of_origin
            keep = set(ids)
            hosts = {k: v for k, v in hosts.items() if where(k) in keep}
        hosts.update((k, json.loads(s)) for k, s in rows)
        data["hosts"] = hosts
        if name == "traps":
            data["allow"] = json.loads(allow) if allow else data.get("allow", [])
            data = {"version": data.get("version", 1), "allow": data["allow"], "hosts": hosts}
        return data

    async def trap_snapshot(self, partitions: Iterable[int] | None = None) -> dict:
        """The trap guard's state (`TrapGuard.restore` takes it) of the keys of
        `partitions` (all when None)."""
        return await self._shared_snapshot("traps", partitions)

    async def soft404_snapshot(self, partitions: Iterable[int] | None = None) -> dict:
        """The soft-404 book (`Soft404Book.restore` takes it) of the origins of
        `partitions` (all when None)."""
        return await self._shared_snapshot("soft404", partitions)

    def _simhash_rows(self, rows: Sequence[tuple]) -> list[tuple]:
        """Batch simhash rows (doc_id, fp, scope host) with the host's partition."""
        return [(*r, self._partition_of_host(r[2])) for r in rows]

    def _history_rows(self, rows: Iterable[tuple]) -> list[tuple]:
        """Batch history rows (url, host, tier, depth, json) with the host's partition."""
        return sorted((*r, self._partition_of_host(r[1])) for r in rows)
