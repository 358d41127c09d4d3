"""SqliteStore: batches are atomic, URL inserts are the exact seen test, nothing is lost."""

import sqlite3

import pytest

from courtly.shell.store.sqlite import Batch, SqliteStore, StoreError


def _new(url, key="a.test", at=1.0):
    return (url, key, 4, 1, 0, "http://a.test/", at)


# The tables as folders made before the urls and digests rows were appended
# (keyed by URL and by digest): the same statements must serve them.
_KEYED_TABLES = """
CREATE TABLE urls (url TEXT PRIMARY KEY, key TEXT NOT NULL, state TEXT NOT NULL,
    band INTEGER NOT NULL DEFAULT 4, depth INTEGER NOT NULL DEFAULT 0, redirects INTEGER NOT NULL DEFAULT 0,
    via TEXT NOT NULL DEFAULT '', discovered_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    fetched_at REAL, status INTEGER, reason TEXT, detail TEXT) WITHOUT ROWID;
CREATE TABLE digests (digest TEXT PRIMARY KEY, url TEXT NOT NULL, at REAL NOT NULL,
    record_id TEXT NOT NULL) WITHOUT ROWID;
"""


@pytest.fixture(params=["appended", "keyed"])
def db(request, tmp_path):
    """The path of a crawl database: a new one, or one with the keyed tables of before."""
    path = tmp_path / "c.db"
    if request.param == "keyed":
        con = sqlite3.connect(path)
        con.executescript(_KEYED_TABLES)
        con.close()
    return path


def test_insert_is_idempotent_and_is_the_exact_seen_test(db):
    s = SqliteStore(db)
    b = Batch(new_urls=[_new("http://a.test/1"), _new("http://a.test/1")])
    s.apply(b)
    assert s.has_url("http://a.test/1")
    assert not s.has_url("http://a.test/2")
    assert [r[0] for r in s.iter_queued()] == ["http://a.test/1"]


def test_fetched_page_and_its_links_commit_together(db):
    s = SqliteStore(db)
    s.apply(Batch(new_urls=[_new("http://a.test/")]))
    b = Batch(new_urls=[_new("http://a.test/child")], fetched=[(2.0, 200, "http://a.test/")])
    s.apply(b)
    assert s.url_record("http://a.test/")["state"] == "fetched"
    assert [r[0] for r in s.iter_queued()] == ["http://a.test/child"]


def test_failed_batch_rolls_back_entirely(db):
    s = SqliteStore(db)
    bad = Batch(new_urls=[_new("http://a.test/x")], fetches=[("u", "page", 1.0)])  # wrong arity
    with pytest.raises(sqlite3.Error):
        s.apply(bad)
    assert not s.has_url("http://a.test/x")


def test_decision_for_unknown_url_creates_a_skipped_record(db):
    s = SqliteStore(db)
    s.apply(Batch(decisions=[("http://b.test/p", "b.test", "http://a.test/", 3.0, "skipped", "robots", "x", 1)]))
    rec = s.url_record("http://b.test/p")
    assert rec["state"] == "skipped" and rec["reason"] == "robots"
    assert s.counts()["reasons"] == {"robots": 1}


def test_nofollow_refusal_never_hides_a_url_that_is_followed_elsewhere(db):
    s = SqliteStore(db)
    nofollow = ("http://a.test/n", "", "http://a.test/", 1.0, "skipped", "nofollow", "rel=nofollow", 1)
    # refused first, queued later
    s.apply(Batch(decisions=[nofollow]))
    s.apply(Batch(new_urls=[_new("http://a.test/n")]))
    assert s.url_record("http://a.test/n")["state"] == "queued"
    # queued first, refused later in the same batch
    s.apply(Batch(new_urls=[_new("http://a.test/m")],
                  decisions=[nofollow[:1] and ("http://a.test/m",) + nofollow[1:]]))
    assert s.url_record("http://a.test/m")["state"] == "queued"


def test_state_survives_reopen(db):
    s = SqliteStore(db)
    s.apply(Batch(new_urls=[_new("http://a.test/1")], hosts={"a.test": {"delay_s": 2.0}},
                  robots={"http://a.test": {"v": 1}}))
    s.close()
    s2 = SqliteStore(db)
    assert s2.hosts() == {"a.test": {"delay_s": 2.0}}
    assert s2.robots() == {"http://a.test": {"v": 1}}
    assert list(s2.iter_urls()) == ["http://a.test/1"]


def test_newer_schema_is_refused_with_a_clear_error(tmp_path):
    s = SqliteStore(tmp_path / "c.db")
    s.apply(Batch(meta={"schema_version": "999"}))
    s.close()
    with pytest.raises(StoreError, match="newer courtly"):
        SqliteStore(tmp_path / "c.db")


