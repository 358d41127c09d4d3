"""SqliteWatchStore: the watch list, its state, change events and webhook deliveries.

What it owns: four tables in the crawl's `crawl.db`, beside the crawl's own
(its own connection, WAL, so `courtly watch add` and the status server's API
can write while a crawl runs, as `courtly purge` does):

    watches        one row per watched URL: the Watch as JSON, paused, removed
    watch_state    what the monitor knows of each watch (WatchState as JSON)
    changes        one row per change event: the event JSON, both contents,
                   and the webhook delivery (none | pending | delivered | dead)
    watch_meta     `version`, bumped by every edit of the list (the crawl
                   re-reads the list when it moves)

Rules: a removed watch keeps its row (flag `removed`) so its changes keep
their watch; re-adding its URL brings it back with the new settings. Every
list read has a limit. Errors are `StoreError` with one line.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from courtly.core.watch import ChangeEvent, Watch, WatchState
from courtly.shell.store.sqlite import StoreError, connect_schema

__all__ = ["SqliteWatchStore", "ChangeRow", "StoreError", "Delivery", "WATCHES_MAX", "watch_of", "change_row",
           "with_id", "CHANGES_LIMIT_MAX", "DELIVERY_STATES", "watch_rows"]

CHANGES_LIMIT_MAX = 1000
WATCHES_MAX = 100_000     # live watches in one crawl


class Delivery(StrEnum):
    """A change event's webhook delivery."""

    NONE = "none"            # its watch has no webhook
    PENDING = "pending"      # waiting for (another) attempt
    DELIVERED = "delivered"
    DEAD = "dead"            # gave up: a dead letter


