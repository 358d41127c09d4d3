"""Resuming a crawl folder under a configuration it cannot take.

The seed is a loopback address that no --allow-network opens: the crawl
decides `non_public` and sends nothing."""

from __future__ import annotations

import sqlite3

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main
from courtly.runtime.exits import Exit

SEED = "http://127.0.0.1:9/"


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def test_a_resume_with_another_politeness_key_is_refused(tmp_path, capsys):
    out = tmp_path / "crawl"
    host = tmp_path / "host.toml"
    host.write_text('[crawl]\npoliteness_key = "host"\ncontact = "t@example.org"\n')
    assert main(["crawl", SEED, "--out", str(out), "--quiet", "--contact", "t@example.org"]) == Exit.SEEDS_REFUSED
    capsys.readouterr()
    assert main(["crawl", SEED, "--out", str(out), "--quiet", "--config", str(host)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "crawl.politeness_key = 'domain', not 'host'" in lines[0], lines
    assert lines[0].startswith("courtly: error:")
    assert main(["crawl", SEED, "--out", str(out), "--quiet", "--contact", "t@example.org"]) == Exit.SEEDS_REFUSED
    db = sqlite3.connect(str(out / "crawl.db"))
    assert db.execute("SELECT v FROM meta WHERE k = 'politeness_key'").fetchone() == ("domain",)


def test_a_folder_in_use_names_the_crawl_holding_it_and_what_to_do(tmp_path, capsys):
    import os

    from courtly.runtime.wiring import crawl_folder

    out = tmp_path / "crawl"
    with crawl_folder(out):
        assert main(["crawl", SEED, "--out", str(out), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"courtly: error: {out} is in use by another courtly crawl (pid {os.getpid()}): wait for "
                     f"it to end, stop it with Ctrl-C or kill -INT {os.getpid()}, or use another --out"], lines
