"""Home regions in the shared PostgreSQL store (issue 21): which region each
politeness key lives in, which partitions each region owns, where each
region's WARC bytes go, and the probes that choose a home.

What it owns
------------
* `regions`: the crawl's regions in order, each with its contiguous range of
  partitions (core/region.RegionLayout) and its storage URL. Written once
  by `courtly submit --regions`; a crawl without rows has one region and
  keeps `partition_of(key, P)` (the layouts agree).
* `homes`: key -> home region, the reason (`default`, `override`,
  `geo_block`, `rtt`, `kept`), the regions that refuse it, and the key's
  probe slot (`probe_free_at`, database clock). Every key that reaches the
  store gets a row before its first URL (`ensure_homes`: the configured
  override, else the first region): host assignments are global metadata.
* `probes`: requests made from each region to a key (round trip, status,
  payload digest), the input of `choose_home`.

How it works
------------
A key's partition is `RegionLayout.partition_of(key, home)`. The insert of
discovered URLs computes it in SQL from the `homes` row it reads `FOR SHARE`
(`first + blake2b64(key) mod count`), so a URL never lands in the partition
of a home the key just left: `rehome` (which takes the row `FOR UPDATE`)
waits for such inserts, and they read the new home after it. `rehome` moves
a key only while no worker holds its current partition (the row of
`partitions` taken `FOR UPDATE`, as `acquire` does): its queued URLs, inbox
rows and host state move to the new home's partition, never fetched by both.
The process keeps a bounded key -> partition cache for the synchronous
callers (the worker's gate); claims refresh it with the partition the URL
row has, and a key not in it is taken as homed in the process's region.

Rules: metadata only (no content crosses regions through this module);
every statement counted in `statements`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from courtly.core.region import Probe, RegionError, RegionLayout
from courtly.core.sitekey import partition_of
from courtly.shell.store.pg_schema import NOW_SQL as _NOW
from courtly.shell.store.sqlite import StoreError

__all__ = ["RegionMixin", "key_hash"]

CACHE_MAX = 200_000       # key -> partition entries kept by one process


def key_hash(key: str) -> int:
    """blake2b-64 of the key, big-endian: the same number RegionLayout and
    partition_of reduce."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


