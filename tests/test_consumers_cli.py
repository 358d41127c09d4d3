"""The consumers' commands as a user runs them: one-line errors with exit
status 2, JSON where a tool wants it, the chargeback's text and JSON."""

from __future__ import annotations

import json

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main

CONFIG = """
[[consumers]]
name = "search"
fetches_per_day = 100
priority_min = 2
priority = 3
price_per_million = 40.0
"""


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    return str(path)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_for_a_consumer_records_the_urls_and_says_so_in_json(tmp_path, cfg, capsys):
    code, out, _ = _run(capsys, "submit", "--consumer", "search", "--out", str(tmp_path / "crawl"),
                        "--config", cfg, "--json", "--intent", "search", "http://a.test/", "http://b.test/")
    assert code == 0
    assert json.loads(out) == {"consumer": "search", "submitted": 2, "priority": 3, "intent": "search"}


@pytest.mark.parametrize("argv, words", [
    (["submit", "--consumer", "nobody"], "unknown consumer 'nobody' (declared: search)"),
    (["submit", "--consumer", "search", "--priority", "1"], "priority 2..7, not 1"),
    (["submit"], "submit wants --db DSN"),
])
def test_a_bad_submission_is_a_one_line_error_with_status_2(tmp_path, cfg, capsys, argv, words):
    extra = ["--out", str(tmp_path / "crawl"), "--config", cfg] if "--consumer" in argv else []
    code, _, err = _run(capsys, *argv, *extra, "http://a.test/")
    assert code == 2
    assert words in err and len(err.strip().splitlines()) == 1


def test_crawl_with_an_unknown_consumer_or_a_priority_alone_is_refused_before_anything_starts(tmp_path, cfg,
                                                                                                capsys):
    out = tmp_path / "crawl"
    code, _, err = _run(capsys, "crawl", "--config", cfg, "--out", str(out), "--consumer", "nobody",
                        "http://a.test/")
    assert code == 2 and "unknown consumer" in err
    code, _, err = _run(capsys, "crawl", "--config", cfg, "--out", str(out), "--priority", "3", "http://a.test/")
    assert code == 2 and "--priority goes with --consumer" in err


def test_the_chargeback_of_a_crawl_without_requests_is_zero_and_of_no_crawl_an_error(tmp_path, cfg, capsys):
    out = tmp_path / "crawl"
    code, _, err = _run(capsys, "report", "--consumers", "--out", str(out), "--config", cfg)
    assert code == 2 and "no crawl in" in err
    _run(capsys, "submit", "--consumer", "search", "--out", str(out), "--config", cfg, "http://a.test/")
    from courtly.shell.store.sqlite import SqliteStore

    SqliteStore(out / "crawl.db").close()
    code, text, _ = _run(capsys, "report", "--consumers", "--out", str(out), "--config", cfg)
    assert code == 0 and text.splitlines()[0].split()[:3] == ["consumer", "fetches", "shared"]
    code, text, _ = _run(capsys, "report", "--consumers", "--json", "--out", str(out), "--config", cfg)
    data = json.loads(text)
    assert data["requests"] == 0 and data["consumers"][0]["consumer"] == "search"
    assert data["consumers"][0]["price_per_million"] == 40.0


def test_a_malformed_webhook_sink_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text('[[consumers]]\nname = "x"\nsink = "https:// nowhere"\n')
    code, _, err = _run(capsys, "submit", "--consumer", "x", "--out", str(tmp_path), "--config", str(path),
                        "http://a.test/")
    assert code == 2 and "is not a webhook URL" in err and err.count("\n") == 1
