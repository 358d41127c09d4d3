"""The PostgresStore schema: versioned migrations, applied in order.

`migrate(conn)` brings a database to the last version in one transaction,
serialised across workers by an advisory lock (ten workers starting at once
is safe). Schema changes append to `MIGRATIONS`; a released migration is never
edited.

Versions:
  1. the crawl tables, the lease table, the inbox, the per-IP limit table
     and `courtly_ip_acquire` (window measured from starts).
  2. per-IP limits measured like the single-machine politeness: a slot
     remembers its request's start (`ip_limits.open`), `courtly_ip_release`
     replaces that start by the completion instant, and a request whose
     window hinges on a request still in flight waits for its completion
     (a late-arriving request cannot crowd the server's window).
  3. the monitor's watch list: watches, watch_state, changes (with webhook
     delivery state) and the list's version (a sequence).
  4. what the single machine's store has beside the crawl data, shared by
     all workers (shell/store/pg_shared): purges, abuse complaints, the trap
     guard's rows per key and the soft-404 book's per origin, flags
     numbered in the order recorded, and a partition on simhashes and
     histories (filled from the URL records for older rows). Additive only (IF NOT EXISTS): if another migration takes
     this number first, renumbering is safe.
  5. home regions (issue 21; shell/store/pg_region.py): `regions` (each
     region's contiguous partition range), `homes` (key -> home region, why,
     the regions that refuse it, the probe slot), `probes` (requests made
     from each region to choose a home) and `workers.region`. Additive only
     (IF NOT EXISTS), so it commutes with other branches' migrations.
  6. the cluster monitor's webhook deliveries (issue 16): `changes.not_before`
     (next attempt), `claimed_by` / `claimed_until` (the worker sending it, on
     the database clock), an event recorded once per (watch, detected_at),
     an index of the pending events per watch, and `changes.event` as `json`
     (its text as written: a webhook body and a changes.jsonl line read back
     from the cluster are the single machine's, key order included).
     Additive or idempotent: renumbering is safe.
  7. `inbox.judged`: false only for a URL just discovered (postgres.py's
     insert of new URLs); a row an adoption rebuilt or an operator requeued
     takes the default, true: the owner's trap guard judged it before, so a
     claim does not count it again (runtime/admission `judge_claimed`).
     Additive only (IF NOT EXISTS): renumbering is safe.
  8. per-IP leases (shell/store/pg_cluster.py, runtime/ip_leases.py): an
     IP one worker uses is held whole by it (`ip_leases`: owner, `until` on
     the database clock, `free_at` after a give-back, `wanted` when another
     worker asked), which applies the per-IP limits itself, as one machine
     does; an IP several workers want is shared (`shared_until`) through
     the per-request slots of versions 1-2. `courtly_ip_lease` answers
     held / shared / wait; `courtly_ip_slot` takes a slot of a shared IP.
     Additive only: renumbering is safe.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "NOW_SQL", "LOCK_ID", "PURGE_LOCK_ID", "SchemaError"]

NOW_SQL = "extract(epoch from clock_timestamp())::float8"
_NOW = NOW_SQL
LOCK_ID = 0x636F75727431   # advisory lock serialising migrations ("court1")
PURGE_LOCK_ID = 0x636F75727432   # advisory lock numbering purges in commit order ("court2")
_LOCK_ID = LOCK_ID


class SchemaError(Exception):
    """The database's schema is newer than this courtly."""


