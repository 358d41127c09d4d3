"""Bad input to `courtly crawl`: one line naming the problem, exit 2, and no
crawl folder made. The seed is a loopback address that no --allow-network
opens: a crawl that does start decides `non_public` and sends nothing."""

from __future__ import annotations

import json

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main
from courtly.runtime.exits import Exit

SEED = "http://127.0.0.1:9/"


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def test_host_pins_that_are_not_addresses_are_one_line_before_anything_starts(tmp_path, capsys):
    hosts = tmp_path / "hosts.json"
    out = tmp_path / "crawl"
    for pins, message in ((["--resolve", "a.test:not-an-ip"], "--resolve: 'not-an-ip' (for a.test) is not an IP"),
                          ({"a.test": 5}, "'a.test' must map to an IP address or a list of them, not 5"),
                          ({"a.test": []}, "'a.test' must map to an IP address or a list of them, not []"),
                          ({"a.test": ["127.0.0.1", "nope"]}, "'nope' (for a.test) is not an IP address")):
        if isinstance(pins, dict):
            hosts.write_text(json.dumps(pins))
            pins = ["--hosts-file", str(hosts)]
        assert main(["crawl", SEED, "--out", str(out), "--quiet", *pins]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("courtly: error:") and message in lines[0], lines
        assert not out.exists()


def test_with_json_logs_the_error_is_a_json_line_too(tmp_path, capsys):
    assert main(["crawl", "ftp://a.test/", "--out", str(tmp_path / "crawl"), "--log-format", "json"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    record = json.loads(lines[0])                  # was a plain 'courtly: error: ...' line
    assert record["level"] == "error" and record["event"] == "error"
    assert record["message"].startswith("bad seed URL at argument 'ftp://a.test/'")


@pytest.mark.parametrize("content, message", [
    (b"", "no seeds: {file} holds no URL"),                         # was: 'give URLs or --seeds-file'
    (b"# only a comment\n\n", "no seeds: {file} holds no URL"),
    (b"http://127.0.0.1:9/\n\xff\xfe\n", "seeds file {file}:2 is not UTF-8 text"),
])
def test_a_seeds_file_without_usable_urls_is_named(tmp_path, capsys, content, message):
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes(content)
    assert main(["crawl", "--seeds-file", str(seeds), "--out", str(tmp_path / "crawl")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"courtly: error: {message.format(file=seeds)}"), lines
    assert not (tmp_path / "crawl").exists()


def test_a_seeds_file_with_a_byte_order_mark_is_read(tmp_path, capsys):
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes("\ufeffhttp://127.0.0.1:9/\n".encode("utf-8"))   # was: bad scheme '\ufeffhttp'
    assert main(["crawl", "--seeds-file", str(seeds), "--out", str(tmp_path / "crawl"), "--quiet"]) == Exit.SEEDS_REFUSED
