"""The failing hosts of sim/outage.py crawled by `courtly crawl`, judged from
the server's log by sim/outage_check.py (issue 17's "done when").

The schedule is scaled down so the test takes seconds: a probe base of
0.25 s stands for 1 min, and the host is down for 4 s (2 s cut, 2 s hung),
which stands for 16 min. What it proves, from the server's side: the down
host got at most park_after + the schedule's probes (+3 for robots.txt and a
kept-alive connection's retry) attempts while down, not one per delay; none
of its URLs was marked failed; every one was fetched after it came back.
5xx bursts stretch the gaps at least as the doubling asks and the rate
recovers; the challenge host is paused after 10 answers; the slow host's IP
neighbour slowed down. All bounds are lower bounds on waits or upper bounds
on attempts, which load can only help, except the recovery of the burst host.
"""

from __future__ import annotations

import asyncio
import json
import threading

from crawl_support import db_rows, run_courtly

from courtly.sim.outage import DOWN, HOSTS, OutageConfig, OutageWeb
from courtly.sim.outage_check import check_outage

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
ip_rate = 50.0              # the IP rate limit must not be what slows the slow host's neighbour
[fetch]
total_s = 1.0
connect_s = 0.5
[store]
commit_interval_s = 0.2
"""


class _Serving:
    """The outage web on its own event loop in a thread, for the test's duration."""

    def __init__(self, config: OutageConfig, log_path) -> None:
        self.web = OutageWeb(config, log_path)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        self.stop = asyncio.Event()
        async with self.web:
            self.ready.set()
            await self.stop.wait()

    def __enter__(self) -> OutageWeb:
        self.thread.start()
        assert self.ready.wait(10.0), "the outage web did not start"
        return self.web

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10.0)


def test_failing_hosts_are_backed_off_parked_paused_and_crawled_when_back(tmp_path):
    cfg = OutageConfig(pages=24, refused_s=2.0, hang_s=2.0)
    (tmp_path / "c.toml").write_text(CONFIG)
    with _Serving(cfg, tmp_path / "requests.jsonl") as web:
        (tmp_path / "hosts.json").write_text(json.dumps(HOSTS))
        (tmp_path / "seeds.txt").write_text("\n".join(web.seeds) + "\n")
        out = tmp_path / "crawl"
        proc = run_courtly("crawl", "--config", str(tmp_path / "c.toml"), "--seeds-file",
                           str(tmp_path / "seeds.txt"), "--hosts-file", str(tmp_path / "hosts.json"),
                           "--out", str(out), "--quiet", "--allow-network", "127.0.5.0/24",
                           "--duration-s", "14", timeout=120)
        assert proc.returncode == 0, proc.stderr
        down_at, up_at = web.state.down_at, web.up_at
        records = web.log.records()
    assert down_at is not None
    rep = check_outage(records, cfg, down_at=down_at, up_at=up_at, delay_s=0.05, park_after=3,
                       probe_s_min=0.25, probe_s_max=2.0)
    assert rep.ok, rep.violations
    assert 3 <= rep.down_attempts <= 12
    assert rep.challenge_requests >= 10 and rep.burst_gaps
    failed = db_rows(out, "SELECT url, reason FROM urls WHERE key = ? AND state != 'fetched'", (DOWN,))
    assert failed == []                    # no URL of the down host failed or waits
    hosts = {k: json.loads(v) for k, v in db_rows(out, "SELECT key, state FROM hosts")}
    neighbour = hosts["neighbour.outage.test"]
    assert max(neighbour["responses"]) < 0.05          # it answered fast itself ...
    assert neighbour["delay_s"] >= 0.1                 # ... and was slowed by its IP's slow answers
