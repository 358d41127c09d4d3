"""The real runtime in virtual time: one seed = one web with faults, one crawl,
one verdict (`courtly sim runtime`).

Theory of operation
-------------------
`run_seed(seed)` draws the web of the seed (sim/rtweb.draw_web), builds a
`runtime.crawler.Crawler` as runtime/wiring does (the same constructor, a
real `SqliteStore` in a temporary folder), but with the fakes of rtweb for
the network, the extraction pool and the WARC writer, and runs it on a
`VirtualLoop` (sim/vloop.py): every timer of the runtime - its politeness
waits, the main loop's wake-ups, the commit loop, lease holding, IP waiters -
runs in virtual time, in one thread, so a crawl of hours takes a fraction of
a second and the same seed gives the same request log, bit for bit. The crawl
stops by itself or after `DURATION_S` of virtual time; then the checker
(sim/rtcheck.py) judges the request log and the store.

A run that ends on an unavailable store - past `store.down_s_max` while
crawling, or already while loading the folder (a restart that falls inside
the outage) - ends as the command does, with its environment exit; the same
command is then run again once the store is back.

Rules: nothing here reads the wall clock except the report of how long the
run took; a failing seed's line says how to reproduce it alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from courtly.config import Config
from courtly.core.recrawl_policy import policy_for_intent
from courtly.runtime.crawler import Crawler
from courtly.runtime.exits import environment_problem
from courtly.runtime.group_commit import StoreDown
from courtly.runtime.seeds import feed_seeds
from courtly.shell.store.sqlite import SqliteStore
from courtly.sim.rtfaults import FlakyStore, Freeze
from courtly.sim.rtcheck import CheckLimits, Rule, UrlRow, Violation, check_run
from courtly.sim.rtweb import DEFAULT_SIZE, Request, RuntimeWeb, SimExtractor, SimFetcher, SimResolver, SimWarc, WebSize, draw_web
from courtly.sim.vloop import VirtualClock, VirtualLoop, VirtualStall, run_virtual

__all__ = ["T0", "DURATION_S", "SeedResult", "config_for", "run_seed", "run_seeds", "main"]

T0 = 1_700_000_000.0          # the virtual clock's start (wall-clock seconds)
DURATION_S = 4 * 3600.0       # a crawl that has not ended by itself is stopped then
SEARCH_DURATION_S = 5400.0    # a search crawl never ends by itself: six recrawl periods of its top tier
TURNS_MAX = 500_000           # event loop turns per seed (a livelock ends as a stall)
PROGRESS_EVERY = 50           # seeds between two progress lines of a long run
KEYS_MAX = 200                # bounds of --keys-max and --pages-max (a seed's web stays small)
PAGES_MAX = 200
UNWRITTEN_MAX = 3             # store.unwritten_max of a seeded run (small: its outages reach it)


@dataclass(frozen=True, slots=True)
class SeedResult:
    seed: int
    web: RuntimeWeb
    requests: tuple[Request, ...]
    violations: tuple[Violation, ...]
    pages_fetched: int
    virtual_s: float
    ended_by_itself: bool
    store_failures: int = 0       # calls the store failed (its outage window met the crawl)
    store_down: bool = False      # the crawl stopped: its store was down past store.down_s_max
    froze: bool = False           # the process stall drawn happened

    @property
    def ok(self) -> bool:
        return not self.violations


def config_for(seed: int, intent: str = "archive") -> Config:
    """The crawl settings of a seeded run: the defaults, 16 fetch tasks (more
    than a shared server's 4 connections) and a small seen filter (the webs are small: the filter's fill check after each
    commit scans it), the seed's own random streams, a time limit."""
    # a search crawl never ends by itself: it recrawls for the time limit
    duration = SEARCH_DURATION_S if intent == "search" else DURATION_S
    cfg = Config().replace("crawl", seed=seed, fetch_tasks=16, duration_s=duration, intent=intent)
    # a small bound of unwritten requests: a store outage of a small web reaches it (fetching pauses)
    return cfg.replace("seen", bloom_capacity=10_000).replace("store", unwritten_max=UNWRITTEN_MAX)


