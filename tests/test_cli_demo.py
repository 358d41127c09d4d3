"""`courtly demo` on a folder it cannot use: one line, exit 2, and nothing
started or rewritten (a second demo on the same --out used to start its own
simulated web first and rewrite simweb/ under the running one: its hosts
map, its manifest, and the port a later run resumes on)."""

from __future__ import annotations

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main
from courtly.runtime.wiring import crawl_folder


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def test_a_second_demo_on_a_folder_in_use_stops_before_its_simulated_web(tmp_path, capsys):
    out = tmp_path / "demo"
    with crawl_folder(out / "crawl"):                    # the first demo's crawl holds the folder
        assert main(["demo", "--out", str(out), "--hosts", "2", "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"courtly: error: {out / 'crawl'} is in use"), lines
    assert not (out / "simweb").exists()


def test_demo_into_a_path_under_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["demo", "--out", str(tmp_path / "file"), "--hosts", "2", "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("courtly: error: cannot write to crawl folder"), lines
