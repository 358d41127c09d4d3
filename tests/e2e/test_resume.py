"""kill -9 at several points, then the same command again: nothing is lost.

Also: Ctrl-C (SIGINT) stops gracefully and the crawl resumes, and bad input
gets one line naming the problem, never a traceback.
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from courtly.runtime.exits import Exit
from crawl_support import check, courtly_cmd, crawl_args, db_rows, kill_when, log_lines, run_courtly, write_config

pytestmark = pytest.mark.slow

SIM_ARGS = ["--profile", "demo", "--hosts", "6", "--ips", "4", "--pages-per-host", "25", "--seed", "3"]


def _start(web, out, config):
    return subprocess.Popen(courtly_cmd(*crawl_args(web, out, config)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def test_sigkill_at_several_points_then_resume_loses_nothing(tmp_path, simweb_factory):
    web = simweb_factory(*SIM_ARGS)
    out = tmp_path / "crawl"
    config = write_config(tmp_path / "c.toml")
    kills = 0
    for at in (6, 20, 40, 70):
        proc = _start(web, out, config)
        if kill_when(proc, web, at):
            kills += 1
    assert kills >= 3, "the crawl finished before it could be killed; make the web bigger"
    final = run_courtly(*crawl_args(web, out, config), timeout=400)
    assert final.returncode == 0, final.stderr[-3000:]

    # the servers saw a polite, complete crawl across all the restarts
    report = check(web, coverage_min=1.0, duplicate_fetches_max=10_000)
    assert report.ok, report.render()
    assert report.coverage.missing == ()
    # nothing left behind, nothing unexplained
    assert db_rows(out, "SELECT count(*) FROM urls WHERE state = 'queued'") == [(0,)]
    assert db_rows(out, "SELECT count(*) FROM urls WHERE state != 'fetched' AND reason IS NULL") == [(0,)]
    # every fetched page is in a WARC file that reads back cleanly (repaired after each kill)
    from courtly.shell.warc import iter_records

    warc_dir = out / "warc"
    assert not list(warc_dir.glob("*.open"))
    in_warc = set()
    for w in sorted(warc_dir.glob("*.warc.gz")):
        for rec in iter_records(w):
            if rec.rec_type in ("response", "revisit"):
                in_warc.add(rec.warc_headers["WARC-Target-URI"])
    fetched = {u for (u,) in db_rows(out, "SELECT url FROM urls WHERE state = 'fetched'")}
    assert fetched <= in_warc, sorted(fetched - in_warc)[:5]


def test_ctrl_c_stops_gracefully_and_the_same_command_resumes(tmp_path, simweb_factory):
    web = simweb_factory(*SIM_ARGS)
    out = tmp_path / "crawl"
    config = write_config(tmp_path / "c.toml")
    proc = _start(web, out, config)
    deadline = time.monotonic() + 60
    while log_lines(web) < 15 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "crawl ended too early"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == Exit.SIGINT, err.decode()[-2000:]   # 130: stopped by a signal, resumable
    assert b"Traceback" not in err
    assert b"stopped by SIGINT, state saved: run the same command again to resume" in err, err[-2000:]
    queued = db_rows(out, "SELECT count(*) FROM urls WHERE state = 'queued'")[0][0]
    assert queued > 0, "stopped crawl should leave work queued"
    final = run_courtly(*crawl_args(web, out, config), timeout=400)
    assert final.returncode == 0, final.stderr[-2000:]
    assert db_rows(out, "SELECT count(*) FROM urls WHERE state = 'queued'") == [(0,)]
    report = check(web, coverage_min=1.0, duplicate_fetches_max=10_000)
    assert report.ok, report.render()


@pytest.mark.parametrize("args, message", [
    (["crawl", "http://a.test/", "--config", "{tmp}/bad.toml"], "unknown key crawl.nope"),
    (["crawl", "ftp://a.test/"], "bad seed URL"),
    (["crawl", "http://exa mple.com/"], "bad seed URL"),
    (["crawl", "--seeds-file", "{tmp}/missing.txt"], "cannot read seeds file"),
    (["crawl", "--seeds-file", "{tmp}/seeds.txt"], "seeds.txt:2"),
    (["crawl", "http://a.test/", "--allow-network", "10.0.0.0/33"], "--allow-network"),
    (["crawl", "http://a.test/", "--resolve", "nocolon"], "HOST:IP"),
    (["crawl", "http://a.test/", "--out", "/proc/courtly-cannot-write"], "cannot write to crawl folder"),
    (["crawl"], "no seeds"),
    (["stats", "--out", "{tmp}/nothing"], "not a crawl folder"),
])
def test_bad_input_gets_one_line_naming_the_problem(tmp_path, args, message):
    (tmp_path / "bad.toml").write_text("[crawl]\nnope = 1\n")
    (tmp_path / "seeds.txt").write_text("http://ok.test/\njavascript:alert(1)\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = run_courtly(*args, "--out", str(tmp_path / "out")) if "--out" not in args and args[0] == "crawl" \
        else run_courtly(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("courtly: error:"), proc.stderr
    assert message in lines[0], lines[0]
    assert not (tmp_path / "out" / "crawl.db").exists()


def test_second_crawl_on_the_same_folder_is_refused(tmp_path, simweb_factory):
    web = simweb_factory(*SIM_ARGS)
    out = tmp_path / "crawl"
    config = write_config(tmp_path / "c.toml")
    first = _start(web, out, config)
    try:
        deadline = time.monotonic() + 30
        while not (out / "crawl.db").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = run_courtly(*crawl_args(web, out, config))
        assert second.returncode == 2 and "in use by another courtly crawl" in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
