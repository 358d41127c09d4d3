"""The failing hosts of `courtly simweb outage` (sim/outage.py) crawled by
`courtly crawl` and judged from the server's log by `courtly simweb check`
(sim/outage_check.py): issue 17's "done when".

The schedule is scaled down so the test takes seconds: a probe base of
0.25 s stands for 1 min, and the host is down for 4 s (2 s cut, 2 s hung),
which stands for 16 min; the horizon is 10 s, so the challenge host is given
up and the crawl ends by itself (the down host's failures all fall in its 4 s
outage, so it is never given up, however slow the machine). What it proves, from the server's side: the down
host got at most park_after + the schedule's probes (+3 for robots.txt and a
kept-alive connection's retry) attempts while down, not one per delay; none
of its URLs was marked failed; every one was fetched after it came back.
5xx bursts stretch the gaps at least as the doubling asks and the rate
recovers; the challenge host is paused after 10 answers; the slow host's IP
neighbour slowed down. All bounds are lower bounds on waits or upper bounds
on attempts, which load can only help, except the recovery of the burst host.
"""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import time

from crawl_support import courtly_cmd, db_rows, run_courtly

from courtly.sim.outage import DOWN, NEIGHBOUR, SLOW

CONFIG = """
[crawl]
contact = "tests@example.org"
fetch_tasks = 16
politeness_key = "host"     # the five hosts share one registered domain
[politeness]
delay_s = 0.05
crawl_delay_s_max = 0.3
probe_s_min = 0.25
probe_s_max = 2.0
park_after = 3
down_horizon_s = 10.0       # the challenge host is given up (banned) and the crawl ends by itself
ip_rate = 50.0              # the IP rate limit must not be what slows the slow host's neighbour
[fetch]
total_s = 1.0
connect_s = 0.5
[store]
commit_interval_s = 0.2
"""


def _serve(out) -> subprocess.Popen:
    """`courtly simweb outage` as a child process, once it listens."""
    proc = subprocess.Popen(courtly_cmd("simweb", "outage", "--out", str(out), "--pages", "24",
                                        "--refused-s", "2", "--hang-s", "2", "--slow-max-s", "0.2",
                                        "--duration-s", "300"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60.0   # bounded, generous for a loaded machine
    while not (out / "ready.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "simweb outage did not start"
        time.sleep(0.05)
    return proc


def test_failing_hosts_are_backed_off_parked_paused_and_crawled_when_back(tmp_path):
    (tmp_path / "c.toml").write_text(CONFIG)
    web, out = tmp_path / "web", tmp_path / "crawl"
    server = _serve(web)
    try:
        proc = run_courtly("crawl", "--config", str(tmp_path / "c.toml"), "--seeds-file", str(web / "seeds.txt"),
                           "--hosts-file", str(web / "hosts.json"), "--out", str(out), "--quiet",
                           "--allow-network", "127.0.5.0/24", "--duration-s", "90", timeout=150)
        assert proc.returncode == 0, proc.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    check = run_courtly("simweb", "check", str(web / "requests.jsonl"), "--delay-s-min", "0.05",
                        "--park-after", "3", "--probe-s-min", "0.25", "--probe-s-max", "2",
                        "--fetch-total-s", "1.0", "--json")
    rep = json.loads(check.stdout)
    assert check.returncode == 0 and rep["ok"], rep["violations"]
    assert rep["down_attempts"] <= 12      # 6-7 on an idle machine; load can only make fewer
    assert rep["challenge_requests"] >= 10 and rep["burst_gaps_s"]
    failed = db_rows(out, "SELECT url, reason FROM urls WHERE key = ? AND state != 'fetched'", (DOWN,))
    assert failed == []                    # no URL of the down host failed or waits
    given_up = db_rows(out, "SELECT DISTINCT reason FROM urls WHERE key = 'challenge.outage.test' AND state = 'failed'")
    assert given_up == [("banned",)]       # paused, probed, and past the horizon given up
    hosts = {k: json.loads(v) for k, v in db_rows(out, "SELECT key, state FROM hosts")}
    neighbour, slow = hosts[NEIGHBOUR], hosts[SLOW]
    # it answered fast itself: its answers, timed by the crawler, were quicker than the slow host's
    # (both timed on the same loaded machine; an absolute bound would be one on the machine's speed)
    assert statistics.median(neighbour["responses"]) < statistics.median(slow["responses"])
    assert neighbour["delay_s"] >= 0.1                 # ... and was slowed by its IP's slow answers
