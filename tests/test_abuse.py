"""Abuse complaints (`courtly abuse`): recorded while a crawl runs, the host's
politeness key slowed at the crawl's next commit, lifted when resolved.

A real Crawler and SqliteStore in this process (tests/inproc_support.py):
the gaps between requests to one key are read from its fetcher's notes, and
the key's delay from the store's `hosts` table.
"""

from __future__ import annotations

import json

import pytest
from cli_support import courtly_logger_restored
from inproc_support import crawler as _crawler
from inproc_support import fetch as _fetch
from inproc_support import gaps as _gaps

from courtly.cli import main
from courtly.config import ConfigError, config_from_dict
from courtly.shell.store.sqlite import SqliteStore


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _stored_delay(out, key: str) -> float:
    store = SqliteStore(out / "crawl.db")
    try:
        return store.hosts()[key]["delay_s"]
    finally:
        store.close()


def _abuse(out, *args: str) -> int:
    return main(["abuse", "--out", str(out), *args])


def test_a_complaint_recorded_while_the_crawl_runs_slows_the_key_ten_times_at_the_next_commit(tmp_path, capsys):
    c = _crawler(tmp_path)
    _fetch(c, "https://www.a.example/1", "https://www.a.example/2", "https://b.example/1")
    c.commit()
    assert _gaps(c, "a.example") == [1.0]
    assert _abuse(tmp_path, "--host", "www.a.example", "--contact", "abuse@a.example",
                  "--note", "too many requests") == 0
    assert "complaint #1 recorded" in capsys.readouterr().out
    _fetch(c, "https://www.a.example/3")     # before the commit: the crawl has not seen it yet
    c.commit()                               # the poll: the key is slowed at once
    assert _stored_delay(tmp_path, "a.example") == pytest.approx(10.0)
    assert _stored_delay(tmp_path, "b.example") == pytest.approx(1.0)
    _fetch(c, "https://www.a.example/4", "https://www.a.example/5", "https://b.example/2", "https://b.example/3")
    gaps = _gaps(c, "a.example")
    assert gaps[:2] == [1.0, 1.0] and min(gaps[2:]) >= 10.0, gaps
    assert _gaps(c, "b.example")[-1] == pytest.approx(1.0)


def test_resolving_a_complaint_gives_the_key_its_ordinary_delay_back(tmp_path, capsys):
    c = _crawler(tmp_path)
    _abuse(tmp_path, "--host", "a.example")
    c.commit()
    _fetch(c, "https://a.example/1", "https://a.example/2")
    assert _gaps(c, "a.example") == [10.0]
    assert _abuse(tmp_path, "--resolve", "1") == 0
    c.commit()
    assert _stored_delay(tmp_path, "a.example") == pytest.approx(1.0)
    _fetch(c, "https://a.example/3", "https://a.example/4")
    assert _gaps(c, "a.example")[-1] == pytest.approx(1.0)


def test_a_complaint_recorded_between_runs_slows_the_key_when_the_next_run_loads(tmp_path):
    SqliteStore(tmp_path / "crawl.db").close()
    _abuse(tmp_path, "--host", "www.a.example")
    c = _crawler(tmp_path)
    assert c.politeness.key("a.example").delay_s == 10.0


def test_a_fixed_minimum_delay_applies_when_it_exceeds_the_factor(tmp_path):
    SqliteStore(tmp_path / "crawl.db").close()
    _abuse(tmp_path, "--host", "a.example")
    c = _crawler(tmp_path, config_from_dict({"abuse": {"delay_factor": 2.0, "delay_s_min": 60.0}}))
    assert c.politeness.key("a.example").delay_s == 60.0
    c2 = config_from_dict({"abuse": {"delay_factor": 5.0}})
    assert c2.abuse.delay_factor * c2.politeness.delay_s == 5.0


def test_a_host_key_crawl_slows_only_that_host(tmp_path):
    SqliteStore(tmp_path / "crawl.db").close()
    _abuse(tmp_path, "--host", "www.a.example")
    c = _crawler(tmp_path, config_from_dict({"crawl": {"politeness_key": "host"}}))
    assert c.politeness.slowed_keys() == ["www.a.example"]


def test_complaints_are_listed_open_until_resolved_and_courtly_report_shows_the_open_ones(tmp_path, capsys):
    SqliteStore(tmp_path / "crawl.db").close()
    _abuse(tmp_path, "--host", "www.a.example", "--contact", "abuse@a.example", "--note", "hammered")
    _abuse(tmp_path, "--host", "b.example", "--json")
    capsys.readouterr()
    assert _abuse(tmp_path, "--resolve", "2") == 0
    capsys.readouterr()
    assert _abuse(tmp_path, "--list", "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["host"], r["key"], r["resolved_at"] is None) for r in rows] == [
        (1, "www.a.example", "a.example", True), (2, "b.example", "b.example", False)]
    assert rows[0]["contact"] == "abuse@a.example" and rows[0]["note"] == "hammered"
    assert main(["report", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "open abuse complaints (their keys are slowed; courtly abuse --resolve ID): 1" in text
    assert "www.a.example" in text and "b.example" not in text.split("open abuse complaints")[1]
    assert main(["report", "--out", str(tmp_path), "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)["abuse_complaints_open"]] == [1]


@pytest.mark.parametrize("args, message", [
    (["--resolve", "7"], "cannot resolve complaint #7: no such complaint"),
    (["--host", "a b"], "bad host"),
    ([], "abuse wants --host H"),
])
def test_bad_abuse_input_is_one_line_and_exit_status_2(tmp_path, capsys, args, message):
    SqliteStore(tmp_path / "crawl.db").close()
    assert _abuse(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("courtly: error: ") and message in err and err.count("\n") == 1, err


def test_resolving_twice_says_it_is_already_resolved(tmp_path, capsys):
    SqliteStore(tmp_path / "crawl.db").close()
    _abuse(tmp_path, "--host", "a.example")
    assert _abuse(tmp_path, "--resolve", "1") == 0
    assert _abuse(tmp_path, "--resolve", "1") == 2
    assert "already resolved" in capsys.readouterr().err


def test_a_delay_factor_below_one_is_refused():
    with pytest.raises(ConfigError, match="abuse.delay_factor must be >= 1"):
        config_from_dict({"abuse": {"delay_factor": 0.5}})
