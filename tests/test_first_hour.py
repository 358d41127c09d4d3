"""A new user's first hour (issue 23, item 10): each rough edge met on the
way, as one fact each."""

from __future__ import annotations

import ipaddress
import os
import re
import time
from pathlib import Path

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main
from courtly.cli_parser import build_parser as _build_parser
from courtly.core.netpolicy import NetPolicy
from courtly.ports import Batch
from courtly.runtime.exits import Exit
from courtly.runtime.report import daily_report, stats
from courtly.runtime.wiring import crawl_folder
from courtly.shell.store.sqlite import SqliteStore
from courtly.shell.warc_index import LOCK_PREFIX, STALE_LOCK_AGE_S, repair
from courtly.sim.command import crawl_hint
from courtly.sim.manifest import BAIT_IP
from courtly.sim.model import SimWeb
from courtly.sim.vsim_command import parser as sim_parser
from courtly.sim.webconfig import profile_config

README = Path(__file__).parents[1] / "README.md"
SEED = "http://127.0.0.1:9/"


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def _err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("profile", ["demo", "hostile", "bench"])
def test_simweb_prints_a_crawl_command_that_leaves_the_ssrf_bait_forbidden(profile):
    web = SimWeb(profile_config(profile, seed=3))
    hint = crawl_hint(Path("web"), web.allowed_networks())
    nets = re.findall(r"--allow-network (\S+)", hint)
    assert nets == web.allowed_networks() and nets
    assert not NetPolicy(tuple(nets)).permits(BAIT_IP)
    assert all(NetPolicy(tuple(nets)).permits(ip) for ip in web.ips)
    assert "--seeds-file web/seeds.txt --hosts-file web/hosts.json" in hint
    assert "courtly simweb check web/requests.jsonl" in hint


def test_no_network_in_crawl_help_lets_the_ssrf_bait_through():
    crawl = _build_parser()._subparsers._group_actions[0].choices["crawl"]
    text = crawl.format_help()
    nets = re.findall(r"\b\d+\.\d+\.\d+\.\d+/\d+\b", text)
    assert nets, "the help gives an example network"
    assert not any(ipaddress.ip_address(BAIT_IP) in ipaddress.ip_network(n) for n in nets), nets


def test_crawl_help_documents_the_exit_statuses():
    crawl = _build_parser()._subparsers._group_actions[0].choices["crawl"]
    text = " ".join(crawl.format_help().split())
    for status in Exit:
        if status is not Exit.NOT_FOUND:
            assert re.search(rf"\b{int(status)}\b", text.partition("exit status:")[2]), status


def test_readme_documents_every_exit_status_of_crawl():
    text = README.read_text()
    for status in Exit:
        assert f"| {int(status)} |" in text or f"| {int(status)}" in text, status


def test_a_seed_line_with_extra_words_is_refused_not_encoded(tmp_path, capsys):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/ extra words\n")
    out = tmp_path / "crawl"
    assert main(["crawl", "--seeds-file", str(seeds), "--out", str(out)]) == Exit.BAD_INPUT
    lines = _err_lines(capsys)
    assert lines == [f"courtly: error: bad seed URL at {seeds}:1: 'http://a.test/ extra words' is not one URL "
                     "(it holds white space; one URL per line, a space inside a URL written %20)"], lines
    assert not out.exists()


