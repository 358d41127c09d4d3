"""The real runtime on seeded webs with faults, in virtual time (sim/rtsim.py):
CI's fixed seeds pass, a run reproduces bit for bit, and a broken politeness
or robots rule in the real code is caught by the checker within those seeds."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from courtly.core import politeness
from courtly.runtime import crawler as crawler_module
from courtly.sim.rtcheck import Rule, check_duplicates
from courtly.sim.rtsim import T0, main, run_seed, run_seeds
from courtly.sim.rtweb import ABORTED, Request

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
    assert all(statuses[s] for s in (200, 404, 429, 503, 500, 0)), statuses
    assert any(r.web.leap_at_s is not None for r in results)
    # stopped and resumed from the store: the resumed crawl went on fetching
    assert any(r.web.restart_at_s is not None and r.requests[-1].sent_at - T0 > r.web.restart_at_s for r in results)
    assert statuses[ABORTED]   # an abort cut requests in flight, and the resumed crawl still passed
    assert sum(r.pages_fetched for r in results) > 500


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
    monkeypatch.setattr(crawler_module, "path_of", lambda url: "/robots.txt")   # every path looks allowed
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
