"""Benchmark: courtly, Scrapy and Crawlee for Python on the same simulated web, side by side.

    pip install -e '.[bench]'                  # Scrapy and Crawlee (optional; missing ones are skipped)
    python bench/compare.py                    # S1 and S2, all three crawlers
    python bench/compare.py --scenario s1 --crawlers courtly,scrapy --json-out s1.json
    python bench/compare.py --scenario s2 --hosts 200 --max-pages 1000   # a smaller run
    python bench/compare.py --scenario s2 --crawlers courtly --timeline  # requests per second, by kind
    python bench/compare.py --scenario s2 --politeness-key host         # S2 keyed per host name

Scenarios (`courtly simweb --profile bench`, 50 pages per host, 250 IPs, seed 1):
  s1 "raw":    1,000 hosts, no delay, one request at a time per host, stop at 20,000 pages
  s2 "polite": 2,000 hosts, 1 s delay per host, stop at 10,000 pages; the politeness
               ceiling is hosts / delay = 2,000 pages/s and the table gives % of it

For each crawler a fresh simulated web is started (pinned to CPU 0) and the
crawler runs as its own process (pinned to CPU 1): courtly exactly as
bench/crawl.py runs it (`python -m courtly crawl` with a config), Scrapy as
bench/rival_scrapy.py and Crawlee as bench/rival_crawlee.py, each set up as
its documentation recommends for a polite broad crawl (their docstrings say
how, and what had to be adapted). Every figure comes from outside the
crawler: wall time of the process, pages = 200 answers for HTML pages in the
server's request log (robots.txt, sitemaps and feeds are not pages), pages/s =
pages / wall time (% ceil is of this), req/s = every request in the log
(robots.txt, sitemaps, 404s too) / wall time, % key ceil = req/s against
keys / delay (the politeness keys, registered domains, of the web's hosts:
S2's 2,000 hosts are 1,620 domains, and robots.txt, the soft-404 probe and
sitemaps take turns of the same keys), span = first request's arrival to the
last one's completion in the server's log and span p/s = pages / span (the
rate while crawling, without start-up and shut-down), CPU =
user+sys of the crawler's process tree (os.wait4), peak RSS = the summed RSS
of the tree sampled every 0.1 s (psutil; without it the largest process's
ru_maxrss), violations = `courtly.sim.check` over the server's log (one
request in flight and the delay per registered domain, so www.acme1.test and
shop.acme1.test count as one; robots.txt first and obeyed for the "courtly"
group; the per-IP limits given by --ip-rate/--ip-concurrency). Below the
table the same per-key rules are counted per host name, the key Scrapy's
download slots and Crawlee's throttled domains use. With `--politeness-key
host` courtly keys politeness by host name (its `[crawl] politeness_key =
"host"`) and the checker holds every crawler to one request at a time and
the delay per host name: S2 as issue 8 words it ("1 s delay per host"), whose
2,000 keys make the stated ceiling the keys' ceiling.

The page limit is each crawler's own: courtly's `max_pages` counts every
fetch (sitemaps, feeds and 404s too), so it stops with fewer HTML pages;
Scrapy finishes the requests already in its downloader after CloseSpider,
so it may pass the limit. Rates are per page actually fetched.

Ratios read "courtly is N times better": speed = courtly pages/s / theirs,
CPU = their CPU s per 1,000 pages / courtly's. The machine is shared, so
figures are noisy: compare within one run. This is a benchmark, not a test:
it measures and prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from harness import ROOT, courtly_command, run_measured, server_verdict, simulated_web  # noqa: E402

CRAWLERS = ("courtly", "scrapy", "crawlee")
NEEDS = {"courtly": (), "scrapy": ("scrapy",), "crawlee": ("crawlee", "curl_cffi", "parsel")}


@dataclass(frozen=True, slots=True)
class Scenario:
    key: str
    title: str
    hosts: int
    max_pages: int
    delay_s: float
    pages_per_host: int = 50
    ips: int = 250

    @property
    def ceiling(self) -> float | None:
        """Pages/s that politeness allows at most (every host busy, one fetch per delay)."""
        return self.hosts / self.delay_s if self.delay_s > 0 else None

    def describe(self) -> str:
        delay = f"{self.delay_s:g} s delay per host" if self.delay_s else "no delay"
        return (f"{self.key.upper()} {self.title}: {self.hosts:,} hosts x {self.pages_per_host} pages on "
                f"{self.ips} IPs, {delay}, one request at a time per host, stop at {self.max_pages:,} pages")


SCENARIOS = {
    "s1": Scenario("s1", "raw", hosts=1000, max_pages=20_000, delay_s=0.0),
    "s2": Scenario("s2", "polite", hosts=2000, max_pages=10_000, delay_s=1.0),
}


def missing_modules(crawler: str) -> list[str]:
    return [m for m in NEEDS[crawler] if importlib.util.find_spec(m) is None]


def crawler_command(crawler: str, tmp: Path, web, allowed: list[str], sc: Scenario,  # type: ignore[no-untyped-def]
                    args: argparse.Namespace) -> list[str]:
    if crawler == "courtly":
        return courtly_command(tmp, web, allowed, max_pages=sc.max_pages, fetch_tasks=args.fetch_tasks,
                               delay_s=sc.delay_s, ip_rate=args.ip_rate, ip_concurrency=args.ip_concurrency,
                               politeness_key=args.politeness_key)
    script = BENCH / f"rival_{crawler}.py"
    return [sys.executable, str(script), "--seeds", str(web.out / "seeds.txt"), "--hosts-file", str(web.hosts_file),
            "--allowed", json.dumps(allowed), "--max-pages", str(sc.max_pages), "--delay-s", str(sc.delay_s),
            "--concurrency", str(args.concurrency)]


def run_one(crawler: str, sc: Scenario, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"courtly-cmp-{sc.key}-{crawler}-"))
    row: dict[str, Any] = {"crawler": crawler, "status": "ok"}
    try:
        with simulated_web(tmp / "sim", hosts=sc.hosts, pages_per_host=sc.pages_per_host, ips=sc.ips,
                           seed=args.seed) as (web, allowed):
            cmd = crawler_command(crawler, tmp, web, allowed, sc, args)
            run = run_measured(cmd, tmp / "run", timeout_s=args.timeout_s, env=env, cwd=tmp)
            verdict = server_verdict(web, delay_s=sc.delay_s, ip_rate=args.ip_rate,
                                     ip_concurrency=args.ip_concurrency, politeness_key=args.politeness_key)
            if run.timed_out:
                row["status"] = f"stopped after the {args.timeout_s:g} s timeout"
            elif run.returncode != 0:
                row["status"] = f"exit code {run.returncode}"
                row["stderr_tail"] = run.tail(1500)
            pages = verdict.pages
            row.update(pages=pages, requests=verdict.requests, by_kind=verdict.by_kind, wall_s=round(run.wall_s, 2),
                       pages_per_s=round(pages / run.wall_s, 1) if run.wall_s else 0.0,
                       fetch_span_s=round(verdict.span_s, 2),
                       pages_per_s_span=round(pages / verdict.span_s, 1) if verdict.span_s else 0.0,
                       cpu_s=round(run.cpu_s, 2),
                       cpu_s_per_1k=round(run.cpu_s / pages * 1000, 3) if pages else None,
                       peak_rss_mb=round(run.rss_mb, 1), maxrss_single_mb=round(run.maxrss_mb, 1),
                       rss_measure="tree sum (psutil)" if run.tree_rss_peak_mb is not None else "largest process",
                       violations=verdict.violations, violations_by_rule=verdict.rules,
                       violations_per_host_name=verdict.host_rules)
            row["timeline"] = verdict.timeline
            if args.timeline:
                print(render_timeline(crawler, verdict.timeline), flush=True)
            row["requests_per_s"] = round(verdict.requests / run.wall_s, 1) if run.wall_s else 0.0
            row["keys"] = verdict.keys
            if sc.ceiling:
                row["ceiling_pct"] = round(100 * row["pages_per_s"] / sc.ceiling, 1)
                if verdict.keys:
                    row["key_ceiling_pct"] = round(100 * row["requests_per_s"] * sc.delay_s / verdict.keys, 1)
            if verdict.violations and args.verbose:
                print(verdict.report.render(), flush=True)
    except Exception as exc:  # a crawler or the web failing must not end the whole comparison
        row["status"] = f"failed: {type(exc).__name__}: {exc}"[:300]
    finally:
        if args.keep:
            print(f"  kept {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return row


def add_ratios(rows: list[dict[str, Any]]) -> None:
    base = next((r for r in rows if r["crawler"] == "courtly" and r.get("pages")), None)
    if base is None:
        return
    for r in rows:
        if r is base or not r.get("pages"):
            continue
        if r["pages_per_s"]:
            r["courtly_speed_x"] = round(base["pages_per_s"] / r["pages_per_s"], 2)
        if r.get("cpu_s_per_1k") and base.get("cpu_s_per_1k"):
            r["courtly_cpu_x"] = round(r["cpu_s_per_1k"] / base["cpu_s_per_1k"], 2)


TIMELINE_KINDS = ("robots", "page", "other", "error")


def render_timeline(crawler: str, timeline: list[dict[str, int]]) -> str:
    """Requests per second of the server's log, by kind: which part of a run
    is bound by the politeness keys (every key busy) and which by the crawler."""
    lines = [f"  {crawler}: requests per second of its run, from the first (robots.txt, HTML pages, "
             "other 200s such as sitemaps, errors and not-found answers)",
             f"  {'second':>6} {'all':>6} " + " ".join(f"{k:>6}" for k in TIMELINE_KINDS)]
    for i, counts in enumerate(timeline):
        lines.append(f"  {i:>6} {sum(counts.values()):>6} "
                     + " ".join(f"{counts.get(k, 0):>6}" for k in TIMELINE_KINDS))
    return "\n".join(lines)


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def render(sc: Scenario, rows: list[dict[str, Any]]) -> str:
    head = (f"{'crawler':<8} {'pages':>7} {'wall s':>7} {'pages/s':>8} {'span s':>7} {'span p/s':>8} "
            f"{'% ceil':>6} {'req/s':>7} {'% key ceil':>10} {'CPU s/1k':>9} "
            f"{'RSS MB':>7} {'violations':>10} {'speed x':>8} {'CPU x':>6}  status")
    lines = [sc.describe(), head, "-" * len(head)]
    for r in rows:
        if "pages" not in r:
            lines.append(f"{r['crawler']:<8} {r['status']}")
            continue
        lines.append(
            f"{r['crawler']:<8} {r['pages']:>7} {r['wall_s']:>7.1f} {r['pages_per_s']:>8.1f} "
            f"{r['fetch_span_s']:>7.1f} {r['pages_per_s_span']:>8.1f} "
            f"{_fmt(r.get('ceiling_pct'), '.1f'):>6} {r['requests_per_s']:>7.1f} "
            f"{_fmt(r.get('key_ceiling_pct'), '.1f'):>10} {_fmt(r['cpu_s_per_1k'], '.2f'):>9} "
            f"{r['peak_rss_mb']:>7.0f} {r['violations']:>10} {_fmt(r.get('courtly_speed_x'), '.2f'):>8} "
            f"{_fmt(r.get('courtly_cpu_x'), '.2f'):>6}  {r['status']}")
    for r in rows:
        if r.get("violations_by_rule"):
            rules = ", ".join(f"{k} {v}" for k, v in sorted(r["violations_by_rule"].items()))
            per_host = ", ".join(f"{k} {v}" for k, v in sorted(r["violations_per_host_name"].items())) or "none"
            lines.append(f"  {r['crawler']} violations by rule: {rules}; key rules per host name instead of "
                         f"per registered domain: {per_host}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:3]))
    ap.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    ap.add_argument("--crawlers", default=",".join(CRAWLERS), help="comma-separated, of: " + ", ".join(CRAWLERS))
    ap.add_argument("--hosts", type=int, help="override the scenario's host count (smaller runs)")
    ap.add_argument("--max-pages", type=int, help="override the scenario's page limit (smaller runs)")
    ap.add_argument("--concurrency", type=int, default=256,
                    help="Scrapy CONCURRENT_REQUESTS and Crawlee's task pool (default 256)")
    ap.add_argument("--fetch-tasks", type=int, default=512, help="courtly [crawl] fetch_tasks (default 512)")
    ap.add_argument("--ip-rate", type=float, default=1000.0,
                    help="courtly's per-IP rate limit and the checker's (loopback only; default 1000/s)")
    ap.add_argument("--ip-concurrency", type=int, default=64,
                    help="courtly's per-IP concurrency limit and the checker's (default 64)")
    ap.add_argument("--politeness-key", choices=("domain", "host"), default="domain",
                    help="courtly's [crawl] politeness_key and the checker's key (default domain, courtly's "
                         "default; host is the rule as issue 8 words S2, one host name a key)")
    ap.add_argument("--timeout-s", type=float, default=900.0, help="stop a crawler after this long (default 900)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json-out", help="also write the table as JSON to this file")
    ap.add_argument("--keep", action="store_true", help="keep each run's folder (crawl, logs, request log)")
    ap.add_argument("--verbose", action="store_true", help="print every violation found")
    ap.add_argument("--timeline", action="store_true",
                    help="print each run's requests per second by kind (also in --json-out)")
    args = ap.parse_args()

    crawlers = [c.strip() for c in args.crawlers.split(",") if c.strip()]
    unknown = [c for c in crawlers if c not in CRAWLERS]
    if unknown or not crawlers:
        ap.error(f"unknown crawler(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(CRAWLERS)}")
    for name, value in (("--hosts", args.hosts), ("--max-pages", args.max_pages), ("--concurrency", args.concurrency)):
        if value is not None and value < 1:
            ap.error(f"{name} must be at least 1")
    scenarios = list(SCENARIOS.values()) if args.scenario == "all" else [SCENARIOS[args.scenario]]
    scenarios = [dataclasses.replace(sc, hosts=args.hosts or sc.hosts, max_pages=args.max_pages or sc.max_pages,
                                     ips=min(sc.ips, args.hosts or sc.hosts)) for sc in scenarios]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])

    results: list[dict[str, Any]] = []
    for sc in scenarios:
        print(sc.describe(), flush=True)
        rows: list[dict[str, Any]] = []
        for crawler in crawlers:
            missing = missing_modules(crawler)
            if missing:
                line = f"{crawler}: skipped, not installed ({', '.join(missing)}; pip install -e '.[bench]')"
                print(f"  {line}", flush=True)
                rows.append({"crawler": crawler, "status": "skipped: not installed"})
                continue
            print(f"  {crawler}: running ...", flush=True)
            row = run_one(crawler, sc, args, env)
            print(f"  {crawler}: {row.get('pages', 0)} pages in {row.get('wall_s', 0)} s, "
                  f"{row.get('violations', '-')} violation(s), {row['status']}", flush=True)
            rows.append(row)
        add_ratios(rows)
        print()
        print(render(sc, rows), flush=True)
        print()
        results.append({"scenario": dataclasses.asdict(sc), "ceiling_pages_per_s": sc.ceiling, "rows": rows})
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"runs": results, "cpus": os.cpu_count()}, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
