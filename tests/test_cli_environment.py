"""A full disk (and its kin: quota, read-only file system, I/O error) ends a
crawl with one line and exit status 4; the data stays consistent and the
same command resumes. The disk is not filled: the WARC writer is made to
fail as a full disk fails it (every write and flush raises ENOSPC from the
moment it is "full")."""

from __future__ import annotations

import errno
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import courtly_logger_restored
from site_support import tiny_site

from courtly.cli import main
from courtly.runtime.exits import Exit, environment_advice, environment_problem
from courtly.shell.warc import WarcWriter

PAGES = 8


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _crawl(url: str, out: Path) -> list[str]:
    return ["crawl", url, "--out", str(out), "--quiet", "--allow-network", "127.0.0.1/32",
            "--delay-s", "0.05", "--contact", "t@example.org"]


def _fill_disk_after(monkeypatch, exchanges: int) -> None:
    """From the `exchanges`+1-th exchange on, every WARC write and flush raises ENOSPC."""
    real_append, real_sync = WarcWriter._append, WarcWriter._sync
    written = [0]

    def full(path) -> OSError:
        return OSError(errno.ENOSPC, "No space left on device", str(path))

    def append(self, *a, **kw):
        written[0] += 1
        if written[0] > exchanges:
            raise full(self.folder)
        return real_append(self, *a, **kw)

    def sync(self, current):
        if written[0] > exchanges:
            raise full(current.path)
        return real_sync(self, current)

    monkeypatch.setattr(WarcWriter, "_append", append)
    monkeypatch.setattr(WarcWriter, "_sync", sync)


