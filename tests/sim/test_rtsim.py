"""The real runtime on seeded webs with faults, in virtual time (sim/rtsim.py):
CI's fixed seeds pass, a run reproduces bit for bit, and a broken politeness
or robots rule in the real code is caught by the checker within those seeds."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from courtly.core import politeness
from courtly.runtime import host_batch
from courtly.sim import vloop
from courtly.sim.rtcheck import CheckLimits, Rule, check_duplicates, check_ips, check_keys, check_robots
from courtly.sim.rtsim import T0, config_for, main, run_seed, run_seeds
from courtly.sim.rtweb import ABORTED, HostFaults, Request, RuntimeWeb, SimHost, draw_web

CI_SEEDS = range(1, 51)


def _first_caught(rules: set[Rule]):
    """The first CI seed whose run breaks one of `rules`, and that violation."""
    for seed in CI_SEEDS:
        r = run_seed(seed)
        hits = [v for v in r.violations if v.rule in rules]
        if hits:
            return seed, hits[0]
    return None, None


def test_the_fifty_ci_seeds_with_faults_pass_every_check():
    results = run_seeds(CI_SEEDS)
    failed = [f"seed {r.seed}: {r.violations[0].render()}" for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    statuses = Counter(q.status for r in results for q in r.requests)
    # the faults were drawn and met: throttles, server errors, refused connections, robots 404/5xx
    assert all(statuses[s] for s in (200, 304, 404, 429, 503, 500, 0)), statuses   # 304: a search crawl's recrawls
    assert any(r.web.leap_at_s is not None for r in results)
    # stopped and resumed from the store: the resumed crawl went on fetching
    assert any(r.web.restart_at_s is not None and r.requests[-1].sent_at - T0 > r.web.restart_at_s for r in results)
    assert statuses[ABORTED]   # an abort cut requests in flight, and the resumed crawl still passed
    # the store failed under a crawl, which went on once it was back or stopped past store.down_s_max
    assert any(r.store_failures and not r.store_down for r in results)
    assert any(r.store_down for r in results)
    # the process froze inside a commit and inside a fetch answer, and politeness held after it
    assert {r.web.freeze_in for r in results if r.froze} == {"commit", "fetch"}
    assert any(r.froze and r.web.freeze_s > config_for(r.seed).crawl.lease_s for r in results)   # past a lease
    assert sum(r.pages_fetched for r in results) > 500


# soak seeds whose clock leaps past crawl.lease_s (300 s) while a page is in flight:
# the main loop took the lease back from the live task and fetched the URL twice
LEASE_LEAP_SEEDS = (138, 223, 388)


def _leap_only(seed: int):
    """The seed's run without the faults drawn after the leap (a store outage
    would pause fetching, so that no page is in flight when the clock leaps)."""
    return run_seed(seed, web=dataclasses.replace(draw_web(seed), store_down_at_s=None, freeze_at_s=None))


@pytest.mark.parametrize("seed", LEASE_LEAP_SEEDS)
def test_a_clock_leap_past_the_lease_during_a_fetch_requests_no_url_twice(seed):
    r = _leap_only(seed)
    leap = T0 + r.web.leap_at_s
    assert r.web.leap_s > config_for(seed, r.web.intent).crawl.lease_s
    assert any(q.sent_at < leap < q.done_at for q in r.requests)   # a page was in flight
    assert not r.violations, r.violations[0].render()


def test_a_wall_clock_step_past_the_lease_during_a_fetch_requests_no_url_twice(monkeypatch):
    # the clock's now() jumps but the loop's timers do not (an NTP step, not a suspend)
    monkeypatch.setattr(vloop.VirtualLoop, "leap", lambda self, s: setattr(self, "step_s", self.step_s + s))
    monkeypatch.setattr(vloop.VirtualLoop, "step_s", 0.0, raising=False)
    monkeypatch.setattr(vloop.VirtualClock, "now", lambda self: self.loop.time() + self.loop.step_s)
    for seed in LEASE_LEAP_SEEDS[:2]:
        r = _leap_only(seed)
        assert any(q.sent_at < T0 + r.web.leap_at_s + r.web.leap_s < q.done_at for q in r.requests)
        assert not r.violations, r.violations[0].render()


def test_the_same_seed_gives_the_same_request_log_bit_for_bit():
    a, b = run_seed(7), run_seed(7)
    assert len(a.requests) > 10
    assert a.requests == b.requests
    assert a.violations == b.violations


def test_a_key_delay_ignored_by_the_real_code_is_caught(monkeypatch):
    ready_at = politeness.Politeness.ready_at
    monkeypatch.setattr(politeness.Politeness, "ready_at", lambda self, key, now: min(ready_at(self, key, now), now))
    seed, v = _first_caught({Rule.KEY_GAP})
    assert seed is not None and "needs" in v.detail


def test_per_ip_limits_ignored_by_the_real_code_are_caught(monkeypatch):
    monkeypatch.setattr(politeness.Politeness, "ip_ready_at", lambda self, ip, now, key=None: now)
    seed, v = _first_caught({Rule.IP_CONCURRENCY, Rule.IP_RATE})
    assert seed is not None and "203.0.113." in v.detail


def test_a_crawl_delay_ignored_by_the_real_code_is_caught(monkeypatch):
    monkeypatch.setattr(politeness.Politeness, "set_crawl_delay", lambda self, key, delay, now: None)
    seed, v = _first_caught({Rule.KEY_GAP})
    assert seed is not None


def test_a_retry_after_ignored_by_the_real_code_is_caught(monkeypatch):
    monkeypatch.setattr(politeness, "parse_retry_after", lambda value, now: None)
    seed, v = _first_caught({Rule.KEY_GAP})
    assert seed is not None and ("answered 429" in v.detail or "answered 503" in v.detail)


def test_robots_rules_ignored_by_the_real_code_are_caught(monkeypatch):
    monkeypatch.setattr(host_batch, "path_of", lambda url: "/robots.txt")   # every path looks allowed
    seed, v = _first_caught({Rule.ROBOTS_DISALLOWED, Rule.ROBOTS_UNREACHABLE})
    assert seed is not None


def _req(url: str, at: float, status: int) -> Request:
    return Request(url, "k0.test", "/" + url.rsplit("/", 1)[1], "203.0.113.10", T0 + at, T0 + at + 0.1, status, "")


def test_a_page_requested_again_after_a_final_answer_is_a_duplicate_but_a_retry_after_503_is_not():
    log = [_req("http://k0.test/a", 0, 503), _req("http://k0.test/a", 5, 200), _req("http://k0.test/a", 9, 200)]
    found = check_duplicates(log, T0)
    assert [(v.rule, v.at) for v in found] == [(Rule.DUPLICATE, 9.0)]


def test_the_command_prints_each_failing_seed_with_how_to_reproduce_it_and_exits_1(monkeypatch, capsys):
    ready_at = politeness.Politeness.ready_at
    monkeypatch.setattr(politeness.Politeness, "ready_at", lambda self, key, now: min(ready_at(self, key, now), now))
    assert main(["--seeds", "2"]) == 1
    out = capsys.readouterr().out
    assert "seed 1: FAILED key_gap" in out and "reproduce: courtly sim runtime --seed 1" in out
    assert "2 seeds (1..2), 2 failed" in out


def test_the_command_summarises_passing_seeds_as_json(capsys):
    assert main(["--seeds", "3", "--first", "4", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["seeds"] == 3 and summary["failed"] == 0 and summary["requests"] > 0


def test_a_failing_seed_of_a_bigger_web_names_the_size_in_its_reproduce_command(monkeypatch, capsys):
    monkeypatch.setattr(politeness.Politeness, "ip_ready_at", lambda self, ip, now, key=None: now)
    assert main(["--seeds", "1", "--first", "2", "--keys-max", "8"]) == 1
    assert "reproduce: courtly sim runtime --seed 2 --keys-max 8" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--seeds", "0"], ["--first", "-1"], ["--keys-max", "1"], ["--pages-max", "999"]])
def test_the_command_refuses_bad_counts_with_status_2(argv, capsys):
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


def _web(robots: str = "ok", crawl_delay: float | None = None) -> RuntimeWeb:
    host = SimHost("k0.test", "k0.test", "203.0.113.10", ("/", "/a"), {"/": (), "/a": ()}, ("/private/",),
                   crawl_delay, HostFaults(robots=robots))
    return RuntimeWeb(1, (host,), ("http://k0.test/",))


def _at(path: str, sent: float, done: float, status: int = 200, retry_after: str = "") -> Request:
    return Request(f"http://k0.test{path}", "k0.test", path, "203.0.113.10", T0 + sent, T0 + done, status, retry_after)


def test_the_key_gap_counts_retry_after_and_a_known_crawl_delay():
    web, lim = _web(crawl_delay=5.0), CheckLimits()
    polite = [_at("/robots.txt", 0, 1), _at("/", 6, 7, 503, "30"), _at("/a", 37, 38)]
    assert check_keys(web, polite, lim, T0) == []
    early = [_at("/robots.txt", 0, 1), _at("/", 6, 7, 503, "30"), _at("/a", 20, 21)]
    assert [v.rule for v in check_keys(web, early, lim, T0)] == [Rule.KEY_GAP]
    no_crawl_delay_wait = [_at("/robots.txt", 0, 1), _at("/", 2, 3)]
    assert [v.rule for v in check_keys(web, no_crawl_delay_wait, lim, T0)] == [Rule.KEY_GAP]


def test_robots_rules_are_judged_by_the_checkers_own_matcher():
    lim = CheckLimits()
    assert [v.rule for v in check_robots(_web(), [_at("/", 0, 1)], lim, T0)] == [Rule.ROBOTS_FIRST]
    seen = [_at("/robots.txt", 0, 1), _at("/private/x", 2, 3)]
    assert [v.rule for v in check_robots(_web(), seen, lim, T0)] == [Rule.ROBOTS_DISALLOWED]
    down = [_at("/robots.txt", 0, 1, 503), _at("/", 2, 3)]
    assert [v.rule for v in check_robots(_web("5xx"), down, lim, T0)] == [Rule.ROBOTS_UNREACHABLE]


def test_more_than_ip_rate_starts_within_a_second_on_one_address_are_caught():
    log = [_at(f"/{i}", i * 0.1, i * 0.1 + 0.01) for i in range(6)]
    assert [v.rule for v in check_ips(log, CheckLimits(ip_rate=5.0), T0)] == [Rule.IP_RATE]
    assert check_ips(log[:5], CheckLimits(ip_rate=5.0), T0) == []