class RegionMixin:
    """Regions and homes of a PostgresStore (uses its `_one`, `_conn`, `partitions`)."""

    statements: int
    partitions: int | None
    region: str = ""                          # the region this process works for ('' = none given)
    layout: RegionLayout | None = None        # None: a crawl of one region
    storage: dict[str, str]
    _part_cache: dict[str, int]

    async def _load_regions(self, conn) -> None:
        rows = await conn.fetch("SELECT name, storage FROM regions ORDER BY idx")
        self.statements += 1
        self.storage = {r["name"]: r["storage"] for r in rows}
        self.layout = RegionLayout(tuple(self.storage), self.partitions) if rows and self.partitions else None
        self._part_cache = {}

    @property
    def default_region(self) -> str:
        return self.layout.regions[0] if self.layout else ""

    async def create_regions(self, regions: Sequence[str], storage: Mapping[str, str]) -> None:
        """Declare the crawl's regions (once; the same list again is a no-op)."""
        if self.partitions is None:
            raise StoreError("no crawl in this database: create it first")
        layout = RegionLayout(tuple(regions), self.partitions)
        unknown = sorted(set(storage) - set(regions))
        if unknown:
            raise StoreError(f"storage given for unknown region {unknown[0]!r} (regions: {', '.join(regions)})")
        async with self._conn() as conn:
            async with conn.transaction():
                have = [r[0] for r in await conn.fetch("SELECT name FROM regions ORDER BY idx FOR UPDATE")]
                if have and have != list(regions):
                    raise StoreError(f"this crawl has regions {','.join(have)}, not {','.join(regions)} "
                                     "(fixed at creation)")
                if not have:
                    if await conn.fetchval("SELECT EXISTS (SELECT 1 FROM urls)"):
                        raise StoreError("regions are declared when the crawl is created, before any URL")
                    for i, name in enumerate(regions):
                        r = layout.range_of(name)
                        await conn.execute("INSERT INTO regions VALUES ($1, $2, $3, $4, $5)",
                                           name, i, r.start, len(r), storage.get(name, ""))
                for name, url in storage.items():
                    await conn.execute("UPDATE regions SET storage = $2 WHERE name = $1", name, url)
            self.statements += 3 + len(regions) + len(storage)
            await self._load_regions(conn)

    def region_range(self) -> range | None:
        """The partitions this process's region owns (None: all of them)."""
        if self.layout is None or not self.region:
            return None
        return self.layout.range_of(self.region)

    def partition_of_key(self, key: str) -> int:
        """`key`'s partition as this process knows it: the cache (claims, homes
        read), else as if homed in this process's region (a worker claims only
        keys of its region, so for them that is exact even after the cache was
        emptied), else in the default region."""
        if self.partitions is None:
            raise StoreError("no crawl in this database: open it with partitions=P to create one")
        if self.layout is None:     # the hash, remembered (every batch row asks it again)
            p = self._part_cache.get(key)
            if p is None:
                if len(self._part_cache) >= CACHE_MAX:
                    self._part_cache.clear()
                p = self._part_cache[key] = partition_of(key, self.partitions)
            return p
        p = self._part_cache.get(key)
        if p is None:
            p = self.layout.partition_of(key, self.region or self.default_region)
        return p

    def _learn(self, key: str, partition: int) -> None:
        if len(self._part_cache) >= CACHE_MAX:
            self._part_cache.clear()
        self._part_cache[key] = partition

    async def ensure_homes(self, keys_urls: Iterable[tuple[str, str]]) -> None:
        """Give every key not seen by this process a `homes` row (first region,
        reason `default`, one of its URLs; unless one exists) and learn its
        partition. `keys_urls`: (key, url) pairs."""
        if self.layout is None:
            return
        todo = dict(sorted((k, u) for k, u in keys_urls if k not in self._part_cache))
        if not todo:
            return
        rows = await self._one("fetch", """
            WITH ins AS (
                INSERT INTO homes (key, region, reason, url)
                SELECT k, $3, 'default', u FROM unnest($1::text[], $2::text[]) AS t(k, u)
                ON CONFLICT (key) DO NOTHING RETURNING key, region)
            SELECT key, region FROM ins UNION ALL SELECT key, region FROM homes WHERE key = ANY($1::text[])""",
            list(todo), list(todo.values()), self.default_region)
        for key, region in rows:
            self._learn(key, self.layout.partition_of(key, region))

    async def set_homes(self, homes: Mapping[str, str], reason: str = "override") -> None:
        """Configured homes (`courtly submit --home KEY=REGION`), before the
        key's first URL: an override wins over probes."""
        if not homes:
            return
        if self.layout is None:
            raise StoreError("this crawl has one region: declare --regions to give keys homes")
        for region in homes.values():
            self.layout.range_of(region)   # RegionError for an unknown region
        items = sorted(homes.items())
        await self._one("execute", "INSERT INTO homes (key, region, reason) SELECT * FROM"
                        " unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT (key) DO UPDATE"
                        " SET region = excluded.region, reason = excluded.reason",
                        [k for k, _ in items], [r for _, r in items], [reason] * len(items))
        for key, region in items:
            self._learn(key, self.layout.partition_of(key, region))

    async def homes(self, keys: Iterable[str] | None = None) -> dict[str, tuple[str, str, str]]:
        """key -> (region, reason, blocked regions comma-separated)."""
        ks = None if keys is None else sorted(set(keys))
        rows = await self._one("fetch", "SELECT key, region, reason, blocked FROM homes"
                               " WHERE $1::text[] IS NULL OR key = ANY($1) ORDER BY key", ks)
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    # ---- probes ---------------------------------------------------------------------------------

    async def probe_slot(self, key: str, hold_s: float) -> float | None:
        """Take the key's probe slot for `hold_s` (None), or seconds to wait:
        one probe in flight per key, from any region."""
        row = await self._one("fetchrow", f"""
            WITH cur AS (SELECT key, probe_free_at FROM homes WHERE key = $1 FOR UPDATE),
            up AS (UPDATE homes h SET probe_free_at = {_NOW} + $2 FROM cur
                    WHERE h.key = cur.key AND cur.probe_free_at <= {_NOW} RETURNING h.key)
            SELECT (SELECT count(*) FROM up) AS got, (SELECT probe_free_at FROM cur) - {_NOW} AS wait""",
            key, hold_s)
        if row["got"]:
            return None
        return max(0.01, row["wait"]) if row["wait"] is not None else None

    async def probe_done(self, key: str, probe: Probe, gap_s: float) -> None:
        """Record a probe and free the key's slot `gap_s` after now (the key's delay)."""
        async with self._conn() as conn:
            async with conn.transaction():
                await conn.execute(f"INSERT INTO probes VALUES ($1, $2, {_NOW}, $3, $4, $5)", key, probe.region,
                                   probe.rtt_s, probe.status, probe.digest)
                await conn.execute(f"UPDATE homes SET probe_free_at = {_NOW} + $2 WHERE key = $1", key, gap_s)
            self.statements += 4

    async def probes_of(self, keys: Iterable[str]) -> dict[str, list[Probe]]:
        rows = await self._one("fetch", "SELECT key, region, rtt_s, status, digest FROM probes"
                               " WHERE key = ANY($1::text[]) ORDER BY key, at", sorted(set(keys)))
        out: dict[str, list[Probe]] = {}
        for key, region, rtt, status, digest in rows:
            out.setdefault(key, []).append(Probe(region, rtt, status, digest))
        return out

    async def probe_targets(self, region: str, samples: int, limit: int) -> dict[str, str]:
        """Keys with fewer than `samples` probes from `region`, each with one of
        its URLs (whose origin's robots.txt is the probe)."""
        rows = await self._one("fetch", """
            SELECT h.key, h.url FROM homes h
             WHERE h.reason <> 'override' AND h.url <> ''
               AND (SELECT count(*) FROM probes p WHERE p.key = h.key AND p.region = $1) < $2
             ORDER BY h.key LIMIT $3""", region, samples, limit)
        return {r[0]: r[1] for r in rows}

    async def rehome(self, key: str, region: str, reason: str, blocked: Sequence[str]) -> bool:
        """Move `key` to `region` (see the module doc). False while a worker
        holds its current partition (try again when it is free)."""
        if self.layout is None:
            raise StoreError("this crawl has one region")
        new_p = self.layout.partition_of(key, region)
        async with self._conn() as conn:
            async with conn.transaction():
                cur = await conn.fetchrow("SELECT region FROM homes WHERE key = $1 FOR UPDATE", key)
                if cur is None:
                    raise RegionError(f"no home recorded for {key!r}")
                old_p = self.layout.partition_of(key, cur["region"])
                held = await conn.fetchval(f"SELECT owner IS NOT NULL AND lease_until > {_NOW} FROM partitions"
                                           " WHERE id = $1 FOR UPDATE", old_p)
                self.statements += 3
                if held:
                    return False
                await conn.execute("UPDATE homes SET region = $2, reason = $3, blocked = $4 WHERE key = $1",
                                   key, region, reason, ",".join(blocked))
                if old_p != new_p:
                    await conn.execute("""
                        WITH mv AS (UPDATE urls SET partition = $2 WHERE key = $1 RETURNING url, state),
                        gone AS (DELETE FROM inbox i USING mv WHERE i.url = mv.url AND i.partition = $3)
                        INSERT INTO inbox (partition, url) SELECT $2, url FROM mv WHERE state = 'queued'""",
                                       key, new_p, old_p)
                    await conn.execute("UPDATE hosts SET partition = $2 WHERE key = $1", key, new_p)
                    self.statements += 2
            self.statements += 3
        self._learn(key, new_p)
        return True