def test_a_full_disk_is_one_line_exit_4_and_the_same_command_resumes(tmp_path, capsys, monkeypatch):
    out = tmp_path / "crawl"
    with tiny_site(PAGES) as url:
        _fill_disk_after(monkeypatch, 3)   # robots.txt and two pages fit
        assert main(_crawl(url, out)) == Exit.ENVIRONMENT
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error" in line.lower()]
        assert "Traceback" not in err, err
        assert len(errors) == 1 and errors[0].startswith("courtly: error: no space left on device writing "), err
        assert "(ENOSPC)" in errors[0] and "run the same command again to resume" in errors[0]
        monkeypatch.undo()
        assert main(_crawl(url, out)) == Exit.FINISHED
    db = sqlite3.connect(str(out / "crawl.db"))
    fetched = {u for (u,) in db.execute("SELECT url FROM urls WHERE state = 'fetched'")}
    assert fetched == {url} | {f"{url}p{n}" for n in range(1, PAGES)}
    warcs = sorted((out / "warc").glob("*.warc.gz"))
    assert warcs and not list((out / "warc").glob("*.open"))
    check = subprocess.run([str(Path(sys.executable).with_name("warcio")), "check", *map(str, warcs)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("exc, line", [
    (OSError(errno.EDQUOT, "Disk quota exceeded", "/x/crawl.db"), "disk quota exceeded writing /x/crawl.db (EDQUOT)"),
    (OSError(errno.EROFS, "Read-only file system"), "read-only file system (EROFS)"),
    (sqlite3.OperationalError("database or disk is full"), ""),   # no code: not guessed from the text
])
def test_environment_errors_are_named_by_their_code(exc, line):
    assert environment_problem(exc) == line


def test_a_crawl_started_on_a_database_another_process_holds_locked_is_one_line_exit_4(tmp_path):
    """A real lock (an exclusive transaction of another process) and the real command: no traceback."""
    out = tmp_path / "crawl"
    with tiny_site(PAGES) as url:
        first = subprocess.run([sys.executable, "-m", "courtly", *_crawl(url, out), "--max-pages", "2"],
                               capture_output=True, text=True, timeout=300)
        assert first.returncode == Exit.FINISHED, first.stderr
        holder = sqlite3.connect(str(out / "crawl.db"), isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            locked = subprocess.run([sys.executable, "-m", "courtly", *_crawl(url, out)],
                                    capture_output=True, text=True, timeout=300)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        again = subprocess.run([sys.executable, "-m", "courtly", *_crawl(url, out)],
                               capture_output=True, text=True, timeout=300)
    assert locked.returncode == Exit.ENVIRONMENT, locked.stderr
    assert "Traceback" not in locked.stderr
    errors = [line for line in locked.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["courtly: error: the crawl's database is locked by another process (SQLite: database is "
                      "locked); the crawl state is saved: when the process holding it lets go (another courtly "
                      "command on this folder, a backup, an open sqlite3 shell), run the same command again to "
                      "resume"], locked.stderr
    assert again.returncode == Exit.FINISHED, again.stderr
    db = sqlite3.connect(str(out / "crawl.db"))
    assert db.execute("SELECT count(*) FROM urls WHERE state = 'fetched'").fetchone() == (PAGES,)
    db.close()


def test_the_advice_follows_the_error():
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = 5   # SQLITE_BUSY
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13
    assert environment_advice(busy).startswith("when the process holding it lets go")
    assert environment_problem(busy) == "the crawl's database is locked by another process (SQLite: database is locked)"
    assert environment_advice(full).startswith("free space")


def test_an_environment_error_is_found_behind_the_error_it_caused():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/x/warc/a.warc.gz.open")
        except OSError:
            raise RuntimeError("flush failed")   # noqa: B904 (the implicit context is the point)
    except RuntimeError as e:
        assert environment_problem(e) == "no space left on device writing /x/warc/a.warc.gz.open (ENOSPC)"
    assert environment_problem(ValueError("a bug")) == ""


def test_a_page_refetched_after_a_stop_between_its_digest_and_its_links_is_not_its_own_duplicate(tmp_path, capsys):
    """The exact-duplicate index is committed with the WARC record; the page's
    links come with its extraction, a commit later. A run that stops between
    (a full disk, kill -9) leaves the page queued with its digest known: the
    next run fetches it again and must follow its links, not call it a
    duplicate of itself (that lost every page behind the seed)."""
    from courtly.core.fingerprint import warc_payload_digest
    from courtly.ports import Batch
    from courtly.shell.store.sqlite import SqliteStore
    from site_support import page_body

    out = tmp_path / "crawl"
    with tiny_site(3) as url:
        store = SqliteStore(out / "crawl.db")
        store.apply(Batch(new_urls=[(url, "127.0.0.1", 1, 0, 0, "", 1.0)],
                          digests=[(warc_payload_digest(page_body(0, 3)), url, 1.0, "")],
                          meta={"politeness_key": "domain"}))
        store.close()
        assert main(_crawl(url, out)) == Exit.FINISHED
    db = sqlite3.connect(str(out / "crawl.db"))
    assert {u for (u,) in db.execute("SELECT url FROM urls WHERE state = 'fetched'")} == {url, f"{url}p1", f"{url}p2"}


def test_a_full_disk_under_the_store_is_one_line_exit_4_too(tmp_path, capsys, monkeypatch):
    from courtly.shell.store.sqlite import SqliteStore

    real_apply = SqliteStore.apply
    applied = [0]

    def apply(self, batch, **kw):
        applied[0] += 1
        if applied[0] > 2:
            full = sqlite3.OperationalError("database or disk is full")
            full.sqlite_errorcode = 13   # SQLITE_FULL, as the driver sets it
            raise full
        return real_apply(self, batch, **kw)

    out = tmp_path / "crawl"
    with tiny_site(PAGES) as url:
        monkeypatch.setattr(SqliteStore, "apply", apply)
        assert main(_crawl(url, out)) == Exit.ENVIRONMENT
        err = capsys.readouterr().err
        assert "Traceback" not in err
        errors = [line for line in err.splitlines() if "error" in line.lower()]
        assert errors == ["courtly: error: database or disk is full (SQLite: database or disk is full); the "
                          "crawl state is saved: free space (or fix the file system) and run the same command "
                          "again to resume"], err
        monkeypatch.undo()
        assert main(_crawl(url, out)) == Exit.FINISHED
    db = sqlite3.connect(str(out / "crawl.db"))
    assert db.execute("SELECT count(*) FROM urls WHERE state = 'fetched'").fetchone() == (PAGES,)
