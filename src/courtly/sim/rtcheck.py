"""The checker of a runtime simulation: judges a run from the fake server's
request log (sim/rtweb.Request rows) and the crawl's store, never from what
the crawler says about itself.

Rules (each a `Rule`; a run's violations come in the order of the log):

- KEY_OVERLAP: per politeness key (the registered domain, `registered_domain`
  of sim/model, not the crawler's code), no request starts before the one
  before it was answered.
- KEY_GAP: per key, next.sent_at - prev.done_at >= the floor: max(delay_s,
  the smaller Crawl-delay of the two hosts (capped at crawl_delay_s_max) once
  both robots.txt were answered); twice that after a failure of the host (5xx,
  429, no answer); after a 429/503 with Retry-After R, at least min(R,
  backoff_s_max).
- IP_CONCURRENCY / IP_RATE: per address, at most `ip_concurrency` requests
  overlap, and no `ip_rate` + 1 requests start within one second.
- ROBOTS_FIRST: a page of a host is requested only after a robots.txt
  request of that host was answered; ROBOTS_UNREACHABLE: a host whose
  robots.txt is 5xx or unreachable gets no other request (disallow all);
  ROBOTS_DISALLOWED: no path its robots.txt disallows (sim/robotsrule, an
  independent matcher).
- DUPLICATE: a URL is not requested again after a final answer (2xx, 3xx,
  4xx but 429), unless a recrawl may (search intent: after the shortest
  interval of its tiers), or the crawl stopped for its store being down
  before the store settled the URL, and the same command resumed it. A request the crawler cut (an abort, status -1) is no answer,
  but it counts for the gaps: the server saw it arrive.
- LOST: every link of a page answered 200 is in the store (queued, fetched
  or decided) at the end (after a stop for a store down past
  `store.down_s_max`, the resumed crawl's store; an answer the store had not
  settled before that stop was never acknowledged, so its links count only
  through the resumed crawl's own answer for the page); NO_REASON: every URL
  skipped or failed has a reason;
  LEFT_QUEUED: a crawl that ended by itself left nothing queued.

The tolerance is a microsecond: the run is in virtual time, which has no
scheduling jitter.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import StrEnum
from typing import Iterable, NamedTuple, Sequence

from courtly.sim.model import registered_domain
from courtly.sim.robotsrule import robots_allows
from courtly.sim.rtweb import ABORTED, Request, RuntimeWeb

__all__ = ["Rule", "Violation", "CheckLimits", "UrlRow", "check_run"]

TOLERANCE_S = 1e-6
_RETRYABLE = frozenset({ABORTED, 0, 429, 500, 502, 503, 504})


class Rule(StrEnum):
    KEY_OVERLAP = "key_overlap"
    KEY_GAP = "key_gap"
    IP_CONCURRENCY = "ip_concurrency"
    IP_RATE = "ip_rate"
    ROBOTS_FIRST = "robots_first"
    ROBOTS_UNREACHABLE = "robots_unreachable"
    ROBOTS_DISALLOWED = "robots_disallowed"
    DUPLICATE = "duplicate"
    LOST = "lost"
    NO_REASON = "no_reason"
    LEFT_QUEUED = "left_queued"
    STALLED = "stalled"
    CRASHED = "crashed"


class Violation(NamedTuple):
    rule: Rule
    at: float
    detail: str

    def render(self) -> str:
        return f"{self.rule} at +{self.at:.3f} s: {self.detail}"


class UrlRow(NamedTuple):
    url: str
    state: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class CheckLimits:
    delay_s: float = 1.0
    crawl_delay_s_max: float = 30.0
    backoff_s_max: float = 3600.0
    ip_concurrency: int = 4
    ip_rate: float = 5.0
    token: str = "courtly"
    recrawl_s_min: float | None = None    # a recrawl may refetch a URL this long after a final answer


def _failed(r: Request) -> bool:
    """A failure of the host (an aborted request, cut by the crawler, is none)."""
    return r.status == 0 or r.status == 429 or r.status >= 500


def _robots_answered(web: RuntimeWeb, log: Sequence[Request]) -> dict[str, float]:
    """host -> when its robots.txt was first answered 200 (its rules known)."""
    out: dict[str, float] = {}
    for r in log:
        if r.path == "/robots.txt" and r.status == 200 and r.host not in out:
            out[r.host] = r.done_at
    return out


def _crawl_delay(web: RuntimeWeb, host: str, at: float, known: dict[str, float]) -> float:
    h = web.by_name[host]
    if h.crawl_delay_s is None or known.get(host, float("inf")) > at:
        return 0.0
    return h.crawl_delay_s


def _required_gap(web: RuntimeWeb, a: Request, b: Request, known: dict[str, float], lim: CheckLimits) -> float:
    crawl = min(_crawl_delay(web, a.host, a.done_at, known), _crawl_delay(web, b.host, a.done_at, known))
    floor = max(lim.delay_s, min(crawl, lim.crawl_delay_s_max))
    need = 2 * floor if _failed(a) else floor
    if a.status in (429, 503) and a.retry_after.isdigit():
        need = max(need, min(float(a.retry_after), lim.backoff_s_max))
    return need


def check_keys(web: RuntimeWeb, log: Sequence[Request], lim: CheckLimits, t0: float) -> list[Violation]:
    known = _robots_answered(web, log)
    by_key: dict[str, list[Request]] = defaultdict(list)
    for r in log:
        by_key[registered_domain(r.host)].append(r)
    out = []
    for key, rs in by_key.items():
        rs.sort(key=lambda r: r.sent_at)
        for a, b in zip(rs, rs[1:]):
            if b.sent_at < a.done_at - TOLERANCE_S:
                out.append(Violation(Rule.KEY_OVERLAP, b.sent_at - t0,
                                     f"{b.url} sent while {a.url} was in flight (key {key})"))
                continue
            need = _required_gap(web, a, b, known, lim)
            gap = b.sent_at - a.done_at
            if gap < need - TOLERANCE_S:
                out.append(Violation(Rule.KEY_GAP, b.sent_at - t0,
                                     f"{b.url} sent {gap:.3f} s after {a.url} was answered {a.status} "
                                     f"(key {key} needs {need:.3f} s)"))
    return out


def check_ips(log: Sequence[Request], lim: CheckLimits, t0: float) -> list[Violation]:
    by_ip: dict[str, list[Request]] = defaultdict(list)
    for r in log:
        by_ip[r.ip].append(r)
    out = []
    rate = int(lim.ip_rate)
    for ip, rs in by_ip.items():
        rs.sort(key=lambda r: r.sent_at)
        ends: list[float] = []
        for i, r in enumerate(rs):
            ends = [e for e in ends if e > r.sent_at + TOLERANCE_S] + [r.done_at]
            if len(ends) > lim.ip_concurrency:
                out.append(Violation(Rule.IP_CONCURRENCY, r.sent_at - t0,
                                     f"{len(ends)} requests in flight on {ip} ({r.url})"))
            if i >= rate and r.sent_at - rs[i - rate].sent_at < 1.0 - TOLERANCE_S:
                out.append(Violation(Rule.IP_RATE, r.sent_at - t0,
                                     f"{rate + 1} requests to {ip} within "
                                     f"{r.sent_at - rs[i - rate].sent_at:.3f} s ({r.url})"))
    return out


def check_robots(web: RuntimeWeb, log: Sequence[Request], lim: CheckLimits, t0: float) -> list[Violation]:
    answered: dict[str, float] = {}
    out = []
    for r in sorted(log, key=lambda r: r.sent_at):
        host = web.by_name[r.host]
        if r.path == "/robots.txt":
            if r.status != ABORTED:
                answered.setdefault(r.host, r.done_at)
            continue
        mode = host.faults.robots
        if r.host not in answered or answered[r.host] > r.sent_at + TOLERANCE_S:
            out.append(Violation(Rule.ROBOTS_FIRST, r.sent_at - t0, f"{r.url} before any robots.txt answer"))
        elif mode in ("5xx", "unreachable"):
            out.append(Violation(Rule.ROBOTS_UNREACHABLE, r.sent_at - t0,
                                 f"{r.url} requested though robots.txt is {mode}"))
        elif mode == "ok" and not robots_allows(host.robots_txt(lim.token), r.path, lim.token):
            out.append(Violation(Rule.ROBOTS_DISALLOWED, r.sent_at - t0, f"{r.url} is disallowed"))
    return out


def check_duplicates(log: Sequence[Request], t0: float, recrawl_s_min: float | None = None,
                     resumed_after_down: tuple[float, frozenset[str]] | None = None) -> list[Violation]:
    """A URL requested again after a final answer, sooner than a recrawl may
    (`recrawl_s_min`; None: never; robots.txt is never recrawled in a run).
    `resumed_after_down` (instant, URLs the store had settled when the crawl
    stopped for its store being down): a URL answered before that stop but
    not settled in the store may be requested again from that instant."""
    final: dict[str, Request] = {}
    out = []
    for r in sorted(log, key=lambda r: r.sent_at):
        first = final.get(r.url)
        may_recrawl = recrawl_s_min is not None and r.path != "/robots.txt"
        if first is not None and resumed_after_down is not None:
            at, settled = resumed_after_down
            if first.done_at < at <= r.sent_at and r.url not in settled:
                first = None    # never acknowledged: the resumed crawl fetches it again (at-least-once)
        if first is not None and not (may_recrawl and r.sent_at - first.done_at >= recrawl_s_min - TOLERANCE_S):
            out.append(Violation(Rule.DUPLICATE, r.sent_at - t0,
                                 f"{r.url} requested again {r.sent_at - first.done_at:.3f} s after a final "
                                 f"{first.status}"))
        elif r.status not in _RETRYABLE:
            final[r.url] = r
    return out


def check_store(web: RuntimeWeb, log: Sequence[Request], rows: Iterable[UrlRow], *, ended_by_itself: bool,
                t0: float, resumed_after_down: tuple[float, frozenset[str]] | None = None) -> list[Violation]:
    stored = {row.url: row for row in rows}
    out = []
    for r in log:
        host = web.by_name[r.host]
        if r.status != 200 or r.path not in host.links:
            continue
        if resumed_after_down is not None and r.done_at < resumed_after_down[0] \
                and r.url not in resumed_after_down[1]:
            continue   # never acknowledged: the page is fetched again (and may fail then, with its reason)
        for link in host.links[r.path]:
            if link not in stored:
                out.append(Violation(Rule.LOST, r.done_at - t0,
                                     f"{link} (linked from {r.url}) is neither queued, fetched nor decided"))
    for row in stored.values():
        if row.state in ("skipped", "failed") and not row.reason:
            out.append(Violation(Rule.NO_REASON, 0.0, f"{row.url} is {row.state} with no reason"))
        if ended_by_itself and row.state == "queued":
            out.append(Violation(Rule.LEFT_QUEUED, 0.0, f"{row.url} still queued after the crawl ended"))
    return out


def check_run(web: RuntimeWeb, log: Sequence[Request], rows: Iterable[UrlRow], lim: CheckLimits, *,
              t0: float, ended_by_itself: bool, resumed_after_down: tuple[float, frozenset[str]] | None = None) -> list[Violation]:
    """Every violation of the run, ordered by when it happened."""
    found = (check_keys(web, log, lim, t0) + check_ips(log, lim, t0) + check_robots(web, log, lim, t0)
             + check_duplicates(log, t0, lim.recrawl_s_min, resumed_after_down)
             + check_store(web, log, rows, ended_by_itself=ended_by_itself, t0=t0,
                           resumed_after_down=resumed_after_down))
    return sorted(found, key=lambda v: (v.at, v.rule))
