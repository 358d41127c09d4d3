"""Server-side checkers: was the crawler polite, safe and thorough?

Every check reads only the simulated web's request log (what the servers
saw) and the model (what the web is); nothing the crawler says about itself.
Each returns `Violation`s naming the offending log lines, and `check_log`
gathers them in a `CheckReport` with `.ok` and `.render()`.

Rules (numbers are `CheckParams` fields):

- key_concurrency: per politeness key (default: the registered domain, from
  courtly.core.urls when present, else the last two labels; pass `key_of`),
  at most `key_concurrency` (1) requests overlap in time.
- key_gap: per key, next.arrived_at - prev.completed_at >= the delay that
  applied after prev: max(delay_s_min, min(Crawl-delay, crawl_delay_s_max))
  (the smaller Crawl-delay of the two hosts, when their robots.txt had been
  fetched), and after a 429/503 the Retry-After instant (capped by
  retry_after_s_max) or, with no Retry-After, backoff_factor x that delay.
- ip_concurrency / ip_rate: per local IP (the resolved address), at most
  `ip_concurrency` overlapping requests and at most `ip_rate` x
  `ip_window_s` arrivals in any window of `ip_window_s`.
- robots_first: on each origin (Host header incl. port), /robots.txt is
  complete before any other path arrives. Robots redirect hops (tag
  robots_hop) are part of another origin's robots fetch and exempt.
- robots_unreachable: nothing but /robots.txt from an origin whose robots.txt
  is 5xx or hangs. A hanging robots.txt that the server finished sending, to a
  client still connected (status 200, not aborted), was reached: a crawler
  starved of CPU reads an answer that came after its deadline before its
  timer fires, and then rightly obeys it (robots_first and robots_disallowed
  still apply). A crawler that gave up closed the connection, and the server
  logs that request aborted.
- robots_disallowed: no path that robots.txt disallows for `token` (RFC 9309,
  matched by robotsrule.py, not by the crawler's code).
- ssrf_bait: no request ever reaches the bait IP or names a bait host.
- trap_fetches: per trap host, at most `trap_fetches_max` trap URLs (None: report only).
- duplicate_fetch: the same host+path fetched again, unconditionally, after a
  final answer (not 429/5xx/aborted), more than `duplicate_fetches_max` times.
- coverage: fetched 200 pages / reachable allowed pages >= `coverage_min`
  (None: report only), with the missing URLs listed.

All times are the server's time.time(); `tolerance_s` absorbs clock and
scheduling granularity in gaps and windows; overlaps use the much smaller
`concurrency_tolerance_s` (every simweb answer lasts >= service_time_s, 5 ms,
so truly parallel requests overlap by more than that).

Load on the machine cannot make a polite crawl fail these checks: a request
is logged when the server's handler starts (after the client sent it) and
completed just before its last bytes are written (before the client has
them), so a slow server only widens the gaps it measures. The exception is
a request the client gave up on: the server logs it when it notices the
close, which a starved server does late; a hanging robots.txt is judged by
whether its answer was delivered (robots_unreachable above).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from courtly.sim.manifest import web_from_manifest
from courtly.sim.model import BAIT_IP, SimWeb, registered_domain
from courtly.sim.reqlog import LogRecord, load_log

__all__ = ["CheckParams", "Violation", "Coverage", "CheckReport", "check_log",
           "check_key_politeness", "check_ip_limits", "check_robots", "check_ssrf",
           "count_trap_fetches", "find_duplicate_fetches", "compute_coverage"]

KeyOf = Callable[[str], str]
_RETRYABLE = {0, 429, 500, 502, 503, 504}


@dataclass(frozen=True, slots=True)
class CheckParams:
    delay_s_min: float = 1.0
    crawl_delay_s_max: float = 10.0
    retry_after_s_max: float = 3600.0
    backoff_factor: float = 2.0
    tolerance_s: float = 0.05
    concurrency_tolerance_s: float = 0.002
    key_concurrency: int = 1
    ip_concurrency: int = 4
    ip_rate: float = 5.0
    ip_window_s: float = 1.0
    token: str = "courtly"
    trap_fetches_max: int | None = None
    duplicate_fetches_max: int = 0
    coverage: bool = True
    coverage_min: float | None = None
    max_redirects: int = 5
    seeds: tuple[str, ...] | None = None  # None: every host's root
    hosts: tuple[str, ...] | None = None  # crawl bounded to these hosts (coverage)
    shown_max: int = 10  # offending requests shown per violation in render()


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    key: str
    detail: str
    lines: tuple[int, ...]  # 1-based line numbers in the log
    requests: tuple[LogRecord, ...]


@dataclass(frozen=True, slots=True)
class Coverage:
    reachable: int
    fetched: int
    missing: tuple[str, ...]
    extra_fetched: int  # 200 pages fetched that are not in the reachable set

    @property
    def ratio(self) -> float:
        return self.fetched / self.reachable if self.reachable else 1.0


@dataclass(slots=True)
class CheckReport:
    violations: list[Violation]
    stats: dict[str, float | int]
    trap_fetches: dict[str, int]
    duplicate_fetches: dict[str, int]
    coverage: Coverage | None
    notes: list[str] = field(default_factory=list)
    params: CheckParams = field(default_factory=CheckParams)

    @property
    def ok(self) -> bool:
        return not self.violations

    def by_rule(self, rule: str) -> list[Violation]:
        return [v for v in self.violations if v.rule == rule]

    def rules_failed(self) -> set[str]:
        return {v.rule for v in self.violations}

    def render(self) -> str:
        return _render(self)


# ---- helpers -------------------------------------------------------------

Indexed = list[tuple[int, LogRecord]]


def _host_name(web: SimWeb, header: str) -> str | None:
    spec = web.host_of(header)
    return spec.name if spec is not None else None


def _served(web: SimWeb, records: Sequence[LogRecord]) -> Indexed:
    out = []
    for i, r in enumerate(records, 1):
        if r.ip == BAIT_IP or r.tag in ("ssrf_bait", "unknown_host") or web.is_bait(r.host):
            continue
        if web.host_of(r.host) is None:
            continue
        out.append((i, r))
    return out


def _violation(rule: str, key: str, detail: str, items: Iterable[tuple[int, LogRecord]]) -> Violation:
    items = list(items)
    return Violation(rule, key, detail, tuple(i for i, _ in items), tuple(r for _, r in items))


def _overlaps(items: Indexed, limit: int, tol: float) -> list[Indexed]:
    """Episodes with more than `limit` requests in flight: each episode is every request
    that was in flight while the count was over the limit (sweep over arrivals)."""
    items = sorted(items, key=lambda x: x[1].arrived_at)
    in_flight: list[tuple[float, int, int, LogRecord]] = []  # (completed_at, seq, line, rec)
    found: list[Indexed] = []
    episode: dict[int, LogRecord] = {}
    for seq, (i, r) in enumerate(items):
        while in_flight and in_flight[0][0] <= r.arrived_at + tol:
            heapq.heappop(in_flight)
        if episode and len(in_flight) <= limit:
            found.append(sorted(episode.items(), key=lambda x: x[1].arrived_at))
            episode = {}
        heapq.heappush(in_flight, (r.completed_at, seq, i, r))
        if len(in_flight) > limit:
            episode.update((x[2], x[3]) for x in in_flight)
    if episode:
        found.append(sorted(episode.items(), key=lambda x: x[1].arrived_at))
    return found


# ---- per politeness key ---------------------------------------------------

def check_key_politeness(records: Sequence[LogRecord], web: SimWeb, params: CheckParams,
                         key_of: KeyOf | None = None) -> list[Violation]:
    key_of = key_of or _default_key_of()
    by_key: dict[str, Indexed] = defaultdict(list)
    for i, r in _served(web, records):
        name = _host_name(web, r.host)
        assert name is not None
        by_key[key_of(name)].append((i, r))
    robots_done: dict[str, float] = {}
    for _, r in _served(web, records):
        if r.path == "/robots.txt" and r.status:
            name = _host_name(web, r.host) or ""
            robots_done[name] = min(robots_done.get(name, r.completed_at), r.completed_at)
    out: list[Violation] = []
    for key in sorted(by_key):
        items = sorted(by_key[key], key=lambda x: x[1].arrived_at)
        for group in _overlaps(items, params.key_concurrency, params.concurrency_tolerance_s):
            out.append(_violation("key_concurrency", key,
                                  f"{len(group)} requests overlapping (limit {params.key_concurrency} in flight)",
                                  group))
        for (ia, a), (ib, b) in zip(items, items[1:]):
            need, why = _delay_after(web, a, b, robots_done, params)
            gap = b.arrived_at - a.completed_at
            if gap < need - params.tolerance_s:
                out.append(_violation("key_gap", key,
                                      f"gap {gap:.3f}s after line {ia} < {need:.3f}s ({why})",
                                      [(ia, a), (ib, b)]))
    return out


def _crawl_delay(web: SimWeb, name: str | None, at: float, robots_done: dict[str, float]) -> float:
    if name is None or robots_done.get(name, float("inf")) > at:
        return 0.0
    rules = web._rules_cached(name)
    return (rules.crawl_delay_s or 0.0) if rules is not None else 0.0


def _delay_after(web: SimWeb, a: LogRecord, b: LogRecord, robots_done: dict[str, float],
                 params: CheckParams) -> tuple[float, str]:
    cd = min(_crawl_delay(web, _host_name(web, a.host), a.completed_at, robots_done),
             _crawl_delay(web, _host_name(web, b.host), a.completed_at, robots_done))
    base = max(params.delay_s_min, min(cd, params.crawl_delay_s_max))
    why = f"crawl-delay {cd:g}s" if cd > params.delay_s_min else f"delay_s_min {params.delay_s_min:g}"
    if a.status in (429, 503):
        if a.retry_after_at is not None:
            wait = min(a.retry_after_at - a.completed_at, params.retry_after_s_max)
            if wait > base:
                return wait, f"Retry-After after {a.status}"
        else:
            return base * params.backoff_factor, f"backoff x{params.backoff_factor:g} after {a.status}"
    return base, why


# ---- per IP -----------------------------------------------------------------

def check_ip_limits(records: Sequence[LogRecord], web: SimWeb, params: CheckParams) -> list[Violation]:
    by_ip: dict[str, Indexed] = defaultdict(list)
    for i, r in _served(web, records):
        by_ip[r.ip].append((i, r))
    out: list[Violation] = []
    limit = int(params.ip_rate * params.ip_window_s + 1e-9)
    window = params.ip_window_s - params.tolerance_s
    for ip in sorted(by_ip):
        items = sorted(by_ip[ip], key=lambda x: x[1].arrived_at)
        for group in _overlaps(items, params.ip_concurrency, params.concurrency_tolerance_s):
            out.append(_violation("ip_concurrency", ip,
                                  f"{len(group)} requests overlapping (limit {params.ip_concurrency} in flight)",
                                  group))
        start = 0
        while start < len(items):
            end = start
            t0 = items[start][1].arrived_at
            while end < len(items) and items[end][1].arrived_at < t0 + window:
                end += 1
            if end - start > limit:
                out.append(_violation("ip_rate", ip,
                                      f"{end - start} arrivals within {params.ip_window_s:g}s (limit {limit})",
                                      items[start:end]))
                start = end
            else:
                start += 1
    return out


# ---- robots -----------------------------------------------------------------

def check_robots(records: Sequence[LogRecord], web: SimWeb, params: CheckParams) -> tuple[list[Violation], list[str]]:
    by_origin: dict[str, Indexed] = defaultdict(list)
    for i, r in _served(web, records):
        by_origin[r.host.lower()].append((i, r))
    out: list[Violation] = []
    notes: list[str] = []
    for origin in sorted(by_origin):
        items = sorted(by_origin[origin], key=lambda x: x[1].arrived_at)
        name = _host_name(web, origin)
        assert name is not None
        spec = web.by_name[name]
        robots = [x for x in items if x[1].path == "/robots.txt"]
        others = [x for x in items if x[1].path != "/robots.txt" and x[1].tag != "robots_hop"]
        first_done = robots[0][1].completed_at if robots else float("inf")
        early = [x for x in others if x[1].arrived_at < first_done - params.tolerance_s]
        if early:
            out.append(_violation("robots_first", origin,
                                  f"{len(early)} request(s) before /robots.txt was fetched", early[:params.shown_max]))
        reached = spec.robots == "timeout" and any(r.status == 200 and not r.aborted for _, r in robots)
        if spec.robots in ("error_500", "timeout") and others and not reached:
            out.append(_violation("robots_unreachable", origin,
                                  f"robots.txt is {spec.robots}: disallow all, yet {len(others)} other fetch(es)",
                                  others[:params.shown_max]))
            continue
        if reached:
            continue  # its late answer allows everything (sim/route.py): nothing was disallowed
        bad = [x for x in others if not web.allowed(name, x[1].path)] if params.token == "courtly" else []
        if params.token != "courtly":
            from courtly.sim.robotsfile import robots_body
            from courtly.sim.robotsrule import RobotsRules

            rules = RobotsRules.parse(robots_body(web, spec, 0), params.token)
            bad = [x for x in others if not rules.allowed(x[1].path)]
        if bad:
            out.append(_violation("robots_disallowed", origin,
                                  f"{len(bad)} path(s) disallowed for {params.token} were fetched",
                                  bad[:params.shown_max]))
    for spec in web.hosts:
        if spec.robots in ("redirect_chain", "redirect_too_long"):
            hops = [r for _, r in _served(web, records) if r.tag == "robots_hop" and f"/robots-hop/{spec.index}/" in r.path]
            if hops or any(_host_name(web, o) == spec.name for o in by_origin):
                notes.append(f"robots of {spec.name} ({spec.robots}): {len(hops)} redirect hop(s) followed")
    return out, notes


# ---- SSRF, traps, duplicates, coverage ---------------------------------------

def check_ssrf(records: Sequence[LogRecord], web: SimWeb) -> list[Violation]:
    bait = [(i, r) for i, r in enumerate(records, 1)
            if r.ip == BAIT_IP or r.tag in ("ssrf_bait",) or web.is_bait(r.host)]
    if not bait:
        return []
    return [_violation("ssrf_bait", BAIT_IP, f"{len(bait)} request(s) reached SSRF bait", bait)]


def count_trap_fetches(records: Sequence[LogRecord], web: SimWeb) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for _, r in _served(web, records):
        if r.tag and r.tag.startswith("trap_"):
            counts[_host_name(web, r.host) or r.host] += 1
    return dict(sorted(counts.items()))


def find_duplicate_fetches(records: Sequence[LogRecord], web: SimWeb) -> dict[str, Indexed]:
    last: dict[tuple[str, str], LogRecord] = {}
    dups: dict[str, Indexed] = defaultdict(list)
    for i, r in sorted(_served(web, records), key=lambda x: x[1].arrived_at):
        if r.method != "GET":
            continue
        k = ((_host_name(web, r.host) or r.host), r.path)
        prev = last.get(k)
        if prev is not None and not r.conditional and prev.status not in _RETRYABLE and not prev.aborted:
            dups[f"{k[0]}{k[1]}"].append((i, r))
        last[k] = r
    return dict(dups)


def compute_coverage(records: Sequence[LogRecord], web: SimWeb, port: int, params: CheckParams) -> Coverage:
    seeds = params.seeds or tuple(web.seeds(port))
    if params.hosts is not None:
        wanted = set(params.hosts)
        seeds = tuple(s for s in seeds if any(f"//{h}:" in s or s.rstrip("/").endswith(f"//{h}") for h in wanted))
    reachable = web.reachable_pages(seeds, hosts=params.hosts, max_redirects=params.max_redirects)
    fetched = set()
    for _, r in _served(web, records):
        if r.status == 200 or (r.status == 304 and r.conditional):
            fetched.add(f"http://{_host_name(web, r.host)}:{port}{r.path}")
    got = reachable & fetched
    return Coverage(len(reachable), len(got), tuple(sorted(reachable - fetched)), len(fetched - reachable))


def _default_key_of() -> KeyOf:
    """The crawler's own politeness key when available (same answers for .test names)."""
    try:
        from courtly.core.urls import registered_domain as core_registered_domain
    except ImportError:
        return registered_domain
    return core_registered_domain


