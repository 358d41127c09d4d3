"""`courtly export` and a damaged WARC file: the file is named on stderr with
how many records were read, what could be read is exported (never a record
that is cut itself), and the exit status is 5 unless --allow-partial."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import courtly_logger_restored, empty_crawl_folder

from courtly.cli import main
from courtly.shell.warc import WarcWriter
from courtly.shell.warc_index import iter_records

PAGES = 8
pytestmark = pytest.mark.warcio_unreadable("the crawl's own file is damaged on purpose (the exports are checked)")
REQUEST = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


@pytest.fixture
def crawl(tmp_path):
    out = empty_crawl_folder(tmp_path / "crawl")
    with WarcWriter(out / "warc", fsync=False) as writer:
        for i in range(PAGES):
            body = f"<html><head><title>Page {i}</title></head><body><p>{'words ' * 50}{i}</p></body></html>".encode()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body)
            writer.write_exchange(url=f"http://example.com/{i}", ip="192.0.2.7", request_head=REQUEST,
                                  response_head=head, body=body, fetched_at=1.7e9 + i,
                                  metadata={"fetch-reason": "page"})
    return out


def _only_file(crawl: Path) -> Path:
    (path,) = sorted((crawl / "warc").glob("*.warc.gz"))
    return path


def _cut_inside(path: Path, nth_response: int) -> int:
    """Cut the file 40 bytes into its `nth_response`-th response record; returns
    how many whole records remain before it."""
    records = list(iter_records(path))
    at = [i for i, r in enumerate(records) if r.rec_type == "response"][nth_response]
    with open(path, "r+b") as fh:
        fh.truncate(records[at].offset + 40)
    return at


@pytest.mark.parametrize("kind", ["warc", "cdxj", "text"])
def test_a_truncated_file_is_named_and_the_export_exits_5(crawl, tmp_path, capsys, kind):
    path = _only_file(crawl)
    whole = _cut_inside(path, PAGES - 3)
    to = tmp_path / f"export-{kind}"
    assert main(["export", kind, "--out", str(crawl), "--to", str(to)]) == 5
    err = capsys.readouterr().err
    assert f"{path.name} is damaged" in err and f"{whole} record(s) read" in err, err
    assert f"{PAGES - 3} of the {PAGES} captures its index lists" in err
    assert "exit status 5" in err and "--allow-partial" in err and "Traceback" not in err
    assert main(["export", kind, "--out", str(crawl), "--to", str(to), "--allow-partial"]) == 0
    assert f"{path.name} is damaged" in capsys.readouterr().err    # still said, just accepted


def test_what_was_read_is_exported_and_the_cut_record_is_not(crawl, tmp_path, capsys):
    path = _only_file(crawl)
    _cut_inside(path, PAGES - 3)
    assert main(["export", "text", "--out", str(crawl), "--to", str(tmp_path / "t.jsonl"), "--allow-partial"]) == 0
    urls = [json.loads(line)["url"] for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert urls == [f"http://example.com/{i}" for i in range(PAGES - 3)]
    capsys.readouterr()
    assert main(["export", "warc", "--out", str(crawl), "--to", str(tmp_path / "w"), "--allow-partial",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (damage,) = data["damaged"]
    assert damage["file"] == path.name and damage["size"] == path.stat().st_size
    # the file's own index (written when it was closed) tells how much is missing
    assert (damage["captures_read"], damage["captures_indexed"]) == (PAGES - 3, PAGES)
    exported = tmp_path / "w" / path.name
    responses = [r for r in iter_records(exported) if r.rec_type == "response"]
    assert len(responses) == PAGES - 3
    proc = subprocess.run([str(Path(sys.executable).parent / "warcio"), "check", str(exported)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_file_corrupt_in_the_middle_is_read_up_to_the_damage(crawl, tmp_path, capsys):
    path = _only_file(crawl)
    records = list(iter_records(path))
    middle = records[len(records) // 2]
    data = bytearray(path.read_bytes())
    data[middle.offset:middle.offset + 64] = b"\xff" * 64   # its gzip header and first bytes
    path.write_bytes(bytes(data))
    assert main(["export", "cdxj", "--out", str(crawl), "--to", str(tmp_path / "i.cdxj")]) == 5
    err = capsys.readouterr().err
    assert f"{path.name} is damaged" in err and f"{len(records) // 2} record(s) read" in err, err


def test_an_intact_crawl_exports_with_status_0_and_no_warning(crawl, tmp_path, capsys):
    for kind in ("warc", "cdxj", "text"):
        assert main(["export", kind, "--out", str(crawl), "--to", str(tmp_path / f"e-{kind}")]) == 0
        assert capsys.readouterr().err == ""
