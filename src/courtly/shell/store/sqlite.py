"""SqliteStore: the embedded crawl state (one file, WAL) in the crawl folder.

What it owns: URL records (one row per normalised URL: queued, fetched,
skipped with a reason, failed), the fetch log, per-key politeness state, the
robots cache, dead letters and counters, and the takedowns (`purges`: each
recorded together with the marks on the URL records in its scope, in one
transaction, so `courtly purge` can run beside a crawl).

How it works: the runtime gathers changes in a `Batch` and applies it in one
transaction every `commit_interval_s` (group commit). The WARC writer is
flushed *before* the batch that acknowledges those fetches is committed, so a
fetch acknowledged in the store always has its raw bytes on disk (invariant
5). A discovered URL is inserted in the same transaction that marks the page
it came from as fetched: after `kill -9` a page is either still queued (and is
fetched again: at-least-once) or fetched with all its links queued.

Rules: URL inserts are `INSERT OR IGNORE` (the primary key is the exact
URL-seen test); a decision may arrive for a URL that has no row yet; nothing
is ever deleted. Schema changes bump `SCHEMA_VERSION` with a migration, unless
both shapes serve the same statements (the urls and digests tables: keyed
before, appended now; folders keep the shape they were made with).

Cost: a commit is paid per page it dirties (a WAL frame, later a checkpoint
copy), and URL-keyed inserts land on random pages; tables read back only
whole are appended, and checkpoints wait for `WAL_CHECKPOINT_PAGES`
(`bench/store_micro.py`, docs/performance.md "Session 5").
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

if TYPE_CHECKING:
    from courtly.core.purge import Purge
    from courtly.core.fingerprint import FirstCapture

__all__ = ["SqliteStore", "Batch", "StoreError", "SCHEMA_VERSION"]

from courtly.shell.store.sqlite_folder import StoreError, refuse_foreign  # noqa: E402  (StoreError re-exported)
from courtly.ports import Batch  # noqa: E402  (re-exported: the store's unit of work)
from courtly.ports import (  # noqa: E402  (the rows it reads back: NamedTuples, positional as before)
    ComplaintRow, DeadLetterRow, DigestRow, FlagRow, HistoryRow, PurgeRow, QueuedRow, RefusedRow, SimhashRow,
)

SCHEMA_VERSION = 1

# A commit's random inserts (URLs, their queued index, digests, fetch log
# index) dirty ~1,000-2,000 pages: SQLite's default checkpoint at 1,000 WAL
# pages ran after every commit and copied each page to the database file the
# same 0.5 s it was written. At 10,000 pages (~40 MB of WAL) one checkpoint
# serves ~5 commits and copies a page rewritten by several of them once
# (bench/store_micro.py: ~20 % less CPU per commit). Durability is the WAL's,
# as before: a checkpoint only moves committed pages.
WAL_CHECKPOINT_PAGES = 10_000

# json.dumps' text, without building an encoder per call (a large share of a host row's cost)
_encode = json.JSONEncoder(check_circular=False).encode

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
-- Rows are appended (rowid) and the URL is a unique index: a new URL costs a
-- narrow index entry on a random page instead of its whole row, and the
-- queued index holds rowids instead of URLs (bench/store_micro.py: ~12 % less
-- CPU per commit in S1, ~17 % at 700,000 URLs; the file ~8 % larger). Folders
-- from before keep their table keyed by URL (WITHOUT ROWID); the statements
-- below serve both shapes.
CREATE TABLE IF NOT EXISTS urls (
    url TEXT NOT NULL UNIQUE,
    key TEXT NOT NULL,
    state TEXT NOT NULL,            -- queued | fetched | skipped | failed
    band INTEGER NOT NULL DEFAULT 4,
    depth INTEGER NOT NULL DEFAULT 0,
    redirects INTEGER NOT NULL DEFAULT 0,
    via TEXT NOT NULL DEFAULT '',
    discovered_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    fetched_at REAL,
    status INTEGER,
    reason TEXT,
    detail TEXT
);
-- queued URLs per key in band order: the frontier reads back the URLs it keeps
-- only here (runtime/overflow), and resume scans all of them
CREATE INDEX IF NOT EXISTS urls_queued_key ON urls(key, band, discovered_at) WHERE state = 'queued';
DROP INDEX IF EXISTS urls_queued;       -- the older key-less index, superseded by urls_queued_key
CREATE TABLE IF NOT EXISTS fetches (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL,
    kind TEXT NOT NULL,             -- page | robots
    at REAL NOT NULL,
    status INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    elapsed_s REAL NOT NULL,
    ip TEXT NOT NULL,
    warc TEXT NOT NULL,             -- file:offset of the response record, '' if none
    error TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS fetches_url ON fetches(url);
CREATE TABLE IF NOT EXISTS hosts (key TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS robots (origin TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dead_letters (url TEXT NOT NULL, at REAL NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS flags (              -- exact_dup | near_dup | soft404 | noindex, per fetch; reconsidered (runtime/refusal)
    url TEXT NOT NULL, at REAL NOT NULL, flag TEXT NOT NULL, detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS flags_url ON flags(url);
-- first capture of each payload (exact dedup), in the order captured: read
-- back whole at start, never looked up, so appended (a table keyed by digest
-- took a random page per fetched page). Folders from before keep their keyed
-- table; the same statements serve both.
CREATE TABLE IF NOT EXISTS digests (
    digest TEXT NOT NULL, url TEXT NOT NULL, at REAL NOT NULL, record_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS histories (          -- change history per URL (recrawl scheduler)
    url TEXT PRIMARY KEY, host TEXT NOT NULL, tier INTEGER NOT NULL, depth INTEGER NOT NULL,
    history TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS simhashes (          -- near-duplicate index, in insertion order
    id INTEGER PRIMARY KEY, doc_id TEXT NOT NULL, fp INTEGER NOT NULL, scope TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS purges (             -- takedowns (courtly purge), in the order recorded
    id INTEGER PRIMARY KEY, scope TEXT NOT NULL, value TEXT NOT NULL, reason TEXT NOT NULL,
    at REAL NOT NULL,               -- recorded
    applied_at REAL);               -- taken up by a running crawl (NULL: none was running)
CREATE TABLE IF NOT EXISTS abuse_complaints (   -- courtly abuse: the host's key is slowed while open
    id INTEGER PRIMARY KEY, host TEXT NOT NULL, key TEXT NOT NULL, contact TEXT NOT NULL,
    note TEXT NOT NULL, recorded_at REAL NOT NULL,
    resolved_at REAL);              -- NULL while open
"""


