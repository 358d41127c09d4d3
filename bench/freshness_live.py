"""Benchmark: freshness of a live `courtly crawl --intent search`, against uniform and optimal recrawl.

    python bench/freshness_live.py                        # 20 hosts x 50 pages, 4 fetches/s, 240 s
    python bench/freshness_live.py --budget-per-s 8 --duration-s 300 --change-rate-per-s 0.01

Starts the simulated web (`--profile bench`: plain hosts whose pages change
as Poisson processes at known rates: base x 0, 0.2, 1 or 5, home pages x 5),
then runs `python -m courtly crawl --intent search --duration-s T` with
`[recrawl] daily_budget` = budget-per-s x 86,400, a `period_s` of 10 s,
one tier whose interval runs from `--interval-s-min` to an hour, and
`importance = "uniform"` (`--importance opic` for the default): freshness
here is the plain mean over pages and the optimum weighs every page 1, while
with OPIC the scheduler maximises freshness weighted by link importance.

Freshness is computed from the server's side: a page's stored copy is the
version the server sent at the crawl's last 200 or 304 for it (the request
log says when); it is fresh from then until the page's next change (the
simulator's own change instants, `sim.change.change_times`) or the next
fetch. Averaged over the window [warmup, T] and over every page reachable
from the seeds (a page not fetched yet counts as stale).

In the same run and on the same change instants:
- uniform: every page revisited every N / R seconds from a random phase,
  R = the recrawl rate courtly used (its page fetches per second in the
  window), and R = the full budget;
- optimal: the simulator's optimum (`sim.freshness.optimal_frequencies`,
  the Lagrangian solution from the true rates under the tier's interval
  bounds), expected stationary freshness, at the full budget and at the
  rate courtly used;
- real runtime in virtual time: the real `Crawler` with the live crawl's
  config, seeds and duration on a virtual-time loop (sim/rtlive.py), whose
  fetcher answers with the simulated web's own `route` (same pages, links,
  robots.txt, sitemaps, feeds, ETags and 304s, change instants), measured
  the same way over the same window: everything the live crawl does, less
  the wall clock (CPU time, sockets, the server's real latency).
Prints the figures and the ratios, and where the budget went (the window's
requests per kind of resource: pages, print views, PDF files, feeds,
sitemaps, 404s), live and in the real runtime; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

from courtly.runtime.demo import simweb_process  # noqa: E402
from courtly.sim.change import change_times  # noqa: E402
from courtly.sim.freshness import optimal_frequencies  # noqa: E402
from courtly.sim.manifest import web_from_manifest  # noqa: E402
from courtly.sim.reqlog import load_log  # noqa: E402
from courtly.sim.rtlive import measured_freshness as _measured  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="simulated web seed (default 1)")
    ap.add_argument("--hosts", type=int, default=20, help="hosts (default 20)")
    ap.add_argument("--pages-per-host", type=int, default=50, help="pages per host (default 50)")
    ap.add_argument("--change-rate-per-s", type=float, default=1 / 120,
                    help="base change rate of a page (default 1/120 s)")
    ap.add_argument("--budget-per-s", type=float, default=4.0, help="recrawl budget, fetches per second (default 4)")
    ap.add_argument("--duration-s", type=float, default=240.0, help="crawl duration (default 240)")
    ap.add_argument("--warmup-s", type=float, default=60.0, help="start of the measured window (default 60)")
    ap.add_argument("--interval-s-min", type=float, default=5.0, help="the tier's minimum interval (default 5)")
    ap.add_argument("--importance", choices=("uniform", "opic"), default="uniform",
                    help="[recrawl] importance of the crawl (default uniform: the objective measured here)")
    ap.add_argument("--keep", action="store_true", help="keep the crawl folder")
    ap.add_argument("--virtual-only", action="store_true",
                    help="skip the live crawl: only the real runtime in virtual time and the optimum (seconds)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="courtly-fresh-"))
    try:
        sim_args = ["--profile", "bench", "--seed", str(args.seed), "--hosts", str(args.hosts),
                    "--pages-per-host", str(args.pages_per_host), "--ips", str(min(4, args.hosts)),
                    "--change-rate-per-s", repr(args.change_rate_per_s)]
        with simweb_process(tmp / "sim", sim_args, ready_s=120) as web:
            manifest = json.loads(web.manifest_file.read_text())
            config = tmp / "crawl.toml"
            config.write_text(
                "[crawl]\ncontact = \"bench@example.invalid\"\nfetch_tasks = 64\nintent = \"search\"\n"
                "[politeness]\ndelay_s = 0.05\ncrawl_delay_s_max = 0.05\nresponse_factor = 2.0\n"
                "ip_rate = 100.0\nip_concurrency = 8\n[fetch]\ntotal_s = 3.0\nconnect_s = 2.0\n"
                f"[network]\nallow = {json.dumps(manifest['allowed_networks'])}\n"
                f"hosts_file = \"{web.hosts_file}\"\n"
                f"[recrawl]\ndaily_budget = {int(args.budget_per_s * 86400)}\nperiod_s = 10.0\n"
                f"importance = \"{args.importance}\"\n"
                f"[[recrawl.tiers]]\nname = \"all\"\ninterval_s_min = {args.interval_s_min}\n"
                "interval_s_max = 3600.0\n")
            if args.virtual_only:
                _virtual_only(manifest, args, config)
                return 0
            out = tmp / "crawl"
            cmd = [sys.executable, "-m", "courtly", "crawl", "--config", str(config), "--seeds-file",
                   str(web.out / "seeds.txt"), "--out", str(out), "--duration-s", str(args.duration_s), "--quiet"]
            print(f"crawling {args.duration_s:g} s: simweb {' '.join(sim_args)}; budget {args.budget_per_s:g}/s; "
                  f"importance {args.importance}", flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-3000:])
            time.sleep(1.2)   # the server flushes its log every second
            log = load_log(web.log_file)
        _figures(manifest, log, args, config)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _figures(manifest: dict, log, args, config: Path) -> None:
    web = web_from_manifest(manifest)
    port, started = int(manifest["port"]), float(manifest["started_at"])
    pages = _pages(web, port)
    crawl_start = min(r.arrived_at for r in log) - started
    w0, w1 = crawl_start + args.warmup_s, crawl_start + args.duration_s
    syncs: dict[str, list[float]] = {u: [] for u in pages}
    fetches_in_window = 0
    for r in log:
        url = f"http://{r.host.rsplit(':', 1)[0]}:{port}{r.path}"
        t = r.arrived_at - started
        if url in syncs and r.method == "GET" and r.status in (200, 304):
            syncs[url].append(t)
            fetches_in_window += w0 <= t <= w1
    kinds = _by_kind(web, [(r.host.rsplit(":", 1)[0], r.path, r.status) for r in log
                           if r.method == "GET" and w0 <= r.arrived_at - started <= w1])
    changes = {u: change_times(key, rate, w1) for u, (key, rate) in pages.items()}
    n = len(pages)
    used_per_s = fetches_in_window / (w1 - w0)
    courtly = _measured(syncs, changes, w0, w1)
    rng = random.Random(args.seed)
    uniform_used = _measured(_uniform(pages, used_per_s, w0, w1, rng), changes, w0, w1)
    uniform_full = _measured(_uniform(pages, args.budget_per_s, w0, w1, rng), changes, w0, w1)
    rates = np.array([rate for _, rate in pages.values()])
    opt_full, opt_used = _optimum(rates, args.budget_per_s, args), _optimum(rates, used_per_s, args)
    print(f"pages {n}; window {w0 - crawl_start:.0f}-{w1 - crawl_start:.0f} s of the crawl; budget "
          f"{args.budget_per_s:g}/s, courtly used {used_per_s:.2f}/s ({used_per_s / args.budget_per_s:.0%})")
    print(f"budget by kind (live, fetches/s in the window): {_kinds_text(kinds, w1 - w0)}")
    print(f"freshness: courtly {courtly:.3f}   uniform at the rate used {uniform_used:.3f}   "
          f"uniform at the full budget {uniform_full:.3f}")
    print(f"optimum (simulator, true rates): at the full budget {opt_full:.3f}, at the rate used {opt_used:.3f}")
    print(f"ratios: courtly / optimum at full budget {courtly / opt_full:.3f}; courtly / optimum at the rate "
          f"used {courtly / opt_used:.3f}; courtly / uniform at the rate used {courtly / uniform_used:.3f}")
    t = time.monotonic()
    rt, rt_per_s, rt_kinds = _runtime_simulated(web, port, pages, config, args)
    print(f"budget by kind (real runtime in virtual time): {_kinds_text(rt_kinds, w1 - w0)}")
    print(f"real runtime in virtual time (same web, links, rates, config, budget and window; "
          f"{time.monotonic() - t:.0f} s to run): {rt:.3f} at {rt_per_s:.2f} fetches/s; "
          f"live / real-runtime simulation {courtly / rt:.3f}")
    print(f"summary: live {courtly:.3f}  real-runtime sim {rt:.3f}  "
          f"uniform (rate used) {uniform_used:.3f}  optimum (full budget) {opt_full:.3f}  live / real-runtime sim "
          f"{courtly / rt:.3f}")


def _optimum(rates, per_s: float, args) -> float:
    """Expected freshness of the simulator's optimum at `per_s` fetches a second (the tier's bounds)."""
    n = len(rates)
    lo, hi = np.full(n, args.interval_s_min), np.full(n, 3600.0)
    return _expected(rates, optimal_frequencies(rates, np.ones(n), lo, hi, per_s)[0])


def _pages(web, port: int) -> dict[str, tuple]:
    """url -> (change key, rate) of every page reachable from the seeds."""
    pages = {}
    for url in sorted(web.reachable_pages(web.seeds(port))):
        host, _, target = url.split("://", 1)[1].partition("/")
        lay = web.layout(host.rsplit(":", 1)[0])
        res = lay.resolve("/" + target)
        if res.kind == "page" and res.variant == "":
            pages[url] = (lay.change_key(res.page), lay.change_rate(res.page))
    return pages


def _virtual_only(manifest: dict, args, config: Path) -> None:
    web = web_from_manifest(manifest)
    port = int(manifest["port"])
    pages = _pages(web, port)
    opt_full = _optimum(np.array([rate for _, rate in pages.values()]), args.budget_per_s, args)
    rt, rt_per_s, rt_kinds = _runtime_simulated(web, port, pages, config, args)
    print(f"budget by kind (real runtime in virtual time): {_kinds_text(rt_kinds, args.duration_s - args.warmup_s)}")
    print(f"real runtime in virtual time: {rt:.3f} at {rt_per_s:.2f} fetches/s; optimum (full budget) "
          f"{opt_full:.3f}; share {rt / opt_full:.3f}")


def _runtime_simulated(web, port: int, pages: dict, config: Path, args) -> tuple[float, float, dict[str, int]]:
    """Plain freshness of the real runtime (sim/rtlive.py) crawling the same web in virtual time."""
    from courtly.config import load_config
    from courtly.sim.rtlive import crawl_virtual

    cfg = load_config(config).replace("crawl", duration_s=args.duration_s)
    log = crawl_virtual(web, cfg, web.seeds(port), port=port)
    w0, w1 = args.warmup_s, args.duration_s
    syncs: dict[str, list[float]] = {u: [] for u in pages}
    for row in log:
        if row.url in syncs and row.status in (200, 304):
            syncs[row.url].append(row.t_s)
    in_window = sum(w0 <= t <= w1 for times in syncs.values() for t in times)
    changes = {u: change_times(key, rate, w1) for u, (key, rate) in pages.items()}
    kinds = _by_kind(web, [(row.url.split("://", 1)[1].partition("/")[0].rsplit(":", 1)[0],
                            "/" + row.url.split("://", 1)[1].partition("/")[2], row.status)
                           for row in log if w0 <= row.t_s <= w1])
    return _measured(syncs, changes, w0, w1), in_window / (w1 - w0), kinds


def _by_kind(web, rows: list[tuple[str, str, int]]) -> dict[str, int]:
    """Requests per kind of resource (page, print view, PDF, feed, sitemap, robots.txt,
    404, ...), from (host, path, status) rows: where the budget went."""
    out: dict[str, int] = {}
    for host, path, status in rows:
        res = web.layout(host).resolve(path)
        kind = "404" if status in (404, 410) else res.kind
        if res.kind == "page" and res.variant:
            kind = "page copy"
        elif res.kind == "extra" and res.variant:
            kind = res.variant   # print, hidden, orphan
        out[kind] = out.get(kind, 0) + 1
    return out


def _kinds_text(kinds: dict[str, int], span_s: float) -> str:
    total = sum(kinds.values()) or 1
    return ", ".join(f"{k} {n / span_s:.2f}/s ({n / total:.0%})" for k, n in sorted(kinds.items(), key=lambda x: -x[1]))


def _uniform(pages: dict, per_s: float, w0: float, w1: float, rng: random.Random) -> dict[str, list[float]]:
    """Every page every N / per_s seconds from a random phase (one sync before the window)."""
    interval = len(pages) / per_s if per_s > 0 else math.inf
    out = {}
    for url in pages:
        if math.isinf(interval):
            out[url] = [w0]
            continue
        t = w0 - rng.random() * interval
        out[url] = [t + k * interval for k in range(int((w1 - t) / interval) + 1)]
    return out


def _expected(rates: np.ndarray, freq: np.ndarray) -> float:
    """Mean stationary freshness f/lambda (1 - e^(-lambda/f)) (a page that never changes: 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(rates > 0, np.where(freq > 0, freq / rates * -np.expm1(-rates / np.where(freq > 0, freq, 1.0)),
                                         0.0), 1.0)
    return float(f.mean())


if __name__ == "__main__":
    raise SystemExit(main())