DELIVERY_STATES = tuple(Delivery)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS watches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    url TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS watch_state (id INTEGER PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    watch_id INTEGER NOT NULL,
    url TEXT NOT NULL,
    detected_at REAL NOT NULL,
    event TEXT NOT NULL,
    before TEXT NOT NULL,
    after TEXT NOT NULL,
    webhook TEXT NOT NULL DEFAULT '',
    delivery TEXT NOT NULL DEFAULT 'none',
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS changes_watch ON changes(watch_id, seq);
CREATE INDEX IF NOT EXISTS changes_delivery ON changes(delivery) WHERE delivery IN ('pending', 'dead');
CREATE TABLE IF NOT EXISTS watch_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""


class ChangeRow(NamedTuple):
    seq: int
    watch_id: int
    url: str
    detected_at: float
    event: dict           # ChangeEvent.to_json()
    before: list[str]
    after: list[str]
    webhook: str
    delivery: str
    attempts: int
    last_error: str

    def to_json(self) -> dict:
        return {"seq": self.seq, **self.event, "webhook": self.webhook, "delivery": self.delivery,
                "attempts": self.attempts, "last_error": self.last_error}


class SqliteWatchStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = connect_schema(self.path, _SCHEMA, "watch list")

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                cur = self._db.execute(sql, args)
                if sql.lstrip().upper().startswith(("INSERT INTO WATCHES", "UPDATE WATCHES")):
                    self._db.execute("INSERT INTO watch_meta VALUES ('version', '1') ON CONFLICT(k) "
                                     "DO UPDATE SET v = CAST(v AS INTEGER) + 1")
                return cur
        except sqlite3.Error as e:
            raise StoreError(f"watch list in {self.path}: {e}") from e

    # ---- the list -------------------------------------------------------------

    def version(self) -> int:
        row = self._db.execute("SELECT v FROM watch_meta WHERE k = 'version'").fetchone()
        return int(row[0]) if row else 0

    def add(self, watch: Watch) -> Watch:
        """Store `watch` (checked by the caller); its id is given here.
        Raises StoreError when the URL is watched already."""
        row = self._db.execute("SELECT id, removed FROM watches WHERE url = ?", (watch.url,)).fetchone()
        if row is not None and not row[1]:
            raise StoreError(f"{watch.url} is watched already (watch {row[0]})")
        if self._db.execute("SELECT count(*) FROM watches WHERE removed = 0").fetchone()[0] >= WATCHES_MAX:
            raise StoreError(f"the watch list is full ({WATCHES_MAX} watches)")
        if row is not None:
            w = with_id(watch, row[0])
            self._write("UPDATE watches SET spec = ?, paused = ?, removed = 0 WHERE id = ?",
                        (json.dumps(w.to_json()), int(w.paused), w.id))
            self._db.execute("DELETE FROM watch_state WHERE id = ?", (w.id,))   # learns afresh
            return w
        cur = self._write("INSERT INTO watches (url, spec, paused) VALUES (?, ?, ?)",
                          (watch.url, json.dumps(watch.to_json()), int(watch.paused)))
        w = with_id(watch, cur.lastrowid)
        self._db.execute("UPDATE watches SET spec = ? WHERE id = ?", (json.dumps(w.to_json()), w.id))
        return w

    def find(self, ref: str) -> Watch:
        """A live watch by id or URL; StoreError when there is none."""
        if ref.isdigit():
            row = self._db.execute("SELECT spec, paused FROM watches WHERE id = ? AND removed = 0", (int(ref),)).fetchone()
        else:
            row = self._db.execute("SELECT spec, paused FROM watches WHERE url = ? AND removed = 0", (ref,)).fetchone()
        if row is None:
            raise StoreError(f"no watch {ref!r}")
        return watch_of(row)

    def remove(self, ref: str) -> Watch:
        w = self.find(ref)
        self._write("UPDATE watches SET removed = 1 WHERE id = ?", (w.id,))
        return w

    def set_paused(self, ref: str, paused: bool) -> Watch:
        w = self.find(ref)
        self._write("UPDATE watches SET paused = ? WHERE id = ?", (int(paused), w.id))
        return _with_paused(w, paused)

    def watches(self) -> list[Watch]:
        rows = self._db.execute("SELECT spec, paused FROM watches WHERE removed = 0 ORDER BY id").fetchall()
        return [watch_of(r) for r in rows]

    def rows(self) -> list[dict]:
        """Each live watch with its state: counts, current interval, learned noise."""
        return watch_rows(self.watches(), self.states())

    # ---- state ----------------------------------------------------------------

    def states(self) -> dict[int, WatchState]:
        return {i: WatchState.from_json(json.loads(s))
                for i, s in self._db.execute("SELECT id, state FROM watch_state")}

    def save_states(self, states: dict[int, WatchState]) -> None:
        if not states:
            return
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("INSERT OR REPLACE INTO watch_state VALUES (?, ?)",
                                     [(i, json.dumps(s.to_json())) for i, s in states.items()])
        except sqlite3.Error as e:
            raise StoreError(f"watch state in {self.path}: {e}") from e

    # ---- changes and deliveries -------------------------------------------------

    def record_change(self, ev: ChangeEvent, webhook: str) -> int:
        cur = self._write(
            "INSERT INTO changes (watch_id, url, detected_at, event, before, after, webhook, delivery) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (ev.watch_id, ev.url, ev.detected_at, json.dumps(ev.to_json()), json.dumps(list(ev.before)),
             json.dumps(list(ev.after)), webhook, Delivery.PENDING if webhook else Delivery.NONE))
        return int(cur.lastrowid)

    def changes(self, *, limit: int = 100, watch_id: int | None = None) -> list[ChangeRow]:
        """Newest first."""
        limit = max(1, min(limit, CHANGES_LIMIT_MAX))
        if watch_id is None:
            rows = self._db.execute("SELECT * FROM changes ORDER BY seq DESC LIMIT ?", (limit,))
        else:
            rows = self._db.execute("SELECT * FROM changes WHERE watch_id = ? ORDER BY seq DESC LIMIT ?",
                                    (watch_id, limit))
        return [change_row(r) for r in rows]

    def change(self, seq: int) -> ChangeRow | None:
        row = self._db.execute("SELECT * FROM changes WHERE seq = ?", (seq,)).fetchone()
        return change_row(row) if row else None

    def pending(self, limit: int = 1000) -> list[ChangeRow]:
        rows = self._db.execute("SELECT * FROM changes WHERE delivery = 'pending' ORDER BY seq LIMIT ?", (limit,))
        return [change_row(r) for r in rows]

    def dead_letters(self, limit: int = 1000) -> list[ChangeRow]:
        rows = self._db.execute("SELECT * FROM changes WHERE delivery = 'dead' ORDER BY seq DESC LIMIT ?", (limit,))
        return [change_row(r) for r in rows]

    def set_delivery(self, seq: int, delivery: str, attempts: int, error: str = "") -> None:
        assert delivery in DELIVERY_STATES
        self._write("UPDATE changes SET delivery = ?, attempts = ?, last_error = ? WHERE seq = ?",
                    (delivery, attempts, error[:500], seq))


def watch_rows(watches: list[Watch], states: dict[int, WatchState]) -> list[dict]:
    """`courtly watch list`'s and /api/watches' rows (one machine's store or a cluster's)."""
    rows = []
    for w in watches:
        st = states.get(w.id, WatchState())
        rows.append({**w.to_json(), "checks": st.checks, "changes": st.changes,
                     "learning": st.learning_left > 0, "interval_s": st.interval_s or w.every_s,
                     "last_checked_at": st.last_checked_at, "last_changed_at": st.last_changed_at,
                     "noise_learned": list(st.noise.learned)})
    return rows


def watch_of(row) -> Watch:  # type: ignore[no-untyped-def]
    return _with_paused(Watch.from_json(json.loads(row[0])), bool(row[1]))


def with_id(w: Watch, i: int) -> Watch:
    return replace(w, id=int(i))


def _with_paused(w: Watch, paused: bool) -> Watch:
    return replace(w, paused=paused)


def change_row(r) -> ChangeRow:  # type: ignore[no-untyped-def]
    return ChangeRow(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), json.loads(r[6]),
                     r[7], r[8], r[9], r[10])