_V1 = f"""
CREATE TABLE partitions (
    id integer PRIMARY KEY, owner text, epoch bigint NOT NULL DEFAULT 0,
    lease_until double precision NOT NULL DEFAULT 0);
CREATE TABLE workers (
    id text PRIMARY KEY, started_at double precision NOT NULL, heartbeat_at double precision NOT NULL);
CREATE TABLE urls (
    url text PRIMARY KEY, partition integer NOT NULL, key text NOT NULL,
    state text NOT NULL,                        -- queued | fetched | skipped | failed
    band integer NOT NULL DEFAULT 4, depth integer NOT NULL DEFAULT 0,
    redirects integer NOT NULL DEFAULT 0, via text NOT NULL DEFAULT '',
    discovered_at double precision NOT NULL, attempts integer NOT NULL DEFAULT 0,
    fetched_at double precision, status integer, reason text, detail text);
CREATE INDEX urls_queued ON urls (partition) WHERE state = 'queued';
CREATE INDEX urls_key_reason ON urls (key, reason) WHERE reason IS NOT NULL;
CREATE TABLE inbox (id bigserial PRIMARY KEY, partition integer NOT NULL, url text NOT NULL);
CREATE INDEX inbox_partition ON inbox (partition);
CREATE TABLE fetches (
    id bigserial PRIMARY KEY, url text NOT NULL, kind text NOT NULL, at double precision NOT NULL,
    status integer NOT NULL, bytes bigint NOT NULL, elapsed_s double precision NOT NULL,
    ip text NOT NULL, warc text NOT NULL, error text NOT NULL);
CREATE INDEX fetches_url ON fetches (url);
CREATE TABLE hosts (key text PRIMARY KEY, partition integer NOT NULL, state jsonb NOT NULL);
CREATE INDEX hosts_partition ON hosts (partition);
CREATE TABLE robots (origin text PRIMARY KEY, state jsonb NOT NULL);
CREATE TABLE dead_letters (url text NOT NULL, at double precision NOT NULL, reason text NOT NULL);
CREATE TABLE flags (url text NOT NULL, at double precision NOT NULL, flag text NOT NULL, detail text NOT NULL);
CREATE INDEX flags_url ON flags (url);
CREATE TABLE digests (digest text PRIMARY KEY, url text NOT NULL, at double precision NOT NULL,
                      record_id text NOT NULL);
CREATE TABLE histories (url text PRIMARY KEY, host text NOT NULL, tier integer NOT NULL,
                        depth integer NOT NULL, history text NOT NULL);
CREATE TABLE simhashes (id bigserial PRIMARY KEY, doc_id text NOT NULL, fp bigint NOT NULL,
                        scope text NOT NULL);
CREATE TABLE applied_batches (id text PRIMARY KEY, at double precision NOT NULL);
CREATE UNLOGGED TABLE ip_limits (                     -- ephemeral: no WAL, no fsync wait
    ip text PRIMARY KEY,
    flights double precision[] NOT NULL DEFAULT '{{}}',  -- expiry of each slot in flight
    starts double precision[] NOT NULL DEFAULT '{{}}',   -- latest start instants, sorted
    updated_at double precision NOT NULL);
CREATE FUNCTION courtly_ip_acquire(p_ip text, p_now double precision, p_conc integer,
        p_window integer, p_span double precision, p_hold_s double precision,
        OUT granted boolean, OUT wait_s double precision, OUT token double precision)
LANGUAGE plpgsql AS $$
DECLARE
    r record; live double precision[]; n integer; oldest double precision;
BEGIN
    p_now := coalesce(p_now, {_NOW});
    INSERT INTO ip_limits (ip, updated_at) VALUES (p_ip, p_now) ON CONFLICT (ip) DO NOTHING;
    SELECT flights, starts INTO r FROM ip_limits WHERE ip = p_ip FOR UPDATE;
    live := ARRAY(SELECT f FROM unnest(r.flights) AS f WHERE f > p_now);
    granted := false;
    IF cardinality(live) >= p_conc THEN           -- full: wait for a release
        RETURN;
    END IF;
    n := cardinality(r.starts);
    IF n >= p_window THEN
        oldest := r.starts[n - p_window + 1];
        IF oldest + p_span > p_now THEN
            wait_s := oldest + p_span - p_now;
            RETURN;
        END IF;
    END IF;
    token := p_now + p_hold_s;
    UPDATE ip_limits SET flights = live || token,
           starts = (ARRAY(SELECT x FROM unnest(r.starts || p_now) AS x ORDER BY x))[greatest(1, n + 2 - p_window):],
           updated_at = p_now
     WHERE ip = p_ip;
    granted := true;
END $$;
"""