def test_unopenable_database_is_a_store_error(tmp_path):
    (tmp_path / "c.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        SqliteStore(tmp_path / "c.db")


def test_a_nofollow_refusal_is_not_seen_even_after_a_restart(db):
    # Found by the SIGKILL-and-resume test: after a restart, a URL refused only
    # as nofollow counted as seen, so a later plain link to it was dropped.
    s = SqliteStore(db)
    s.apply(Batch(decisions=[("http://a.test/n", "a.test", "http://a.test/", 1.0, "skipped", "nofollow",
                              "page nofollow", 1),
                             ("http://a.test/r", "a.test", "http://a.test/", 1.0, "skipped", "robots", "x", 1)]))
    s.close()
    s = SqliteStore(db)
    assert not s.has_url("http://a.test/n") and s.has_url("http://a.test/r")
    assert sorted(s.iter_urls()) == ["http://a.test/r"]
    s.apply(Batch(new_urls=[_new("http://a.test/n")]))        # a plain link turns it into a queued URL
    assert s.has_url("http://a.test/n")
    s.close()


def test_digests_come_back_in_capture_order(tmp_path):
    # appended, not keyed by digest: the first capture of each payload is read first
    s = SqliteStore(tmp_path / "c.db")
    s.apply(Batch(digests=[("sha256:ff", "http://a.test/1", 1.0, ""), ("sha256:00", "http://a.test/2", 2.0, "")]))
    s.apply(Batch(digests=[("sha256:77", "http://a.test/3", 3.0, "<urn:3>")]))
    s.close()
    s = SqliteStore(tmp_path / "c.db")
    assert list(s.iter_digests()) == [("sha256:ff", "http://a.test/1", 1.0, ""),
                                      ("sha256:00", "http://a.test/2", 2.0, ""),
                                      ("sha256:77", "http://a.test/3", 3.0, "<urn:3>")]


def test_a_folder_with_the_digest_keyed_table_of_before_keeps_working(tmp_path):
    db = sqlite3.connect(tmp_path / "c.db")
    db.execute("CREATE TABLE digests (digest TEXT PRIMARY KEY, url TEXT NOT NULL, at REAL NOT NULL,"
               " record_id TEXT NOT NULL) WITHOUT ROWID")
    db.execute("INSERT INTO digests VALUES ('sha256:aa', 'http://a.test/old', 1.0, '')")
    db.commit()
    db.close()
    s = SqliteStore(tmp_path / "c.db")
    s.apply(Batch(digests=[("sha256:aa", "http://a.test/again", 2.0, ""), ("sha256:bb", "http://a.test/new", 3.0, "")]))
    assert sorted(s.iter_digests()) == [("sha256:aa", "http://a.test/old", 1.0, ""),
                                        ("sha256:bb", "http://a.test/new", 3.0, "")]


_KILLED_AFTER_COMMITS = """
import os, signal, sys
from courtly.shell.store.sqlite import Batch, SqliteStore
s = SqliteStore(sys.argv[1])
for i in range(50):
    s.apply(Batch(new_urls=[("http://a.test/%d/%d" % (i, j), "a.test", 4, 1, 0, "", 1.0) for j in range(200)],
                  hosts={"a.test": {"fetches": i}}))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_commits_not_yet_checkpointed_survive_kill_9(tmp_path):
    # checkpoints wait for WAL_CHECKPOINT_PAGES: what was committed lives in the WAL until then
    import os
    import subprocess
    import sys

    from courtly.shell.store.sqlite import WAL_CHECKPOINT_PAGES

    path = tmp_path / "c.db"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-c", _KILLED_AFTER_COMMITS, str(path)], env=env, timeout=120)
    assert run.returncode == -9
    wal = path.with_name("c.db-wal")
    assert wal.stat().st_size > 0        # killed with commits in the WAL
    s = SqliteStore(path)
    assert s._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_CHECKPOINT_PAGES
    assert s.counts()["states"] == {"queued": 50 * 200}
    assert s.hosts() == {"a.test": {"fetches": 49}}


def test_queued_reads_and_purges_work_on_either_table_shape(db):
    from courtly.core.purge import purge_of

    s = SqliteStore(db)
    s.apply(Batch(new_urls=[_new(f"http://a.test/p/{n}", at=float(n)) for n in (3, 1, 2)]
                  + [_new("http://b.test/x", key="b.test")]))
    s.apply(Batch(fetched=[(5.0, 200, "http://a.test/p/1")]))
    assert [r[0] for r in s.queued_of_key("a.test", 10)] == ["http://a.test/p/2", "http://a.test/p/3"]
    assert sorted(r[0] for r in s.iter_queued()) == ["http://a.test/p/2", "http://a.test/p/3", "http://b.test/x"]
    _, counts = s.add_purge(purge_of("url_prefix", "http://a.test/p/"), 6.0)
    assert counts == {"queued": 2, "other": 1}
    assert [r[0] for r in s.iter_queued()] == ["http://b.test/x"]
    assert s.url_record("http://a.test/p/1")["reason"] == "purged"


def test_a_digest_twice_in_a_batch_keeps_its_first_capture(db):
    s = SqliteStore(db)
    s.apply(Batch(digests=[("sha1:X", "http://a.test/1", 2.0, "<urn:1>"), ("sha1:X", "http://a.test/2", 3.0, "<urn:2>"),
                           ("sha1:Y", "http://a.test/3", 3.0, "")]))
    assert sorted(s.iter_digests()) == [("sha1:X", "http://a.test/1", 2.0, "<urn:1>"), ("sha1:Y", "http://a.test/3", 3.0, "")]
