"""Benchmark: one crawl serving three consumers against the same crawl with none.

    python bench/consumers.py                       # 200 hosts x 25 pages, stop at 3,000 pages
    python bench/consumers.py --hosts 100 --max-pages 1500

Both runs crawl the same simulated web (`--profile bench`) with the same
settings. With consumers, three of them (`index`, `archive`, `ml`, the last
with a daily quota of a tenth of the pages) submit overlapping halves of the
seeds: the first two share a quarter of them. Printed per run: pages, wall
time, pages/s, crawler CPU s per 1,000 pages and politeness violations in the
servers' log; then the chargeback (`courtly report --consumers --json`) and
whether billed + overhead equals the requests in the servers' log.
This is a benchmark, not a test: it measures and prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import courtly_command, run_measured, server_verdict, simulated_web  # noqa: E402


def _consumers(quota: int) -> str:
    return (f'\n[[consumers]]\nname = "index"\nweight = 2.0\nsink = "sinks/index"\nprice_per_million = 30.0\n'
            f'\n[[consumers]]\nname = "archive"\nsink = "sinks/archive"\nprice_per_million = 10.0\n'
            f'\n[[consumers]]\nname = "ml"\nfetches_per_day = {quota}\nsink = "sinks/ml"\n')


def _run(tmp: Path, args, with_consumers: bool) -> None:
    with simulated_web(tmp / "sim", hosts=args.hosts, pages_per_host=args.pages_per_host, ips=args.ips,
                       seed=args.seed) as (web, allowed):
        cmd = courtly_command(tmp, web, allowed, max_pages=args.max_pages, fetch_tasks=args.fetch_tasks,
                              delay_s=args.delay_s, ip_rate=1000.0, ip_concurrency=64)
        seeds = [s for s in (web.out / "seeds.txt").read_text().split() if s.startswith("http")]
        config = Path(cmd[cmd.index("--config") + 1])
        out = tmp / "crawl"
        if with_consumers:
            config.write_text(config.read_text() + _consumers(args.max_pages // 10))
            half, quarter = len(seeds) // 2, len(seeds) // 4
            for name, part in (("archive", seeds[half - quarter:len(seeds) - quarter]), ("ml", seeds[::2])):
                subprocess.run([sys.executable, "-m", "courtly", "submit", "--consumer", name, "--out", str(out),
                                "--config", str(config), *part], check=True, capture_output=True)
            i = cmd.index("--seeds-file")
            cmd[i:i + 2] = ["--consumer", "index", *seeds[:half]]
        run = run_measured(cmd, tmp / "run")
        if run.returncode != 0:
            print(run.tail(3000), file=sys.stderr)
            return
        verdict = server_verdict(web, delay_s=args.delay_s, ip_rate=1000.0, ip_concurrency=64)
        from courtly.sim.reqlog import load_log

        requests = len(load_log(web.log_file))
        from courtly.shell.store.sqlite import SqliteStore

        store = SqliteStore(out / "crawl.db")
        pages = store.counts()["states"].get("fetched", 0)
        store.close()
        label = "3 consumers" if with_consumers else "no consumers"
        print(f"{label:<14} {pages:>7} {run.wall_s:>8.1f} {pages / run.wall_s:>8.1f} "
              f"{run.cpu_s / max(pages, 1) * 1000:>9.2f} {verdict.violations:>10} {requests:>9}", flush=True)
        if with_consumers:
            bill = subprocess.run([sys.executable, "-m", "courtly", "report", "--consumers", "--json", "--out",
                                   str(out), "--config", str(config)], capture_output=True, text=True, check=True)
            data = json.loads(bill.stdout)
            for row in data["consumers"]:
                print(f"  {row['consumer']:<8} fetches {row['fetches']:>6}  shared {row['shared']:>5}  "
                      f"denied {row['denied']:>5}  billed {row['charged']:>9.1f}  cost {row['cost']:.4f}")
            billed = sum(row["charged"] for row in data["consumers"])
            print(f"  overhead {data['overhead']:.1f}; billed + overhead = {billed + data['overhead']:.1f}, "
                  f"requests in the servers' log {requests}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages-per-host", type=int, default=25)
    ap.add_argument("--ips", type=int, default=50)
    ap.add_argument("--max-pages", type=int, default=3000)
    ap.add_argument("--delay-s", type=float, default=0.0)
    ap.add_argument("--fetch-tasks", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{'run':<14} {'pages':>7} {'wall s':>8} {'pages/s':>8} {'CPU s/1k':>9} {'violations':>10} "
          f"{'requests':>9}", flush=True)
    for with_consumers in (False, True):
        tmp = Path(tempfile.mkdtemp(prefix="courtly-bench-consumers-"))
        try:
            _run(tmp, args, with_consumers)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
