"""Bad observability input is one line and exit 2 before anything starts:
`courtly worker --status` (malformed, or a port already taken) and a
`[coverage] canaries_file` that cannot be read or holds a non-URL."""

from __future__ import annotations

import socket

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main

SEED = "http://127.0.0.1:9/"
DSN = "postgresql://nobody@127.0.0.1:9/none"   # never reached: the checks come first


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("courtly: error:"), lines
    return lines[0]


def test_worker_status_must_be_host_port_and_free(capsys):
    assert main(["worker", "--db", DSN, "--status", "nonsense"]) == 2
    assert "--status wants HOST:PORT, not 'nonsense'" in _one_error_line(capsys)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["worker", "--db", DSN, "--status", f"127.0.0.1:{port}"]) == 2
        assert f"--status 127.0.0.1:{port}:" in _one_error_line(capsys)


@pytest.mark.parametrize("content, message", [
    (None, "cannot read coverage.canaries_file"),
    ("https://a.test/\nmailto:x@a.test\n", "canaries.txt:2: not a URL to crawl"),
    ("# nothing but a comment\n", "holds no URL"),
])
def test_a_bad_canaries_file_stops_the_crawl_before_it_starts(tmp_path, capsys, content, message):
    canaries = tmp_path / "canaries.txt"
    if content is not None:
        canaries.write_text(content)
    config = tmp_path / "crawl.toml"
    config.write_text(f'[coverage]\ncanaries_file = "{canaries}"\n')
    out = tmp_path / "crawl"
    assert main(["crawl", SEED, "--out", str(out), "--quiet", "--config", str(config)]) == 2
    assert message in _one_error_line(capsys)
    assert not out.exists()
