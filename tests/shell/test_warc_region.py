"""A region's residency tag in every WARC record it writes (`record_fields`,
issue 21), read back by warcio with the digests checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtly.shell.warc import WarcWriter
from courtly.shell.warc_index import iter_records

REQUEST = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"


def test_every_record_but_warcinfo_carries_the_region_field(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, prefix="courtly-eu", record_fields={"Courtly-Region": "eu"}, fsync=False)
    w.write_exchange(url="http://example.com/", ip="192.0.2.1", request_head=REQUEST, response_head=RESPONSE,
                     body=b"<p>hi</p>", fetched_at=1_700_000_000.0, metadata={"outlinks": "http://example.com/a"})
    w.close()
    (path,) = tmp_path.glob("*.warc.gz")
    kinds = {}
    for rec in iter_records(path):
        kinds[rec.rec_type] = rec.warc_headers.get("Courtly-Region")
    assert kinds == {"warcinfo": None, "request": "eu", "response": "eu", "metadata": "eu"}


@pytest.mark.parametrize("fields", [{"Courtly Region": "eu"}, {"Courtly-Region": "e u"},
                                    {"Courtly-Region": "eu\r\nX: y"}])
def test_a_field_that_would_break_the_header_is_refused(tmp_path: Path, fields: dict) -> None:
    with pytest.raises(ValueError, match="bad record field"):
        WarcWriter(tmp_path, record_fields=fields)
