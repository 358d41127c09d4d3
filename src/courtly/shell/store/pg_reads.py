"""The reads of PostgresStore: the same answers as SqliteStore's, over pooled connections.

What it owns: every query that only reads the crawl's shared state (the URL
seen test, the queued and known URLs, hosts, robots, digests, histories and
near-duplicate prints by partition, fetch counts, one URL's record), plus
`requeue_denied`, the one write `courtly requeue` issues, and `get_meta`.

How it works: `ReadsMixin` is mixed into PostgresStore (shell/store/postgres)
and uses its `_one` (one counted statement) and `_conn`. Large sets are read
by keyset pagination (`_pages`, PAGE_ROWS rows a statement) so no read holds
a whole table; a read by partitions goes partition by partition (`_each`) to
use the partition indexes.

Rules: reads never lock; a URL refused only as nofollow is not "seen".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from courtly.shell.store.pg_shared import SHARED_META

__all__ = ["ReadsMixin", "PAGE_ROWS"]

PAGE_ROWS = 10_000          # keyset page of the iterators


def _each(partitions: Iterable[int] | None) -> list[int | None]:
    """The partitions to read one by one, or [None]: all at once."""
    return [None] if partitions is None else sorted(set(partitions))


class ReadsMixin:
    """PostgresStore's reads (see the module doc)."""

    statements: int     # set by PostgresStore, like `_one` and `_conn`

    if TYPE_CHECKING:
        def _one(self, method: str, sql: str, *args: Any) -> Awaitable[Any]: ...

        def _conn(self) -> AbstractAsyncContextManager[Any]: ...

        async def trap_snapshot(self) -> dict: ...      # pg_shared

        async def soft404_snapshot(self) -> dict: ...   # pg_shared

    # A URL refused only as nofollow is not "seen" (see SqliteStore._SEEN).
    _KNOWN = "NOT (state = 'skipped' AND reason IS NOT DISTINCT FROM 'nofollow')"

    async def has_url(self, url: str) -> bool:
        """Is `url` known for good (anything but a nofollow refusal)?"""
        return await self._one("fetchval", f"SELECT true FROM urls WHERE url = $1 AND {self._KNOWN}",
                               url) is not None

    async def _pages(self, sql: str, key_col: int, *args, start=None) -> AsyncIterator[tuple]:
        """Keyset pagination: `sql` takes $1 = last key (or NULL) and $2 = page size."""
        last = start
        while True:
            rows = await self._one("fetch", sql, last, PAGE_ROWS, *args)
            for r in rows:
                yield tuple(r)
            if len(rows) < PAGE_ROWS:
                return
            last = rows[-1][key_col]

    async def iter_urls(self) -> AsyncIterator[str]:
        async for (u,) in self._pages(f"SELECT url FROM urls WHERE ($1::text IS NULL OR url > $1) AND {self._KNOWN}"
                                      " ORDER BY url LIMIT $2", 0):
            yield u

    async def iter_queued(self, partitions: Iterable[int] | None = None) -> AsyncIterator[tuple]:
        """(url, key, band, depth, redirects, via, attempts) of queued URLs (of
        `partitions` when given)."""
        ids = None if partitions is None else sorted(set(partitions))
        async for r in self._pages(
                "SELECT url, key, band, depth, redirects, via, attempts FROM urls WHERE state = 'queued'"
                " AND ($1::text IS NULL OR url > $1) AND ($3::int[] IS NULL OR partition = ANY($3))"
                " ORDER BY url LIMIT $2", 0, ids):
            yield r

    async def hosts(self, partitions: Iterable[int] | None = None) -> dict[str, dict]:
        ids = None if partitions is None else sorted(set(partitions))
        rows = await self._one("fetch", "SELECT key, state::text FROM hosts"
                               " WHERE $1::int[] IS NULL OR partition = ANY($1)", ids)
        return {k: json.loads(v) for k, v in rows}

    async def robots(self) -> dict[str, dict]:
        rows = await self._one("fetch", "SELECT origin, state::text FROM robots")
        return {k: json.loads(v) for k, v in rows}

    async def iter_digests(self) -> AsyncIterator[tuple]:
        async for r in self._pages("SELECT digest, url, at, record_id FROM digests"
                                   " WHERE $1::text IS NULL OR digest > $1 ORDER BY digest LIMIT $2", 0):
            yield r

    async def iter_histories(self, partitions: Iterable[int] | None = None) -> AsyncIterator[tuple]:
        """(url, host, tier, depth, history) of the recrawl histories, by URL
        (partition by partition when `partitions` are given: index
        histories_partition)."""
        sql = "SELECT url, host, tier, depth, history FROM histories WHERE ($1::text IS NULL OR url > $1)"
        for p in _each(partitions):
            async for r in self._pages(sql + (" AND partition = $3" if p is not None else "")
                                       + " ORDER BY url LIMIT $2", 0, *(() if p is None else (p,))):
                yield r

    async def iter_simhashes(self, partitions: Iterable[int] | None = None) -> AsyncIterator[tuple]:
        """(doc_id, fp, scope) in insertion order (partition by partition when
        `partitions` are given: index simhashes_partition; a host's rows are
        all in its key's partition, so each scope keeps its order)."""
        sql = "SELECT doc_id, fp, scope, id FROM simhashes WHERE id > $1"
        for p in _each(partitions):
            async for r in self._pages(sql + (" AND partition = $3" if p is not None else "")
                                       + " ORDER BY id LIMIT $2", 3, *(() if p is None else (p,)), start=0):
                yield r[:3]

    async def fetches_by_day(self) -> list[tuple]:
        rows = await self._one("fetch", "SELECT floor(at / 86400)::int AS day, kind, count(*) FROM fetches"
                               " GROUP BY day, kind ORDER BY day, kind")
        return [tuple(r) for r in rows]

    async def url_flags(self, url: str) -> list[tuple]:
        rows = await self._one("fetch", "SELECT at, flag, detail FROM flags WHERE url = $1 ORDER BY at", url)
        return [tuple(r) for r in rows]

    async def count_denied(self, key: str, reason: str) -> int:
        return await self._one("fetchval", "SELECT count(*) FROM urls WHERE key = $1 AND reason = $2",
                               key, reason)

    async def requeue_denied(self, key: str, reason: str, rule: str | None = None) -> int:
        """Queue again the URLs of `key` skipped for `reason` (and `rule`, whose
        name starts the decision's detail); they reach the owner's inbox."""
        rows = await self._one("fetch", """
            WITH up AS (
                UPDATE urls SET state = 'queued', reason = NULL, detail = NULL
                 WHERE key = $1 AND state = 'skipped' AND reason = $2
                   AND ($3::text IS NULL OR starts_with(detail, $3))
                RETURNING partition, url
            ), q AS (INSERT INTO inbox (partition, url) SELECT partition, url FROM up)
            SELECT count(*) FROM up""", key, reason, rule or None)
        return rows[0][0]

    async def get_meta(self, k: str) -> str | None:
        """A meta value; the trap guard's and soft-404 book's snapshots are
        put together from their rows (pg_shared), None while there are none."""
        if k in SHARED_META:
            data = await (self.trap_snapshot() if k == "traps" else self.soft404_snapshot())
            return json.dumps(data) if data["hosts"] or data.get("allow") else None
        return await self._one("fetchval", "SELECT v FROM meta WHERE k = $1", k)

    async def url_record(self, url: str) -> dict | None:
        row = await self._one("fetchrow", "SELECT * FROM urls WHERE url = $1", url)
        return None if row is None else dict(row)

    async def url_fetches(self, url: str) -> list[dict]:
        rows = await self._one("fetch", "SELECT * FROM fetches WHERE url = $1 ORDER BY at", url)
        return [dict(r) for r in rows]

    async def linked_from(self, url: str, limit: int = 20) -> list[str]:
        rows = await self._one("fetch", "SELECT url FROM urls WHERE via = $1 LIMIT $2", url, limit)
        return [r[0] for r in rows]

    async def counts(self) -> dict:
        async with self._conn() as conn:
            q = conn.fetch
            out: dict = {"states": {}, "reasons": {}, "statuses": {}}
            out["states"] = {s: n for s, n in await q("SELECT state, count(*) FROM urls GROUP BY state")}
            out["reasons"] = {r: n for r, n in await q(
                "SELECT reason, count(*) FROM urls WHERE reason IS NOT NULL GROUP BY reason ORDER BY 2 DESC")}
            out["statuses"] = {str(s): n for s, n in await q(
                "SELECT status, count(*) FROM fetches WHERE kind = 'page' GROUP BY status ORDER BY 1")}
            row = await conn.fetchrow("SELECT count(*), coalesce(sum(bytes), 0), min(at), max(at) FROM fetches")
            out["fetches"], out["bytes"], out["first_at"], out["last_at"] = row[0], int(row[1]), row[2], row[3]
            out["hosts"] = await conn.fetchval("SELECT count(DISTINCT key) FROM urls")
            out["dead_letters"] = await conn.fetchval("SELECT count(*) FROM dead_letters")
            out["flags"] = {f: n for f, n in await q("SELECT flag, count(*) FROM flags GROUP BY flag")}
            out["robots_fetches"] = await conn.fetchval("SELECT count(*) FROM fetches WHERE kind = 'robots'")
            self.statements += 8
        return out
