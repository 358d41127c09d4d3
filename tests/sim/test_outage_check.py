"""The outage checker (sim/outage_check.py) on made-up logs: it passes a crawl
that keeps the schedule and names each way of breaking it."""

from __future__ import annotations

import dataclasses

from courtly.sim.outage import BURST, CHALLENGE, DOWN, NEIGHBOUR, OutageConfig
from courtly.sim.outage_check import check_outage, probes_in
from courtly.sim.reqlog import LogRecord

CFG = OutageConfig(pages=4)
ARGS = dict(down_at=100.0, up_at=116.0, delay_s=0.1, park_after=3, probe_s_min=1.0, probe_s_max=8.0)


def rec(host: str, at: float, path: str = "/p0", status: int = 200, tag: str | None = None) -> LogRecord:
    return LogRecord(arrived_at=at, completed_at=at + 0.01, host=host, conn="c", ip="127.0.5.1", method="GET",
                     path=path, status=status, bytes=10, conditional=False, tag=tag)


def good_log(down_attempts: list[float]) -> list[LogRecord]:
    recs = [rec(DOWN, 99.0 + i * 0.2, f"/p{i}") for i in range(2)]
    recs += [rec(DOWN, t, "", 0, "outage_refused") for t in down_attempts]
    recs += [rec(DOWN, 117.0 + i * 0.2, f"/p{i}") for i in range(2, 4)]
    recs += [rec(NEIGHBOUR, t) for t in (0.0, 0.2, 1.0)]
    return recs


def test_probes_in_counts_an_exponential_schedule_with_a_cap():
    assert probes_in(15.0, 1.0) == 4            # 1 + 2 + 4 + 8
    assert probes_in(14.9, 1.0) == 3
    assert probes_in(31.0, 1.0, 8.0) == 6       # 1 + 2 + 4 + 8 + 8 + 8
    assert probes_in(0.0, 1.0) == 0


def test_a_down_host_probed_on_the_schedule_passes():
    attempts = [100.0, 100.2, 100.6, 101.6, 103.6, 107.6, 115.6]
    rep = check_outage(good_log(attempts), CFG, **ARGS)
    assert rep.ok, rep.violations
    assert rep.down_attempts == 7 and rep.down_bound == 3 + 4 + 3


def test_a_down_host_hammered_at_its_delay_fails():
    attempts = [100.0 + 0.1 * i for i in range(150)]
    rep = check_outage(good_log(attempts), CFG, **ARGS)
    assert any(v.startswith("down: 150 attempts") for v in rep.violations)


def test_a_probe_sooner_than_the_schedule_fails():
    attempts = [100.0, 100.2, 100.6, 101.6, 102.7]      # the second probe 1 s after the first, not 2
    assert any("probe 2 came" in v for v in check_outage(good_log(attempts), CFG, **ARGS).violations)


def test_a_hung_attempt_noticed_late_by_a_starved_server_ends_at_the_crawlers_deadline():
    # the third attempt hangs; the client gives up after its 1 s deadline (102.6) and probes 1 s
    # later (103.6), but the server notices the close only at 103.599, in the same wake-up
    recs = good_log([100.0, 100.2, 103.6])
    hung = rec(DOWN, 101.6, "", 0, "outage_hang")
    recs.append(dataclasses.replace(hung, completed_at=103.599, aborted=True))
    assert any("probe 1 came" in v for v in check_outage(recs, CFG, **ARGS).violations)
    assert check_outage(recs, CFG, **ARGS, fetch_total_s=1.0).ok
    # a probe at once after the deadline still fails
    early = [r for r in recs if r.arrived_at != 103.6] + [rec(DOWN, 102.7, "", 0, "outage_refused")]
    assert any("probe 1 came" in v for v in check_outage(early, CFG, **ARGS, fetch_total_s=1.0).violations)


def test_pages_not_fetched_after_the_host_came_back_fail():
    recs = [r for r in good_log([100.0]) if r.path != "/p3"]
    assert any("never fetched" in v for v in check_outage(recs, CFG, **ARGS).violations)


def test_5xx_answers_must_double_the_gap_and_the_rate_must_recover():
    ok = [rec(BURST, 0.0), rec(BURST, 0.2, status=500), rec(BURST, 0.45, status=502),
          rec(BURST, 0.9, status=504), rec(BURST, 2.0), rec(BURST, 2.2), rec(BURST, 2.4), rec(BURST, 2.6)]
    assert check_outage(good_log([100.0]) + ok, CFG, **ARGS).ok
    hammered = [rec(BURST, i * 0.11, status=500 if 1 <= i <= 3 else 200) for i in range(8)]
    rep = check_outage(good_log([100.0]) + hammered, CFG, **ARGS)
    assert any(v.startswith("burst:") and "doubling" in v for v in rep.violations)


def test_a_challenge_host_must_be_paused_after_ban_run_answers():
    hammered = [rec(CHALLENGE, i * 0.1, f"/p{i}", tag="outage_challenge") for i in range(40)]
    rep = check_outage(good_log([100.0]) + hammered, CFG, **ARGS, ban_run=10)
    assert any(v.startswith("challenge: 40 requests") for v in rep.violations)


def test_a_neighbour_never_slowed_fails():
    recs = [r for r in good_log([100.0]) if r.host != NEIGHBOUR]
    recs += [rec(NEIGHBOUR, i * 0.11) for i in range(5)]
    assert any(v.startswith("slow IP") for v in check_outage(recs, CFG, **ARGS).violations)
