"""`courtly export` keeps content in its home region: WARC files of two
regions (their `Courtly-Region` residency tag, issue 21) are not exported
together unless `--mix-regions` says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import empty_crawl_folder
from courtly.cli import main
from courtly.shell.warc import WarcWriter
from courtly.shell.warc_index import iter_records

REQUEST = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"


def _warc(folder: Path, region: str | None, url: str) -> None:
    fields = {"Courtly-Region": region} if region else None
    w = WarcWriter(folder, prefix=f"courtly-{region or 'one'}", record_fields=fields, fsync=False)
    w.write_exchange(url=url, ip="192.0.2.1", request_head=REQUEST, response_head=RESPONSE,
                     body=b"<p>hi</p>", fetched_at=1_700_000_000.0)
    w.close()


def _exported_urls(to: Path) -> set[str]:
    return {r.warc_headers["WARC-Target-URI"] for p in to.glob("*.warc.gz") for r in iter_records(p)
            if r.rec_type == "response"}


def test_files_of_two_regions_are_refused_in_one_line_and_nothing_is_written(tmp_path, capsys):
    out = empty_crawl_folder(tmp_path / "crawl")
    _warc(out / "warc", "us", "http://us.example/")
    _warc(out / "warc", "eu", "http://eu.example/")
    to = tmp_path / "export"
    assert main(["export", "warc", "--out", str(out), "--to", str(to)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "would mix regions eu, us" in err[0], err
    assert not to.exists() or not list(to.iterdir())


def test_mix_regions_exports_both(tmp_path):
    out = empty_crawl_folder(tmp_path / "crawl")
    _warc(out / "warc", "us", "http://us.example/")
    _warc(out / "warc", "eu", "http://eu.example/")
    to = tmp_path / "export"
    assert main(["export", "warc", "--out", str(out), "--to", str(to), "--mix-regions"]) == 0
    assert _exported_urls(to) == {"http://us.example/", "http://eu.example/"}


@pytest.mark.parametrize("regions", [["eu", "eu"], [None, None], ["eu", None]])
def test_one_region_or_untagged_files_export_as_before(tmp_path, regions):
    out = empty_crawl_folder(tmp_path / "crawl")
    for i, region in enumerate(regions):
        _warc(out / "warc", region, f"http://h{i}.example/")
    to = tmp_path / "export"
    assert main(["export", "warc", "--out", str(out), "--to", str(to)]) == 0
    assert _exported_urls(to) == {f"http://h{i}.example/" for i in range(len(regions))}
