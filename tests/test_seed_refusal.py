"""Refusals at the seed stage are told with their reason and the fix, and a
seed refused for a reason a changed setting removes is reconsidered when the
crawl is resumed with that setting; each reconsideration is recorded."""

from __future__ import annotations

import sqlite3

import pytest
from cli_support import courtly_logger_restored
from site_support import tiny_site

from courtly.cli import main
from courtly.core.types import Reason
from courtly.runtime.exits import Exit
from courtly.runtime.refusal import _why_again, fix_for, refusal_line


@pytest.fixture(autouse=True)
def _courtly_logger():
    yield from courtly_logger_restored()


def test_a_private_seed_is_told_with_the_flag_that_opens_it():
    line = refusal_line("http://10.0.0.5/", "", Reason.NON_PUBLIC, "10.0.0.5: no permitted address in 10.0.0.5")
    assert line == ("seed http://10.0.0.5/ refused: non_public (10.0.0.5 is a private address); "
                    "add --allow-network 10.0.0.5/32 to crawl it")


def test_a_seed_whose_name_does_not_resolve_is_told_to_pin_it():
    line = refusal_line("http://a.invalid/", "", Reason.DNS, "a.invalid: Domain name not found")
    assert line.startswith("seed http://a.invalid/ refused: dns (a.invalid: Domain name not found); ")
    assert "--resolve HOST:IP" in line and "--hosts-file" in line


def test_a_seed_redirected_out_of_scope_names_the_redirect_and_the_wider_scope():
    line = refusal_line("http://b.example.org/", "http://example.org/", Reason.SCOPE, "scope seed-hosts",
                        "seed-hosts")
    assert line == ("seed http://example.org/ redirects to http://b.example.org/, refused: scope (outside "
                    "--scope seed-hosts); use --scope seed-domains (same registered domain) or --scope any "
                    "to follow it")


def test_robots_refusals_have_no_fix_to_offer():
    assert fix_for("http://a.test/", Reason.ROBOTS, "http://a.test/robots.txt") == ""


@pytest.mark.parametrize("reason, changed, why", [
    (Reason.NON_PUBLIC, "network", "network.allow (--allow-network) changed"),
    (Reason.NON_PUBLIC, "", ""),                                          # nothing changed: it stands
    (Reason.DNS, "pins", "host pins (--resolve, --hosts-file) changed"),
    (Reason.DNS, "", "a resume resolves names again"),
    (Reason.SCOPE, "scope", "crawl.scope (--scope) changed"),
    (Reason.SCOPE, "network", ""),                                        # another setting changed
])
def test_a_refusal_is_reconsidered_when_its_own_setting_changed(reason, changed, why):
    before = {"network": "[]", "pins": "[]", "scope": "any"}
    now = dict(before, **({changed: "other"} if changed else {}))
    assert _why_again(str(reason), before, now) == why


def _crawl(url: str, out, *extra: str) -> list[str]:
    return ["crawl", url, "--out", str(out), "--quiet", "--delay-s", "0.05", "--contact", "t@example.org", *extra]