def limits_of(cfg: Config) -> CheckLimits:
    p = cfg.politeness
    recrawl_s = None
    if cfg.crawl.intent != "archive":   # the shortest interval a tier of the intent allows between two fetches
        recrawl_s = min(t.interval_s_min for t in policy_for_intent(cfg.crawl.intent, 1).tiers)
    return CheckLimits(delay_s=p.delay_s, crawl_delay_s_max=p.crawl_delay_s_max, backoff_s_max=p.backoff_s_max,
                       ip_concurrency=p.ip_concurrency, ip_rate=p.ip_rate, token=cfg.robots.token,
                       recrawl_s_min=recrawl_s)


def run_seed(seed: int, size: WebSize = DEFAULT_SIZE, cfg: Config | None = None,
             web: RuntimeWeb | None = None) -> SeedResult:
    """Crawl the web of `seed` (or `web`, one made from it) with the real runtime in virtual time; check it."""
    web = web or draw_web(seed, size)
    cfg = cfg or config_for(seed, web.intent)
    with tempfile.TemporaryDirectory(prefix="courtly-rtsim-") as tmp:
        folder = Path(tmp)
        fetcher: list[SimFetcher] = []
        outcome: dict[str, object] = {}

        async def crawl(loop: VirtualLoop) -> None:
            outcome["loop"] = loop     # its time tells when a stall happened
            clock = VirtualClock(loop)
            freeze = Freeze(web, loop, T0)
            outcome["freeze"] = freeze
            outcome["store_failures"] = 0
            f = SimFetcher(web, clock, cfg.robots.token, freeze)
            fetcher.append(f)
            if web.leap_at_s is not None:
                loop.call_later(web.leap_at_s, loop.leap, web.leap_s)
            outcome["pages"] = 0
            restarted = await _one_run(cfg, clock, f, web, folder, first=True, outcome=outcome, freeze=freeze)
            if restarted:   # stopped or aborted for the web's restart: a new run resumes at once
                await _one_run(cfg, clock, f, web, folder, first=False, outcome=outcome, freeze=freeze)
            if "store_down" in outcome:   # the same command, run again once the store is back
                outcome["acknowledged"] = _acknowledged(folder)
                await clock.sleep_until(max(clock.now(), T0 + web.store_down_at_s + web.store_down_s))
                outcome["resumed_at"] = clock.now()
                outcome["stopped_down"] = outcome.pop("store_down")
                await _one_run(cfg, clock, f, web, folder, first=False, outcome=outcome, freeze=freeze, seeds=True)

        problems: list[Violation] = []
        try:
            run_virtual(crawl, start_at=T0, turns_max=TURNS_MAX)
        except VirtualStall as e:
            problems.append(Violation(Rule.STALLED, _when(outcome), str(e)))
        except Exception as e:  # noqa: BLE001 - a crash of the runtime is this seed's verdict
            problems.append(Violation(Rule.CRASHED, _when(outcome), f"{type(e).__name__}: {e}"))
        if "crash" in outcome:
            e = outcome["crash"]
            problems.append(Violation(Rule.CRASHED, _when(outcome), f"{type(e).__name__}: {e}"))
        log = tuple(fetcher[0].log) if fetcher else ()
        db = sqlite3.connect(folder / "crawl.db")
        try:
            rows = [UrlRow(*r) for r in db.execute("SELECT url, state, reason FROM urls ORDER BY rowid")]
        finally:
            db.close()
    resumed = None
    if "resumed_at" in outcome:
        resumed = (float(outcome["resumed_at"]), outcome["acknowledged"])
    found = check_run(web, log, rows, limits_of(cfg), t0=T0, ended_by_itself=bool(outcome.get("ended")),
                      resumed_after_down=resumed)
    freeze = outcome.get("freeze")
    return SeedResult(seed, web, log, tuple(problems + found), int(outcome.get("pages", 0)),
                      _when(outcome), bool(outcome.get("ended")), int(outcome.get("store_failures", 0)),
                      "store_down" in outcome or "stopped_down" in outcome,
                      freeze is not None and freeze.done_at is not None)


