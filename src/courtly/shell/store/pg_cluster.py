"""What many workers share through PostgresStore besides the crawl data:
registration and heartbeats, partition leases on the database clock, picking
up new work (`adopt`, `claim_new`), per-IP leases across workers, queue
state and housekeeping. A mixin of `PostgresStore` (shell/store/postgres.py,
whose module doc describes the protocol); it uses the store's `_one`,
`_conn` and `_fence`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
import asyncpg

from courtly.core.lease import LeaseRecord
from courtly.ports import ClaimedRow
from courtly.shell.store.pg_coalesce import LEASE_SQL, RELEASE_SQL, SLOT_SQL, Coalescer
from courtly.shell.store.pg_schema import NOW_SQL as _NOW
from courtly.shell.store.sqlite import StoreError

__all__ = ["ClusterMixin", "RETRIES", "RETRYABLE"]

RETRIES = 5                 # deadlock / serialization failure retries
RETRYABLE = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)


class ClusterMixin:
    """Workers, leases, work pick-up and per-IP limits of a PostgresStore."""

    # set by PostgresStore, like the `_one`, `_conn` and `_fence` used below
    statements: int
    region: str
    _shared_acquired: Callable[[], None]   # pg_shared: partitions were granted
    _ip_leases: Coalescer
    _ip_slots: Coalescer
    _ip_releases: Coalescer
    _ip_tokens: dict[str, list[float]]
    ip_busy_wait_s: float
    # ---- workers and leases (database clock) --------------------------------------------------

    async def register(self, worker_id: str) -> float:
        """Record a live worker (of this store's region); returns the database time."""
        return await self._one("fetchval",
                               f"INSERT INTO workers (id, started_at, heartbeat_at, region) VALUES ($1, {_NOW},"
                               f" {_NOW}, $2) ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at,"
                               " heartbeat_at = excluded.heartbeat_at, region = excluded.region"
                               " RETURNING heartbeat_at", worker_id, self.region)

    async def heartbeat(self, worker_id: str) -> float:
        """Refresh the worker's heartbeat (re-registers it if it was pruned)."""
        return await self._one("fetchval",
                               f"INSERT INTO workers (id, started_at, heartbeat_at, region) VALUES ($1, {_NOW},"
                               f" {_NOW}, $2) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"
                               " RETURNING heartbeat_at", worker_id, self.region)

    async def deregister(self, worker_id: str) -> None:
        await self._one("execute", "DELETE FROM workers WHERE id = $1", worker_id)

    async def live_workers(self, ttl_s: float) -> list[str]:
        """Live workers of this store's region (a worker shares partitions only
        with its own region's)."""
        rows = await self._one("fetch", f"SELECT id FROM workers WHERE heartbeat_at > {_NOW} - $1"
                               " AND region = $2 ORDER BY id", ttl_s, self.region)
        return [r[0] for r in rows]

    async def db_now(self) -> float:
        return await self._one("fetchval", f"SELECT {_NOW}")

    async def acquire(self, partition: int, worker_id: str, ttl_s: float) -> int | None:
        """Take a free or expired partition: returns the new epoch, or None."""
        got = await self.acquire_many([partition], worker_id, ttl_s)
        return got.get(partition)

    async def acquire_many(self, partitions: Iterable[int], worker_id: str, ttl_s: float) -> dict[int, int]:
        """`acquire` for several partitions in one statement: partition -> epoch
        for those granted. The FOR UPDATE waits for in-flight fenced batches.
        A store of a region grants only partitions of that region's range."""
        mine = self.region_range()
        ids = sorted(p for p in set(partitions) if mine is None or p in mine)
        for attempt in range(RETRIES):
            try:
                rows = await self._one("fetch", (
                    "WITH cur AS (SELECT id FROM partitions WHERE id = ANY($1::int[]) ORDER BY id FOR UPDATE)"
                    f" UPDATE partitions p SET owner = $2, epoch = p.epoch + 1, lease_until = {_NOW} + $3"
                    f" FROM cur WHERE p.id = cur.id AND (p.owner IS NULL OR p.lease_until <= {_NOW})"
                    " RETURNING p.id, p.epoch"), ids, worker_id, ttl_s)
                got = {r["id"]: r["epoch"] for r in rows}
                if got:
                    self._shared_acquired()
                return got
            except RETRYABLE:
                await asyncio.sleep(0.01 * (attempt + 1))
        return {}

    async def renew(self, partition: int, worker_id: str, epoch: int, ttl_s: float) -> bool:
        """Extend a lease we hold at `epoch` that has not expired; never revives."""
        return partition in await self.renew_many(worker_id, {partition: epoch}, ttl_s)

    async def renew_many(self, worker_id: str, partition_epochs: Mapping[int, int], ttl_s: float) -> set[int]:
        """`renew` for all held partitions in one statement; returns those renewed."""
        items = sorted(partition_epochs.items())
        rows = await self._one("fetch", (
            f"UPDATE partitions p SET lease_until = greatest(p.lease_until, {_NOW} + $4)"
            " FROM unnest($1::int[], $2::int8[]) AS t(id, epoch)"
            f" WHERE p.id = t.id AND p.epoch = t.epoch AND p.owner = $3 AND p.lease_until > {_NOW}"
            " RETURNING p.id"), [p for p, _ in items], [e for _, e in items], worker_id, ttl_s)
        return {r[0] for r in rows}

    async def release(self, partition: int, worker_id: str, epoch: int) -> bool:
        """Give a partition up now (after its fetching stopped and its batch committed)."""
        return partition in await self.release_many(worker_id, {partition: epoch})

    async def release_many(self, worker_id: str, partition_epochs: Mapping[int, int]) -> set[int]:
        items = sorted(partition_epochs.items())
        rows = await self._one("fetch", (
            "UPDATE partitions p SET owner = NULL, lease_until = 0 FROM unnest($1::int[], $2::int8[])"
            " AS t(id, epoch) WHERE p.id = t.id AND p.epoch = t.epoch AND p.owner = $3 RETURNING p.id"),
            [p for p, _ in items], [e for _, e in items], worker_id)
        return {r[0] for r in rows}

    async def leases(self) -> list[LeaseRecord]:
        rows = await self._one("fetch", "SELECT id, owner, epoch, lease_until FROM partitions ORDER BY id")
        return [LeaseRecord(r["id"], r["owner"], r["epoch"], r["lease_until"]) for r in rows]

    # ---- picking up work ---------------------------------------------------------------------

    async def adopt(self, partition: int, epoch: int) -> int:
        """Right after acquiring: rebuild the partition's inbox from its queued URLs
        (one snapshot, so nothing is lost or doubled). Returns how many."""
        for attempt in range(RETRIES):
            try:
                async with self._conn() as conn:
                    async with conn.transaction(isolation="repeatable_read"):
                        await self._fence(conn, {partition}, {partition: epoch})
                        await conn.execute("DELETE FROM inbox WHERE partition = $1", partition)
                        status = await conn.execute(
                            "INSERT INTO inbox (partition, url) SELECT partition, url FROM urls"
                            " WHERE partition = $1 AND state = 'queued' ORDER BY band, discovered_at",
                            partition)
                    self.statements += 5
                    return int(status.split()[-1])
            except RETRYABLE:
                await asyncio.sleep(0.01 * (attempt + 1))
        raise StoreError(f"could not adopt partition {partition}: too many conflicts")

    async def claim_new(self, partition_epochs: Mapping[int, int], limit: int) -> list[ClaimedRow]:
        """Take up to `limit` new queued URLs of the held partitions from the inbox:
        (url, key, band, depth, redirects, via, attempts) like `iter_queued`,
        then `judged` (false only for a URL just discovered: an adoption's or
        an operator's requeue was judged before). Fenced: a partition whose
        epoch moved yields nothing."""
        items = sorted(partition_epochs.items())
        if not items or limit <= 0:
            return []
        rows = await self._one("fetch", """
            WITH ok AS (
                SELECT p.id FROM partitions p JOIN unnest($1::int[], $2::int8[]) AS t(id, epoch)
                    ON p.id = t.id AND p.epoch = t.epoch ORDER BY p.id FOR KEY SHARE OF p
            ), picked AS (
                SELECT i.id FROM inbox i WHERE i.partition IN (SELECT id FROM ok)
                 LIMIT $3 FOR UPDATE SKIP LOCKED
            ), gone AS (
                DELETE FROM inbox i USING picked WHERE i.id = picked.id RETURNING i.id, i.url, i.judged
            )
            SELECT u.url, u.key, u.band, u.depth, u.redirects, u.via, u.attempts, gone.judged, u.partition
              FROM gone JOIN urls u ON u.url = gone.url WHERE u.state = 'queued' ORDER BY gone.id""",
            [p for p, _ in items], [e for _, e in items], limit)
        if self.layout is not None:
            for r in rows:
                self._learn(r[1], r[8])     # the key's partition as its URL row has it (pg_region)
        return [ClaimedRow(*tuple(r)[:8]) for r in rows]

    async def queue_sizes(self) -> dict[int, int]:
        """partition -> URLs waiting in its inbox (status page)."""
        rows = await self._one("fetch", "SELECT partition, count(*) FROM inbox GROUP BY partition")
        return {r[0]: r[1] for r in rows}

    # ---- per-IP leases across workers ----------------------------------------------------------

    async def ip_lease(self, ip: str, owner: str, lease_s: float, hold_s: float,
                       now: float | None = None) -> tuple[str, float]:
        """Ask to hold `ip` whole (its per-IP limits are then `owner`'s to
        apply): ('held', seconds the lease lasts from the statement);
        ('shared', seconds it stays shared at least: take a slot per request,
        `ip_slot`); or ('wait', seconds before it can be free at the latest:
        its holder, told it is wanted, gives it back at its next renewal, and
        it is shared from then on). A holder that stopped renewing lapses
        `hold_s` after its term. `now` is a caller's clock for tests; None:
        the database's. Requests made together go as one statement
        (pg_coalesce)."""
        answer, s = await self._ip_leases.submit((ip, owner, now, lease_s, hold_s))
        return str(answer), float(s)

    async def ip_leases_renew(self, owner: str, ips: Sequence[str], lease_s: float,
                              now: float | None = None) -> set[str]:
        """Extend `owner`'s leases of `ips` by `lease_s`: the IPs renewed. An IP
        missing from the answer is wanted by another worker (give it back once
        its requests are over) or no longer `owner`'s."""
        if not ips:
            return set()
        rows = await self._ip_statement("fetch", f"""
            WITH mine AS (SELECT ip FROM ip_leases WHERE ip = ANY($1::text[]) AND owner = $2 AND NOT wanted
                           ORDER BY ip FOR UPDATE)
            UPDATE ip_leases l SET until = coalesce($4, {_NOW}) + $3, updated_at = coalesce($4, {_NOW})
              FROM mine WHERE l.ip = mine.ip RETURNING l.ip""", [(sorted(set(ips)), owner, lease_s, now)])
        return {r[0] for r in rows}

    async def ip_leases_wanted(self, owner: str) -> set[str]:
        """The IPs `owner` holds whole that another worker asked for (index
        `ip_leases_wanted`: the cost follows the IPs wanted, not those held)."""
        rows = await self._one("fetch", "SELECT ip FROM ip_leases WHERE owner = $1 AND wanted", owner)
        return {r[0] for r in rows}

    async def ip_leases_give(self, owner: str, ips: Sequence[str], span_s: float, shared_s: float = 0.0,
                             now: float | None = None) -> None:
        """Give back `owner`'s leases of `ips`, whose requests are all over:
        free `span_s` from now (one rate window: the next requests cannot
        crowd the server's window with the last of these), and shared for
        `shared_s` (given to a worker that wanted them: every worker that
        wants them takes slots from then on)."""
        if not ips:
            return
        await self._ip_statement("execute", f"""
            WITH mine AS (SELECT ip FROM ip_leases WHERE ip = ANY($1::text[]) AND owner = $2
                           ORDER BY ip FOR UPDATE)
            UPDATE ip_leases l SET owner = NULL, wanted = false, free_at = coalesce($5, {_NOW}) + $3,
                   shared_until = greatest(shared_until, coalesce($5, {_NOW}) + $4),
                   updated_at = coalesce($5, {_NOW})
              FROM mine WHERE l.ip = mine.ip""", [(sorted(set(ips)), owner, span_s, shared_s, now)])

    async def ip_slot(self, ip: str, now: float | None, concurrency_max: int, rate_per_s: float, *,
                      hold_s: float, shared_s: float, margin_s: float = 0.01) -> float | None:
        """A request slot on a shared `ip` (`ip_lease` answered 'shared'): None
        when granted (call `ip_release` when the request is over), else
        seconds to wait before asking again. The window rule is the single
        machine's (core/politeness), cluster-wide in `ip_limits`; a slot not
        released within `hold_s` lapses (dead worker); every slot keeps the
        IP shared `shared_s` longer. An IP held whole by a worker gives no
        slot (it is marked wanted)."""
        window = int(rate_per_s) if rate_per_s >= 1 else 1
        span = (1.0 if rate_per_s >= 1 else 1.0 / rate_per_s) + margin_s
        granted, wait_s, token = await self._ip_slots.submit(
            (ip, now, concurrency_max, window, span, hold_s, shared_s))
        if granted:
            self._ip_tokens.setdefault(ip, []).append(token)
            return None
        return wait_s if wait_s is not None else self.ip_busy_wait_s

    async def ip_release(self, ip: str, now: float | None = None) -> None:
        """Give back one slot this store granted on `ip` (with the releases made
        together, one statement: pg_coalesce); the window counts the request
        from `now`, its completion (None: the database's clock)."""
        tokens = self._ip_tokens.get(ip)
        if not tokens:
            return
        token = tokens.pop()
        if not tokens:
            del self._ip_tokens[ip]
        await self._ip_releases.submit((ip, token, now))

    def _ip_coalescers(self) -> tuple[Coalescer, Coalescer, Coalescer]:
        """The batchers of `ip_lease`, `ip_slot` and `ip_release` (shell/store/pg_coalesce.py)."""
        return Coalescer(self._send_ip_leases), Coalescer(self._send_ip_slots), Coalescer(self._send_ip_releases)

    async def _send_ip_leases(self, rows: list[tuple]) -> list[tuple]:
        got = await self._ip_statement("fetch", LEASE_SQL, rows, columns=True)
        return [tuple(r) for r in got]

    async def _send_ip_slots(self, rows: list[tuple]) -> list[tuple]:
        got = await self._ip_statement("fetch", SLOT_SQL, rows, columns=True)
        return [tuple(r) for r in got]

    async def _send_ip_releases(self, rows: list[tuple]) -> list[None]:
        await self._ip_statement("fetchval", RELEASE_SQL, rows, columns=True)
        return [None] * len(rows)

    async def _ip_statement(self, method: str, sql: str, rows: list[tuple], *, columns: bool = False):
        """One statement, retried on a deadlock: `rows` as its arguments'
        columns (`columns`), or the one row of arguments `rows[0]`."""
        args = [list(c) for c in zip(*rows)] if columns else list(rows[0])
        for attempt in range(RETRIES):
            try:
                return await self._one(method, sql, *args)
            except RETRYABLE:
                if attempt == RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))

    async def queue_state(self) -> tuple[bool, bool]:
        """(any URL at all, any URL still queued). A URL stays queued until the
        batch that fetched or decided it commits, so (True, False) means done."""
        # every region's queue, not only this worker's: a region still crawling may forward links here
        row = await self._one("fetchrow", "SELECT EXISTS (SELECT 1 FROM urls),"
                              " EXISTS (SELECT 1 FROM urls WHERE state = 'queued')")
        return bool(row[0]), bool(row[1])

    async def queued_partitions(self, partitions: Iterable[int]) -> dict[int, str]:
        """Of `partitions`, those with a queued URL, each with one such URL
        (index urls_queued)."""
        rows = await self._one("fetch", "SELECT DISTINCT ON (partition) partition, url FROM urls"
                               " WHERE state = 'queued' AND partition = ANY($1::int[])", sorted(set(partitions)))
        return {r[0]: r[1] for r in rows}

    async def hosts_of(self, keys: Sequence[str]) -> dict[str, dict]:
        """The saved politeness state of `keys` that have one (a worker reads
        evicted keys back when they return: runtime/keyreadback.py)."""
        rows = await self._one("fetch", "SELECT key, state::text FROM hosts WHERE key = ANY($1::text[])",
                               sorted(set(keys)))
        return {k: json.loads(v) for k, v in rows}

    async def robots_first(self, limit: int) -> dict[str, dict]:
        """At most `limit` saved robots.txt states (a worker's start: the
        others are read back as their origins return)."""
        rows = await self._one("fetch", "SELECT origin, state::text FROM robots LIMIT $1", limit)
        return {k: json.loads(v) for k, v in rows}

    async def robots_for(self, origins: Sequence[str]) -> dict[str, dict]:
        """The saved robots.txt state of `origins` that have one."""
        rows = await self._one("fetch", "SELECT origin, state::text FROM robots WHERE origin = ANY($1::text[])",
                               sorted(set(origins)))
        return {k: json.loads(v) for k, v in rows}

    async def workers(self) -> list[tuple[str, float, float, str]]:
        """(worker id, seconds since it started, seconds since its last heartbeat, region)."""
        rows = await self._one("fetch", f"SELECT id, {_NOW} - started_at, {_NOW} - heartbeat_at, region"
                               " FROM workers ORDER BY id")
        return [tuple(r) for r in rows]

    async def queued_by_partition(self) -> dict[int, int]:
        rows = await self._one("fetch", "SELECT partition, count(*) FROM urls WHERE state = 'queued'"
                               " GROUP BY partition")
        return {r[0]: r[1] for r in rows}

    async def prune(self, older_than_s: float = 86_400.0) -> None:
        """Housekeeping (one worker, now and then): forget batch ids, dead workers
        and idle IP rows older than `older_than_s` (database clock)."""
        async with self._conn() as conn:
            for sql in ("DELETE FROM applied_batches WHERE at < {now} - $1",
                        "DELETE FROM workers WHERE heartbeat_at < {now} - $1",
                        "DELETE FROM ip_limits WHERE updated_at < {now} - $1 AND cardinality(flights) = 0",
                        "DELETE FROM ip_leases WHERE updated_at < {now} - $1 AND owner IS NULL"):
                self.statements += 1
                await conn.execute(sql.format(now=_NOW), older_than_s)
