"""Freshness from the real runtime: `courtly sim --runtime` crawls the model
web of sim/virtual.py with the real `Crawler` (intent search) in virtual time.

Theory of operation
-------------------
The model web of the seed (`build_web`) is served by `ModelFetcher`: every
page answers 200 with an ETag naming its version, or 304 when the crawler's
If-None-Match names the live version; the versions come from the same
`FreshnessMeter` that sim/virtual.py's `drive` uses (its changes are
Poisson, drawn at each sync), and every 200/304 answer syncs the page in it.
A seeded share of answers fail (half 500, half 503), and each answer takes a
seeded log-normal time. robots.txt is 404 everywhere.

The runtime gets every page as a seed (so discovery fetches each once, from
t = 0, where `drive` starts with every page just fetched), the model's
importance as its `recrawl.importance_file`, `SimParams.budget` as its daily
budget, and runs for `days` of virtual time on a `VirtualLoop`
(sim/vloop.py): its own recrawl scheduler, frontier, politeness, commit
loop and SQLite store, nothing re-implemented. The meter then gives the same
figures as for `drive`, so the two rows can be set side by side.

Rules: the runtime's tiers come from its own rules (depth: every seed is a
top-tier page), not from the model's tiers; the figures are computed over
the model's tiers and importance, as for the other rows.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import tempfile
from pathlib import Path

from courtly.config import Config
from courtly.runtime.crawler import Crawler
from courtly.shell.fetcher import FetchResult
from courtly.shell.store.sqlite import SqliteStore
from courtly.sim.freshness import DAY_S, FreshnessMeter, PolicyFigures, figures
from courtly.sim.rtweb import SimExtractor, SimWarc
from courtly.sim.virtual import ModelWeb, SimParams, build_web, courtly_policy
from courtly.sim.vloop import VirtualClock, VirtualLoop, run_virtual

__all__ = ["ModelFetcher", "runtime_figures"]

T0 = 1_700_000_000.0
COMMIT_INTERVAL_S = 60.0     # days of virtual time: a commit a minute, not every 0.5 s


class ModelFetcher:
    """Answers the model web's pages from the meter's versions (see the module doc)."""

    def __init__(self, web: ModelWeb, meter: FreshnessMeter, clock: VirtualClock, p: SimParams) -> None:
        self.web, self.meter, self.clock, self.p = web, meter, clock, p
        self.rng = random.Random(f"{p.seed}:runtime-fetch")
        self.fetches = self.failures = self.not_modified = 0

    async def fetch(self, url: str, *, ip: str | None = None, headers=None) -> FetchResult:
        sent = self.clock.now()
        await asyncio.sleep(self.rng.lognormvariate(math.log(self.p.latency_s_median), self.p.latency_sigma))
        t = self.clock.now() - T0
        status, head, body = self._answer(url, t, headers or {})
        return FetchResult(url=url, ip=ip or "", status=status, request_head=b"", response_head=b"",
                           headers=head, body=body, content=body, truncated=None, started_at=sent,
                           elapsed_s=self.clock.now() - sent)

    def _answer(self, url: str, t: float, headers) -> tuple[int, dict, bytes]:
        i = self.web.index_of.get(url)
        if i is None:    # robots.txt, the soft-404 probe
            return 404, {"content-type": "text/html"}, b"<html><body>not found</body></html>"
        self.fetches += 1
        u = self.rng.random()
        if u < self.p.failure_rate:
            self.failures += 1
            return (500 if u < self.p.failure_rate / 2 else 503), {}, b"busy"
        m = self.meter
        etag = f'"v{m.version[i] + m.changed_by(i, t)}"'
        m.sync(i, t)
        if headers.get("If-None-Match") == etag:
            self.not_modified += 1
            return 304, {"etag": etag}, b""
        body = f"<html><body><p>{url} version {etag}</p></body></html>".encode()
        return 200, {"content-type": "text/html", "etag": etag}, body


class _Resolver:
    async def resolve(self, host: str) -> list[str]:
        return ["203.0.113.1"]   # one address per host would be truer; the IP limits then bind less


def _config(p: SimParams, importance_file: Path) -> Config:
    cfg = Config().replace("crawl", intent="search", seed=p.seed, duration_s=p.days * DAY_S,
                           fetch_tasks=p.fetch_tasks, batch_max=p.batch_max)
    cfg = cfg.replace("recrawl", daily_budget=p.budget, period_s=p.period_s, importance_file=str(importance_file))
    cfg = cfg.replace("politeness", delay_s=p.delay_s, ip_concurrency=10_000, ip_rate=1e9)
    cfg = cfg.replace("seen", bloom_capacity=max(10_000, 2 * p.pages))
    # the model's URL shape (many /sT/pN per host, no links) reads as a trap to the budget defence
    cfg = cfg.replace("budget", enabled=False)
    return cfg.replace("store", commit_interval_s=COMMIT_INTERVAL_S)


def runtime_figures(p: SimParams) -> tuple[PolicyFigures, ModelFetcher]:
    """Crawl the model web of `p` with the real runtime; its freshness figures."""
    policy = courtly_policy(p)
    web = build_web(p, len(policy.tiers))
    w0, w1 = p.warmup_days * DAY_S, p.days * DAY_S
    meter = FreshnessMeter(web.rate.tolist(), random.Random(f"{p.seed}:changes"), window_from_s=w0, window_to_s=w1)
    fetcher: list[ModelFetcher] = []
    with tempfile.TemporaryDirectory(prefix="courtly-rtfresh-") as tmp:
        folder = Path(tmp)
        importance = folder / "importance.tsv"
        importance.write_text("".join(f"{u}\t{w!r}\n" for u, w in zip(web.urls, web.importance.tolist())))
        cfg = _config(p, importance)

        async def crawl(loop: VirtualLoop) -> None:
            clock = VirtualClock(loop)
            f = ModelFetcher(web, meter, clock, p)
            fetcher.append(f)
            store = SqliteStore(folder / "crawl.db")
            try:
                c = Crawler(cfg, clock=clock, resolver=_Resolver(), fetcher=f, warc=SimWarc(), store=store,
                            extractor=SimExtractor(cfg.robots.token, cfg.extract.links_max, cfg.budget.enabled))
                c.load()
                c.add_seeds(web.urls)
                await c.run()
                if c.fatal is not None:
                    raise c.fatal
            finally:
                store.close()

        level = logging.getLogger("courtly").level
        logging.getLogger("courtly").setLevel(logging.ERROR)
        try:
            run_virtual(crawl, start_at=T0, turns_max=200_000_000)
        finally:
            logging.getLogger("courtly").setLevel(level)
    fresh, age = meter.close()
    f = fetcher[0]
    return figures("courtly (real runtime)", fresh, age, web.importance, web.tier, w1 - w0, f.fetches / p.days), f