def _when(outcome: dict) -> float:
    """Seconds from the start to where the run stopped (the loop keeps its time after it closes)."""
    loop = outcome.get("loop")
    return loop.time() - T0 if loop is not None else 0.0


def _acknowledged(folder: Path) -> frozenset[str]:
    """The URLs the store has settled (any state but queued), read as a reader beside the crawl would."""
    db = sqlite3.connect(folder / "crawl.db")
    try:
        return frozenset(u for (u,) in db.execute("SELECT url FROM urls WHERE state != 'queued'"))
    finally:
        db.close()


async def _one_run(cfg: Config, clock: VirtualClock, fetcher: SimFetcher, web: RuntimeWeb, folder: Path, *,
                   first: bool, outcome: dict, freeze: Freeze, seeds: bool = False) -> bool:
    """One crawl on the folder's store (the first one, or one with `seeds`,
    admits the seeds, as the same command does again); True when it was
    stopped for the web's restart, so that another resumes."""
    store = FlakyStore(SqliteStore(folder / "crawl.db"), web, clock, T0, freeze)
    crawler = Crawler(cfg, clock=clock, resolver=SimResolver(web), fetcher=fetcher, warc=SimWarc(), store=store,
                      extractor=SimExtractor(cfg.robots.token, cfg.extract.links_max, cfg.budget.enabled))
    stopped: list[bool] = []

    def restart() -> None:
        stopped.append(True)
        crawler.abort() if web.restart_aborts else crawler.stop()

    timer = None
    try:
        try:
            crawler.load()
        except Exception as e:
            if not environment_problem(e):
                raise
            outcome["store_down"] = e     # the command's exit 4 before it crawls: run again when the store is back
            return False
        if first or seeds:
            await feed_seeds(crawler, web.seeds)   # as runtime/wiring.run_crawl admits them
        if first:
            if web.restart_at_s is not None:
                timer = clock.timer(clock.now() + web.restart_at_s, restart)
        stats = await crawler.run()
        outcome["pages"] += stats.fetched
        outcome["ended"] = not crawler.stopping
        if isinstance(crawler.fatal, StoreDown):   # past store.down_s_max: a clean stop, judged as one
            outcome["store_down"] = crawler.fatal
        elif crawler.fatal is not None:
            outcome["crash"] = crawler.fatal
    finally:
        if timer is not None:
            timer.cancel()
        outcome["store_failures"] += store.failures
        store.close()
    return bool(stopped) and "crash" not in outcome and "store_down" not in outcome


def run_seeds(seeds: range, size: WebSize = DEFAULT_SIZE, on_result=None) -> list[SeedResult]:
    """`run_seed` for each seed; `on_result(result)` after each."""
    out = []
    for seed in seeds:
        r = run_seed(seed, size)
        if on_result is not None:
            on_result(r)
        out.append(r)
    return out


# ---- the command ---------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="courtly sim runtime",
        description="Run the real crawler runtime on seeded webs with faults (slow and dripping hosts, "
                    "429/503/5xx bursts, refused connections, DNS failures, robots.txt 5xx or unreachable, "
                    "clock leaps, the store unavailable, the process frozen) in virtual time, and check every run: per-key and per-IP politeness, "
                    "robots.txt first and obeyed, no URL lost or fetched twice, every skip with a reason.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--seeds", type=int, default=50, help="how many seeds to run (the soak: 1000)")
    ap.add_argument("--first", type=int, default=1, help="the first seed")
    ap.add_argument("--seed", type=int, default=None,
                    help="run this one seed and print its web, its request log and every violation")
    ap.add_argument("--keys-max", type=int, default=DEFAULT_SIZE.keys_max,
                    help="at most this many politeness keys per web (a bigger web per seed)")
    ap.add_argument("--pages-max", type=int, default=DEFAULT_SIZE.pages_max, help="at most this many pages per host")
    ap.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    return ap