def test_out_naming_a_file_says_so(tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("mine")
    assert main(["crawl", SEED, "--out", str(out), "--quiet"]) == Exit.BAD_INPUT
    assert _err_lines(capsys) == [f"courtly: error: --out {out} is a file, not a folder: give the crawl "
                                  "folder (it is made when missing)"]
    assert out.read_text() == "mine"


@pytest.mark.parametrize("flag, value", [("--max-pages", "-1"), ("--duration-s", "-5"), ("--delay-s", "-1")])
def test_a_bad_flag_value_names_the_flag_not_the_config_key(tmp_path, capsys, flag, value):
    assert main(["crawl", SEED, "--out", str(tmp_path / "c"), flag, value]) == Exit.BAD_INPUT
    lines = _err_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith(f"courtly: error: {flag} must be >= 0"), lines


def test_demo_max_pages_below_zero_names_the_flag(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "d"), "--max-pages", "-1"]) == Exit.BAD_INPUT
    assert _err_lines(capsys) == ["courtly: error: --max-pages must be >= 0 (0 = no limit), not -1"]


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_the_folder_lock_is_gone_when_the_crawl_ends_and_a_stale_one_is_taken_over(tmp_path):
    out = tmp_path / "crawl"
    out.mkdir()
    (out / "lock").write_text(str(_dead_pid()))   # left by a crawl killed with -9
    with crawl_folder(out):
        assert (out / "lock").read_text() == str(os.getpid())
    assert not (out / "lock").exists()


def test_stale_writer_locks_are_removed_and_live_ones_kept(tmp_path):
    from courtly.shell.warc import WarcWriter

    warc = tmp_path / "warc"
    warc.mkdir()
    (warc / f"{LOCK_PREFIX}courtly-dead0001").write_text(str(_dead_pid()))   # its writer was killed
    old_empty = warc / f"{LOCK_PREFIX}courtly-dead0002"
    old_empty.write_bytes(b"")                                               # killed before it wrote its pid
    now = time.time()
    os.utime(old_empty, (now - STALE_LOCK_AGE_S - 1, now - STALE_LOCK_AGE_S - 1))
    young_empty = warc / f"{LOCK_PREFIX}courtly-new00003"
    young_empty.write_bytes(b"")                                             # a writer between open and flock
    with WarcWriter(warc, prefix="courtly", warcinfo={}) as live:
        repair(warc, now)
        left = sorted(p.name for p in warc.glob(f"{LOCK_PREFIX}*"))
        assert left == sorted([young_empty.name, f"{LOCK_PREFIX}courtly-{live._tag}"]), left
    assert [p.name for p in warc.glob(f"{LOCK_PREFIX}*")] == [young_empty.name]


def test_readme_links_the_observability_and_freshness_docs():
    text = README.read_text()
    assert "(docs/observability.md)" in text and "(docs/freshness.md)" in text


def test_sim_help_explains_every_column_of_its_table():
    from courtly.sim.freshness import Comparison   # noqa: F401  (the table's source)
    from courtly.sim import vsim_command

    header = re.search(r"\{'policy':22s\}.*", Path(vsim_command.__file__).read_text()).group(0)
    columns = re.findall(r"'([^' ]+)'", header)
    assert "F_w" in columns and "/opt" in columns
    text = sim_parser().format_help()
    for column in columns:
        assert re.search(rf"^  {re.escape(column)}\s", text, re.M), column


def test_report_names_the_hosts_stats_shows_answering_429_and_503(tmp_path):
    out = tmp_path / "crawl"
    store = SqliteStore(out / "crawl.db")
    at = time.time() - 3600
    fetch = lambda url, status: (url, "page", at, status, 100, 0.01, "127.0.1.1", "", "")  # noqa: E731
    store.apply(Batch(
        fetches=[fetch("http://a.test/x", 429), fetch("http://a.test/y", 429), fetch("http://www.b.test/", 503),
                 fetch("http://b.test/robots.txt", 503), fetch("http://c.test/", 200)],
        # the back-offs are over and were cleared by later successes
        hosts={k: {"delay_s": 1.0, "backoff_until": at, "backoff_reason": ""} for k in ("a.test", "b.test")}))
    store.close()
    assert "429: 2  503: 2" in stats(out)
    text = daily_report(out)
    assert "hosts throttled by politeness (answered 429/503, backed off): 2" in text
    assert "  a.test  429 x2" in text and "  b.test  503 x2" in text