def check_log(records: Sequence[LogRecord] | str | Path, web: SimWeb | str | Path | dict[str, Any],
              params: CheckParams | None = None, *, port: int | None = None,
              key_of: KeyOf | None = None, **overrides: Any) -> CheckReport:
    """Run every check over `records` (in log order) against the model `web`.

    `records` may be a requests.jsonl path and `web` a manifest path or dict
    (the port then comes from the manifest); keyword `overrides` replace
    CheckParams fields, e.g. `check_log(log, manifest, delay_s_min=0.5)`.
    """
    if isinstance(records, (str, Path)):
        records = load_log(records)
    if not isinstance(web, SimWeb):
        manifest = web if isinstance(web, dict) else json.loads(Path(web).read_text(encoding="utf-8"))
        web = web_from_manifest(manifest)
        port = port if port is not None else int(manifest["port"])
    params = dataclasses.replace(params or CheckParams(), **overrides)
    key_of = key_of or _default_key_of()
    started = time.monotonic()
    violations: list[Violation] = []
    violations += check_key_politeness(records, web, params, key_of)
    violations += check_ip_limits(records, web, params)
    robot_violations, notes = check_robots(records, web, params)
    violations += robot_violations
    violations += check_ssrf(records, web)
    traps = count_trap_fetches(records, web)
    if params.trap_fetches_max is not None:
        for host, n in traps.items():
            if n > params.trap_fetches_max:
                items = [(i, r) for i, r in _served(web, records)
                         if _host_name(web, r.host) == host and (r.tag or "").startswith("trap_")]
                violations.append(_violation("trap_fetches", host,
                                             f"{n} trap fetches (limit {params.trap_fetches_max})",
                                             items[-params.shown_max:]))
    dups = find_duplicate_fetches(records, web)
    n_dups = sum(len(v) for v in dups.values())
    if n_dups > params.duplicate_fetches_max:
        for url, items in sorted(dups.items()):
            violations.append(_violation("duplicate_fetch", url, f"fetched {len(items) + 1} times", items))
    coverage = None
    if params.coverage:
        if port is None:
            port = _port_of(records)
        if port is not None:
            coverage = compute_coverage(records, web, port, params)
            if params.coverage_min is not None and coverage.ratio < params.coverage_min:
                violations.append(Violation("coverage", "*",
                                            f"coverage {coverage.ratio:.1%} < {params.coverage_min:.1%}", (), ()))
    served = _served(web, records)
    stats: dict[str, float | int] = {
        "requests": len(records),
        "served_requests": len(served),
        "hosts": len({_host_name(web, r.host) for _, r in served}),
        "ips": len({r.ip for _, r in served}),
        "status_200": sum(1 for _, r in served if r.status == 200),
        "conditional": sum(1 for _, r in served if r.conditional),
        "not_modified": sum(1 for _, r in served if r.status == 304),
        "span_s": (max(r.completed_at for r in records) - min(r.arrived_at for r in records)) if records else 0.0,
        "check_s": time.monotonic() - started,
    }
    return CheckReport(violations, stats, traps, {k: len(v) for k, v in dups.items()}, coverage, notes, params)


