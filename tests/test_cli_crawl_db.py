"""A crawl.db that is not a courtly crawl (an empty file, a file that is not
SQLite, another program's SQLite database) is refused with one line and exit
status 2, by `crawl` and by the views, and is never written to."""

from __future__ import annotations

import sqlite3

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main
from courtly.runtime.exits import Exit

SEED = "http://127.0.0.1:9/"


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _sqlite(*statements: str):
    """An SQLite database of another program, made by `statements`."""
    def make(path) -> None:
        db = sqlite3.connect(str(path))
        for sql in statements:
            db.execute(sql)
        db.commit()
        db.close()
    return make


_foreign_sqlite = _sqlite("CREATE TABLE people (name TEXT)", "INSERT INTO people VALUES ('ada')")
# tables named as courtly's are (a browser's history has urls and meta)
_browser_history = _sqlite("CREATE TABLE meta (key TEXT, value TEXT)",
                           "CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT, title TEXT, visit_count INTEGER)")


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_bytes(b""), "is empty (0 bytes), not a courtly crawl database"),
    (lambda p: p.write_bytes(b"not a database\n" * 100), "is not a courtly crawl database (not SQLite"),
    (_foreign_sqlite, "is an SQLite database of another program (tables people), not a courtly crawl"),
    (_browser_history, "is an SQLite database of another program (tables meta, urls), not a courtly crawl"),
])
@pytest.mark.parametrize("command", [["crawl", SEED, "--quiet", "--contact", "t@example.org"], ["stats"]])
def test_a_crawl_db_that_is_not_a_courtly_crawl_is_refused_in_one_line(tmp_path, capsys, make, message, command):
    out = tmp_path / "a crawl?#%20"   # characters a file: URI must escape
    out.mkdir()
    db = out / "crawl.db"
    make(db)
    before = db.read_bytes()
    assert main([*command, "--out", str(out)]) == Exit.BAD_INPUT
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"courtly: error: {db} {message}" + lines[0].partition(message)[2]], lines
    assert db.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["crawl.db"]


def test_a_folder_made_by_courtly_watch_or_submit_is_courtlys_own(tmp_path):
    # `courtly watch add` and `courtly submit --consumer` may make crawl.db before any crawl
    from courtly.shell.store.consumers_sqlite import SqliteConsumerStore
    from courtly.shell.store.sqlite_folder import refuse_foreign
    from courtly.shell.store.watch_sqlite import SqliteWatchStore

    for name, make in (("watch", SqliteWatchStore), ("submit", SqliteConsumerStore)):
        path = tmp_path / name / "crawl.db"
        path.parent.mkdir()
        make(path).close()
        refuse_foreign(path)   # courtly's own: no StoreError
