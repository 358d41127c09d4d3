"""Benchmark: crawl a larger simulated web and print capacity figures.

    python bench/crawl.py                      # 1,000 hosts x 50 pages, stop at 20,000 pages
    python bench/crawl.py --hosts 200 --pages-per-host 50 --max-pages 5000 --delay-s 1.0

The simulated web runs in its own process (pinned to CPU 0 when `taskset`
exists) and the crawler in another (pinned to CPU 1), started exactly as a
user would (`python -m courtly crawl`). Printed: pages fetched, wall time,
pages/s, crawler CPU seconds (user+sys) per 1,000 pages, crawler peak RSS,
and politeness violations found in the servers' request log.

The crawl targets only loopback, so the per-IP limits may be raised here
(`--ip-rate`, `--ip-concurrency`) without being impolite to anyone; the
per-key rules (one request in flight, the delay) stay as configured.
This is a benchmark, not a test: it measures and prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import courtly_command, run_measured, server_verdict, simulated_web  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--pages-per-host", type=int, default=50)
    ap.add_argument("--ips", type=int, default=250)
    ap.add_argument("--max-pages", type=int, default=20_000)
    ap.add_argument("--delay-s", type=float, default=0.0)
    ap.add_argument("--ip-rate", type=float, default=1000.0)
    ap.add_argument("--ip-concurrency", type=int, default=64)
    ap.add_argument("--fetch-tasks", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the crawl folder")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="courtly-bench-"))
    print(f"simulated web: {args.hosts} hosts x {args.pages_per_host} pages on {args.ips} IPs", flush=True)
    try:
        with simulated_web(tmp / "sim", hosts=args.hosts, pages_per_host=args.pages_per_host,
                           ips=args.ips, seed=args.seed) as (web, allowed):
            cmd = courtly_command(tmp, web, allowed, max_pages=args.max_pages, fetch_tasks=args.fetch_tasks,
                                  delay_s=args.delay_s, ip_rate=args.ip_rate, ip_concurrency=args.ip_concurrency)
            run = run_measured(cmd, tmp / "run")
            if run.returncode != 0:
                print(run.tail(3000), file=sys.stderr)
                return 1
            from courtly.shell.store.sqlite import SqliteStore

            store = SqliteStore(tmp / "crawl" / "crawl.db")
            counts = store.counts()
            store.close()
            pages = counts["states"].get("fetched", 0)
            verdict = server_verdict(web, delay_s=args.delay_s, ip_rate=args.ip_rate,
                                     ip_concurrency=args.ip_concurrency)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    wall, cpu = run.wall_s, run.cpu_s
    print()
    print(f"{'pages':>8} {'wall s':>8} {'pages/s':>8} {'CPU s/1k':>9} {'peak RSS MB':>12} {'violations':>10}")
    print(f"{pages:>8} {wall:>8.1f} {pages / wall:>8.1f} {cpu / max(pages, 1) * 1000:>9.2f} "
          f"{run.rss_mb:>12.0f} {verdict.violations:>10}")
    rss_how = "summed over the process tree" if run.tree_rss_peak_mb is not None else "largest single process"
    print(f"(crawler CPU {cpu:.1f} s user+sys incl. its extraction workers, of which sys {run.sys_s:.1f} s; "
          f"peak RSS {rss_how})")
    if verdict.violations:
        print(verdict.report.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
