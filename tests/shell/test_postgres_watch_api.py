"""The watch API and `courtly watch` read a distributed crawl's PostgreSQL as
they read a crawl folder: a worker's status server answers /api/watches,
/api/changes, one change, dead letters and the feeds exactly as one machine's
does for the same events, and `watch changes --db --jsonl` prints the
change log one machine writes to DIR/changes.jsonl."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import replace

import feedparser

from courtly.shell.status import StatusServer
from courtly.shell.store.watch_postgres import PostgresWatchStore
from courtly.shell.store.watch_sqlite import SqliteWatchStore
from courtly.shell.watch_api import WatchApi
from courtly.shell.webhook import ChangeLog
from monitor_events import fill
from pg_store_support import run
from shell.test_status import FakeSource
from shell.test_watch_api import TOKEN, call

NOW = 1_800_000_000.0
READS = ("api/watches", "api/changes?limit=5", "api/changes/1", "api/dead-letters", "api/changes?watch=2")


class Recorder:
    """A watch store that keeps what `fill` gives it, to give the same to PostgreSQL."""

    def __init__(self) -> None:
        self.watches: list = []
        self.events: list = []
        self.states: dict = {}

    def add(self, w):
        w = replace(w, id=len(self.watches) + 1)
        self.watches.append(w)
        return w

    def record_change(self, ev, webhook):
        self.events.append((ev, webhook))
        return len(self.events)

    def save_states(self, states):
        self.states.update(states)


async def _answers(store):
    server = StatusServer(FakeSource(hosts_n=5), watch_api=WatchApi(store, TOKEN, lambda: NOW))
    port = await server.start()
    base = f"http://127.0.0.1:{port}/"
    try:
        out = {path: json.loads((await call(base, "GET", path))[1]) for path in READS}
        feed = feedparser.parse((await call(base, "GET", "changes.atom"))[1])
        out["feed"] = [e.title for e in feed.entries]
        added = await call(base, "POST", "api/watches", token=TOKEN, json={"url": "http://c.test/", "every_s": 30})
        out["added"] = (added[0], json.loads(added[1])["id"])
        return out
    finally:
        await server.stop()


def test_a_workers_watch_api_answers_from_postgres_as_one_machines_from_its_folder(postgres, tmp_path):
    dsn = postgres.create_database()
    rec = Recorder()
    fill(rec)
    lite = SqliteWatchStore(tmp_path / "crawl.db")
    log = ChangeLog(tmp_path / "changes.jsonl")
    for w in rec.watches:
        lite.add(w)
    for ev, hook in rec.events:
        log.change(lite.record_change(ev, hook), ev, hook)
    log.close()
    lite.save_states(rec.states)
    lite.set_delivery(1, "dead", 5, "status 500")

    async def body():
        pg = await PostgresWatchStore.open(dsn)
        try:
            for w in rec.watches:
                await pg.add(w)
            for ev, hook in rec.events:
                await pg.record_change(ev, hook)
            await pg.save_states(rec.states)
            await pg.set_delivery(1, "dead", 5, "status 500")
            return await _answers(pg)
        finally:
            await pg.close()

    from_pg = run(body())
    from_folder = asyncio.run(_answers(lite))
    lite.close()
    assert from_pg["api/changes?limit=5"]["rows"] and from_pg["api/dead-letters"]["rows"]
    assert from_pg == from_folder

    cli = subprocess.run([sys.executable, "-m", "courtly", "watch", "changes", "--db", dsn, "--jsonl", "--limit", "1000"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == (tmp_path / "changes.jsonl").read_text()
    feed = subprocess.run([sys.executable, "-m", "courtly", "watch", "feed", "--db", dsn, "--id", "1"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert feed.returncode == 0, feed.stderr
    parsed = feedparser.parse(feed.stdout)
    assert not parsed.bozo and len(parsed.entries) == sum(ev.watch_id == 1 for ev, _ in rec.events)