_V2 = f"""
TRUNCATE ip_limits;
ALTER TABLE ip_limits ADD COLUMN open double precision[] NOT NULL DEFAULT '{{}}';  -- start of each slot
CREATE OR REPLACE FUNCTION courtly_ip_acquire(p_ip text, p_now double precision, p_conc integer,
        p_window integer, p_span double precision, p_hold_s double precision,
        OUT granted boolean, OUT wait_s double precision, OUT token double precision)
LANGUAGE plpgsql AS $$
DECLARE
    r record; live double precision[] := '{{}}'; opened double precision[] := '{{}}';
    n integer; oldest double precision;
BEGIN
    p_now := coalesce(p_now, {_NOW});
    INSERT INTO ip_limits (ip, updated_at) VALUES (p_ip, p_now) ON CONFLICT (ip) DO NOTHING;
    SELECT flights, open, starts INTO r FROM ip_limits WHERE ip = p_ip FOR UPDATE;
    FOR i IN 1 .. coalesce(cardinality(r.flights), 0) LOOP     -- slots past hold_s lapse (dead worker)
        IF r.flights[i] > p_now THEN
            live := live || r.flights[i];
            opened := opened || coalesce(r.open[i], r.flights[i] - p_hold_s);
        END IF;
    END LOOP;
    granted := false;
    IF cardinality(live) >= p_conc THEN               -- full: wait for a release
        RETURN;
    END IF;
    n := cardinality(r.starts);
    IF n >= p_window THEN
        oldest := r.starts[n - p_window + 1];
        IF oldest = ANY(opened) THEN                   -- the window hinges on a request in flight
            RETURN;
        END IF;
        IF oldest + p_span > p_now THEN
            wait_s := oldest + p_span - p_now;
            RETURN;
        END IF;
    END IF;
    token := p_now + p_hold_s;
    UPDATE ip_limits SET flights = live || token, open = opened || p_now,
           starts = (ARRAY(SELECT x FROM unnest(r.starts || p_now) AS x ORDER BY x))[greatest(1, n + 2 - p_window):],
           updated_at = p_now
     WHERE ip = p_ip;
    granted := true;
END $$;
CREATE FUNCTION courtly_ip_release(p_ip text, p_token double precision, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record; i integer; j integer; started double precision;
BEGIN
    p_now := coalesce(p_now, {_NOW});
    SELECT flights, open, starts INTO r FROM ip_limits WHERE ip = p_ip FOR UPDATE;
    i := array_position(r.flights, p_token);
    IF i IS NULL THEN
        RETURN;
    END IF;
    started := r.open[i];
    j := array_position(r.starts, started);
    IF j IS NOT NULL THEN                                -- the window counts from completion
        r.starts[j] := greatest(started, p_now);
    END IF;
    UPDATE ip_limits SET flights = r.flights[:i - 1] || r.flights[i + 1:],
           open = r.open[:i - 1] || r.open[i + 1:],
           starts = ARRAY(SELECT x FROM unnest(r.starts) AS x ORDER BY x), updated_at = p_now
     WHERE ip = p_ip;
END $$;
"""

# the monitor's watch list (shell/store/watch_postgres; the same tables as watch_sqlite)
_V3 = """
CREATE TABLE watches (
    id bigserial PRIMARY KEY, url text NOT NULL UNIQUE, spec jsonb NOT NULL,
    paused boolean NOT NULL DEFAULT false, removed boolean NOT NULL DEFAULT false);
CREATE TABLE watch_state (id bigint PRIMARY KEY, state jsonb NOT NULL);
CREATE TABLE changes (
    seq bigserial PRIMARY KEY, watch_id bigint NOT NULL, url text NOT NULL,
    detected_at double precision NOT NULL, event jsonb NOT NULL, before jsonb NOT NULL, after jsonb NOT NULL,
    webhook text NOT NULL DEFAULT '', delivery text NOT NULL DEFAULT 'none',
    attempts integer NOT NULL DEFAULT 0, last_error text NOT NULL DEFAULT '');
CREATE INDEX changes_watch ON changes (watch_id, seq);
CREATE INDEX changes_delivery ON changes (delivery) WHERE delivery IN ('pending', 'dead');
CREATE SEQUENCE watch_list_version;
"""

