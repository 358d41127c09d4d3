"""A host that goes down mid-crawl is parked, probed on the schedule, and
crawled in full when it comes back (issue 17); one down past the horizon has
its URLs given up with reason host_down, naming the first and last failure.

A real Crawler and SqliteStore with the fakes of tests/test_overflow.py. The
probe schedule is scaled down (a probe base of 50 ms instead of 60 s) so the
test runs in a second; it judges by the schedule's ratios, from the fake
server's side: the attempts made while the host was down are counted there
(6 on an idle machine). A loaded machine can only make fewer attempts (every
politeness wait is a lower bound), never more, so the bound cannot fail
under load.
"""

from __future__ import annotations

import asyncio

from test_overflow import _config, _crawler, fake_result

from courtly.core.health import Health

PROBE_S = 0.05          # stands for 1 min
DOWN_S = 10 * PROBE_S   # stands for 10 min
PAGES = 8
WEB = {
    "https://down.example/": [f"https://down.example/p{i}" for i in range(PAGES)] + ["https://up.example/"],
    **{f"https://down.example/p{i}": [] for i in range(PAGES)},
    "https://up.example/": [f"https://up.example/p{i}" for i in range(PAGES)],
    **{f"https://up.example/p{i}": [] for i in range(PAGES)},
}


def _cfg(**politeness):
    settings = {"delay_s": 0.01, "probe_s_min": PROBE_S, "probe_s_max": 8 * PROBE_S, "ip_rate": 10_000.0}
    return (_config(memory_max=1000, key_memory_max=100)
            .replace("politeness", **{**settings, **politeness})
            .replace("crawl", retries_max=2))


class _Outage:
    """down.example refuses connections from its third page on, for `down_s`
    (forever when None), counted from the first refusal."""

    def __init__(self, c, down_s: float | None) -> None:
        self.c = c
        self.down_s = down_s
        self.pages = 0
        self.down_at: float | None = None
        self.attempts_while_down = 0
        self.fetched: list[str] = []

    def is_down(self, now: float) -> bool:
        if self.down_at is None:
            if self.pages < 3:
                return False
            self.down_at = now
        return self.down_s is None or now < self.down_at + self.down_s

    async def fetch(self, url: str, *, ip: str, headers: dict):
        await asyncio.sleep(0)
        now = self.c.clock.now()
        if url.startswith("https://down.example/"):
            if self.is_down(now):
                self.attempts_while_down += 1
                r = fake_result(url, ip, 0)
                r.error, r.error_detail = "connect", "connection refused"
                return r
            self.pages += 1
        if url.endswith("/robots.txt"):
            return fake_result(url, ip, 404)
        self.fetched.append(url)
        return fake_result(url, ip, 200, b"<html>x</html>")


def _decisions(c) -> list[tuple]:
    return c.store._db.execute("SELECT url, reason, detail, state FROM urls WHERE reason IS NOT NULL").fetchall()


def test_a_host_down_for_ten_probe_units_gets_about_a_dozen_attempts_and_is_crawled_after(tmp_path):
    c, fetcher = _crawler(tmp_path, WEB, _cfg())
    outage = _Outage(c, DOWN_S)
    fetcher.fetch = outage.fetch
    c.add_seeds(["https://down.example/"])
    asyncio.run(asyncio.wait_for(c.run(), 30.0))
    assert outage.down_at is not None
    assert 1 <= outage.attempts_while_down <= 12   # the code before: 21, and 7 of the 9 URLs failed
    assert not [d for d in _decisions(c) if d[0].startswith("https://down.example/")]   # none failed
    assert sorted(u for u in outage.fetched if u.startswith("https://down.example/")) == \
        sorted(u for u in WEB if u.startswith("https://down.example/"))
    assert c.politeness.health("down.example") is Health.HEALTHY
    assert c.politeness.key("down.example").delay_s < 0.1   # resumed at its normal delay, not the back-off
    c.store.close()


def test_a_host_down_past_the_horizon_has_its_urls_given_up_with_the_failure_times(tmp_path):
    c, fetcher = _crawler(tmp_path, WEB, _cfg(down_horizon_s=4 * PROBE_S))
    outage = _Outage(c, None)
    fetcher.fetch = outage.fetch
    c.add_seeds(["https://down.example/"])
    asyncio.run(asyncio.wait_for(c.run(), 30.0))
    given_up = [d for d in _decisions(c) if d[0].startswith("https://down.example/")]
    fetched_down = {u for u in outage.fetched if u.startswith("https://down.example/")}
    assert {d[0] for d in given_up} | fetched_down == {u for u in WEB if u.startswith("https://down.example/")}
    assert {d[1] for d in given_up} == {"host_down"} and {d[3] for d in given_up} == {"failed"}
    assert all("down since" in d[2] and "last failure" in d[2] and "connect" in d[2] for d in given_up)
    assert sorted(u for u in outage.fetched if u.startswith("https://up.example/")) == \
        sorted(u for u in WEB if u.startswith("https://up.example/"))   # the other host was crawled
    assert c.politeness.health("down.example") is Health.DOWN
    c.store.close()


def test_a_parked_host_is_shown_by_explain_stats_and_report_with_since_and_next_probe(tmp_path):
    from courtly.runtime.report import daily_report, explain, stats

    c, fetcher = _crawler(tmp_path, WEB, _cfg(probe_s_min=3600.0, probe_s_max=7200.0))
    outage = _Outage(c, None)

    fetcher.fetch = outage.fetch
    c.add_seeds(["https://down.example/"])

    async def go() -> None:
        crawl = asyncio.create_task(c.run())
        while c.politeness.health("down.example") is not Health.PARKED and not crawl.done():
            await asyncio.sleep(0.01)
        c.stop()          # the next probe is an hour away
        await crawl

    asyncio.run(asyncio.wait_for(go(), 30.0))
    c.store.close()
    assert outage.attempts_while_down == 3        # park_after, then nothing for an hour
    queued = [u for u in WEB if u.startswith("https://down.example/p") and u not in outage.fetched]
    text, found = explain(tmp_path, queued[0])
    assert found and "state      queued" in text
    host = next(line for line in text.splitlines() if line.startswith("host  "))
    assert "parked since" in host and "3 connect failures in a row" in host and "next probe" in host
    assert "down.example  parked since" in stats(tmp_path)
    assert "parked 1" in daily_report(tmp_path) and "down.example  parked since" in daily_report(tmp_path)
    import json

    rows = json.loads(daily_report(tmp_path, as_json=True))["hosts_unhealthy"]
    assert [(r["key"], r["health"], r["failures"], r["kind"]) for r in rows] == [("down.example", "parked", 3, "connect")]
    assert rows[0]["next_probe_at"] >= rows[0]["last_failure_at"] + 3600.0