def _port_of(records: Sequence[LogRecord]) -> int | None:
    for r in records:
        if ":" in r.host and not r.host.startswith("["):
            try:
                return int(r.host.rsplit(":", 1)[1])
            except ValueError:
                continue
    return None


def _fmt(line: int, r: LogRecord) -> str:
    t = time.strftime("%H:%M:%S", time.localtime(r.arrived_at)) + f".{int(r.arrived_at * 1000) % 1000:03d}"
    return (f"    line {line}: {t} +{r.completed_at - r.arrived_at:.3f}s {r.method} {r.host}{r.path} "
            f"-> {r.status} conn={r.conn} ip={r.ip}" + (f" tag={r.tag}" if r.tag else ""))


def _render(rep: CheckReport) -> str:
    p = rep.params
    head = "PASS" if rep.ok else f"FAIL ({len(rep.violations)} violation(s): {', '.join(sorted(rep.rules_failed()))})"
    lines = [f"simweb check: {head}",
             "  " + "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in rep.stats.items())]
    by_rule: dict[str, list[Violation]] = defaultdict(list)
    for v in rep.violations:
        by_rule[v.rule].append(v)
    for rule in sorted(by_rule):
        lines.append(f"[{rule}] {len(by_rule[rule])} violation(s)")
        for v in by_rule[rule][: p.shown_max]:
            lines.append(f"  {v.key}: {v.detail}")
            lines += [_fmt(i, r) for i, r in list(zip(v.lines, v.requests))[: p.shown_max]]
        if len(by_rule[rule]) > p.shown_max:
            lines.append(f"  ... {len(by_rule[rule]) - p.shown_max} more")
    if rep.trap_fetches:
        lines.append("trap fetches: " + ", ".join(f"{h}={n}" for h, n in rep.trap_fetches.items()))
    if rep.duplicate_fetches:
        lines.append(f"duplicate fetches: {sum(rep.duplicate_fetches.values())} on {len(rep.duplicate_fetches)} URL(s)")
    if rep.coverage is not None:
        c = rep.coverage
        lines.append(f"coverage: {c.fetched}/{c.reachable} reachable allowed pages ({c.ratio:.1%}), "
                     f"{len(c.missing)} missing, {c.extra_fetched} other 200s")
        lines += [f"    missing: {u}" for u in c.missing[: p.shown_max]]
    lines += [f"note: {n}" for n in rep.notes]
    return "\n".join(lines)
