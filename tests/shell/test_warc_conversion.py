"""The rendered DOM as a WARC `conversion` record (WARC 1.1 section 6.8),
checked with warcio and cdxj-indexer as the writer's other records are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtly.shell.warc import WarcWriter, cdxj_path, repair
from shell.test_warc import FETCHED_AT, cdxj_indexer_lines, request_head, response_head, run_tool, warc_files

SHELL = b'<html><body><div id="root"></div><script src="/app.js"></script></body></html>'
DOM = '<html><head></head><body><div id="root"><a href="/a">caf\u00e9</a></div></body></html>'.encode()


def _write(folder: Path, **kw) -> tuple[Path, str]:
    with WarcWriter(folder) as w:
        raw = w.write_exchange(url="http://spa.test/", ip="127.0.1.1", request_head=request_head(),
                               response_head=response_head(Content_Type="text/html"), body=SHELL,
                               fetched_at=FETCHED_AT)
        w.write_conversion(url="http://spa.test/", fetched_at=FETCHED_AT + 1.5, body=DOM,
                           content_type="text/html; charset=utf-8", refers_to_record_id=raw.record_id,
                           refers_to_uri="http://spa.test/", refers_to_date=FETCHED_AT, **kw)
    return warc_files(folder)[0], raw.record_id


def test_conversion_record_names_the_response_it_was_rendered_from(tmp_path: Path) -> None:
    path, raw_id = _write(tmp_path, metadata={"render-outcome": "rendered"})
    with open(path, "rb") as fh:
        records = [(r.rec_type, r.rec_headers, r.content_stream().read()) for r in ArchiveIterator(fh)]
    kinds = [k for k, _, _ in records]
    assert kinds == ["warcinfo", "request", "response", "conversion", "metadata"]
    _, headers, body = records[3]
    assert body == DOM
    assert headers.get_header("WARC-Refers-To") == raw_id
    assert headers.get_header("WARC-Refers-To-Target-URI") == "http://spa.test/"
    assert headers.get_header("WARC-Refers-To-Date") == "2023-11-14T22:13:20.123456Z"
    assert headers.get_header("Content-Type") == "text/html; charset=utf-8"
    about = records[4][1].get_header("WARC-Concurrent-To") or records[4][1].get_header("WARC-Refers-To")
    assert about == headers.get_header("WARC-Record-ID")


def test_conversion_record_passes_warcio_check_and_the_index_matches_cdxj_indexer(tmp_path: Path) -> None:
    path, _ = _write(tmp_path)
    done = run_tool("warcio.cli", "check", "-v", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    ours = cdxj_path(path).read_text().splitlines()
    assert ours == cdxj_indexer_lines(path)
    assert [json.loads(line.split(" ", 2)[2])["mime"] for line in ours] == ["text/html"]   # the raw page only


def test_repair_keeps_a_conversion_record(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, fsync=False) as w:
        w.write_conversion(url="http://spa.test/", fetched_at=FETCHED_AT, body=DOM, content_type="text/html",
                           refers_to_record_id="<urn:uuid:00000000-0000-4000-8000-000000000000>",
                           refers_to_uri="http://spa.test/", refers_to_date=FETCHED_AT)
        w.flush()
        open_path = w.open_path
        copy = tmp_path / "copy"
        copy.mkdir()
        (copy / open_path.name).write_bytes(open_path.read_bytes())
    repaired = repair(copy)
    assert run_tool("warcio.cli", "check", *map(str, repaired)).returncode == 0


@pytest.mark.parametrize("field, value", [("refers_to_record_id", ""), ("content_type", "text/html\r\nX: y")])
def test_conversion_values_that_would_break_framing_are_refused(tmp_path: Path, field: str, value: str) -> None:
    kw = dict(url="http://spa.test/", fetched_at=FETCHED_AT, body=DOM, content_type="text/html",
              refers_to_record_id="<urn:uuid:x>", refers_to_uri="http://spa.test/", refers_to_date=FETCHED_AT)
    kw[field] = value
    with WarcWriter(tmp_path) as w, pytest.raises(ValueError):
        w.write_conversion(**kw)
