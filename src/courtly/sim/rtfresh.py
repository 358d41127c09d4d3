"""Freshness from the real runtime: `courtly sim` crawls the model web of
sim/virtual.py with the real `Crawler` (intent search) in virtual time.

Theory of operation
-------------------
The model web of the seed (`build_web`) is served by `ModelFetcher`: every
page answers 200 with an ETag naming its version, or 304 when the crawler's
If-None-Match names the live version; the versions come from the same
`FreshnessMeter` (sim/freshness.py: its changes are Poisson, drawn at each
sync), and every 200/304 answer syncs the page in it.
A seeded share of answers fail (half 500, half 503), and each answer takes a
seeded log-normal time. robots.txt is 404 everywhere.

The runtime gets every page as a seed (so discovery fetches each once, from
t = 0), the model's importance as its `recrawl.importance_file`,
`SimParams.budget` as its daily budget (which pays for that discovery too:
the figures start after `warmup_days`, and the fetches per day are counted
in the same window), and runs for `days` of virtual time on a `VirtualLoop`
(sim/vloop.py): its own recrawl scheduler, tiers, frontier, politeness,
commit loop and SQLite store, nothing re-implemented.

Rules: the runtime's tiers come from its own rules (the importance file and
the budget, runtime/recrawl_tiers.py), not from the model's tiers; the
figures are computed over the model's tiers and importance, as for the
reference rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
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
from typing import Callable, NamedTuple
from courtly.sim.vloop import VirtualClock, VirtualLoop, run_virtual

__all__ = ["ModelFetcher", "RuntimeRun", "runtime_figures"]

T0 = 1_700_000_000.0
COMMIT_INTERVAL_S = 60.0     # days of virtual time: a commit a minute, not every 0.5 s


class ModelFetcher:
    """Answers the model web's pages from the meter's versions (see the module doc)."""

    def __init__(self, web: ModelWeb, meter: FreshnessMeter, clock: VirtualClock, p: SimParams,
                 on_day: Callable[[int], None] | None = None, log: list | None = None) -> None:
        self.web, self.meter, self.clock, self.p = web, meter, clock, p
        self.rng = random.Random(f"{p.seed}:runtime-fetch")
        self.fetches = self.failures = self.not_modified = self.in_window = 0
        self.on_day, self.log, self.day = on_day, log, -1

    async def fetch(self, url: str, *, ip: str | None = None, headers=None) -> FetchResult:
        sent = self.clock.now()
        await asyncio.sleep(self.rng.lognormvariate(math.log(self.p.latency_s_median), self.p.latency_sigma))
        t = self.clock.now() - T0
        if self.on_day is not None and t // DAY_S > self.day:
            self.day = int(t // DAY_S)
            self.on_day(self.day)
        status, head, body = self._answer(url, t, headers or {})
        if self.log is not None:   # (host, sent, answered, status): the politeness test reads it
            self.log.append((url.split("/")[2], sent - T0, t, status))
        return FetchResult(url=url, ip=ip or "", status=status, request_head=b"", response_head=b"",
                           headers=head, body=body, content=body, truncated=None, started_at=sent,
                           elapsed_s=self.clock.now() - sent)

    def _answer(self, url: str, t: float, headers) -> tuple[int, dict, bytes]:
        i = self.web.index_of.get(url)
        if i is None:    # robots.txt, the soft-404 probe
            return 404, {"content-type": "text/html"}, b"<html><body>not found</body></html>"
        self.fetches += 1
        self.in_window += self.meter.w0 <= t <= self.meter.w1
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


class RuntimeRun(NamedTuple):
    """What the crawl did besides its figures."""

    fetches: int            # page fetches in all (discovery included)
    failures: int
    not_modified: int
    in_window: int          # page fetches inside the figures' window
    multiplier: float | None
    report: tuple           # the scheduler's DayTierStats rows
    tiers: tuple[int, ...]  # pages per runtime tier at the end


def runtime_figures(p: SimParams, *, on_day: Callable[[int], None] | None = None,
                    log: list | None = None) -> tuple[PolicyFigures, RuntimeRun]:
    """Crawl the model web of `p` with the real runtime; its freshness figures.
    `on_day(day)` is called as each virtual day's first fetch is answered;
    `log`, if given, receives (host, sent_s, answered_s, status) per fetch."""
    policy = courtly_policy(p)
    web = build_web(p, len(policy.tiers))
    w0, w1 = p.warmup_days * DAY_S, p.days * DAY_S
    meter = FreshnessMeter(web.rate.tolist(), random.Random(f"{p.seed}:changes"), window_from_s=w0, window_to_s=w1)
    fetcher: list[ModelFetcher] = []
    done: list[RuntimeRun] = []
    with tempfile.TemporaryDirectory(prefix="courtly-rtfresh-") as tmp:
        folder = Path(tmp)
        importance = folder / "importance.tsv"
        importance.write_text("".join(f"{u}\t{w!r}\n" for u, w in zip(web.urls, web.importance.tolist())))
        cfg = _config(p, importance)

        async def crawl(loop: VirtualLoop) -> None:
            clock = VirtualClock(loop)
            f = ModelFetcher(web, meter, clock, p, on_day, log)
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
                s = c.recrawl.scheduler
                placer = c.recrawl.placer
                day0 = int(T0 // DAY_S)   # the report's (UTC) days count from the one the crawl starts in
                report = tuple(dataclasses.replace(r, day=r.day - day0) for r in s.report())
                done.append(RuntimeRun(f.fetches, f.failures, f.not_modified, f.in_window, s.multiplier,
                                       report, tuple(placer.counts) if placer else (len(s),)))
            finally:
                store.close()

        level = logging.getLogger("courtly").level
        logging.getLogger("courtly").setLevel(logging.ERROR)
        try:
            run_virtual(crawl, start_at=T0, turns_max=200_000_000)
        finally:
            logging.getLogger("courtly").setLevel(level)
    fresh, age = meter.close()
    run = done[0]
    return figures("courtly", fresh, age, web.importance, web.tier, w1 - w0, run.in_window * DAY_S / (w1 - w0)), run
