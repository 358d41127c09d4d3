"""`courtly export` never writes over what it must not: the crawl's own files
(its database, its WARC files) or something that is not a regular file (a
device, a pipe: the export is written beside it and renamed over it, which
replaced /dev/full, run as root, with a regular file)."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest
from cli_support import courtly_logger_restored, empty_crawl_folder

from courtly.cli import main


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


@pytest.fixture
def crawl(tmp_path):
    out = empty_crawl_folder(tmp_path / "crawl")
    return out


@pytest.mark.parametrize("kind", ["text", "cdxj"])
@pytest.mark.parametrize("target", ["crawl.db", "config.json", "warc/courtly-1.warc.gz"])
def test_export_refuses_to_replace_a_file_of_the_crawl(crawl, capsys, kind, target):
    (crawl / target).touch(exist_ok=True)
    before = (crawl / target).read_bytes()
    assert main(["export", kind, "--out", str(crawl), "--to", str(crawl / target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("courtly: error: --to ") and "crawl folder" in err and err.count("\n") == 1, err
    assert (crawl / target).read_bytes() == before
    sqlite3.connect(str(crawl / "crawl.db")).execute("SELECT count(*) FROM urls").fetchone()


def test_export_refuses_a_target_that_is_not_a_regular_file(crawl, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["export", "text", "--out", str(crawl), "--to", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err and err.count("\n") == 1, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_export_to_a_new_file_beside_the_crawl_s_files_is_fine(crawl, capsys):
    assert main(["export", "text", "--out", str(crawl), "--to", str(crawl / "pages.jsonl")]) == 0
    assert (crawl / "pages.jsonl").exists()
