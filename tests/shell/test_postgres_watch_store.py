"""PostgresWatchStore against a throwaway PostgreSQL: the watch list of a
distributed crawl reads back as SqliteWatchStore's does (watches, states,
changes, deliveries), and its version moves with every edit."""

from __future__ import annotations

import pytest

from courtly.core.watch import ChangeEvent, Watch, WatchState
from courtly.shell.store.sqlite import StoreError
from courtly.shell.store.watch_postgres import PostgresWatchStore
from courtly.shell.store.watch_sqlite import SqliteWatchStore
from pg_store_support import run


def event(at: float) -> ChangeEvent:
    return ChangeEvent(1, "http://a.test/p", at, at - 10, at, {"added": ["x"], "removed": [], "changed": []},
                       ("a",), ("a", "x"))


def test_watch_list_in_postgres_reads_back_as_in_sqlite(postgres, tmp_path):
    dsn = postgres.create_database()
    lite = SqliteWatchStore(tmp_path / "crawl.db")

    async def body():
        pg = await PostgresWatchStore.open(dsn)
        try:
            for store, call in ((pg, _await), (lite, _direct)):
                w = await call(store.add(Watch("http://a.test/p", every_s=30, ignore=("x+",))))
                assert w.id == 1
                with pytest.raises(StoreError, match="watched already"):
                    await call(store.add(Watch("http://a.test/p")))
                await call(store.set_paused("1", True))
                st = WatchState(checks=4, blocks=("a",), fingerprint="f")
                st.noise.learned.append("Quote: *")
                await call(store.save_states({1: st}))
                seq = await call(store.record_change(event(100.0), "http://hook.test/"))
                await call(store.set_delivery(seq, "dead", 5, "status 500"))
            assert await pg.watches() == lite.watches()
            assert (await pg.states())[1].to_json() == lite.states()[1].to_json()
            assert await pg.changes() == lite.changes() and await pg.dead_letters() == lite.dead_letters()
            v = await pg.version()
            await pg.remove("http://a.test/p")
            assert await pg.watches() == [] and await pg.version() > v
            assert (await pg.add(Watch("http://a.test/p"))).id == 1 and await pg.states() == {}
        finally:
            await pg.close()

    run(body())
    lite.close()


async def _await(x):
    return await x


async def _direct(x):
    return x


def test_courtly_watch_manages_a_distributed_crawls_list_with_db(postgres):
    import json
    import subprocess
    import sys

    dsn = postgres.create_database()

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "courtly", "watch", *args, "--db", dsn], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    assert cli("add", "http://a.test/p", "--every", "60").returncode == 0
    assert cli("add", "http://b.test/", "--select", "main").returncode == 0
    assert cli("pause", "2").returncode == 0
    listed = json.loads(cli("list", "--json").stdout)
    assert [(w["url"], w["paused"]) for w in listed] == [("http://a.test/p", False), ("http://b.test/", True)]
    again = cli("add", "http://a.test/p")
    assert again.returncode == 2 and "watched already" in again.stderr
