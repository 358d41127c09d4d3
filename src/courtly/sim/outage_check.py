"""Judging a crawl of the failing hosts (`outage.py`) from the server's log.

Written from the server's side and from the documented schedule, not from
the crawler's code (as `check.py` is): given the back-off settings the crawl
ran with, each rule is a bound on what the log may show.

- **down**: while down.outage.test was down, at most `park_after` attempts
  plus one probe per step of the schedule (`probe_s_min`, doubling: k probes
  fit in a window W when probe_s_min x (2^k - 1) <= W) plus `slack`
  (robots.txt, one retry of a reused connection); from the parking on, the
  k-th probe comes at least probe_s_min x 2^k (capped at probe_s_max) after
  the failure before it; every page is answered 200 once it is back.
  A hung attempt ended for the client when it gave up, which the server
  sees only when it notices the close: a starved server notices it late,
  in the same wake-up as the next attempt (under load a gap of 0.001 s was
  logged where the crawler waits 0.25 s). So a hung attempt's failure
  is taken at the earlier of that notice and its arrival + `fetch_total_s`
  (the crawler's deadline: it had given up by then).
- **burst**: after the j-th 5xx answer in a row the gap to the next request
  is at least `delay_s` x 2^j (the doubling; `probe_s_min` once parked), up
  to `backoff_s_max`; after the burst the gaps come back down.
- **challenge**: at most `ban_run` requests once the challenge began, then
  only the probes of the schedule (+ `slack`): paused, not hammered.
- **slow IP**: a later gap of neighbour.outage.test is at least
  `neighbour_gap_factor` x `delay_s` (its IP's slowness slowed it).

`check_outage(records, ...)` returns an `OutageReport`: figures and
violations, each a sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from courtly.sim.outage import BURST, CHALLENGE, DOWN, NEIGHBOUR, OutageConfig
from courtly.sim.reqlog import LogRecord

__all__ = ["OutageReport", "check_outage", "probes_in"]

GAP_TOLERANCE_S = 0.02   # server-side arrival vs client-side completion, both on one host's clock
PROBE_SLACK = 0.2        # a hung request ends on the server a little after the client gave up


@dataclass(slots=True)
class OutageReport:
    down_attempts: int = 0
    down_bound: int = 0
    down_pages_after: int = 0
    burst_gaps: list[float] = field(default_factory=list)
    challenge_requests: int = 0
    neighbour_gap_max: float = 0.0
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def probes_in(window_s: float, probe_s_min: float, probe_s_max: float = math.inf) -> int:
    """Probes an exponential schedule from `probe_s_min`, doubling up to
    `probe_s_max`, fits in `window_s`."""
    n, t, step = 0, 0.0, probe_s_min
    while t + step <= window_s and n < 10_000:
        t += step
        n += 1
        step = min(step * 2, probe_s_max)
    return n


def _host(r: LogRecord) -> str:
    return r.host.split(":")[0]


def check_outage(records: Iterable[LogRecord], config: OutageConfig, *, down_at: float, up_at: float,
                 delay_s: float, park_after: int, probe_s_min: float, probe_s_max: float = 21600.0,
                 backoff_s_max: float = 3600.0,
                 ban_run: int = 10, neighbour_gap_factor: float = 2.0, slack: int = 3,
                 fetch_total_s: float = math.inf) -> OutageReport:
    rep = OutageReport()
    recs = sorted(records, key=lambda r: r.arrived_at)
    by_host: dict[str, list[LogRecord]] = {}
    for r in recs:
        by_host.setdefault(_host(r), []).append(r)
    _down(rep, by_host.get(DOWN, []), config, down_at, up_at, park_after, probe_s_min, probe_s_max, slack,
          fetch_total_s)
    _burst(rep, [r for r in by_host.get(BURST, []) if r.path != "/robots.txt"], delay_s, park_after, probe_s_min,
           backoff_s_max)
    challenged = [r for r in by_host.get(CHALLENGE, []) if r.tag == "outage_challenge"]
    if challenged:
        rep.challenge_requests = len(challenged)
        paused_at = challenged[min(ban_run, len(challenged)) - 1].completed_at
        allowed = ban_run + probes_in(challenged[-1].arrived_at - paused_at, probe_s_min, probe_s_max) + slack
        if rep.challenge_requests > allowed:
            rep.violations.append(f"challenge: {rep.challenge_requests} requests after the challenge began "
                                  f"(a pause after {ban_run} and its probes allow {allowed})")
    gaps = _gaps(by_host.get(NEIGHBOUR, []))
    rep.neighbour_gap_max = max(gaps, default=0.0)
    if rep.neighbour_gap_max < neighbour_gap_factor * delay_s:
        rep.violations.append(f"slow IP: the neighbour's longest gap {rep.neighbour_gap_max:.3f} s is under "
                              f"{neighbour_gap_factor:g} x delay_s")
    return rep


def _gaps(recs: list[LogRecord]) -> list[float]:
    """Completion of each request to the arrival of the next."""
    return [b.arrived_at - a.completed_at for a, b in zip(recs, recs[1:])]


def _down(rep: OutageReport, recs: list[LogRecord], cfg: OutageConfig, down_at: float, up_at: float,
          park_after: int, probe_s_min: float, probe_s_max: float, slack: int, fetch_total_s: float) -> None:
    during = [r for r in recs if down_at <= r.arrived_at < up_at]
    # a request cut on a kept-alive connection and its retry on a new one are one attempt
    attempts = [r for i, r in enumerate(during)
                if not (i and r.path == "" and during[i - 1].path and r.arrived_at - during[i - 1].completed_at < 1.0)]
    rep.down_attempts = len(attempts)
    rep.down_bound = park_after + probes_in(up_at - down_at, probe_s_min, probe_s_max) + slack
    if rep.down_attempts > rep.down_bound:
        rep.violations.append(f"down: {rep.down_attempts} attempts while down for {up_at - down_at:.1f} s "
                              f"(the schedule allows {rep.down_bound})")
    # from the parking on, the k-th probe waits at least probe_s_min x 2^k (capped): a lower
    # bound (load only adds), checked within PROBE_SLACK for the server's view of a hung request
    ended = [min(a.completed_at, a.arrived_at + fetch_total_s) if a.tag == "outage_hang" else a.completed_at
             for a in attempts]
    gaps = [b.arrived_at - end for end, b in zip(ended, attempts[1:])]
    for k, gap in enumerate(gaps[park_after - 1:]):
        need = min(probe_s_min * 2 ** k, probe_s_max)
        if gap < need * (1 - PROBE_SLACK):
            rep.violations.append(f"down: probe {k + 1} came {gap:.3f} s after the last failure, "
                                  f"under the schedule's {need:.3f} s")
            break
    pages = {r.path for r in recs if r.arrived_at >= up_at and r.status == 200 and r.path.startswith("/p")}
    rep.down_pages_after = len(pages)
    answered_before = {r.path for r in recs if r.arrived_at < down_at and r.status == 200}
    missing = {f"/p{i}" for i in range(cfg.pages)} - pages - answered_before
    if missing:
        rep.violations.append(f"down: {len(missing)} pages never fetched after it came back, e.g. {min(missing)}")


def _burst(rep: OutageReport, recs: list[LogRecord], delay_s: float, park_after: int, probe_s_min: float,
           backoff_s_max: float) -> None:
    """After the j-th 5xx in a row the next request waits at least delay_s x 2^j
    (the doubling), or probe_s_min once the key is parked; load only adds."""
    gaps = _gaps(recs)
    rep.burst_gaps = gaps
    run = 0
    for i, r in enumerate(recs[:-1]):
        run = run + 1 if r.status >= 500 else 0
        if not run:
            continue
        need = probe_s_min if run >= park_after else min(delay_s * 2 ** run, backoff_s_max)
        if gaps[i] < need - GAP_TOLERANCE_S:
            rep.violations.append(f"burst: {gaps[i]:.3f} s after {run} 5xx answers in a row (the last {r.status}), "
                                  f"under the {need:.3f} s the doubling asks")
    last_5xx = max((i for i, r in enumerate(recs) if r.status >= 500), default=None)
    if last_5xx is not None and last_5xx + 3 < len(recs):
        worst = max(gaps[:last_5xx + 1])
        if gaps[-1] >= worst:
            rep.violations.append(f"burst: the rate did not recover (last gap {gaps[-1]:.3f} s, worst {worst:.3f} s)")
