"""WARC output for distributed workers: a plain folder, or an fsspec URL
(finished files shipped from a local spool with their CDXJ index); file names
carry the worker id."""

from __future__ import annotations

import gzip
from pathlib import Path

import fsspec
import pytest

from courtly.shell.blob import ShippingWarcWriter, is_url, open_warc_output
from courtly.shell.warc import WarcWriter, iter_records

REQ = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
RESP = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"


def _write(w, n: int) -> None:
    for i in range(n):
        w.write_exchange(url=f"http://a.test/{i}", ip="192.0.2.1", request_head=REQ, response_head=RESP,
                         body=b"<p>%d</p>" % i * 50, fetched_at=1_700_000_000.0 + i)


def test_is_url_tells_paths_from_fsspec_urls():
    assert is_url("s3://bucket/x") and is_url("file:///tmp/x") and is_url("memory://crawl")
    assert not is_url("/data/crawl") and not is_url("crawl-out") and not is_url("C:/x")


def test_a_local_folder_gets_the_files_directly_named_by_worker(tmp_path):
    w = open_warc_output(str(tmp_path / "out"), "host-1-ab", prefix="courtly")
    assert isinstance(w, WarcWriter)
    _write(w, 3)
    w.close()
    files = sorted((tmp_path / "out" / "warc").glob("*.warc.gz"))
    assert len(files) == 1 and files[0].name.startswith("courtly-host-1-ab-")
    assert Path(str(files[0]) + ".cdxj").exists()


@pytest.mark.parametrize("scheme", ["file", "memory"])
def test_an_fsspec_url_receives_finished_files_with_their_index(tmp_path, scheme):
    root = f"file://{tmp_path}/remote" if scheme == "file" else f"memory://courtly-test-{tmp_path.name}"
    spool = tmp_path / "spool"
    w = open_warc_output(root, "w7", prefix="courtly", spool=str(spool), file_bytes_max=3000)
    assert isinstance(w, ShippingWarcWriter)
    _write(w, 12)               # small files: several rotations ship while writing
    w.flush()
    w.close()
    fs, path = fsspec.core.url_to_fs(root + "/warc")
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
    warcs = [n for n in names if n.endswith(".warc.gz")]
    assert len(warcs) >= 2 and all(n.startswith("courtly-w7-") for n in warcs)
    assert sorted(n for n in names if n.endswith(".cdxj")) == sorted(n + ".cdxj" for n in warcs)
    assert not [n for n in names if n.endswith(".part")]
    assert list(spool.iterdir()) == []             # shipped, then removed from the spool
    local = tmp_path / "check"
    local.mkdir()
    urls = []
    for n in warcs:
        fs.get_file(f"{path}/{n}", str(local / n))
        gzip.open(local / n).read()                # whole gzip members
        urls += [r.warc_headers["WARC-Target-URI"] for r in iter_records(local / n) if r.rec_type == "response"]
    assert sorted(urls) == sorted(f"http://a.test/{i}" for i in range(12))


def test_a_crashed_workers_spool_is_repaired_and_shipped_on_the_next_start(tmp_path):
    spool = tmp_path / "spool"
    first = WarcWriter(spool, prefix="courtly-w1")
    _write(first, 2)
    first.flush()                                   # then the process dies: an .open file remains
    first._live.close()                             # and its writer lock goes with it
    assert list(spool.glob("*.open"))
    root = f"file://{tmp_path}/remote"
    w = open_warc_output(root, "w1", prefix="courtly", spool=str(spool))
    w.close()
    shipped = sorted((tmp_path / "remote" / "warc").glob("*.warc.gz"))
    assert len(shipped) == 1 and Path(str(shipped[0]) + ".cdxj").exists()