def test_a_refused_seed_is_told_and_fetched_when_resumed_with_the_flag(tmp_path, capsys):
    out = tmp_path / "crawl"
    with tiny_site(3) as url:
        assert main(_crawl(url, out)) == Exit.SEEDS_REFUSED
        err = capsys.readouterr().err
        assert (f"courtly: WARNING: seed {url} refused: non_public (127.0.0.1 is a loopback address); "
                "add --allow-network 127.0.0.1/32 to crawl it") in err, err
        assert "nothing fetched: every seed was refused or failed (exit status 3)" in err
        assert main(["explain", url, "--out", str(out)]) == 0
        assert "fix        add --allow-network 127.0.0.1/32 to crawl it" in capsys.readouterr().out

        # the same command again: nothing changed, the refusal stands and is said again
        assert main(_crawl(url, out)) == Exit.SEEDS_REFUSED
        err = capsys.readouterr().err
        assert (f"courtly: WARNING: seed {url} refused: non_public (127.0.0.1 is a loopback address); add "
                "--allow-network 127.0.0.1/32 to crawl it (decided by an earlier run)") in err, err

        assert main(_crawl(url, out, "--allow-network", "127.0.0.1/32")) == Exit.FINISHED
    db = sqlite3.connect(str(out / "crawl.db"))
    assert db.execute("SELECT state FROM urls WHERE url = ?", (url,)).fetchone() == ("fetched",)
    assert db.execute("SELECT count(*) FROM urls WHERE state = 'fetched'").fetchone() == (3,)
    flags = db.execute("SELECT flag, detail FROM flags WHERE url = ?", (url,)).fetchall()
    assert flags == [("reconsidered", "was non_public (127.0.0.1: no permitted address in 127.0.0.1); "
                                      "network.allow (--allow-network) changed")]
    assert main(["explain", url, "--out", str(out)]) == 0
    assert "queued again: was non_public" in capsys.readouterr().out


def test_a_seed_redirected_out_of_scope_is_told_and_followed_when_resumed_with_a_wider_scope(tmp_path, capsys):
    out = tmp_path / "crawl"
    with tiny_site(2) as url:
        port = url.rsplit(":", 1)[1].strip("/")
        seed, target = f"http://a.example:{port}/to/b.example:{port}/", f"http://b.example:{port}/"
        pins = ["--resolve", "a.example:127.0.0.1", "--resolve", "b.example:127.0.0.1",
                "--allow-network", "127.0.0.1/32"]
        assert main(_crawl(seed, out, *pins, "--scope", "seed-hosts")) == Exit.FINISHED   # the seed answered
        err = capsys.readouterr().err
        assert (f"seed {seed} redirects to {target}, refused: scope (outside --scope seed-hosts); use --scope "
                "seed-domains (same registered domain) or --scope any to follow it") in err, err
        assert main(_crawl(seed, out, *pins, "--scope", "seed-domains")) == Exit.FINISHED
        assert f"reconsidered {target}" not in capsys.readouterr().err      # b.example is still out of scope
        assert main(_crawl(seed, out, *pins, "--scope", "any")) == Exit.FINISHED
        assert (f"reconsidered {target}: was scope (scope seed-hosts); crawl.scope (--scope) changed"
                in capsys.readouterr().err)
    db = sqlite3.connect(str(out / "crawl.db"))
    assert db.execute("SELECT state FROM urls WHERE url = ?", (target,)).fetchone() == ("fetched",)
    assert db.execute("SELECT state FROM urls WHERE url = ?", (f"{target}p1",)).fetchone() == ("fetched",)


def test_with_json_logs_a_refused_seed_is_a_record_with_its_reason_and_fix(tmp_path, capsys):
    import json

    out = tmp_path / "crawl"
    assert main(["crawl", "http://127.0.0.1:9/", "--out", str(out), "--contact", "t@example.org",
                 "--log-format", "json"]) == Exit.SEEDS_REFUSED
    records = [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]
    refused = [r for r in records if r.get("event") == "seed_refused"]
    assert len(refused) == 1, records
    assert refused[0]["url"] == "http://127.0.0.1:9/" and refused[0]["reason"] == "non_public"
    assert refused[0]["fix"] == "add --allow-network 127.0.0.1/32 to crawl it"
    assert refused[0]["level"] == "warning"


def test_the_fix_for_a_link_refused_deeper_says_a_resume_will_not_retry_it():
    detail = "10.0.0.5: no permitted address in 10.0.0.5"
    assert fix_for("http://10.0.0.5/a", Reason.NON_PUBLIC, detail, seed_stage=False) == (
        "add --allow-network 10.0.0.5/32 to crawl it (a resume reconsiders seeds only: give this URL as a seed)")
    assert fix_for("http://a.invalid/", Reason.DNS, "a.invalid: not found", seed_stage=False).endswith(
        "(a resume reconsiders seeds only: give this URL as a seed)")
