"""WARC writer, CDXJ index and crash repair, checked with independent tools:
warcio (reading, digests, ``warcio check``), cdxj-indexer, and pywb replay."""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from courtly import __version__
from courtly.shell import warc
from courtly.shell.warc import (
    TRUNCATED_REASONS,
    WarcRef,
    WarcWriter,
    cdxj_path,
    index_warc,
    iter_records,
    repair,
)

FETCHED_AT = 1_700_000_000.123456  # 2023-11-14T22:13:20.123456Z
TIMESTAMP = "20231114221320"
NAME_RE = re.compile(r"^courtly-(\d{14})-(\d{5})-([0-9a-f]{8})\.warc\.gz$")


def request_head(url_path: str = "/", host: str = "example.com") -> bytes:
    return (
        f"GET {url_path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: courtly/{__version__}\r\n"
        "Accept: */*\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n"
    ).encode()


def response_head(status: str = "200 OK", **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


HTML = b"<!doctype html><html><head><title>hi</title></head><body>" + b"<p>text</p>" * 300 + b"</body></html>"
PNG = random.Random(1).randbytes(10_240)  # stands in for binary content (incompressible)
GZIPPED = gzip.compress(b"<html><body>" + b"compressible " * 500 + b"</body></html>")


def exchanges() -> list[dict]:
    """A mix: HTML, an image, chunked, gzip-encoded, a 404, a redirect, a
    response without Content-Type, a query string and a port."""
    return [
        dict(url="http://example.com/", body=HTML,
             response_head=response_head(Content_Type="text/html; charset=utf-8",
                                         Content_Length=str(len(HTML)))),
        dict(url="http://example.com/logo.png", body=PNG,
             response_head=response_head(Content_Type="image/png", Content_Length=str(len(PNG)))),
        dict(url="http://example.com/chunked", body=HTML,
             response_head=response_head(Content_Type="text/html", Transfer_Encoding="chunked")),
        dict(url="http://example.com/gz?b=2&a=1", body=GZIPPED,
             response_head=response_head(Content_Type="text/html", Content_Encoding="gzip",
                                         Content_Length=str(len(GZIPPED)))),
        dict(url="http://other.example.org:8080/missing", body=b"not found",
             response_head=response_head("404 Not Found", Content_Type="text/plain",
                                         Content_Length="9")),
        dict(url="http://example.com/old", body=b"",
             response_head=response_head("301 Moved Permanently", Location="http://example.com/",
                                         Content_Length="0")),
        dict(url="http://example.com/bare", body=b"just bytes",
             response_head=response_head(Content_Length="10")),
    ]


def write_all(writer: WarcWriter, items: list[dict], *, start_at: float = FETCHED_AT) -> list[WarcRef]:
    refs = []
    for i, item in enumerate(items):
        path = "/" + item["url"].split("/", 3)[3]
        refs.append(
            writer.write_exchange(
                url=item["url"],
                ip="192.0.2.7",
                request_head=request_head(path),
                response_head=item["response_head"],
                body=item["body"],
                fetched_at=start_at + i,
                truncated=item.get("truncated"),
                metadata=item.get("metadata", {"via": "http://example.com/", "hop-path": "L"}),
            )
        )
    return refs


def warc_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.warc.gz"))


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(params=["zlib", "isal"])
def deflate_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with each deflate library the writer can use."""
    if request.param == "isal":
        isal_zlib = pytest.importorskip("isal.isal_zlib")
        monkeypatch.setattr(warc, "_deflate_lib", isal_zlib)
        monkeypatch.setattr(warc, "_LEVEL_MAX", 3)
    else:
        monkeypatch.setattr(warc, "_deflate_lib", zlib)
        monkeypatch.setattr(warc, "_LEVEL_MAX", 9)
    return request.param


@pytest.fixture()
def written(tmp_path: Path, deflate_backend: str) -> tuple[Path, list[WarcRef]]:
    with WarcWriter(tmp_path, warcinfo={"operator": "ops@example.org", "intent": "archive"}) as writer:
        refs = write_all(writer, exchanges())
    return warc_files(tmp_path)[0], refs


# ---------------------------------------------------------------- records


def test_records_round_trip_through_warcio_with_digests_checked(written: tuple[Path, list[WarcRef]]) -> None:
    path, refs = written
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh, check_digests=True)
        records = []
        for record in it:
            payload = record.raw_stream.read()
            assert record.digest_checker.passed is True, record.digest_checker.problems
            records.append((record.rec_type, dict(record.rec_headers.headers), payload))
    assert [r[0] for r in records] == ["warcinfo"] + ["request", "response", "metadata"] * len(refs)
    for item, ref, (req, resp, meta) in zip(exchanges(), refs, zip(*[iter(records[1:])] * 3)):
        assert resp[2] == item["body"]
        assert resp[1]["WARC-Target-URI"] == req[1]["WARC-Target-URI"] == item["url"]
        assert resp[1]["WARC-IP-Address"] == req[1]["WARC-IP-Address"] == "192.0.2.7"
        assert resp[1]["WARC-Record-ID"] == ref.record_id
        assert req[1]["WARC-Concurrent-To"] == ref.record_id
        assert meta[1]["WARC-Concurrent-To"] == meta[1]["WARC-Refers-To"] == ref.record_id
        assert meta[1]["Content-Type"] == "application/warc-fields"
        assert meta[2] == b"via: http://example.com/\r\nhop-path: L\r\n"
        assert resp[1]["WARC-Payload-Digest"].startswith("sha1:")
        assert resp[1]["Content-Type"] == "application/http;msgtype=response"


def test_each_response_reads_alone_from_its_ref(written: tuple[Path, list[WarcRef]]) -> None:
    path, refs = written
    data = path.read_bytes()
    for item, ref in zip(exchanges(), refs):
        assert ref.filename == path.name
        member = data[ref.offset : ref.offset + ref.length]
        read = [(r.rec_headers.get_header("WARC-Record-ID"), r.raw_stream.read())
                for r in ArchiveIterator(io.BytesIO(member))]
        assert read == [(ref.record_id, item["body"])]  # one whole record per member


def test_warc_date_keeps_microseconds_from_fetched_at(written: tuple[Path, list[WarcRef]]) -> None:
    path, _ = written
    dates = [r.warc_headers["WARC-Date"] for r in iter_records(path) if r.rec_type == "response"]
    assert dates[0] == "2023-11-14T22:13:20.123456Z"
    assert dates[1] == "2023-11-14T22:13:21.123456Z"


def test_file_starts_with_warcinfo_naming_software_and_given_fields(written: tuple[Path, list[WarcRef]]) -> None:
    path, _ = written
    first = next(iter_records(path))
    assert first.rec_type == "warcinfo"
    assert first.warc_headers["WARC-Filename"] == path.name
    fields = dict(line.split(": ", 1) for line in first.payload.decode().splitlines())
    assert fields["software"] == f"courtly/{__version__}"
    assert fields["format"] == "WARC File Format 1.1"
    assert fields["operator"] == "ops@example.org"
    assert fields["intent"] == "archive"
    assert gzip.decompress(path.read_bytes()).startswith(b"WARC/1.1\r\nWARC-Type: warcinfo\r\n")


def test_warcio_check_cli_passes(written: tuple[Path, list[WarcRef]]) -> None:
    path, refs = written
    done = run_tool("warcio.cli", "check", "-v", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    # warcinfo, metadata and request have a block digest; response has both
    assert done.stdout.count("digest pass") == 1 + 3 * len(refs)


def test_chunked_response_head_is_rewritten_to_match_the_stored_body(
    written: tuple[Path, list[WarcRef]],
) -> None:
    path, _ = written
    (resp,) = [r for r in iter_records(path) if r.warc_headers.get("WARC-Target-URI") == "http://example.com/chunked"
               and r.rec_type == "response"]
    names = [name.lower() for name, _ in resp.http_headers]
    assert "transfer-encoding" not in names
    assert ("X-Crawler-Transfer-Encoding", "chunked") in resp.http_headers
    assert resp.payload == HTML  # not de-chunked again, not cut


def test_transfer_encoding_rewrite_only_touches_header_names(tmp_path: Path) -> None:
    body = b"body mentions Transfer-Encoding: chunked"
    head = response_head(Content_Type="text/plain", transfer_encoding="chunked", X_Note="transfer-encoding: x")
    with WarcWriter(tmp_path, fsync=False) as writer:
        writer.write_exchange(url="http://example.com/t", ip="192.0.2.1", request_head=request_head("/t"),
                              response_head=head, body=body, fetched_at=FETCHED_AT)
    (resp,) = [r for r in iter_records(warc_files(tmp_path)[0]) if r.rec_type == "response"]
    assert resp.http_headers == [("Content-Type", "text/plain"), ("X-Crawler-Transfer-Encoding", "chunked"),
                                 ("X-Note", "transfer-encoding: x")]
    assert resp.payload == body


@pytest.mark.parametrize("reason", sorted(TRUNCATED_REASONS))
def test_truncated_response_is_marked(tmp_path: Path, reason: str) -> None:
    item = dict(exchanges()[0], body=HTML[:100], truncated=reason)
    with WarcWriter(tmp_path, fsync=False) as writer:
        write_all(writer, [item])
    types = {r.rec_type: r for r in iter_records(warc_files(tmp_path)[0])}
    assert types["response"].warc_headers["WARC-Truncated"] == reason
    assert "WARC-Truncated" not in types["request"].warc_headers
    assert types["response"].payload == HTML[:100]


def test_untruncated_response_has_no_truncated_header(written: tuple[Path, list[WarcRef]]) -> None:
    path, _ = written
    assert all("WARC-Truncated" not in r.warc_headers for r in iter_records(path))


def test_no_metadata_record_without_provenance_fields(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, fsync=False) as writer:
        write_all(writer, [dict(exchanges()[0], metadata=None)])
    assert [r.rec_type for r in iter_records(warc_files(tmp_path)[0])] == ["warcinfo", "request", "response"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("url", "http://example.com/\r\nWARC-Type: evil"),
        ("url", "http://example.com/a b"),
        ("url", ""),
        ("ip", "1.2.3.4\r\nX: y"),
        ("truncated", "because"),
        ("metadata", {"bad key": "v"}),
        ("metadata", {"k": "line\nbreak"}),
        ("response_head", b"HTTP/1.1 200 OK\r\n"),
        ("request_head", b"GET / HTTP/1.1\r\n"),
    ],
)
def test_values_that_would_break_framing_are_refused(tmp_path: Path, field: str, value: object) -> None:
    args = dict(url="http://example.com/", ip="192.0.2.1", request_head=request_head(),
                response_head=response_head(), body=b"", fetched_at=FETCHED_AT)
    args[field] = value
    with WarcWriter(tmp_path, fsync=False) as writer, pytest.raises(ValueError):
        writer.write_exchange(**args)


def test_writing_after_close_is_refused(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, fsync=False)
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError):
        write_all(writer, exchanges()[:1])


def test_writer_without_writes_leaves_no_file(tmp_path: Path) -> None:
    with WarcWriter(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []


def test_concurrent_writers_threads_produce_valid_file(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, fsync=False) as writer:
        def work(k: int) -> None:
            for i in range(25):
                write_all(writer, [dict(exchanges()[i % 7], url=f"http://t{k}.example/{i}")], start_at=FETCHED_AT + i)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    (path,) = warc_files(tmp_path)
    types = [r.rec_type for r in iter_records(path)]
    assert types.count("response") == 100
    assert len(cdxj_path(path).read_text().splitlines()) == 100


# ---------------------------------------------------------------- files, names, rotation


def test_file_is_named_open_while_written_and_renamed_with_its_index_on_close(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, fsync=False)
    write_all(writer, exchanges()[:2])
    writer.flush()
    open_file, lock = sorted(tmp_path.iterdir(), key=lambda p: p.name.startswith("."))
    assert open_file.name.endswith(".warc.gz.open")
    assert writer.open_path == open_file
    assert lock.name.startswith(".writer-courtly-")     # the live writer's lock (see repair)
    writer.close()
    (path,) = writer.finished_paths
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".cdxj"]   # lock gone
    match = NAME_RE.match(path.name)
    assert match and match.group(1) == TIMESTAMP and match.group(2) == "00000"
    assert cdxj_path(path) == tmp_path / (path.name + ".cdxj")


def test_files_rotate_by_size_and_sort_in_write_order(tmp_path: Path) -> None:
    items = [dict(exchanges()[1], url=f"http://example.com/img{i}.png") for i in range(20)]
    with WarcWriter(tmp_path, file_bytes_max=40_000, fsync=False) as writer:
        refs = write_all(writer, items)
    paths = list(writer.finished_paths)
    assert len(paths) >= 3
    assert warc_files(tmp_path) == paths  # names sort in write order
    assert [NAME_RE.match(p.name).group(2) for p in paths] == [f"{i:05d}" for i in range(len(paths))]
    assert all(p.stat().st_size <= 40_000 for p in paths)
    assert not list(tmp_path.glob("*.open"))
    by_file: dict[str, list[str]] = {}
    for ref in refs:
        by_file.setdefault(ref.filename, []).append(ref.record_id)
    for path in paths:
        records = list(iter_records(path))
        assert records[0].rec_type == "warcinfo"
        ids = [r.warc_headers["WARC-Record-ID"] for r in records if r.rec_type == "response"]
        assert ids == by_file[path.name]
        assert len(cdxj_path(path).read_text().splitlines()) == len(ids)
    assert sum(len(v) for v in by_file.values()) == 20


def test_one_exchange_larger_than_the_limit_still_gets_written(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, file_bytes_max=100, fsync=False) as writer:
        refs = write_all(writer, exchanges()[:3])
    assert len(writer.finished_paths) == 3
    assert [r.filename for r in refs] == [p.name for p in writer.finished_paths]


# ---------------------------------------------------------------- CDXJ


def cdxj_indexer_lines(*paths: Path) -> list[str]:
    done = run_tool("cdxj_indexer.main", "--sort", *map(str, paths))
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_cdxj_is_what_cdxj_indexer_writes(written: tuple[Path, list[WarcRef]]) -> None:
    path, refs = written
    ours = cdxj_path(path).read_text().splitlines()
    assert ours == sorted(ours)
    assert ours == cdxj_indexer_lines(path)
    entries = {json.loads(line.split(" ", 2)[2])["url"]: line for line in ours}
    for item, ref in zip(exchanges(), refs):
        key, timestamp, fields = entries[item["url"]].split(" ", 2)
        assert timestamp.isdigit() and len(timestamp) == 14
        fields = json.loads(fields)
        assert (int(fields["offset"]), int(fields["length"])) == (ref.offset, ref.length)
        assert fields["filename"] == path.name


def test_cdxj_fields_for_a_page(written: tuple[Path, list[WarcRef]]) -> None:
    path, _ = written
    line = next(x for x in cdxj_path(path).read_text().splitlines() if x.startswith("com,example)/ "))
    key, timestamp, fields = line.split(" ", 2)
    assert timestamp == TIMESTAMP
    assert list(json.loads(fields)) == ["url", "mime", "status", "digest", "length", "offset", "filename"]
    assert json.loads(fields)["mime"] == "text/html"
    assert json.loads(fields)["status"] == "200"


def test_index_warc_reads_back_the_written_index(written: tuple[Path, list[WarcRef]]) -> None:
    path, _ = written
    assert index_warc(path) == cdxj_path(path).read_text().splitlines()


# ---------------------------------------------------------------- repair


def member_spans(path: Path) -> list[tuple[int, int]]:
    return [(r.offset, r.offset + r.length) for r in iter_records(path)]


@pytest.fixture()
def crashed(tmp_path: Path, deflate_backend: str) -> tuple[bytes, list[tuple[int, int]], str]:
    """The bytes an .open file held when the process died after a flush, and
    the (start, end) of each record in it."""
    name, data = open_file_snapshot(tmp_path / "live", exchanges())
    return data, member_spans(tmp_path / "live" / name.removesuffix(".open")), name


def cut_points(spans: list[tuple[int, int]]) -> list[int]:
    points = {0, 1, 9, spans[0][1] - 1}
    for start, end in spans:
        points.update({start + 1, start + 10, (start + end) // 2, end - 9, end - 1, end})
    return sorted(points)


def test_repair_keeps_every_complete_record_at_any_cut(
    tmp_path: Path, crashed: tuple[bytes, list[tuple[int, int]], str]
) -> None:
    data, spans, name = crashed
    for cut in cut_points(spans):
        folder = tmp_path / f"cut{cut}"
        folder.mkdir()
        (folder / name).write_bytes(data[:cut])
        (repaired,) = repair(folder)
        assert repaired == folder / name.removesuffix(".open")
        kept = [span for span in spans if span[1] <= cut]
        assert repaired.stat().st_size == (kept[-1][1] if kept else 0), cut
        assert member_spans(repaired) == kept, cut  # digests checked while reading
        assert len(index_warc(repaired)) == len(cdxj_path(repaired).read_text().splitlines())
        assert not list(folder.glob("*.open"))


def test_repaired_files_pass_warcio_check_and_match_cdxj_indexer(
    tmp_path: Path, crashed: tuple[bytes, list[tuple[int, int]], str]
) -> None:
    data, spans, name = crashed
    cuts = [spans[0][1] + 5, spans[5][1] + 100, spans[-1][1] - 1, len(data)]
    repaired = []
    for cut in cuts:
        folder = tmp_path / f"cut{cut}"
        folder.mkdir()
        (folder / name).write_bytes(data[:cut])
        repaired += repair(folder)
    done = run_tool("warcio.cli", "check", *map(str, repaired))
    assert done.returncode == 0, done.stdout
    for path in repaired:
        assert cdxj_path(path).read_text().splitlines() == cdxj_indexer_lines(path)
    assert len(cdxj_path(repaired[-1]).read_text().splitlines()) == len(exchanges())


def open_file_snapshot(folder: Path, items: list[dict]) -> tuple[str, bytes]:
    """Name and bytes of the .open file after a flush: what kill -9 leaves."""
    with WarcWriter(folder) as writer:
        write_all(writer, items)
        writer.flush()
        assert writer.open_path is not None
        return writer.open_path.name, writer.open_path.read_bytes()


def test_repair_drops_a_member_that_is_not_a_whole_record(tmp_path: Path) -> None:
    name, good = open_file_snapshot(tmp_path / "live", exchanges()[:2])
    bad = gzip.compress(b"WARC/1.1\r\nContent-Length: 100\r\n\r\nshort")
    (tmp_path / name).write_bytes(good + bad + good[:500])
    (path,) = repair(tmp_path)
    assert path.read_bytes() == good


def test_repair_is_idempotent_and_leaves_closed_files_alone(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        write_all(writer, exchanges()[:2])
    open_name, data = open_file_snapshot(tmp_path / "live", exchanges()[2:4])
    (tmp_path / open_name).write_bytes(data)
    snapshot = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    first = repair(tmp_path)
    assert [p.name for p in first] == [open_name.removesuffix(".open")]
    assert first[0].read_bytes() == data
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert repair(tmp_path) == []
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == after
    for name in snapshot:  # the file closed normally was not touched
        if not name.endswith(".open"):
            assert after[name] == snapshot[name]


def test_repair_indexes_a_warc_that_lost_its_cdxj(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, fsync=False) as writer:
        write_all(writer, exchanges())
    (path,) = writer.finished_paths
    expected = cdxj_path(path).read_text()
    cdxj_path(path).unlink()
    assert repair(tmp_path) == [path]
    assert cdxj_path(path).read_text() == expected


def test_repair_of_empty_open_file_gives_empty_warc(tmp_path: Path) -> None:
    (tmp_path / "courtly-20240101000000-00000-00000000.warc.gz.open").write_bytes(b"")
    (path,) = repair(tmp_path)
    assert path.read_bytes() == b""
    assert cdxj_path(path).read_text() == ""
    done = run_tool("warcio.cli", "check", str(path))
    assert done.returncode == 0, done.stdout


# ---------------------------------------------------------------- pywb replay


@pytest.mark.pywb
@pytest.mark.parametrize("use_our_index", [False, True], ids=["pywb-index", "our-cdxj"])
def test_pywb_replays_original_payloads(tmp_path: Path, use_our_index: bool) -> None:
    pywb_support = pytest.importorskip("pywb_support")
    items = [exchanges()[i] for i in (0, 1, 2, 3)]  # HTML, image, chunked, gzip-encoded
    with WarcWriter(tmp_path / "warcs", file_bytes_max=8_000) as writer:
        write_all(writer, items)
    paths = list(writer.finished_paths)
    assert len(paths) >= 2  # replay across files, too
    with pywb_support.pywb_server(paths, use_our_index=use_our_index) as base:
        for i, item in enumerate(items):
            timestamp = f"{TIMESTAMP[:-2]}{20 + i:02d}"
            status, headers, body = pywb_support.fetch_replay(base, timestamp, item["url"])
            assert status == 200, (item["url"], status, body[:300])
            assert body == item["body"], item["url"]
            if item["url"].endswith("/gz?b=2&a=1"):
                assert headers.get("content-encoding") == "gzip"
            assert "chunked" not in headers.get("x-archive-orig-transfer-encoding", "")


_WRITER_SCRIPT = """
import sys
from pathlib import Path
from courtly.shell.warc import WarcWriter
writer = WarcWriter(Path(sys.argv[1]), fsync=False)
head = b"HTTP/1.1 200 OK\\r\\nContent-Type: text/html\\r\\n\\r\\n"
for i in range(10**9):
    writer.write_exchange(url=f"http://example.com/{i}", ip="192.0.2.1",
                          request_head=b"GET / HTTP/1.1\\r\\nHost: example.com\\r\\n\\r\\n",
                          response_head=head, body=b"x" * (i % 5000), fetched_at=1.7e9 + i,
                          metadata={"n": str(i)})
    if i % 50 == 0:
        writer.flush()  # what the runtime does before acknowledging fetches
    if i == 200:
        print("ready", flush=True)
"""


def test_repair_leaves_the_open_file_of_a_live_writer_alone(tmp_path: Path) -> None:
    live = WarcWriter(tmp_path, prefix="courtly-w1", fsync=False)
    write_all(live, exchanges()[:2])
    live.flush()
    dead = WarcWriter(tmp_path, prefix="courtly-w2", fsync=False)
    write_all(dead, exchanges()[:2])
    dead.flush()
    dead._live.close()          # its process died: the kernel drops the lock with the descriptor
    (repaired,) = repair(tmp_path)    # what another worker sharing the folder runs at start-up
    assert repaired.name.startswith("courtly-w2-")
    assert live.open_path is not None and live.open_path.exists()
    write_all(live, exchanges()[2:4])
    live.close()                # the live writer finishes its own file as usual
    (path,) = live.finished_paths
    assert len([r for r in iter_records(path) if r.rec_type == "response"]) == 4
    assert repair(tmp_path) == []   # nothing left half-written


def test_repair_after_kill_9_of_a_writing_process(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    finally:
        proc.kill()  # SIGKILL mid-write: nothing gets closed or flushed
        proc.wait(timeout=30)
    (path,) = repair(tmp_path)
    responses = [r for r in iter_records(path) if r.rec_type == "response"]
    assert len(responses) >= 201  # everything flushed before "ready" survived; the torn tail is gone
    assert [r.warc_headers["WARC-Target-URI"] for r in responses] == [
        f"http://example.com/{i}" for i in range(len(responses))
    ]
    assert run_tool("warcio.cli", "check", str(path)).returncode == 0
    assert cdxj_path(path).read_text().splitlines() == cdxj_indexer_lines(path)


def test_sha1_digests_are_rfc4648_base32() -> None:
    import base64
    import hashlib

    from courtly.shell.warc_record import sha1_b32 as _sha1_b32

    for data in (b"", b"a", bytes(range(256)) * 7, b"\xff" * 20):
        h = hashlib.sha1(data)
        assert _sha1_b32(h) == "sha1:" + base64.b32encode(h.digest()).decode("ascii")


def test_record_ids_are_unique_version_4_uuid_urns(tmp_path: Path) -> None:
    import uuid

    with WarcWriter(tmp_path, fsync=False) as writer:
        write_all(writer, exchanges()[:5])
    ids = [r.warc_headers["WARC-Record-ID"] for path in writer.finished_paths for r in iter_records(path)]
    assert len(ids) == len(set(ids)) >= 11   # warcinfo + request, response, metadata per exchange
    for rid in ids:
        assert rid.startswith("<urn:uuid:") and rid.endswith(">")
        u = uuid.UUID(rid[len("<urn:uuid:"):-1])
        assert str(u) == rid[len("<urn:uuid:"):-1]
        assert u.version == 4 and u.variant == uuid.RFC_4122


def test_warc_dates_are_what_datetime_formats() -> None:
    import math
    from datetime import UTC, datetime

    from courtly.shell.warc_record import warc_date as _warc_date

    rng = random.Random(8)
    values = [rng.uniform(0, 4e9) for _ in range(20_000)]
    values += [1.7e9 + k / 1e6 + 0.5e-6 for k in range(2_000)]     # halfway microseconds
    values += [1.7e9 + 0.9999995, 1.7e9 + 0.9999994, 0.0, 1.5, 1.7e9 + 1e-7]
    values += [math.nextafter(v, 0) for v in values[:500]]
    for v in values:
        assert _warc_date(v) == datetime.fromtimestamp(v, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), v
