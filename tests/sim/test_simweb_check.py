"""The checkers catch impolite clients (synthetic logs and live misbehaving clients),
and pass a polite one."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
import pytest

from courtly.sim.check import CheckParams, check_log
from courtly.sim.model import BAIT_IP, SimWeb
from courtly.sim.reqlog import LogRecord
from courtly.sim.robotsrule import RobotsRules
from courtly.sim.server import SimWebServer
from courtly.sim.webconfig import profile_config

sys.path.insert(0, str(Path(__file__).parent))
from simclient import get, run_with_server, small_hostile  # noqa: E402

PORT = 8123
NO_COV = dict(coverage=False)


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb(small_hostile())


def rec(web: SimWeb, host: str, path: str, t0: float, t1: float, *, status: int = 200,
        retry_after_at: float | None = None, conditional: bool = False, ip: str | None = None,
        tag: str | None = None) -> LogRecord:
    spec = web.by_name.get(host)
    return LogRecord(arrived_at=t0, completed_at=t1, host=f"{host}:{PORT}", conn="127.0.0.1:1",
                     ip=ip or (spec.ip if spec else BAIT_IP), method="GET", path=path, status=status,
                     bytes=100, conditional=conditional, tag=tag, retry_after_at=retry_after_at)


def polite_pair(web: SimWeb, host: str, t: float) -> list[LogRecord]:
    return [rec(web, host, "/robots.txt", t, t + 0.01), rec(web, host, "/", t + 2.0, t + 2.01)]


def _allow_all_host(web: SimWeb) -> str:
    """A host with no crawl-delay, not throttled, not slow."""
    return next(s.name for s in web.hosts if s.robots in ("allow_all", "missing_404") and not s.latency_s)


# ---- synthetic logs -----------------------------------------------------------

def test_polite_synthetic_log_passes(web: SimWeb) -> None:
    host = _allow_all_host(web)
    report = check_log(polite_pair(web, host, 100.0), web, CheckParams(**NO_COV))
    assert report.ok, report.render()


def test_key_concurrency_catches_overlap_across_subdomains(web: SimWeb) -> None:
    a, b = next((x, y) for x in web.hosts for y in web.hosts
                if x.name != y.name and x.domain == y.domain and x.robots == y.robots == "rules")
    log = polite_pair(web, a.name, 0.0) + polite_pair(web, b.name, 10.0)
    log.append(rec(web, a.name, web.layout(a.name).path_of(1), 20.0, 21.0))
    log.append(rec(web, b.name, web.layout(b.name).path_of(1), 20.5, 21.5))
    report = check_log(log, web, CheckParams(**NO_COV))
    bad = report.by_rule("key_concurrency")
    assert bad and bad[0].key == a.domain and bad[0].lines == (5, 6)
    per_host = check_log(log, web, CheckParams(**NO_COV), key_of=lambda h: h)
    assert not per_host.by_rule("key_concurrency")


def test_key_gap_uses_delay_min_and_crawl_delay(web: SimWeb) -> None:
    host = _allow_all_host(web)
    log = [rec(web, host, "/robots.txt", 0.0, 0.1), rec(web, host, "/", 0.3, 0.4)]
    report = check_log(log, web, CheckParams(delay_s_min=0.5, **NO_COV))
    assert [v.lines for v in report.by_rule("key_gap")] == [(1, 2)]
    assert check_log(log, web, CheckParams(delay_s_min=0.1, **NO_COV)).ok
    spec = next(s for s in web.hosts if s.crawl_delay_s and s.crawl_delay_s >= 0.5)
    log = [rec(web, spec.name, "/robots.txt", 0.0, 0.1), rec(web, spec.name, "/", 0.1 + spec.crawl_delay_s * 0.5, 5.0)]
    report = check_log(log, web, CheckParams(delay_s_min=0.01, **NO_COV))
    assert "crawl-delay" in report.by_rule("key_gap")[0].detail
    capped = check_log(log, web, CheckParams(delay_s_min=0.01, crawl_delay_s_max=0.01, **NO_COV))
    assert not capped.by_rule("key_gap")


def test_key_gap_honours_retry_after_and_backoff(web: SimWeb) -> None:
    host = _allow_all_host(web)
    log = [rec(web, host, "/robots.txt", 0.0, 0.1),
           rec(web, host, "/", 2.0, 2.1, status=429, retry_after_at=12.1),
           rec(web, host, "/", 4.0, 4.1)]
    report = check_log(log, web, CheckParams(delay_s_min=1.0, **NO_COV))
    (v,) = report.by_rule("key_gap")
    assert v.lines == (2, 3) and "Retry-After" in v.detail
    log[2] = rec(web, host, "/", 12.2, 12.3)
    assert check_log(log, web, CheckParams(delay_s_min=1.0, **NO_COV)).ok
    bare = [rec(web, host, "/robots.txt", 0.0, 0.1), rec(web, host, "/", 2.0, 2.1, status=503),
            rec(web, host, "/", 3.5, 3.6)]
    (v,) = check_log(bare, web, CheckParams(delay_s_min=1.0, **NO_COV)).by_rule("key_gap")
    assert "backoff" in v.detail


def test_ip_concurrency_and_rate(web: SimWeb) -> None:
    ip, names = next((ip, n) for ip, n in web.hosts_by_ip.items() if len({web.by_name[x].domain for x in n}) >= 6)
    hosts = []
    for n in names:
        if web.by_name[n].domain not in {web.by_name[h].domain for h in hosts}:
            hosts.append(n)
    hosts = hosts[:6]
    overlap = [rec(web, h, "/robots.txt", 0.0 + i * 0.01, 1.0) for i, h in enumerate(hosts)]
    report = check_log(overlap, web, CheckParams(**NO_COV))
    (v,) = report.by_rule("ip_concurrency")
    assert v.key == ip and len(v.lines) == 6
    burst = [rec(web, h, "/robots.txt", i * 0.1, i * 0.1 + 0.01) for i, h in enumerate(hosts)]
    (v,) = check_log(burst, web, CheckParams(**NO_COV)).by_rule("ip_rate")
    assert v.lines == (1, 2, 3, 4, 5, 6)
    spaced = [rec(web, h, "/robots.txt", i * 0.21, i * 0.21 + 0.01) for i, h in enumerate(hosts)]
    assert not check_log(spaced, web, CheckParams(**NO_COV)).by_rule("ip_rate")


def test_a_hanging_robots_txt_is_unreachable_when_the_client_gave_up_and_reached_when_it_was_answered(
        web: SimWeb) -> None:
    hang = next(s.name for s in web.hosts if s.robots == "timeout")
    gave_up = dataclasses.replace(rec(web, hang, "/robots.txt", 0.0, 3.0, status=0), aborted=True)
    (v,) = check_log([gave_up, rec(web, hang, "/", 5.0, 5.1)], web, CheckParams(**NO_COV)).by_rule(
        "robots_unreachable")
    assert v.lines == (2,)
    # a starved client read the late answer before its timer fired: the server saw it delivered
    answered = rec(web, hang, "/robots.txt", 4.5, 8.5, tag="robots_timeout")
    report = check_log([gave_up, answered, rec(web, hang, "/", 10.0, 10.1)], web, CheckParams(**NO_COV))
    assert report.ok, report.render()
    early = check_log([answered, rec(web, hang, "/", 8.0, 8.1)], web, CheckParams(**NO_COV))
    assert "robots_first" in early.rules_failed()   # a page before the answer was complete


def test_robots_rules_first_unreachable_disallowed(web: SimWeb) -> None:
    host = _allow_all_host(web)
    (v,) = check_log([rec(web, host, "/", 0.0, 0.1)], web, CheckParams(**NO_COV)).by_rule("robots_first")
    assert v.lines == (1,)
    bad = next(s.name for s in web.hosts if s.robots == "error_500")
    log = [rec(web, bad, "/robots.txt", 0.0, 0.1, status=500), rec(web, bad, "/", 5.0, 5.1)]
    (v,) = check_log(log, web, CheckParams(**NO_COV)).by_rule("robots_unreachable")
    assert v.lines == (2,)
    rules = next(s.name for s in web.hosts if s.robots == "rules")
    log = polite_pair(web, rules, 0.0) + [rec(web, rules, "/private/", 5.0, 5.1),
                                          rec(web, rules, "/files/report-6.pdf", 15.0, 15.1)]
    (v,) = check_log(log, web, CheckParams(**NO_COV)).by_rule("robots_disallowed")
    assert v.lines == (3, 4)


def test_robots_hops_are_not_robots_first_violations(web: SimWeb) -> None:
    spec = next(s for s in web.hosts if s.robots == "redirect_chain")
    hop_host, hop_path = f"{spec.partner}", f"/robots-hop/{spec.index}/0"
    log = [rec(web, spec.name, "/robots.txt", 0.0, 0.1, status=301),
           rec(web, hop_host, hop_path, 2.0, 2.1, tag="robots_hop")]
    assert not check_log(log, web, CheckParams(**NO_COV)).by_rule("robots_first")


def test_ssrf_traps_duplicates(web: SimWeb) -> None:
    log = [rec(web, "localhost", "/admin", 0.0, 0.1, tag="ssrf_bait")]
    (v,) = check_log(log, web, CheckParams(**NO_COV)).by_rule("ssrf_bait")
    assert v.lines == (1,)
    trap = next(s.name for s in web.hosts if s.has("trap_deep"))
    log = polite_pair(web, trap, 0.0)
    log += [rec(web, trap, f"/deep/{'/'.join(map(str, range(1, i + 2)))}/", 10.0 + 2 * i, 10.1 + 2 * i,
                tag="trap_deep") for i in range(5)]
    report = check_log(log, web, CheckParams(trap_fetches_max=3, **NO_COV))
    assert report.trap_fetches == {trap: 5}
    assert report.by_rule("trap_fetches")
    host = _allow_all_host(web)
    log = polite_pair(web, host, 0.0) + [rec(web, host, "/", 5.0, 5.1),
                                         rec(web, host, "/", 8.0, 8.1, conditional=True)]
    (v,) = check_log(log, web, CheckParams(**NO_COV)).by_rule("duplicate_fetch")
    assert v.lines == (3,)
    retry = polite_pair(web, host, 0.0)
    retry[1] = rec(web, host, "/", 2.0, 2.1, status=503)
    retry.append(rec(web, host, "/", 9.0, 9.1))
    assert not check_log(retry, web, CheckParams(**NO_COV)).by_rule("duplicate_fetch")


def test_coverage_lists_missing_pages(web: SimWeb) -> None:
    host = _allow_all_host(web)
    params = CheckParams(hosts=(host,), coverage_min=0.9)
    report = check_log(polite_pair(web, host, 0.0), web, params, port=PORT)
    cov = report.coverage
    assert cov is not None and cov.fetched == 1 and cov.reachable > 5
    assert f"http://{host}:{PORT}/" not in cov.missing and len(cov.missing) == cov.reachable - 1
    assert report.by_rule("coverage")
    text = report.render()
    assert "FAIL" in text and "coverage" in text and "missing:" in text


# ---- live misbehaving clients -------------------------------------------------

def _live_report(srv: SimWebServer, **kw: Any) -> Any:
    srv.flush()
    return check_log(srv.records(), srv.web, CheckParams(**{**NO_COV, **kw}), port=srv.port)


def test_live_parallel_requests_to_one_host_are_caught() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> Any:
        slow = next(h for h in srv.web.hosts if h.latency_s > 0)
        await get(s, srv, slow.name, "/robots.txt")
        await asyncio.gather(*(get(s, srv, slow.name, srv.web.layout(slow.name).path_of(k)) for k in range(3)))
        return _live_report(srv, delay_s_min=0.0)

    report = run_with_server(small_hostile(), go)
    (v,) = report.by_rule("key_concurrency")
    assert len(v.lines) == 3 and all(r.path != "/robots.txt" for r in v.requests)
    assert "line " in report.render()


def test_live_parallel_requests_to_a_fast_host_are_caught() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> Any:
        fast = next(h for h in srv.web.hosts if h.robots == "allow_all" and not h.latency_s
                    and not any(b.startswith("throttle") for b in h.behaviours))
        await get(s, srv, fast.name, "/robots.txt")
        await asyncio.gather(*(get(s, srv, fast.name, "/") for _ in range(4)))
        return _live_report(srv, delay_s_min=0.0)

    # 50 ms of service time: the four requests overlap even on a loaded machine
    report = run_with_server(small_hostile(service_time_s=0.05), go)
    (v,) = report.by_rule("key_concurrency")
    assert len(v.lines) >= 2 and all(r.path == "/" for r in v.requests)


def test_live_ignoring_retry_after_is_caught() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> Any:
        spec = next(h for h in srv.web.hosts if h.has("throttle_429"))
        await get(s, srv, spec.name, "/robots.txt")
        first = await get(s, srv, spec.name, "/")
        second = await get(s, srv, spec.name, "/")
        assert first.status == 429 and second.status == 429
        return _live_report(srv, delay_s_min=0.0)

    report = run_with_server(small_hostile(retry_after_s=5), go)
    (v,) = report.by_rule("key_gap")
    assert "Retry-After" in v.detail and v.requests[0].status == 429


def test_live_disallowed_and_unrobotted_fetches_are_caught() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> Any:
        rules = next(h for h in srv.web.hosts if h.robots == "rules")
        other = next(h for h in srv.web.hosts if h.robots == "allow_all" and h.domain != rules.domain)
        await get(s, srv, rules.name, "/robots.txt")
        await get(s, srv, rules.name, "/private/")
        await get(s, srv, other.name, "/")
        unreachable = next(h for h in srv.web.hosts if h.robots == "error_500")
        await get(s, srv, unreachable.name, "/robots.txt")
        await get(s, srv, unreachable.name, "/")
        return _live_report(srv, delay_s_min=0.0)

    report = run_with_server(small_hostile(), go)
    assert {"robots_disallowed", "robots_first", "robots_unreachable"} <= report.rules_failed()
    assert report.by_rule("robots_disallowed")[0].requests[0].path == "/private/"


def test_live_per_ip_burst_is_caught() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> Any:
        ip = max(srv.web.hosts_by_ip, key=lambda i: len(srv.web.hosts_by_ip[i]))
        names = srv.web.hosts_by_ip[ip][:8]
        await asyncio.gather(*(get(s, srv, n, "/robots.txt") for n in names if srv.web.by_name[n].robots != "timeout"))
        return _live_report(srv, delay_s_min=0.0), ip

    report, ip = run_with_server(small_hostile(), go)
    assert report.by_rule("ip_rate") and report.by_rule("ip_rate")[0].key == ip


def test_live_ssrf_bait_is_caught() -> None:
    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> Any:
        async with s.get(f"http://{BAIT_IP}:{srv.port}/decimal", headers={"Host": f"2130706433:{srv.port}"}) as r:
            await r.read()
        return _live_report(srv)

    report = run_with_server(small_hostile(), go)
    (v,) = report.by_rule("ssrf_bait")
    assert v.requests[0].path == "/decimal"


# ---- a polite crawler passes ----------------------------------------------------

_HREF = re.compile(rb'<a href="([^"]+)"( rel="nofollow")?')
_BASE = re.compile(rb'<base href="([^"]+)"')


async def polite_crawl(srv: SimWebServer, s: aiohttp.ClientSession, hosts: list[str], delay_s: float,
                       pages_max: int = 400) -> None:
    """One fetch at a time, robots first, delay between requests, no duplicates."""
    queue = [f"http://{h}:{srv.port}/" for h in hosts]
    seen = set(queue)
    rules: dict[str, RobotsRules | None] = {}
    fetched = 0
    while queue and fetched < pages_max:
        url = queue.pop(0)
        parts = urlsplit(url)
        host, target = parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else "")
        if host not in rules:
            g = await get(s, srv, host, "/robots.txt")
            rules[host] = RobotsRules.parse(g.body) if g.status == 200 else (
                RobotsRules.allow_all() if 400 <= g.status < 500 else None)
            await asyncio.sleep(delay_s)
        r = rules[host]
        if r is None or not r.allowed(target):
            continue
        g = await get(s, srv, host, target)
        fetched += 1
        await asyncio.sleep(delay_s)
        if g.status != 200 or b'content="nofollow"' in g.body:
            continue
        m = _BASE.search(g.body)
        base = m.group(1).decode() if m else url
        for href, nofollow in _HREF.findall(g.body):
            nxt = urljoin(base, href.decode().replace("&amp;", "&")).split("#")[0]
            p = urlsplit(nxt)
            if nofollow or p.hostname not in hosts or p.port != srv.port or nxt in seen:
                continue
            seen.add(nxt)
            queue.append(nxt)


def test_polite_crawler_passes_every_check_with_full_coverage() -> None:
    config = profile_config("demo", seed=11, hosts=12, ips=3, pages_per_host=10, special_share=0.0,
                            crawl_delays_s=(0.0,))

    async def go(srv: SimWebServer, s: aiohttp.ClientSession) -> Any:
        hosts = [h.name for h in srv.web.hosts if h.robots == "rules"][:2]
        await polite_crawl(srv, s, hosts, delay_s=0.25)
        srv.flush()
        params = CheckParams(delay_s_min=0.2, hosts=tuple(hosts), coverage_min=1.0)
        return check_log(srv.records(), srv.web, params, port=srv.port)

    report = run_with_server(config, go, timeout_s=120)
    assert report.ok, report.render()
    assert report.coverage is not None and report.coverage.ratio == 1.0 and report.coverage.reachable >= 10


def test_check_log_accepts_paths_and_overrides(tmp_path: Path, web: SimWeb) -> None:
    import json as _json

    host = _allow_all_host(web)
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(r.to_json() + "\n" for r in polite_pair(web, host, 0.0)))
    manifest = tmp_path / "manifest.json"
    manifest.write_text(_json.dumps(web.manifest(PORT, 0.0)))
    report = check_log(log, manifest, delay_s_min=2.5, coverage=False)
    assert report.params.delay_s_min == 2.5 and report.by_rule("key_gap")
    assert check_log(log, manifest, delay_s_min=0.5, coverage=False).ok
