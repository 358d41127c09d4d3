"""WARC writer: record framing at the edges of its fast paths (small records
on their own deflate stream, bodies around that limit, record IDs drawn from a
per-thread pool), checked by decompressing each member alone and by warcio."""

from __future__ import annotations

import gzip
import io
import os
import random
import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtly.shell import warc
from courtly.shell.warc import WarcWriter, iter_records

REQUEST = b"GET /x HTTP/1.1\r\nHost: example.com\r\n\r\n"


def head(length: int) -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {length}\r\n\r\n".encode()


def write(writer: WarcWriter, n: int, body: bytes, **extra) -> warc.WarcRef:
    return writer.write_exchange(url=f"http://example.com/{n}", ip="192.0.2.7", request_head=REQUEST,
                                 response_head=head(len(body)), body=body, fetched_at=1.7e9 + n,
                                 metadata={"via": "http://example.com/"}, **extra)


@pytest.fixture(params=["zlib", "isal"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "isal":
        monkeypatch.setattr(warc, "_deflate_lib", pytest.importorskip("isal.isal_zlib"))
        monkeypatch.setattr(warc, "_LEVEL_MAX", 3)
    else:
        monkeypatch.setattr(warc, "_deflate_lib", zlib)
        monkeypatch.setattr(warc, "_LEVEL_MAX", 9)
    return request.param


def members(data: bytes) -> list[bytes]:
    """The file cut into its gzip members, each decompressed alone."""
    out = []
    while data:
        d = zlib.decompressobj(31)
        out.append(d.decompress(data))
        assert d.eof
        data = d.unused_data
    return out


@pytest.mark.parametrize("level", [0, 1])
def test_bodies_around_the_small_record_limit_frame_as_one_record_per_member(
        tmp_path: Path, backend: str, level: int) -> None:
    rng = random.Random(5)
    limit = warc._SMALL_BODY_BYTES
    bodies = [b"", b"x", rng.randbytes(limit - 1), b"a" * limit, rng.randbytes(limit + 1),
              b"<p>page</p>" * 7000, rng.randbytes(70_000)]
    with WarcWriter(tmp_path, fsync=False, gzip_level=level) as writer:
        refs = [write(writer, n, body) for n, body in enumerate(bodies)]
    (path,) = writer.finished_paths
    data = path.read_bytes()
    records = members(data)
    assert len(records) == 1 + 3 * len(bodies)   # warcinfo, then request, response, metadata each
    for n, (body, ref) in enumerate(zip(bodies, refs)):
        response = records[2 + 3 * n]
        assert response.startswith(b"WARC/1.1\r\nWARC-Type: response\r\n")
        assert response.endswith(b"\r\n\r\n" + head(len(body)) + body + b"\r\n\r\n")
        assert gzip.decompress(data[ref.offset:ref.offset + ref.length]) == response
    with open(path, "rb") as fh:
        for record in ArchiveIterator(fh, check_digests=True):
            record.raw_stream.read()
            assert record.digest_checker.passed is not False, record.digest_checker.problems
    assert [r.payload for r in iter_records(path) if r.rec_type == "response"] == bodies


def test_record_ids_stay_unique_past_one_pool_of_them(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, fsync=False) as writer:
        for n in range(3 * warc._IDS_PER_READ):
            write(writer, n, b"body %d" % n)
    ids = [r.warc_headers["WARC-Record-ID"] for p in writer.finished_paths for r in iter_records(p)]
    assert len(ids) == len(set(ids)) == 1 + 9 * warc._IDS_PER_READ


def test_a_forked_child_draws_record_ids_of_its_own(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, fsync=False)
    parent_first = writer._ids()   # the pool is filled now
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its next IDs, then out without cleanup
        try:
            os.write(write_end, " ".join(writer._ids()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with io.FileIO(read_end) as pipe:
        child = pipe.read().decode().split()
    os.waitpid(pid, 0)
    parent = writer._ids()
    writer.close()
    assert len(child) == 3
    assert not set(child) & (set(parent) | set(parent_first))


@pytest.mark.parametrize("size", [100, 4096, 65_535, 65_536, 140_000])
def test_compressed_payloads_are_stored_and_read_back_whole(tmp_path: Path, backend: str, size: int) -> None:
    noise = random.Random(size).randbytes(size)   # what gzip, brotli or JPEG bytes look like
    coded = gzip.compress(random.Random(1).randbytes(size // 2) * 2)
    heads = [b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n\r\n",
             b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\r\n",
             b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"]
    with WarcWriter(tmp_path, fsync=False) as writer:
        refs = [writer.write_exchange(url=f"http://example.com/{n}", ip="", request_head=REQUEST,
                                      response_head=h, body=b, fetched_at=1.7e9)
                for n, (h, b) in enumerate(zip(heads, (noise, coded, noise)))]
    (path,) = writer.finished_paths
    data = path.read_bytes()
    assert len(members(data)) == 1 + 2 * len(heads)
    for ref, h, b in zip(refs, heads, (noise, coded, noise)):
        record = gzip.decompress(data[ref.offset:ref.offset + ref.length])
        assert record.endswith(b"\r\n\r\n" + h + b + b"\r\n\r\n")
    with open(path, "rb") as fh:
        for record in ArchiveIterator(fh, check_digests=True):
            record.raw_stream.read()
            assert record.digest_checker.passed is not False, record.digest_checker.problems
    assert [r.payload for r in iter_records(path) if r.rec_type == "response"] == [noise, coded, noise]


@pytest.mark.warcio_unreadable("a br-coded response: warcio 1.8 with the brotli package cannot decode it")
def test_a_body_with_a_content_coding_is_stored_as_it_is_and_plain_text_is_deflated(tmp_path: Path) -> None:
    text = b"<p>the same words again</p>" * 2000   # compressible, whatever the header says
    coded = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: br\r\n\r\n"
    plain = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
    with WarcWriter(tmp_path, fsync=False) as writer:
        stored, deflated = (writer.write_exchange(url="http://example.com/", ip="", request_head=REQUEST,
                                                  response_head=h, body=text, fetched_at=1.7e9)
                            for h in (coded, plain))
    (path,) = writer.finished_paths
    data = path.read_bytes()
    assert text[:65_535] in data[stored.offset:stored.offset + stored.length]   # verbatim
    assert stored.length > len(text) > 10 * deflated.length
    assert [r.payload for r in iter_records(path) if r.rec_type == "response"] == [text, text]


def test_small_records_are_deflated_at_the_writers_level_when_it_asks_for_more_than_1(tmp_path: Path) -> None:
    pytest.importorskip("isal")
    sizes = {}
    for level in (1, 3):
        with WarcWriter(tmp_path / str(level), fsync=False, gzip_level=level) as writer:
            ref = write(writer, 0, b"<p>not found</p>" * 20)   # a small body: the small-record stream
        sizes[level] = ref.length
    assert sizes[3] < sizes[1]
