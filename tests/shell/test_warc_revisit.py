"""WARC revisit records (WARC 1.1 section 6.7), checked with independent
tools: warcio (reading, digests, ``warcio check``), cdxj-indexer, pywb."""

from __future__ import annotations

import gzip
import hashlib
import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from courtly.shell.warc import (
    REVISIT_PROFILES,
    WarcWriter,
    cdxj_path,
    index_warc,
    iter_records,
    payload_digest_of,
    repair,
)

T0 = 1_700_000_000.25  # 2023-11-14T22:13:20.25Z
BODY = b"<!doctype html><html><body>" + b"<p>the same article, fetched again</p>" * 200 + b"</body></html>"
ORIGINAL = "http://example.com/article"
MIRROR = "http://example.com/article?utm_campaign=x"  # another URL, same bytes


def request_head(path: str = "/article", extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: example.com\r\nUser-Agent: courtly\r\n{extra}\r\n".encode()


def response_head(status: str = "200 OK", **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


HEAD_200 = response_head(Content_Type="text/html; charset=utf-8", Content_Length=str(len(BODY)), ETag='"v1"')
HEAD_304 = response_head("304 Not Modified", ETag='"v1"')


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)


def write_captures(folder: Path, **writer_kw) -> tuple[Path, dict[str, object]]:
    """An original capture, an identical-payload revisit of the same URL, one
    of another URL, and a server-not-modified revisit."""
    with WarcWriter(folder, **writer_kw) as writer:
        original = writer.write_exchange(url=ORIGINAL, ip="192.0.2.1", request_head=request_head(),
                                         response_head=HEAD_200, body=BODY, fetched_at=T0)
        digest = payload_digest_of(BODY)
        same = writer.write_revisit(
            url=ORIGINAL, ip="192.0.2.1", request_head=request_head(), response_head=HEAD_200,
            fetched_at=T0 + 3600, refers_to_uri=ORIGINAL, refers_to_date=T0, payload_digest=digest,
            profile="identical-payload-digest", refers_to_record_id=original.record_id,
            metadata={"via": "http://example.com/"},
        )
        other = writer.write_revisit(
            url=MIRROR, ip="192.0.2.1", request_head=request_head("/article?utm_campaign=x"),
            response_head=HEAD_200, fetched_at=T0 + 7200, refers_to_uri=ORIGINAL, refers_to_date=T0,
            payload_digest=digest, profile="identical-payload-digest",
        )
        not_modified = writer.write_revisit(
            url=ORIGINAL, ip="192.0.2.1", request_head=request_head(extra='If-None-Match: "v1"\r\n'),
            response_head=HEAD_304, fetched_at=T0 + 10800, refers_to_uri=ORIGINAL, refers_to_date=T0,
            payload_digest=digest, profile="server-not-modified", refers_to_record_id=original.record_id,
        )
    (path,) = writer.finished_paths
    return path, {"original": original, "same": same, "other": other, "not_modified": not_modified,
                  "digest": digest}


def test_payload_digest_of_is_what_response_records_carry(tmp_path: Path):
    expected = "sha1:" + base64.b32encode(hashlib.sha1(BODY).digest()).decode()
    assert payload_digest_of(BODY) == expected
    path, _ = write_captures(tmp_path)
    response = next(r for r in iter_records(path) if r.rec_type == "response")
    assert response.warc_headers["WARC-Payload-Digest"] == expected


def test_revisit_records_carry_the_warc_1_1_fields(tmp_path: Path):
    path, refs = write_captures(tmp_path)
    records = list(iter_records(path))  # digests verified
    assert [r.rec_type for r in records] == [
        "warcinfo", "request", "response", "request", "revisit", "metadata",
        "request", "revisit", "request", "revisit",
    ]
    same, other, not_modified = (r for r in records if r.rec_type == "revisit")
    h = same.warc_headers
    assert h["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    assert h["WARC-Refers-To-Target-URI"] == ORIGINAL
    assert h["WARC-Refers-To-Date"] == "2023-11-14T22:13:20.250000Z"
    assert h["WARC-Refers-To"] == refs["original"].record_id
    assert h["WARC-Payload-Digest"] == refs["digest"]
    assert h["WARC-Record-ID"] == refs["same"].record_id
    assert h["WARC-Date"] == "2023-11-14T23:13:20.250000Z"
    assert h["Content-Type"] == "application/http;msgtype=response"
    assert int(h["Content-Length"]) == len(HEAD_200)  # the block is the HTTP head alone
    assert same.payload == b"" and same.http_status == "200"
    assert "WARC-Refers-To" not in other.warc_headers
    assert other.warc_headers["WARC-Target-URI"] == MIRROR
    assert not_modified.warc_headers["WARC-Profile"] == REVISIT_PROFILES["server-not-modified"]
    assert not_modified.http_status == "304"
    metadata = next(r for r in records if r.rec_type == "metadata")
    assert metadata.warc_headers["WARC-Refers-To"] == refs["same"].record_id


def test_identical_payload_revisits_are_marked_truncated_by_length(tmp_path: Path):
    """WARC 1.1 section 6.7.2: a block that is the response cut short to
    leave out the duplicate payload "shall" carry WARC-Truncated: length (as
    Heritrix writes it); a 304 left nothing out."""
    path, _ = write_captures(tmp_path)
    same, other, not_modified = (r for r in iter_records(path) if r.rec_type == "revisit")
    assert same.warc_headers["WARC-Truncated"] == "length"
    assert other.warc_headers["WARC-Truncated"] == "length"
    assert "WARC-Truncated" not in not_modified.warc_headers


def test_revisit_block_digest_covers_exactly_the_http_head(tmp_path: Path):
    """warcio skips revisit digests ("digest present but not checked"), so
    check them here from the raw record bytes."""
    path, refs = write_captures(tmp_path)
    data = path.read_bytes()
    for name, head in (("same", HEAD_200), ("other", HEAD_200), ("not_modified", HEAD_304)):
        ref = refs[name]
        record = gzip.decompress(data[ref.offset : ref.offset + ref.length])
        warc_head, _, rest = record.partition(b"\r\n\r\n")
        assert rest == head + b"\r\n\r\n"  # block, then the record end
        fields = dict(line.split(": ", 1) for line in warc_head.decode().split("\r\n")[1:])
        assert fields["WARC-Block-Digest"] == "sha1:" + base64.b32encode(hashlib.sha1(head).digest()).decode()
        assert int(fields["Content-Length"]) == len(head)


def test_warcio_check_passes(tmp_path: Path):
    path, _ = write_captures(tmp_path)
    done = run_tool("warcio.cli", "check", "-v", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_revisit_reads_alone_from_its_ref(tmp_path: Path):
    path, refs = write_captures(tmp_path)
    data = path.read_bytes()
    for name in ("same", "other", "not_modified"):
        ref = refs[name]
        member = gzip.decompress(data[ref.offset : ref.offset + ref.length])
        assert member.startswith(b"WARC/1.1\r\nWARC-Type: revisit\r\n")
        assert ref.record_id.encode() in member


def test_cdxj_lists_revisits_as_pywb_and_cdxj_indexer_do(tmp_path: Path):
    path, refs = write_captures(tmp_path)
    ours = cdxj_path(path).read_text().splitlines()
    done = run_tool("cdxj_indexer.main", "--sort", str(path))
    assert done.returncode == 0, done.stderr
    assert ours == done.stdout.splitlines()
    assert ours == index_warc(path)
    fields = [json.loads(line.split(" ", 2)[2]) for line in ours]
    revisits = sorted((f["url"], f["status"], int(f["offset"])) for f in fields if f["mime"] == "warc/revisit")
    assert revisits == sorted([
        (ORIGINAL, "200", refs["same"].offset),
        (MIRROR, "200", refs["other"].offset),
        (ORIGINAL, "304", refs["not_modified"].offset),
    ])
    assert {f["digest"] for f in fields} == {refs["digest"]}


def test_repair_keeps_revisits(tmp_path: Path):
    path, _ = write_captures(tmp_path)
    expected = cdxj_path(path).read_text()
    cdxj_path(path).unlink()
    open_path = path.with_name(path.name + ".open")
    path.rename(open_path)
    (repaired,) = repair(tmp_path)
    assert cdxj_path(repaired).read_text() == expected


def test_server_not_modified_may_omit_the_digest(tmp_path: Path):
    with WarcWriter(tmp_path) as writer:
        writer.write_revisit(url=ORIGINAL, ip="", request_head=request_head(), response_head=HEAD_304,
                             fetched_at=T0, refers_to_uri=ORIGINAL, refers_to_date=T0 - 60,
                             payload_digest=None, profile="server-not-modified")
    (path,) = writer.finished_paths
    (revisit,) = [r for r in iter_records(path) if r.rec_type == "revisit"]
    assert "WARC-Payload-Digest" not in revisit.warc_headers
    assert "WARC-IP-Address" not in revisit.warc_headers
    assert run_tool("warcio.cli", "check", str(path)).returncode == 0
    (line,) = cdxj_path(path).read_text().splitlines()
    assert "digest" not in json.loads(line.split(" ", 2)[2])


@pytest.mark.parametrize("change, message", [
    (dict(profile="maybe"), "profile"),
    (dict(payload_digest=None), "payload digest"),
    (dict(refers_to_uri="http://x y/"), "whitespace"),
    (dict(payload_digest="sha1:AB CD"), "payload_digest"),
    (dict(response_head=b"HTTP/1.1 200 OK\r\n"), "CRLFCRLF"),
    (dict(metadata={"bad name": "x"}), "warc-fields"),
])
def test_bad_revisit_arguments_are_refused_before_anything_is_written(tmp_path: Path, change, message):
    kwargs = dict(url=ORIGINAL, ip="192.0.2.1", request_head=request_head(), response_head=HEAD_200,
                  fetched_at=T0, refers_to_uri=ORIGINAL, refers_to_date=T0 - 1,
                  payload_digest=payload_digest_of(BODY), profile="identical-payload-digest")
    kwargs.update(change)
    with WarcWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match=message):
            writer.write_revisit(**kwargs)
    assert writer.finished_paths == ()


def test_chunked_head_is_rewritten_in_revisits_too(tmp_path: Path):
    with WarcWriter(tmp_path) as writer:
        writer.write_revisit(url=ORIGINAL, ip="192.0.2.1", request_head=request_head(),
                             response_head=response_head(Transfer_Encoding="chunked"), fetched_at=T0,
                             refers_to_uri=ORIGINAL, refers_to_date=T0 - 1,
                             payload_digest=payload_digest_of(BODY), profile="identical-payload-digest")
    (revisit,) = [r for r in iter_records(writer.finished_paths[0]) if r.rec_type == "revisit"]
    assert ("X-Crawler-Transfer-Encoding", "chunked") in revisit.http_headers


@pytest.mark.pywb
@pytest.mark.parametrize("use_our_index", [False, True], ids=["pywb-index", "our-cdxj"])
def test_pywb_replays_an_identical_payload_revisit_from_the_original(tmp_path: Path, use_our_index: bool):
    pywb_support = pytest.importorskip("pywb_support")
    path, _ = write_captures(tmp_path / "warcs")
    with pywb_support.pywb_server([path], use_our_index=use_our_index) as base:
        for url, timestamp, capture_date in (
            (ORIGINAL, "20231114221320", "Tue, 14 Nov 2023 22:13:20 GMT"),  # the response record
            (ORIGINAL, "20231114231320", "Tue, 14 Nov 2023 23:13:20 GMT"),  # revisit, same URL
            (MIRROR, "20231115001320", "Wed, 15 Nov 2023 00:13:20 GMT"),    # revisit, other URL
        ):
            status, headers, body = pywb_support.fetch_replay(base, timestamp, url)
            assert status == 200, (url, timestamp, status, body[:300])
            assert headers.get("memento-datetime") == capture_date  # the revisit itself was served ...
            assert body == BODY, (url, timestamp)  # ... with the original record's payload
            assert headers.get("content-type", "").startswith("text/html")


def test_the_crawlers_304_revisits_refer_to_the_record_holding_the_payload(tmp_path: Path):
    """A 304 is a server-not-modified revisit of the capture its validators
    came from: WARC-Refers-To-Target-URI and WARC-Refers-To-Date are that
    record's WARC-Target-URI and WARC-Date (the fetch's start, not when its
    answer was handled), a later 304 refers to it too (not to the first
    revisit, which has no payload; also after a resume), and a page last
    stored as an exact duplicate refers to the original capture of its payload."""
    import asyncio
    from types import SimpleNamespace

    from clock_support import ManualClock

    from courtly.config import Config
    from courtly.core.types import UrlItem
    from courtly.runtime.crawler import Crawler
    from courtly.shell.store.sqlite import SqliteStore

    other = "http://example.com/copy"
    writer = WarcWriter(tmp_path / "warc", fsync=False)

    def crawler() -> Crawler:
        c = Crawler(Config().replace("crawl", intent="search"), clock=ManualClock(T0), resolver=None,
                    fetcher=None, warc=writer, store=SqliteStore(tmp_path / "crawl.db"), extractor=None)
        c.load()
        return c

    def answer(c: Crawler, url: str, started_at: float, status: int) -> None:
        head = HEAD_200 if status == 200 else HEAD_304
        result = SimpleNamespace(
            url=url, ip="192.0.2.1", status=status, started_at=started_at, elapsed_s=0.1, truncated=None,
            error=None, request_head=request_head(), response_head=head, headers={"etag": '"v1"'},
            body=BODY if status == 200 else b"", content=b"")
        c.clock.t = started_at + 5.0   # the answer is handled a while after the fetch began
        asyncio.run(c.results.handle(UrlItem(url, "example.com"), result))

    c = crawler()
    answer(c, ORIGINAL, T0, 200)          # the response record
    answer(c, ORIGINAL, T0 + 100, 304)
    c.commit()
    c.store.close()
    c = crawler()                         # resumed: the capture comes back with the URL's history
    answer(c, ORIGINAL, T0 + 200, 304)
    answer(c, other, T0 + 300, 200)       # the same bytes: an identical-payload revisit of ORIGINAL
    answer(c, other, T0 + 400, 304)
    writer.close()
    records = [r for path in writer.finished_paths for r in iter_records(path)]
    (response,) = [r.warc_headers for r in records if r.rec_type == "response"]
    refers = [(r.warc_headers["WARC-Target-URI"], r.warc_headers["WARC-Refers-To-Target-URI"],
               r.warc_headers["WARC-Refers-To-Date"]) for r in records if r.rec_type == "revisit"]
    original = (response["WARC-Target-URI"], response["WARC-Date"])
    assert original == (ORIGINAL, "2023-11-14T22:13:20.250000Z")
    assert refers == [(ORIGINAL, *original), (ORIGINAL, *original), (other, *original), (other, *original)]
