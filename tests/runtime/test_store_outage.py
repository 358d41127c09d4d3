"""The crawl's own store unavailable (runtime/group_commit.py): a commit the
database refuses is retried with back-off, nothing is lost or fetched twice,
and a store down past `store.down_s_max` stops the crawl with one line and
exit status 4, resumable. The database is not locked for real: the store's
`apply` raises what the sqlite3 driver raises for a locked database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli_support import courtly_logger_restored
from site_support import tiny_site

from courtly.cli import main
from courtly.runtime.exits import Exit, environment_problem
from courtly.runtime.group_commit import RETRY_S_MAX, RETRY_S_MIN, StoreDown, StoreOutage
from courtly.shell.store.sqlite import SqliteStore

PAGES = 6


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _locked() -> sqlite3.OperationalError:
    e = sqlite3.OperationalError("database is locked")
    e.sqlite_errorcode = 5   # SQLITE_BUSY, as the driver sets it after its busy timeout
    return e


def _lock_page_commits(monkeypatch, failures: int | None) -> list[int]:
    """The store refuses the first `failures` batches that acknowledge a
    request (None: every one); returns the count of refusals, kept up to date."""
    real_apply = SqliteStore.apply
    refused = [0]

    def apply(self, batch, **kw):
        if batch.fetches and (failures is None or refused[0] < failures):
            refused[0] += 1
            raise _locked()
        return real_apply(self, batch, **kw)

    monkeypatch.setattr(SqliteStore, "apply", apply)
    return refused


def _crawl(url: str, out: Path, config: Path) -> list[str]:
    return ["crawl", url, "--out", str(out), "--quiet", "--allow-network", "127.0.0.1/32", "--delay-s", "0.05",
            "--contact", "t@example.org", "--config", str(config)]


def _config(tmp_path: Path, down_s_max: float) -> Path:
    path = tmp_path / "courtly.toml"
    path.write_text(f"[store]\ndown_s_max = {down_s_max}\n")
    return path


def _fetches_per_url(out: Path) -> dict[str, int]:
    db = sqlite3.connect(str(out / "crawl.db"))
    try:
        return dict(db.execute("SELECT url, count(*) FROM fetches WHERE kind = 'page' GROUP BY url"))
    finally:
        db.close()


def test_the_retry_waits_double_from_half_a_second_to_thirty_and_the_horizon_counts_from_the_first_failure():
    o = StoreOutage(down_s_max=60.0)
    waits = []
    now = 100.0
    for _ in range(9):
        o.failed(now, _locked())
        waits.append(o.retry_at - now)
        now = o.retry_at
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert waits[0] == RETRY_S_MIN and max(waits) == RETRY_S_MAX
    assert o.down and o.past_horizon(160.0) and not o.past_horizon(159.9)
    assert o.recovered(170.0) == 70.0 and not o.down and not o.past_horizon(1000.0)
    o.failed(1000.0, _locked())
    assert o.retry_at == 1000.5   # a new outage starts its back-off again


def test_a_store_that_refuses_commits_for_a_while_loses_nothing_and_fetches_no_page_twice(tmp_path, capsys,
                                                                                      monkeypatch):
    out = tmp_path / "crawl"
    with tiny_site(PAGES) as url:
        refused = _lock_page_commits(monkeypatch, 3)
        assert main(_crawl(url, out, _config(tmp_path, 120))) == Exit.FINISHED
    assert refused[0] == 3
    assert "Traceback" not in capsys.readouterr().err
    fetches = _fetches_per_url(out)
    assert set(fetches) == {url} | {f"{url}p{n}" for n in range(1, PAGES)}
    assert set(fetches.values()) == {1}


def test_a_store_down_past_its_horizon_stops_the_crawl_with_one_line_and_exit_4_and_the_same_command_resumes(
        tmp_path, capsys, monkeypatch):
    out = tmp_path / "crawl"
    config = _config(tmp_path, 1.0)
    with tiny_site(PAGES) as url:
        _lock_page_commits(monkeypatch, None)
        assert main(_crawl(url, out, config)) == Exit.ENVIRONMENT
        err = capsys.readouterr().err
        assert "Traceback" not in err
        errors = [line for line in err.splitlines() if "error" in line.lower()]
        assert len(errors) == 1, err
        assert errors[0].startswith("courtly: error: the crawl database could not be written for ")
        assert "(store.down_s_max = 1 s): database is locked" in errors[0]
        assert "run the same command again to resume" in errors[0]
        monkeypatch.undo()
        assert main(_crawl(url, out, config)) == Exit.FINISHED
    assert set(_fetches_per_url(out)) == {url} | {f"{url}p{n}" for n in range(1, PAGES)}


def test_store_down_names_itself_and_keeps_a_full_disk_behind_it_as_its_cause():
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13
    down = StoreDown("the crawl database could not be written for 130 s", full)
    assert environment_problem(down) == "the crawl database could not be written for 130 s"
    assert down.__cause__ is full