def _first_per_digest(rows: Sequence[DigestRow]) -> list[DigestRow]:
    """A batch's digest rows, the first of each digest only (the appended
    table does not ignore a repeat by itself). A digest repeated across
    batches, which happens only once the crawl's ExactDupIndex is full, is
    kept: the reader's index takes the first row it meets."""
    seen: set[str] = set()
    out = []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            out.append(row)
    return out


def _first_capture(url: str, at: float, record_id: str) -> FirstCapture:
    from courtly.core.fingerprint import FirstCapture

    return FirstCapture(url, at, record_id)


def connect_wal(path: Path) -> sqlite3.Connection:
    """The crawl folder's database (made with its folder if missing), in WAL
    mode, autocommit, waiting up to 5 s for another writer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


def connect_schema(path: Path, schema: str, what: str) -> sqlite3.Connection:
    """`connect_wal(path)` with `schema` made; StoreError naming `what` if it fails."""
    try:
        db = connect_wal(path)
        db.executescript(schema)
        return db
    except (sqlite3.Error, OSError) as e:
        raise StoreError(f"cannot open {what} in {path}: {e}") from e


class SqliteStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            refuse_foreign(self.path)
            self._db = connect_wal(self.path)
            self._db.execute("PRAGMA cache_size=-65536")
            self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            self._db.executescript(_SCHEMA)
            self._migrate()
        except (sqlite3.Error, OSError) as e:
            raise StoreError(f"cannot open crawl database {self.path}: {e}") from e
        self.statements = 0

    def _migrate(self) -> None:
        row = self._db.execute("SELECT v FROM meta WHERE k='schema_version'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer courtly (schema {row[0]} > {SCHEMA_VERSION})"
            )

    # ---- writes ---------------------------------------------------------------

    def apply(self, b: Batch) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            if b.new_urls:
                db.executemany(
                    "INSERT INTO urls(url, key, state, band, depth, redirects, via, discovered_at)"
                    " VALUES (?, ?, 'queued', ?, ?, ?, ?, ?)"
                    # a link refused as nofollow may be followed from another page
                    " ON CONFLICT(url) DO UPDATE SET state='queued', key=excluded.key,"
                    " band=excluded.band, depth=excluded.depth, via=excluded.via,"
                    " reason=NULL, detail=NULL WHERE urls.state='skipped' AND urls.reason='nofollow'",
                    b.new_urls,
                )
            if b.requeued:
                db.executemany("UPDATE urls SET attempts = ? WHERE url = ?", b.requeued)
            if b.fetched:
                db.executemany(
                    "UPDATE urls SET state='fetched', fetched_at=?, status=?, reason=NULL, detail=NULL"
                    " WHERE url=?",
                    b.fetched,
                )
            if b.decisions:
                db.executemany(
                    "INSERT INTO urls(url, key, via, discovered_at, state, reason, detail, depth)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT(url) DO UPDATE SET state=excluded.state, reason=excluded.reason,"
                    " detail=excluded.detail"
                    " WHERE NOT (excluded.reason='nofollow' AND urls.state IN ('queued', 'fetched'))",
                    b.decisions,
                )
            if b.fetches:
                db.executemany(
                    "INSERT INTO fetches(url, kind, at, status, bytes, elapsed_s, ip, warc, error)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    b.fetches,
                )
            if b.hosts:
                db.executemany(
                    "INSERT OR REPLACE INTO hosts VALUES (?, ?)",
                    [(k, _encode(v)) for k, v in b.hosts.items()],
                )
            if b.robots:
                db.executemany(
                    "INSERT OR REPLACE INTO robots VALUES (?, ?)",
                    [(k, _encode(v)) for k, v in b.robots.items()],
                )
            if b.dead_letters:
                db.executemany("INSERT INTO dead_letters VALUES (?, ?, ?)", b.dead_letters)
            if b.flags:
                db.executemany("INSERT INTO flags VALUES (?, ?, ?, ?)", b.flags)
            if b.digests:
                db.executemany("INSERT OR IGNORE INTO digests VALUES (?, ?, ?, ?)", _first_per_digest(b.digests))
            if b.simhashes:
                db.executemany("INSERT INTO simhashes(doc_id, fp, scope) VALUES (?, ?, ?)", b.simhashes)
            if b.histories:
                db.executemany("INSERT OR REPLACE INTO histories VALUES (?, ?, ?, ?, ?)",
                               list(b.histories.values()))
            if b.meta:
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(b.meta.items()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.statements += 1

    # ---- reads ----------------------------------------------------------------

    # A URL refused only because a page linked it rel=nofollow is not "seen":
    # another page may link it plainly (admission is told so; the new_urls
    # insert then turns the row into a queued one). After a restart too.
    _SEEN = "SELECT 1 FROM urls WHERE url = ? AND NOT (state = 'skipped' AND reason IS 'nofollow')"

    def has_url(self, url: str) -> bool:
        """Is `url` known for good (anything but a nofollow refusal)?"""
        return self._db.execute(self._SEEN, (url,)).fetchone() is not None

    def iter_urls(self) -> Iterator[str]:
        """Every URL known for good (what `has_url` says yes to)."""
        for (u,) in self._db.execute("SELECT url FROM urls WHERE NOT (state = 'skipped' AND reason IS 'nofollow')"):
            yield u

    def iter_queued(self) -> Iterator[QueuedRow]:
        """(url, key, band, depth, redirects, via, attempts) of every queued URL."""
        yield from map(QueuedRow._make, self._db.execute(
            "SELECT url, key, band, depth, redirects, via, attempts FROM urls WHERE state='queued'"
        ))

    def queued_of_key(self, key: str, limit: int) -> list[QueuedRow]:
        """The first `limit` queued URLs of `key` in band order, as
        (url, key, band, depth, redirects, via, attempts); an index range scan."""
        return list(map(QueuedRow._make, self._db.execute(
            "SELECT url, key, band, depth, redirects, via, attempts FROM urls INDEXED BY urls_queued_key"
            " WHERE key = ? AND state = 'queued' ORDER BY band, discovered_at LIMIT ?",
            (key, limit))))

    def hosts(self) -> dict[str, dict[str, Any]]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, state FROM hosts")}

    def robots(self, limit: int = -1) -> dict[str, dict[str, Any]]:
        """Saved robots.txt states by origin (at most `limit`; -1: all)."""
        return {k: json.loads(v) for k, v in self._db.execute("SELECT origin, state FROM robots LIMIT ?", (limit,))}

    def host(self, key: str) -> dict[str, Any] | None:
        """One key's saved politeness state (read back after an eviction)."""
        row = self._db.execute("SELECT state FROM hosts WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def robots_of(self, origin: str) -> dict[str, Any] | None:
        """One origin's saved robots.txt state (read back after an eviction)."""
        row = self._db.execute("SELECT state FROM robots WHERE origin = ?", (origin,)).fetchone()
        return None if row is None else json.loads(row[0])

    def iter_digests(self) -> Iterator[DigestRow]:
        yield from map(DigestRow._make, self._db.execute("SELECT digest, url, at, record_id FROM digests"))

    def digest_record(self, digest: str) -> FirstCapture | None:
        """The first capture (core FirstCapture) of the payload `digest`, or
        None. A scan of the appended table: the running crawl keeps this index
        in memory (runtime/budget); this answers tools and the store contract."""
        row = self._db.execute("SELECT url, at, record_id FROM digests WHERE digest = ? ORDER BY rowid LIMIT 1",
                               (digest,)).fetchone()
        return None if row is None else _first_capture(*row)

    def digest_records(self, digests: Iterable[str]) -> dict[str, FirstCapture]:
        """`digest_record` for many digests (one scan): those known."""
        wanted = set(digests)
        out: dict[str, FirstCapture] = {}
        for digest, url, at, record_id in self.iter_digests():
            if digest in wanted and digest not in out:
                out[digest] = _first_capture(url, at, record_id)
        return out

    def trap_snapshot(self) -> dict[str, Any]:
        """The trap guard's snapshot (`TrapGuard.restore` takes it; empty when none)."""
        raw = self.get_meta("traps")
        return json.loads(raw) if raw else {"version": 1, "allow": [], "hosts": {}}

    def soft404_snapshot(self) -> dict[str, Any]:
        """The soft-404 book's snapshot (`Soft404Book.restore` takes it; empty when none)."""
        raw = self.get_meta("soft404")
        return json.loads(raw) if raw else {"version": 2, "hosts": {}}

    def iter_histories(self) -> Iterator[HistoryRow]:
        yield from map(HistoryRow._make, self._db.execute("SELECT url, host, tier, depth, history FROM histories"))

    def fetches_by_day(self) -> list[tuple[int, str, int]]:
        """(day since epoch, kind, fetches) for the report."""
        return self._db.execute(
            "SELECT CAST(at / 86400 AS INTEGER) AS day, kind, count(*) FROM fetches GROUP BY day, kind"
            " ORDER BY day, kind").fetchall()

    def iter_simhashes(self) -> Iterator[SimhashRow]:
        yield from map(SimhashRow._make, self._db.execute("SELECT doc_id, fp, scope FROM simhashes ORDER BY id"))

    def iter_flags(self, flags: tuple[str, ...]) -> Iterator[FlagRow]:
        """(url, at, flag, detail) of the flags named, in the order recorded."""
        marks = ", ".join("?" * len(flags))
        yield from map(FlagRow._make, self._db.execute(
            f"SELECT url, at, flag, detail FROM flags WHERE flag IN ({marks}) ORDER BY rowid", flags))

    def url_flags(self, url: str) -> list[tuple[float, str, str]]:
        return read_url_flags(self._db, url)

    def dead_letters(self, limit: int) -> list[DeadLetterRow]:
        """(url, at, reason) of the pages extraction gave up on, oldest first, at most `limit`."""
        return list(map(DeadLetterRow._make, self._db.execute(
            "SELECT url, at, reason FROM dead_letters ORDER BY at LIMIT ?", (limit,))))

    def count_denied(self, key: str, reason: str) -> int:
        return int(self._db.execute("SELECT count(*) FROM urls WHERE key = ? AND reason = ?",
                                    (key, reason)).fetchone()[0])

    def requeue_denied(self, key: str, reason: str, rule: str | None = None) -> int:
        """Queue again the URLs of `key` skipped for `reason` (and `rule`, whose
        name starts the decision's detail). Returns how many."""
        sql = ("UPDATE urls SET state='queued', reason=NULL, detail=NULL"
               " WHERE key = ? AND state = 'skipped' AND reason = ?")
        args: tuple[str, ...] = (key, reason)
        if rule:
            sql += " AND detail LIKE ?"
            args += (rule + "%",)
        self._db.execute("BEGIN")
        n = self._db.execute(sql, args).rowcount
        self._db.execute("COMMIT")
        return n

    def refused_at_depth0(self, reasons: list[str], limit: int) -> list[RefusedRow]:
        """(url, key, via, reason, detail) of seed-stage URLs (depth 0: seeds and
        their redirect hops) skipped for one of `reasons` (runtime/refusal)."""
        marks = ", ".join("?" * len(reasons))
        return list(map(RefusedRow._make, self._db.execute(
            f"SELECT url, key, via, reason, coalesce(detail, '') FROM urls WHERE depth = 0"
            f" AND state = 'skipped' AND reason IN ({marks}) LIMIT ?", (*reasons, limit))))

    def requeue(self, rows: list[tuple[str, str]]) -> int:
        """Queue again skipped URLs, given as (key, url) (seed band). How many."""
        self._db.execute("BEGIN")
        n = self._db.executemany("UPDATE urls SET state='queued', key=?, band=1, reason=NULL, detail=NULL"
                                 " WHERE url = ? AND state = 'skipped'", rows).rowcount
        self._db.execute("COMMIT")
        return n

    def throttle_answers(self) -> list[tuple[str, int, int]]:
        """(origin, status, count) of the 429 and 503 answers in the fetch log
        (pages and robots.txt), per origin (`scheme://host[:port]/`)."""
        return self._db.execute(
            "SELECT substr(url, 1, 8 + instr(substr(url, 9), '/')) AS origin, status, count(*) FROM fetches"
            " WHERE status IN (429, 503) GROUP BY origin, status ORDER BY origin, status").fetchall()

    def seed_states(self) -> dict[str, int]:
        """Seed-stage URLs (depth 0) by state: fetched, queued, skipped, failed."""
        return dict(self._db.execute("SELECT state, count(*) FROM urls WHERE depth = 0 GROUP BY state").fetchall())

    def get_meta(self, k: str) -> str | None:
        row = self._db.execute("SELECT v FROM meta WHERE k = ?", (k,)).fetchone()
        return row[0] if row else None

    def url_record(self, url: str) -> dict[str, Any] | None:
        return read_url_record(self._db, url)

    def url_fetches(self, url: str) -> list[dict[str, Any]]:
        return read_url_fetches(self._db, url)

    def linked_from(self, url: str, limit: int = 20) -> list[str]:
        return read_linked_from(self._db, url, limit)

    def counts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"states": {}, "reasons": {}, "statuses": {}}
        for state, n in self._db.execute("SELECT state, count(*) FROM urls GROUP BY state"):
            out["states"][state] = n
        for reason, n in self._db.execute(
            "SELECT reason, count(*) FROM urls WHERE reason IS NOT NULL GROUP BY reason ORDER BY 2 DESC"
        ):
            out["reasons"][reason] = n
        for status, n in self._db.execute(
            "SELECT status, count(*) FROM fetches WHERE kind='page' GROUP BY status ORDER BY 1"
        ):
            out["statuses"][str(status)] = n
        row = self._db.execute(
            "SELECT count(*), coalesce(sum(bytes),0), min(at), max(at) FROM fetches"
        ).fetchone()
        out["fetches"], out["bytes"], out["first_at"], out["last_at"] = row
        out["hosts"] = self._db.execute("SELECT count(DISTINCT key) FROM urls").fetchone()[0]
        out["dead_letters"] = self._db.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
        out["flags"] = dict(self._db.execute("SELECT flag, count(*) FROM flags GROUP BY flag").fetchall())
        out["robots_fetches"] = self._db.execute(
            "SELECT count(*) FROM fetches WHERE kind='robots'"
        ).fetchone()[0]
        return out

    # ---- takedowns ------------------------------------------------------------

    def add_purge(self, purge: Purge, at: float) -> tuple[Purge, dict[str, int]]:
        """Record `purge` (a core.purge.Purge) and mark every URL record in its
        scope, in one transaction. Returns (the purge with its id, counts)."""
        from dataclasses import replace

        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            cur = db.execute("INSERT INTO purges(scope, value, reason, at) VALUES (?, ?, ?, ?)",
                             (str(purge.scope), purge.value, purge.reason, at))
            assert cur.lastrowid is not None  # set by the INSERT just run
            stored = replace(purge, id=cur.lastrowid, at=at)
            counts = self._mark_purged(stored)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.statements += 1
        return stored, counts

    def purges(self, after_id: int = 0) -> list[PurgeRow]:
        """(id, scope, value, reason, at, applied_at) of the purges after `after_id`."""
        return list(map(PurgeRow._make, self._db.execute(
            "SELECT id, scope, value, reason, at, applied_at FROM purges WHERE id > ? ORDER BY id",
            (after_id,))))

    def purges_max_id(self) -> int:
        return int(self._db.execute("SELECT coalesce(max(id), 0) FROM purges").fetchone()[0])

    def apply_purges(self, purges: Iterable[Purge], applied_at: float | None) -> dict[str, int]:
        """Mark the URL records in scope of `purges` again (a running crawl may
        have written some since they were recorded) and set their applied_at."""
        db = self._db
        total = {"queued": 0, "other": 0}
        db.execute("BEGIN IMMEDIATE")
        try:
            for p in purges:
                for k, v in self._mark_purged(p).items():
                    total[k] += v
                if applied_at is not None:
                    db.execute("UPDATE purges SET applied_at = ? WHERE id = ? AND applied_at IS NULL",
                               (applied_at, p.id))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.statements += 1
        return total

    def _mark_purged(self, purge: Purge) -> dict[str, int]:
        """URL records in scope become skipped/purged; queued ones counted apart.
        A cheap C filter (instr or a key range) runs before the exact match."""
        from courtly.core.purge import PurgeList, Scope

        only = PurgeList((purge,))
        self._db.create_function("courtly_purged", 1, lambda u: only.match(u) is not None,
                                 deterministic=True)
        if purge.scope == Scope.URL_PREFIX:
            where = "url >= ?1 AND url < ?1 || char(1114111)"
        else:
            where = "instr(url, ?1) > 0"
        detail = purge.describe()
        counts = {}
        for name, state in (("queued", "state = 'queued'"), ("other", "state != 'queued'")):
            counts[name] = self._db.execute(
                "UPDATE urls SET detail = ?2 || '; was ' || state"
                " || coalesce(' (' || reason || ')', ''), state = 'skipped', reason = 'purged'"
                f" WHERE {state} AND {where} AND courtly_purged(url) AND reason IS NOT 'purged'",
                (purge.value, detail)).rowcount
        return counts

    # ---- abuse complaints -----------------------------------------------------

    def add_complaint(self, host: str, key: str, contact: str, note: str, at: float) -> int:
        """Record an open complaint (one statement: its own transaction); returns its id."""
        cur = self._db.execute(
            "INSERT INTO abuse_complaints(host, key, contact, note, recorded_at) VALUES (?, ?, ?, ?, ?)",
            (host, key, contact, note, at))
        self.statements += 1
        assert cur.lastrowid is not None  # set by the INSERT just run
        return cur.lastrowid

    def resolve_complaint(self, complaint_id: int, at: float) -> bool:
        """Close an open complaint; False if there is no open one of that id."""
        n = self._db.execute("UPDATE abuse_complaints SET resolved_at = ? WHERE id = ? AND resolved_at IS NULL",
                             (at, complaint_id)).rowcount
        self.statements += 1
        return n == 1

    def complaints(self, *, open_only: bool = False) -> list[ComplaintRow]:
        """(id, host, key, contact, note, recorded_at, resolved_at), oldest first."""
        sql = "SELECT id, host, key, contact, note, recorded_at, resolved_at FROM abuse_complaints"
        return list(map(ComplaintRow._make, self._db.execute(
            sql + (" WHERE resolved_at IS NULL" if open_only else "") + " ORDER BY id")))

    def update_warc_refs(self, filename: str, moved: dict[int, int | None]) -> int:
        """Point the fetch log at the records' new offsets after the WARC file
        `filename` was rewritten (old offset -> new offset, None if removed)."""
        db = self._db
        prefix = filename + ":"
        rows = db.execute("SELECT id, warc FROM fetches WHERE substr(warc, 1, ?) = ?",
                          (len(prefix), prefix)).fetchall()
        updates = []
        for fid, ref in rows:
            old = int(ref[len(prefix):])
            if old in moved:
                new = moved[old]
                updates.append(("" if new is None else f"{prefix}{new}", fid))
        if updates:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("UPDATE fetches SET warc = ? WHERE id = ?", updates)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return len(updates)

    def close(self) -> None:
        try:
            self._db.close()
        except sqlite3.Error:
            pass


# One URL's history, read the same way by the writer's store and by the
# read-only view of a crawl folder (runtime/crawlview.py).

def read_url_record(db: sqlite3.Connection, url: str) -> dict[str, Any] | None:
    cur = db.execute("SELECT * FROM urls WHERE url = ?", (url,))
    row = cur.fetchone()
    return dict(zip([d[0] for d in cur.description], row)) if row else None


def read_url_fetches(db: sqlite3.Connection, url: str) -> list[dict[str, Any]]:
    cur = db.execute("SELECT * FROM fetches WHERE url = ? ORDER BY at", (url,))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def read_linked_from(db: sqlite3.Connection, url: str, limit: int = 20) -> list[str]:
    return [r[0] for r in db.execute("SELECT url FROM urls WHERE via = ? LIMIT ?", (url, limit))]


def read_url_flags(db: sqlite3.Connection, url: str) -> list[tuple[float, str, str]]:
    return db.execute("SELECT at, flag, detail FROM flags WHERE url = ? ORDER BY at", (url,)).fetchall()