def _fail_line(r: SeedResult, size: WebSize) -> str:
    knobs = "".join(f" --{name.replace('_', '-')} {getattr(size, name)}" for name in ("keys_max", "pages_max")
                    if getattr(size, name) != getattr(DEFAULT_SIZE, name))
    return (f"seed {r.seed}: FAILED {r.violations[0].render()}"
            f" ({len(r.violations)} violation{'s' if len(r.violations) != 1 else ''};"
            f" reproduce: courtly sim runtime --seed {r.seed}{knobs})")


def _one(seed: int, size: WebSize) -> int:
    r = run_seed(seed, size)
    print(f"seed {seed}: web\n{r.web.describe()}")
    print(f"request log ({len(r.requests)} requests, instants from the start):")
    for q in r.requests:
        print(f"  +{q.sent_at - T0:10.3f} .. +{q.done_at - T0:10.3f}  {q.status:3d}  {q.ip:15s} {q.url}"
              + (f"  retry-after {q.retry_after}" if q.retry_after else ""))
    for v in r.violations:
        print("violation: " + v.render())
    print(f"seed {seed}: {'ok' if r.ok else 'FAILED'}; {r.pages_fetched} pages, virtual {r.virtual_s:.1f} s, "
          f"{'ended by itself' if r.ended_by_itself else 'stopped at the time limit'}"
          + ("; stopped once by its store down past store.down_s_max, and resumed" if r.store_down else ""))
    return 0 if r.ok else 1


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.seeds < 1 or (a.seed is not None and a.seed < 0) or a.first < 0:
        print("courtly sim runtime: error: --seeds must be >= 1, --seed and --first >= 0", file=sys.stderr)
        return 2
    if not (DEFAULT_SIZE.keys_min <= a.keys_max <= KEYS_MAX and DEFAULT_SIZE.pages_min <= a.pages_max <= PAGES_MAX):
        print(f"courtly sim runtime: error: --keys-max must be in {DEFAULT_SIZE.keys_min}..{KEYS_MAX} and "
              f"--pages-max in {DEFAULT_SIZE.pages_min}..{PAGES_MAX}", file=sys.stderr)
        return 2
    size = dataclasses.replace(DEFAULT_SIZE, keys_max=a.keys_max, pages_max=a.pages_max)
    logging.getLogger("courtly").setLevel(logging.CRITICAL)   # the verdicts speak; the crawl's log would drown them
    if a.seed is not None:
        return _one(a.seed, size)
    started = time.perf_counter()
    failed: list[SeedResult] = []
    totals = {"requests": 0, "pages": 0, "virtual_s": 0.0}
    done = 0

    def note(r: SeedResult) -> None:
        nonlocal done
        done += 1
        totals["requests"] += len(r.requests)
        totals["pages"] += r.pages_fetched
        totals["virtual_s"] += r.virtual_s
        if not r.ok:
            failed.append(r)
            if not a.json:
                print(_fail_line(r, size), flush=True)
        if a.seeds > PROGRESS_EVERY and done % PROGRESS_EVERY == 0:
            print(f"courtly sim runtime: {done}/{a.seeds} seeds, {len(failed)} failed "
                  f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)

    run_seeds(range(a.first, a.first + a.seeds), size, on_result=note)
    wall = time.perf_counter() - started
    if a.json:
        print(json.dumps({"seeds": a.seeds, "first": a.first, "failed": len(failed), **totals,
                          "wall_s": round(wall, 3),
                          "failures": [{"seed": r.seed, "violations": len(r.violations),
                                        "first": {"rule": str(r.violations[0].rule), "at_s": r.violations[0].at,
                                                  "detail": r.violations[0].detail}} for r in failed]}))
    else:
        print(f"courtly sim runtime: {a.seeds} seeds ({a.first}..{a.first + a.seeds - 1}), {len(failed)} failed; "
              f"{totals['requests']} requests, {totals['pages']} pages, {totals['virtual_s'] / 3600:.1f} virtual "
              f"hours in {wall:.1f} s")
    return 1 if failed else 0
