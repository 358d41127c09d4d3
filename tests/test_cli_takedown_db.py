"""`courtly purge` and `courtly abuse` against a distributed crawl (`--db DSN`):
the purge is recorded in the cluster's PostgreSQL store, with the URL
records in its scope marked, where every worker reads it (`purges` after the
last id it saw); complaints are recorded, listed and resolved; a database
that cannot be used is one line on stderr and exit status 2.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from cli_support import courtly_logger_restored
from pg_support import pg_fixture

from courtly.cli import main
from courtly.core.purge import Purge, PurgeList, Scope
from courtly.runtime.cluster import submit
from courtly.shell.store.postgres import PostgresStore

postgres = pg_fixture("module")

SEEDS = ["http://www.a.test/x", "http://a.test/y", "http://b.test/z"]


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60.0))


@pytest.fixture
def dsn(postgres):
    db = postgres.create_database()
    _run(submit(db, SEEDS, partitions=4))
    return db


async def _worker_view(dsn: str, after_id: int = 0):
    """What a worker reads at its commit: the purges after its last id, and URL states."""
    store = await PostgresStore.open(dsn)
    try:
        rows = await store.purges(after_id)
        states = {u: (await store.url_record(u))["state"] for u in SEEDS}
    finally:
        await store.close()
    return rows, states


def test_a_purge_with_db_is_recorded_where_every_worker_reads_it(dsn, capsys):
    assert main(["purge", "--db", dsn, "--domain", "a.test", "--reason", "court order", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["purge_id"], out["scope"], out["value"], out["queued_dropped"]) == (1, "domain", "a.test", 2)
    rows, states = _run(_worker_view(dsn))
    assert [r[:4] for r in rows] == [(1, "domain", "a.test", "court order")]
    plist = PurgeList(tuple(Purge(Scope(sc), v, r, i, at) for i, sc, v, r, at, _ in rows))
    assert plist.match("http://new.a.test/page") is not None and plist.match("http://b.test/z") is None
    assert states == {"http://www.a.test/x": "skipped", "http://a.test/y": "skipped", "http://b.test/z": "queued"}
    assert _run(_worker_view(dsn, after_id=1))[0] == []
    assert main(["purge", "--db", dsn, "--url-prefix", "http://b.test/z"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("purge #2 (url_prefix http://b.test/z) recorded") and "not rewritten" in said
    assert _run(_worker_view(dsn))[1]["http://b.test/z"] == "skipped"
    assert main(["purge", "--db", dsn, "--list"]) == 0
    listing = capsys.readouterr().out
    assert "domain" in listing and "no crawl has taken it up yet" in listing


def test_complaints_with_db_are_recorded_listed_and_resolved(dsn, capsys):
    assert main(["abuse", "--db", dsn, "--host", "www.b.test", "--contact", "ops@b.test", "--note", "slow down"]) == 0
    said = capsys.readouterr().out
    assert "complaint #1 recorded about www.b.test: its politeness key b.test is slowed" in said
    assert "--db DSN --resolve 1" in said
    assert main(["abuse", "--db", dsn, "--list", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["id"], row["key"], row["contact"], row["resolved_at"]) == (1, "b.test", "ops@b.test", None)
    assert main(["abuse", "--db", dsn, "--resolve", "1"]) == 0
    assert "resolved" in capsys.readouterr().out
    assert main(["abuse", "--db", dsn, "--resolve", "1"]) == 2
    assert capsys.readouterr().err.strip() == ("courtly: error: cannot resolve complaint #1: already resolved "
                                              "(courtly abuse --list)")


@pytest.mark.parametrize("db, said", [
    ("mysql://x@127.0.0.1/db", "--db wants a postgresql://user@host[:port]/database URL"),
    ("postgresql://courtly@127.0.0.1:1/db", "cannot reach PostgreSQL at postgresql://courtly@127.0.0.1:1/db"),
])
def test_a_database_that_cannot_be_used_is_one_line_and_status_2(db, said, capsys):
    assert main(["purge", "--db", db, "--host", "a.test"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"courtly: error: {said}") and err.count("\n") == 1


def test_a_purge_with_db_before_any_crawl_names_what_to_do(postgres, capsys):
    assert main(["purge", "--db", postgres.create_database(), "--host", "a.test"]) == 2
    assert "no crawl in" in capsys.readouterr().err
