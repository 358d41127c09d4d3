"""Dead letters are recorded and listed: a page that kills the extraction
worker twice becomes a row of `dead_letters` in the crawl's store, the crawl
goes on with the next page, and `courtly stats --dead-letters` lists it.

A real Crawler and SqliteStore in this process (tests/inproc_support.py) and
a real ExtractPool (with its test faults: a page
marked `courtly-fault:exit` makes the worker exit); no network.
"""

from __future__ import annotations

import json

import pytest
from cli_support import courtly_logger_restored
from inproc_support import extract_pages

from courtly.cli import main
from courtly.runtime.crawler import Crawler
from courtly.shell.store.sqlite import SqliteStore

pytestmark = pytest.mark.timeout(120)

GOOD = b"<html><body><a href=/next>next</a></body></html>"
KILLER = b"<html><body>courtly-fault:exit<a href=/never></body></html>"


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _crawl_two_pages(out) -> Crawler:
    html = {"content-type": "text/html"}
    return extract_pages(out, [("http://a.example/killer", html, KILLER), ("http://a.example/good", html, GOOD)])


def test_a_page_that_kills_the_extraction_worker_twice_is_recorded_as_a_dead_letter(tmp_path):
    c = _crawl_two_pages(tmp_path)
    assert c.stats.extract_failed == 1
    (row,) = c.store.dead_letters(10)
    assert row[0] == "http://a.example/killer"
    assert row[2] == "worker exited with status 13; worker exited with status 13"
    queued = {u for u, *_ in c.store.iter_queued()}
    assert "http://a.example/next" in queued and "http://a.example/never" not in queued   # the crawl went on


def test_courtly_stats_lists_the_dead_letters_as_text_and_json(tmp_path, capsys):
    _crawl_two_pages(tmp_path)
    assert main(["stats", "--out", str(tmp_path), "--dead-letters", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == 1 and [d["url"] for d in data["dead_letters"]] == ["http://a.example/killer"]
    assert main(["stats", "--out", str(tmp_path), "--dead-letters"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("1 dead letter(s)") and "http://a.example/killer" in text and "status 13" in text
    assert main(["stats", "--out", str(tmp_path)]) == 0
    assert "dead letters   1 (courtly stats --dead-letters)" in capsys.readouterr().out


def test_a_crawl_without_dead_letters_says_so(tmp_path, capsys):
    SqliteStore(tmp_path / "crawl.db").close()
    assert main(["stats", "--out", str(tmp_path), "--dead-letters"]) == 0
    assert capsys.readouterr().out.startswith("no dead letters")
