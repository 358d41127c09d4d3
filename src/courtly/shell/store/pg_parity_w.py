"""Takedowns and abuse complaints in PostgreSQL until `PostgresStore` has them (stop-gap of h16w).

What it owns: `PurgeSeat`, a `PostgresStore` with the purge and complaint
methods of `SqliteStore` -- `add_purge(purge, at)`, `purges(after_id)`,
`apply_purges(purges, applied_at)`, `add_complaint(host, key, contact, note,
at)`, `resolve_complaint(id, at)` and `complaints(open_only=)`, same names,
signatures and answers, async -- for the distributed worker
(runtime/worker.py) to take them up at every commit. The tables `purges` and
`abuse_complaints` have SqliteStore's columns; they are made here if the
schema has none.

How it works: `with_purges(store)` returns `store` itself when it has
`purges` (the store's own implementation wins), else a `PurgeSeat` around it
that answers everything else from the store. Marking a purge's scope reads
the candidate URLs with a cheap text test and marks the exact matches of
`core.purge` (the same rules as the crawl's), queued ones counted apart.

Rules: one transaction per call; the statements count like the store's own.
To be removed when PostgresStore gains these methods (issue 16, h16p).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from courtly.core.purge import Purge, PurgeList, Scope

__all__ = ["PurgeSeat", "with_purges"]

_LOCK_ID = 0x636F75727477   # serialises the table's creation ("courtw")
_TABLES = ("""CREATE TABLE IF NOT EXISTS purges (
    id bigserial PRIMARY KEY, scope text NOT NULL, value text NOT NULL, reason text NOT NULL,
    at double precision NOT NULL, applied_at double precision)""", """CREATE TABLE IF NOT EXISTS abuse_complaints (
    id bigserial PRIMARY KEY, host text NOT NULL, key text NOT NULL, contact text NOT NULL,
    note text NOT NULL, recorded_at double precision NOT NULL, resolved_at double precision)""")


async def with_purges(store: Any) -> Any:
    """`store` with the purge and complaint methods (see the module doc)."""
    if hasattr(store, "purges") and hasattr(store, "complaints"):
        return store
    seat = PurgeSeat(store)
    async with store._conn() as conn:     # a table, made once per database
        async with conn.transaction():
            # workers start together: IF NOT EXISTS alone races on the catalog
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_ID)
            for table in _TABLES:
                await conn.execute(table)
    return seat


class PurgeSeat:
    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def add_purge(self, purge: Purge, at: float) -> tuple[Purge, dict[str, int]]:
        """Record `purge` and mark every URL record in its scope, in one
        transaction. Returns (the purge with its id, counts queued / other)."""
        async with self._store._conn() as conn:
            async with conn.transaction():
                pid = await conn.fetchval("INSERT INTO purges (scope, value, reason, at) VALUES ($1, $2, $3, $4)"
                                          " RETURNING id", str(purge.scope), purge.value, purge.reason, at)
                stored = replace(purge, id=pid, at=at)
                return stored, await _mark(conn, stored)

    async def purges(self, after_id: int = 0) -> list[tuple]:
        """(id, scope, value, reason, at, applied_at) of the purges after `after_id`."""
        rows = await self._store._one("fetch", "SELECT id, scope, value, reason, at, applied_at FROM purges"
                                      " WHERE id > $1 ORDER BY id", after_id)
        return [tuple(r) for r in rows]

    async def apply_purges(self, purges: Iterable[Purge], applied_at: float | None) -> dict[str, int]:
        """Mark the URL records in scope of `purges` again (workers may have
        written some since they were recorded) and set their applied_at."""
        total = {"queued": 0, "other": 0}
        async with self._store._conn() as conn:
            async with conn.transaction():
                for p in purges:
                    for k, v in (await _mark(conn, p)).items():
                        total[k] += v
                    if applied_at is not None:
                        await conn.execute("UPDATE purges SET applied_at = $1 WHERE id = $2 AND applied_at IS NULL",
                                           applied_at, p.id)
        self._store.statements += 1
        return total

    async def add_complaint(self, host: str, key: str, contact: str, note: str, at: float) -> int:
        """Record an open complaint; returns its id."""
        return await self._store._one("fetchval", "INSERT INTO abuse_complaints (host, key, contact, note,"
                                      " recorded_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
                                      host, key, contact, note, at)

    async def resolve_complaint(self, complaint_id: int, at: float) -> bool:
        """Close an open complaint; False if there is no open one of that id."""
        status = await self._store._one("execute", "UPDATE abuse_complaints SET resolved_at = $1"
                                        " WHERE id = $2 AND resolved_at IS NULL", at, complaint_id)
        return status.split()[-1] == "1"

    async def complaints(self, *, open_only: bool = False) -> list[tuple]:
        """(id, host, key, contact, note, recorded_at, resolved_at), oldest first."""
        where = " WHERE resolved_at IS NULL" if open_only else ""
        rows = await self._store._one("fetch", "SELECT id, host, key, contact, note, recorded_at, resolved_at"
                                      f" FROM abuse_complaints{where} ORDER BY id")
        return [tuple(r) for r in rows]


async def _mark(conn, purge: Purge) -> dict[str, int]:
    """URL records in scope become skipped/purged; queued ones counted apart."""
    only = PurgeList((purge,))
    near = "starts_with(url, $1)" if purge.scope == Scope.URL_PREFIX else "strpos(url, $1) > 0"
    rows = await conn.fetch(f"SELECT url, state FROM urls WHERE {near} AND reason IS DISTINCT FROM 'purged'",
                            purge.value)
    hits = [(url, state) for url, state in rows if only.match(url) is not None]
    if hits:
        await conn.execute("UPDATE urls SET detail = $2 || '; was ' || state"
                           " || coalesce(' (' || reason || ')', ''), state = 'skipped', reason = 'purged'"
                           " WHERE url = ANY($1::text[])", [u for u, _ in hits], purge.describe())
    queued = sum(1 for _, state in hits if state == "queued")
    return {"queued": queued, "other": len(hits) - queued}
