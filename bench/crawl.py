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
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from courtly.runtime.demo import simweb_process  # noqa: E402


def _pin(cpu: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu)]
    return []


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
    sim_args = ["--profile", "bench", "--hosts", str(args.hosts), "--pages-per-host", str(args.pages_per_host),
                "--ips", str(args.ips), "--seed", str(args.seed)]
    env = dict(os.environ)
    print(f"simulated web: {args.hosts} hosts x {args.pages_per_host} pages on {args.ips} IPs", flush=True)
    try:
        with simweb_process(tmp / "sim", sim_args, ready_s=120) as web:
            if _pin(0):
                subprocess.run(["taskset", "-pc", "0", str(web.proc.pid)], capture_output=True)
            allowed = json.loads(web.manifest_file.read_text())["allowed_networks"]
            cfg = tmp / "bench.toml"
            cfg.write_text(
                f"[crawl]\ncontact = \"bench@example.invalid\"\nmax_pages = {args.max_pages}\n"
                f"fetch_tasks = {args.fetch_tasks}\n"
                f"[politeness]\ndelay_s = {args.delay_s}\nip_rate = {args.ip_rate}\n"
                f"ip_concurrency = {args.ip_concurrency}\n"
                f"[fetch]\ntotal_s = 20.0\n[network]\nallow = {json.dumps(allowed)}\n"
                f"hosts_file = \"{web.hosts_file}\"\n"
            )
            out = tmp / "crawl"
            cmd = [*_pin(1), sys.executable, "-m", "courtly", "crawl", "--config", str(cfg),
                   "--seeds-file", str(web.out / "seeds.txt"), "--out", str(out), "--quiet"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            wall = time.monotonic() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            rss_mb = after.ru_maxrss / 1024
            from courtly.shell.store.sqlite import SqliteStore

            store = SqliteStore(out / "crawl.db")
            counts = store.counts()
            store.close()
            pages = counts["states"].get("fetched", 0)
            time.sleep(1.2)
            from courtly.sim.check import check_log

            report = check_log(web.log_file, web.manifest_file, delay_s_min=args.delay_s,
                               ip_rate=args.ip_rate, ip_concurrency=args.ip_concurrency,
                               coverage=False, duplicate_fetches_max=10**9)
            violations = len(report.violations)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    print()
    print(f"{'pages':>8} {'wall s':>8} {'pages/s':>8} {'CPU s/1k':>9} {'peak RSS MB':>12} {'violations':>10}")
    print(f"{pages:>8} {wall:>8.1f} {pages / wall:>8.1f} {cpu / max(pages, 1) * 1000:>9.2f} "
          f"{rss_mb:>12.0f} {violations:>10}")
    print(f"(crawler CPU {cpu:.1f} s user+sys; ru_maxrss covers the crawler and its extraction workers)")
    if violations:
        print(report.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
