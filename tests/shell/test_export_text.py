"""`export_text` decodes a stored body as the fetcher did: every
Content-Encoding line of the stored head, in order, is one list of codings
(RFC 9110 5.3, 8.4), not only the last line read into a dict."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import brotli

from courtly.core.purge import PurgeList
from courtly.shell.export import export_text
from courtly.shell.warc import WarcWriter

REQUEST = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"
PAGE = b"<html><head><title>Codings</title></head><body><main><p>" + b"Words worth keeping. " * 40 + b"</p></main></body></html>"


def test_a_body_coded_on_two_header_lines_is_decoded_in_their_order(tmp_path: Path) -> None:
    body = brotli.compress(gzip.compress(PAGE))
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n"
            b"Content-Encoding: br\r\nContent-Length: %d\r\n\r\n" % len(body))
    with WarcWriter(tmp_path / "warc", fsync=False) as writer:
        writer.write_exchange(url="http://example.com/", ip="192.0.2.7", request_head=REQUEST,
                              response_head=head, body=body, fetched_at=1.7e9,
                              metadata={"fetch-reason": "page"})
    out = tmp_path / "text.jsonl"
    export_text(tmp_path / "warc", PurgeList(), out, decoded_bytes_max=1 << 20, decode_ratio_max=1000.0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["url"] for r in rows] == ["http://example.com/"]
    assert rows[0]["title"] == "Codings" and "Words worth keeping." in rows[0]["text"]
