"""The simulated web of `courtly simweb`, served to the real runtime in virtual time.

Theory of operation
-------------------
`RouteFetcher` answers every request with `sim.route.route`, the very
function the simulated web's server calls (sim/server.py), at the virtual
instant the request arrives: same pages, links, robots.txt, sitemaps, feeds,
ETags and 304s, page versions and throttling as the live server, after the
reply's delay (at least the server's `service_time_s`). Streams and bombs
(hostile hosts) are answered with their plain body: the benchmark web has
none. Every answer is logged as a `Sync` row (URL, seconds after the web's
start, status), the request log the live benchmark reads from the server.

`crawl_virtual(web, cfg, seeds, ...)` runs the real `Crawler` (its frontier,
politeness, recrawl scheduler, importance, commit loop and SQLite store) on a
`VirtualLoop` over that web, from the web's start for `cfg.crawl.duration_s`,
and returns the log. `measured_freshness` is the freshness of a log against
the pages' change instants: the share of time each stored copy matched the
live page, the same measure the live benchmark takes.

Rules: nothing here reads the wall clock; same web, config and seeds, same
log, bit for bit (the loop's interleaving is fixed by the program alone).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import tempfile
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

from courtly.config import Config
from courtly.core.types import Reason
from courtly.runtime.crawler import Crawler
from courtly.shell.fetcher import FetchResult
from courtly.shell.resolver import ResolveFailed
from courtly.shell.store.sqlite import SqliteStore
from courtly.sim.model import SimWeb
from courtly.sim.route import Request, RouteState, route
from courtly.sim.rtweb import SimExtractor, SimWarc
from courtly.sim.vloop import VirtualClock, VirtualLoop, run_virtual

__all__ = ["Sync", "RouteFetcher", "HostsResolver", "crawl_virtual", "measured_freshness"]

T0 = 1_700_000_000.0   # the web's start on the virtual clock


class Sync(NamedTuple):
    """One answered request, as the server's log holds it."""

    url: str
    t_s: float         # seconds after the web's start, when the request arrived
    status: int


class RouteFetcher:
    """Answers from `sim.route.route` at the virtual instant; `log` holds every answer."""

    def __init__(self, web: SimWeb, port: int, clock: VirtualClock, started_at: float) -> None:
        self.web, self.port, self.clock = web, port, clock
        self.state = RouteState(started_at=started_at)
        self.log: list[Sync] = []

    async def fetch(self, url: str, *, ip: str | None = None, headers=None) -> FetchResult:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        sent = self.clock.now()
        req = Request("GET", parts.netloc, target, ip or "", CIMultiDict(headers or {}), self.port)
        reply = route(self.web, self.state, req, sent)
        self.log.append(Sync(url, sent - self.state.started_at, reply.status))
        delay = max(reply.delay_s, self.web.config.service_time_s)
        if delay > 0:
            await asyncio.sleep(delay)
        head = CIMultiDictProxy(CIMultiDict(reply.headers))
        return FetchResult(url=url, ip=ip or "", status=reply.status, request_head=b"", response_head=b"",
                           headers=head, body=reply.body, content=reply.body, truncated=None, started_at=sent,
                           elapsed_s=self.clock.now() - sent)

    async def close(self) -> None:
        pass


class HostsResolver:
    """The web's name -> address map (what the live crawl reads from its --hosts-file)."""

    def __init__(self, web: SimWeb) -> None:
        self.hosts = web.hosts_map()

    async def resolve(self, host: str) -> list[str]:
        ip = self.hosts.get(host)
        if ip is None:
            raise ResolveFailed(Reason.DNS, f"{host}: no such name (simulated)")
        return [ip]


def crawl_virtual(web: SimWeb, cfg: Config, seeds: list[str], *, port: int, turns_max: int = 50_000_000) -> list[Sync]:
    """Crawl `web` with the real runtime from the web's start for `cfg.crawl.duration_s` virtual seconds."""
    fetchers: list[RouteFetcher] = []
    with tempfile.TemporaryDirectory(prefix="courtly-rtlive-") as tmp:
        async def crawl(loop: VirtualLoop) -> None:
            clock = VirtualClock(loop)
            f = RouteFetcher(web, port, clock, T0)
            fetchers.append(f)
            store = SqliteStore(Path(tmp) / "crawl.db")
            try:
                c = Crawler(cfg, clock=clock, resolver=HostsResolver(web), fetcher=f, warc=SimWarc(), store=store,
                            extractor=SimExtractor(cfg.robots.token, cfg.extract.links_max, cfg.budget.enabled))
                c.load()
                c.add_seeds(seeds)
                await c.run()
                if c.fatal is not None:
                    raise c.fatal
            finally:
                store.close()

        logger = logging.getLogger("courtly")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            run_virtual(crawl, start_at=T0, turns_max=turns_max)
        finally:
            logger.setLevel(level)
    return fetchers[0].log


def measured_freshness(syncs: dict[str, list[float]], changes: dict[str, list[float]], w0: float, w1: float) -> float:
    """Time-averaged share of pages whose stored copy matched the live page over [w0, w1].

    A copy taken at s is fresh from s until the page's first change after s
    (or the next sync); a page with no sync yet is stale."""
    fresh = 0.0
    for url, times in syncs.items():
        ch = changes[url]
        times = sorted(times)
        for i, s in enumerate(times):
            end = times[i + 1] if i + 1 < len(times) else w1
            j = bisect.bisect_right(ch, s)
            stale_at = ch[j] if j < len(ch) else math.inf
            a, b = max(s, w0), min(end, stale_at, w1)
            if b > a:
                fresh += b - a
    return fresh / (len(syncs) * (w1 - w0)) if syncs and w1 > w0 else 0.0
