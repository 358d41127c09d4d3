"""SqliteConsumerStore: consumers' submissions and their deliveries, in crawl.db.

What it owns: three tables in the crawl folder's `crawl.db`, on a connection
of its own (WAL), so `courtly submit --consumer` can add URLs while a crawl
runs, as `courtly purge` does:

    consumer_submissions  one row per URL submitted: consumer, priority, intent
    consumer_results      one row per delivery (a fetch made for the consumer,
                          shared or not, with its bill) or denial (quota)
    consumer_meta         the running crawl's cursors (last submission taken,
                          last purge streamed)

Rules: every read has a limit or a cursor; errors are `StoreError` in one line.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from courtly.core.consumers import ResultRow
from courtly.shell.store.sqlite import StoreError, connect_schema

__all__ = ["SqliteConsumerStore", "Submission", "ResultRow", "SUBMISSIONS_PER_POLL", "EMPTY_TOTALS"]

SUBMISSIONS_PER_POLL = 10_000   # taken at one commit; the rest at the next ones

EMPTY_TOTALS = {"fetches": 0, "bytes": 0, "shared": 0, "charged": 0.0, "denied": 0, "decided": 0}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS consumer_submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer TEXT NOT NULL, url TEXT NOT NULL, priority INTEGER NOT NULL,
    intent TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS consumer_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer TEXT NOT NULL, url TEXT NOT NULL, key TEXT NOT NULL, at REAL NOT NULL,
    kind TEXT NOT NULL,               -- fetch | denied
    status INTEGER NOT NULL, bytes INTEGER NOT NULL, warc TEXT NOT NULL, digest TEXT NOT NULL,
    shared INTEGER NOT NULL,          -- 1: the same request served other consumers too
    charge REAL NOT NULL,             -- this consumer's share of the request (1/n)
    detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS consumer_results_url ON consumer_results(url);
CREATE TABLE IF NOT EXISTS consumer_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""


class Submission(NamedTuple):
    id: int
    consumer: str
    url: str
    priority: int
    intent: str
    at: float


class SqliteConsumerStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = connect_schema(self.path, _SCHEMA, "consumers' tables")
        # the crawl's own connection checkpoints the shared WAL; this one did it
        # too, on its small commits, copying the crawl's pages (most of its cost)
        self._db.execute("PRAGMA wal_autocheckpoint=0")

    def submit(self, consumer: str, urls: Iterable[str], priority: int, intent: str, at: float) -> int:
        rows = [(consumer, u, priority, intent, at) for u in urls]
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("INSERT INTO consumer_submissions(consumer, url, priority, intent, at) "
                                     "VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.Error as e:
            raise StoreError(f"cannot record submissions in {self.path}: {e}") from e
        return len(rows)

    def submissions(self, after_id: int, limit: int = SUBMISSIONS_PER_POLL) -> list[Submission]:
        return [Submission(*r) for r in self._db.execute(
            "SELECT id, consumer, url, priority, intent, at FROM consumer_submissions WHERE id > ? "
            "ORDER BY id LIMIT ?", (after_id, limit))]

    def add_results(self, rows: list[ResultRow], cursors: dict[str, int]) -> None:
        """Deliveries and denials with the cursors they were made up to, in one transaction."""
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "INSERT INTO consumer_results(consumer, url, key, at, kind, status, bytes, warc, digest, "
                    "shared, charge, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                self._db.executemany("INSERT OR REPLACE INTO consumer_meta(k, v) VALUES (?, ?)",
                                     [(k, str(v)) for k, v in cursors.items()])
        except sqlite3.Error as e:
            raise StoreError(f"cannot record consumer results in {self.path}: {e}") from e

    def requeue_quota(self, url: str) -> bool:
        """Queue `url` again if a quota turned it away (it was submitted again)."""
        try:
            return self._db.execute("UPDATE urls SET state = 'queued', reason = NULL, detail = NULL "
                                    "WHERE url = ? AND state = 'skipped' AND reason = 'quota'", (url,)).rowcount > 0
        except sqlite3.Error as e:
            raise StoreError(f"cannot queue {url} again in {self.path}: {e}") from e

    def requeue_all_quota(self) -> dict[str, int]:
        """Queue again every URL a quota turned away (a new UTC day: the quotas
        start again); returns key -> how many (one statement, streamed)."""
        out: dict[str, int] = {}
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                for (key,) in self._db.execute(
                        "UPDATE urls SET state = 'queued', reason = NULL, detail = NULL"
                        " WHERE state = 'skipped' AND reason = 'quota' RETURNING key"):
                    out[key] = out.get(key, 0) + 1
        except sqlite3.Error as e:
            raise StoreError(f"cannot queue the URLs a quota turned away again in {self.path}: {e}") from e
        return out

    def last_denied_at(self) -> float | None:
        """When a quota last turned a request away (None: never)."""
        return self._db.execute("SELECT max(at) FROM consumer_results WHERE kind = 'denied'").fetchone()[0]

    def cursor(self, name: str) -> int:
        row = self._db.execute("SELECT v FROM consumer_meta WHERE k = ?", (name,)).fetchone()
        return int(row[0]) if row else 0

    def delivered(self, url: str) -> list[ResultRow]:
        """The fetch deliveries of `url`, oldest first."""
        return [ResultRow(*r) for r in self._db.execute(
            "SELECT consumer, url, key, at, kind, status, bytes, warc, digest, shared, charge, detail "
            "FROM consumer_results WHERE url = ? AND kind = 'fetch' ORDER BY id LIMIT 1000", (url,))]

    def iter_delivered(self) -> Iterator[tuple[str, str]]:
        """(consumer, url) of every delivery: a resumed crawl's owners of fetched pages."""
        return iter(self._db.execute("SELECT consumer, url FROM consumer_results WHERE kind = 'fetch' ORDER BY id"))

    def fetched_since(self, since: float) -> list[tuple[str, str, float]]:
        """(consumer, key, at) of the requests charged since `since` (a resumed crawl's quotas)."""
        return list(self._db.execute(
            "SELECT consumer, key, at FROM consumer_results WHERE kind = 'fetch' AND charge > 0 AND at >= ?",
            (since,)))

    def totals(self) -> dict[str, dict]:
        """Per consumer: fetches, bytes, shared, charged, denied (by quota) and
        decided (not fetched for another reason): the chargeback report."""
        out: dict[str, dict] = {}
        for consumer, kind, n, nbytes, shared, charge in self._db.execute(
                "SELECT consumer, kind, count(*), sum(bytes), sum(shared), sum(charge) FROM consumer_results "
                "GROUP BY consumer, kind"):
            t = out.setdefault(consumer, dict(EMPTY_TOTALS))
            if kind == "fetch":
                t.update(fetches=n, bytes=nbytes or 0, shared=shared or 0, charged=charge or 0.0)
            else:
                t["denied" if kind == "denied" else "decided"] = n
        return out

    def close(self) -> None:
        self._db.close()