# shell/store/pg_shared: the same tables as SqliteStore's purges and abuse_complaints
_V4_SHARED = """
CREATE TABLE IF NOT EXISTS purges (
    id bigserial PRIMARY KEY, scope text NOT NULL, value text NOT NULL, reason text NOT NULL,
    at double precision NOT NULL,               -- recorded
    applied_at double precision);               -- first taken up by a worker (NULL: none yet)
CREATE TABLE IF NOT EXISTS abuse_complaints (
    id bigserial PRIMARY KEY, host text NOT NULL, key text NOT NULL, contact text NOT NULL,
    note text NOT NULL, recorded_at double precision NOT NULL,
    resolved_at double precision);              -- NULL while open
CREATE TABLE IF NOT EXISTS trap_hosts (          -- TrapGuard state per politeness key
    key text PRIMARY KEY, partition integer NOT NULL, state text NOT NULL);
CREATE INDEX IF NOT EXISTS trap_hosts_partition ON trap_hosts (partition);
CREATE TABLE IF NOT EXISTS soft404_hosts (       -- Soft404Book state per origin
    origin text PRIMARY KEY, partition integer NOT NULL, state text NOT NULL);
CREATE INDEX IF NOT EXISTS soft404_hosts_partition ON soft404_hosts (partition);
ALTER TABLE simhashes ADD COLUMN IF NOT EXISTS partition integer;
UPDATE simhashes s SET partition = u.partition FROM urls u WHERE s.partition IS NULL AND u.url = s.doc_id;
CREATE INDEX IF NOT EXISTS simhashes_partition ON simhashes (partition, id);
ALTER TABLE histories ADD COLUMN IF NOT EXISTS partition integer;
UPDATE histories h SET partition = u.partition FROM urls u WHERE h.partition IS NULL AND u.url = h.url;
CREATE INDEX IF NOT EXISTS histories_partition ON histories (partition, url);
ALTER TABLE flags ADD COLUMN IF NOT EXISTS id bigserial;          -- the order recorded (iter_flags)
"""

# home regions (shell/store/pg_region): metadata only, global; the bytes stay in each region
_V_REGIONS = """
CREATE TABLE IF NOT EXISTS regions (name text PRIMARY KEY, idx integer NOT NULL UNIQUE,
                                    first integer NOT NULL, count integer NOT NULL, storage text NOT NULL);
CREATE TABLE IF NOT EXISTS homes (
    key text PRIMARY KEY, region text NOT NULL, reason text NOT NULL,
    blocked text NOT NULL DEFAULT '', probe_free_at double precision NOT NULL DEFAULT 0,
    url text NOT NULL DEFAULT '');                     -- one URL of the key: its origin is probed
CREATE TABLE IF NOT EXISTS probes (
    key text NOT NULL, region text NOT NULL, at double precision NOT NULL,
    rtt_s double precision, status integer NOT NULL, digest text NOT NULL);
CREATE INDEX IF NOT EXISTS probes_key ON probes (key);
ALTER TABLE workers ADD COLUMN IF NOT EXISTS region text NOT NULL DEFAULT '';
"""

# the cluster monitor's webhook deliveries (shell/store/watch_postgres): when the next attempt
# may start, and the worker sending it until when (a claim; a dead worker's expires); an
# event is recorded once whatever the retries of its write
_V_DELIVERY = """
ALTER TABLE changes ADD COLUMN IF NOT EXISTS not_before double precision NOT NULL DEFAULT 0;
ALTER TABLE changes ADD COLUMN IF NOT EXISTS claimed_by text NOT NULL DEFAULT '';
ALTER TABLE changes ADD COLUMN IF NOT EXISTS claimed_until double precision NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX IF NOT EXISTS changes_once ON changes (watch_id, detected_at);
CREATE INDEX IF NOT EXISTS changes_pending ON changes (watch_id, seq) WHERE delivery = 'pending';
ALTER TABLE changes ALTER COLUMN event TYPE json USING event::json;
"""

# the owner's trap guard judged an inbox row's URL already (runtime/admission.judge_claimed)
_V_JUDGED = "ALTER TABLE inbox ADD COLUMN IF NOT EXISTS judged boolean NOT NULL DEFAULT true;\n"

