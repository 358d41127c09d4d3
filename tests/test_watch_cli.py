"""`courtly watch` and the monitor lines of `courtly report`: one-line errors
with exit status 2, --json everywhere, impossible targets named."""

from __future__ import annotations

import json

import pytest
from cli_support import courtly_logger_restored

from courtly.cli import main


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


@pytest.fixture
def run_cli(capsys):
    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        got = capsys.readouterr()
        return code, got.out, got.err
    return run


def test_watch_commands_round_trip_with_json(tmp_path, run_cli):
    out = str(tmp_path / "c")
    code, stdout, _ = run_cli("watch", "add", "HTTP://Example.ORG/a", "--out", out, "--every", "30",
                              "--ignore", "build \\d+", "--json")
    assert code == 0 and json.loads(stdout)["url"] == "http://example.org/a"
    assert run_cli("watch", "pause", "1", "--out", out)[0] == 0
    code, stdout, _ = run_cli("watch", "list", "--out", out, "--json")
    [w] = json.loads(stdout)
    assert w["paused"] and w["every_s"] == 30 and w["ignore"] == ["build \\d+"] and w["learning"]
    assert run_cli("watch", "pause", "http://example.org/a", "--out", out, "--resume")[0] == 0
    assert run_cli("watch", "remove", "1", "--out", out)[0] == 0
    assert json.loads(run_cli("watch", "list", "--out", out, "--json")[1]) == []


def test_bad_watch_input_is_one_line_and_exit_2(tmp_path, run_cli):
    out = str(tmp_path / "c")
    for args in (["add", "ftp://x/"], ["add", "http://x/", "--every", "0"], ["add", "http://x/", "--select", "p["],
                 ["add", "http://x/", "--ignore", "("], ["add", "http://x/", "--webhook", "nope"],
                 ["remove", "7"], ["list", "--out", str(tmp_path / "none")]):
        if "--out" not in args:
            args = [*args, "--out", out]
        code, _, stderr = run_cli("watch", *args)
        assert code == 2 and stderr.count("\n") == 1 and stderr.startswith("courtly: error: "), (args, stderr)


def test_report_names_watches_the_hosts_politeness_makes_impossible(tmp_path, run_cli):
    out = str(tmp_path / "c")
    for i in range(5):
        run_cli("watch", "add", f"http://shop.example.org/{i}", "--out", out, "--every", "2")
    run_cli("watch", "add", "http://other.example.net/", "--out", out, "--every", "2")
    code, stdout, _ = run_cli("report", "--out", out, "--json")
    rows = {r["key"]: r for r in json.loads(stdout)["monitor"]}
    assert rows["example.org"]["best_detect_s"] == 5.0            # 5 watches x the 1 s default delay
    assert len(rows["example.org"]["impossible"]) == 5
    assert rows["example.net"]["impossible"] == []
    text = run_cli("report", "--out", out)[1]
    assert "IMPOSSIBLE: http://shop.example.org/0 wants 2 s; the host allows 5 s at best" in text