# an IP one worker uses is held whole (its per-IP limits are then the holder's own); an IP
# several workers want is shared through the per-request slots of versions 1-2 (runtime/ip_leases.py)
_V_IP_LEASES = f"""
CREATE TABLE ip_leases (
    ip text PRIMARY KEY,
    owner text,                                       -- NULL: nobody holds it whole
    until double precision NOT NULL DEFAULT 0,        -- the holder starts no request after this
    free_at double precision NOT NULL DEFAULT 0,      -- given back: its last requests left the rate window
    wanted boolean NOT NULL DEFAULT false,            -- another worker asked while it was held
    shared_until double precision NOT NULL DEFAULT 0, -- shared: requests take slots (ip_limits) until then
    updated_at double precision NOT NULL);
CREATE INDEX ip_leases_wanted ON ip_leases (owner) WHERE wanted;   -- a holder's poll: which of mine are wanted
CREATE FUNCTION courtly_ip_row(p_ip text, p_now double precision) RETURNS ip_leases
LANGUAGE plpgsql AS $$
DECLARE
    r ip_leases;
BEGIN                                             -- the IP's row, made if new, locked until the caller's commit
    INSERT INTO ip_leases (ip, updated_at) VALUES (p_ip, p_now) ON CONFLICT (ip) DO NOTHING;
    SELECT * INTO r FROM ip_leases WHERE ip = p_ip FOR UPDATE;
    RETURN r;
END $$;
CREATE FUNCTION courtly_ip_lease(p_ip text, p_owner text, p_now double precision, p_lease_s double precision,
        p_hold_s double precision, OUT answer text, OUT wait_s double precision)
LANGUAGE plpgsql AS $$
DECLARE
    r ip_leases;
BEGIN
    p_now := coalesce(p_now, {_NOW});
    r := courtly_ip_row(p_ip, p_now);
    IF r.owner IS NOT NULL AND r.owner <> p_owner AND r.until + p_hold_s > p_now THEN
        -- held elsewhere (a holder that died lapses hold_s after its term: its last requests are over)
        IF NOT r.wanted THEN
            UPDATE ip_leases SET wanted = true WHERE ip = p_ip;
        END IF;
        answer := 'wait';
        wait_s := r.until + p_hold_s - p_now;
        RETURN;
    END IF;
    IF (r.owner IS NULL OR r.owner <> p_owner) AND r.free_at > p_now THEN   -- given back a moment ago
        answer := 'wait';
        wait_s := r.free_at - p_now;
        RETURN;
    END IF;
    IF (r.owner IS NULL OR r.owner <> p_owner) AND r.shared_until > p_now THEN
        answer := 'shared';                           -- a slot per request (courtly_ip_slot)
        wait_s := r.shared_until - p_now;
        RETURN;
    END IF;
    UPDATE ip_leases SET owner = p_owner, until = p_now + p_lease_s, updated_at = p_now,
           wanted = (r.owner IS NOT DISTINCT FROM p_owner) AND r.wanted
     WHERE ip = p_ip;
    answer := 'held';
    wait_s := p_lease_s;
END $$;
CREATE FUNCTION courtly_ip_slot(p_ip text, p_now double precision, p_conc integer, p_window integer,
        p_span double precision, p_hold_s double precision, p_shared_s double precision,
        OUT granted boolean, OUT wait_s double precision, OUT token double precision)
LANGUAGE plpgsql AS $$
DECLARE
    r ip_leases;
BEGIN
    p_now := coalesce(p_now, {_NOW});
    r := courtly_ip_row(p_ip, p_now);
    granted := false;
    IF r.owner IS NOT NULL AND r.until + p_hold_s > p_now THEN   -- held whole: its holder gives it back
        UPDATE ip_leases SET wanted = true WHERE ip = p_ip;
        wait_s := r.until + p_hold_s - p_now;
        RETURN;
    END IF;
    IF r.free_at > p_now THEN
        wait_s := r.free_at - p_now;
        RETURN;
    END IF;
    SELECT a.granted, a.wait_s, a.token INTO granted, wait_s, token
      FROM courtly_ip_acquire(p_ip, p_now, p_conc, p_window, p_span, p_hold_s) AS a;
    IF granted THEN     -- shared while slots are taken: held whole again only once they are all over
        UPDATE ip_leases SET owner = NULL, wanted = false, updated_at = p_now,
               shared_until = greatest(shared_until, p_now + p_shared_s)
         WHERE ip = p_ip;
    END IF;
END $$;
"""

MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _V1), (2, _V2), (3, _V3), (4, _V4_SHARED),
                                               (5, _V_REGIONS), (6, _V_DELIVERY), (7, _V_JUDGED),
                                               (8, _V_IP_LEASES))
SCHEMA_VERSION = MIGRATIONS[-1][0]


async def migrate(conn, migrations: Sequence[tuple[int, str]] = MIGRATIONS) -> int:
    """Bring the schema to the last migration (idempotent, serialised across
    workers by an advisory lock). Returns the schema version."""
    latest = migrations[-1][0]
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_ID)
        await conn.execute("CREATE TABLE IF NOT EXISTS meta (k text PRIMARY KEY, v text NOT NULL)")
        current = int(await conn.fetchval("SELECT v FROM meta WHERE k = 'schema_version'") or 0)
        if current > latest:
            raise SchemaError(f"the database was written by a newer courtly (schema {current} > {latest})")
        for version, sql in migrations:
            if version > current:
                await conn.execute(sql)
                await conn.execute("INSERT INTO meta VALUES ('schema_version', $1) ON CONFLICT (k)"
                                   " DO UPDATE SET v = excluded.v", str(version))
                current = version
    return current
