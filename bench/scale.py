"""Benchmark: a frontier of ten million queued URLs in the embedded store.

    python bench/scale.py                          # 10,000,000 URLs over 20,000 simulated hosts
    python bench/scale.py --urls 1000000 --hosts 2000 --fetch-s 30

What it does, as a user would: writes a seeds file of `--urls` real page URLs
of a `courtly simweb` web (`--hosts` hosts, pages spread evenly), runs
`courtly crawl --seeds-file` on it (crawler pinned to CPU 1, the simulated web
to CPU 0), lets it fetch for `--fetch-s` seconds once every seed is queued,
and stops it with SIGINT (a graceful stop). Printed:

- validation and enqueue: seconds and URLs/s (the seeds are checked in one
  pass, then admitted: normalised, URL-seen, written to the store, queued);
- peak RSS of the crawler process (`wait4`'s ru_maxrss), and RSS sampled
  while seeding and while fetching;
- the crawl folder on disk (crawl.db and its WAL, the WARC files);
- pages fetched and pages/s in the fetch phase, with ten million URLs queued;
- politeness violations in the server's request log.

The frontier keeps `[frontier] memory_max` URLs in memory (default 500,000)
and the rest in the store (runtime/overflow). This is a benchmark, not a test:
it measures and prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import pin, simulated_web  # noqa: E402
from courtly.sim.check import check_log  # noqa: E402
from courtly.sim.model import SimWeb  # noqa: E402
from courtly.sim.webconfig import profile_config  # noqa: E402

SEEDS_LINE = re.compile(r"seeds: (\d+) read, (\d+) queued")


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def write_seeds(path: Path, roots: list[str], web: SimWeb, urls: int) -> int:
    """`urls` page URLs, the same share of every host (each host's pages in order)."""
    per_host = -(-urls // len(roots))
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for root in roots:
            base = root.rstrip("/")
            name = base.split("://", 1)[1].split(":")[0]
            paths = web.layout(name).page_paths()[:per_host]
            take = min(len(paths), urls - n)
            f.write("\n".join(base + p for p in paths[:take]))
            f.write("\n")
            n += take
            if n >= urls:
                break
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=10_000_000)
    ap.add_argument("--hosts", type=int, default=20_000)
    ap.add_argument("--ips", type=int, default=250)
    ap.add_argument("--fetch-s", type=float, default=60.0, help="fetch phase after seeding (s)")
    ap.add_argument("--memory-max", type=int, default=500_000, help="[frontier] memory_max (the default)")
    ap.add_argument("--delay-s", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=3600.0, help="give up after this long")
    ap.add_argument("--keep", action="store_true", help="keep the crawl folder")
    args = ap.parse_args()

    pages_per_host = -(-args.urls // args.hosts)
    args.ips = min(args.ips, args.hosts)
    tmp = Path(tempfile.mkdtemp(prefix="courtly-scale-"))
    print(f"simulated web: {args.hosts} hosts x {pages_per_host} pages on {args.ips} IPs; "
          f"{args.urls:,} seeds", flush=True)
    try:
        with simulated_web(tmp / "sim", hosts=args.hosts, pages_per_host=pages_per_host, ips=args.ips,
                           seed=args.seed, ready_s=300) as (web, allowed):
            model = SimWeb(profile_config("bench", hosts=args.hosts, pages_per_host=pages_per_host,
                                          ips=args.ips, seed=args.seed))
            t = time.monotonic()
            seeds = tmp / "seeds.txt"
            n = write_seeds(seeds, web.seeds, model, args.urls)
            print(f"seeds file: {n:,} URLs, {seeds.stat().st_size / 2**20:.0f} MiB, "
                  f"written in {time.monotonic() - t:.1f} s", flush=True)
            cfg = tmp / "scale.toml"
            cfg.write_text(
                f"[crawl]\ncontact = \"bench@example.invalid\"\nfetch_tasks = 512\n"
                f"[politeness]\ndelay_s = {args.delay_s}\nip_rate = 1000.0\nip_concurrency = 64\n"
                f"[frontier]\nmemory_max = {args.memory_max}\n"
                f"[seen]\nbloom_capacity = {max(2 * n, 1_000_000)}\n"
                f"[fetch]\ntotal_s = 20.0\n[network]\nallow = {json.dumps(allowed)}\n"
                f"hosts_file = \"{web.hosts_file}\"\n"
            )
            out = tmp / "crawl"
            cmd = [*pin(1), sys.executable, "-m", "courtly", "crawl", "--config", str(cfg),
                   "--seeds-file", str(seeds), "--out", str(out), "--quiet"]
            figures = _run(cmd, n, args)
            figures["disk"] = {"crawl.db": _du_mb(out) - _du_mb(out / "warc") if out.exists() else 0.0,
                               "warc": _du_mb(out / "warc") if (out / "warc").exists() else 0.0}
            time.sleep(1.2)   # the server's log reaches the disk
            report = check_log(web.log_file, web.manifest_file, delay_s_min=args.delay_s, ip_rate=1000.0,
                               ip_concurrency=64, coverage=False, duplicate_fetches_max=10**9)
            _print(figures, report, n)
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    return 0


def _run(cmd: list[str], n: int, args) -> dict:
    """Run the crawl, follow its log, stop it `fetch_s` after seeding ends."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    marks: dict[str, float] = {}
    samples: dict[str, float] = {"seeding": 0.0, "fetching": 0.0}
    phase = ["validating"]
    errors: list[str] = []      # from the first error line on, everything the crawler said

    def follow() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            m = SEEDS_LINE.search(line)
            if m:
                if int(m.group(1)) >= n:
                    marks["seeded"] = time.monotonic()
                    marks["queued"] = int(m.group(2))
            elif "ERROR" in line or "Traceback" in line or errors:
                errors.append(line.rstrip())

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    deadline = t0 + args.timeout_s
    stop_at = None
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
        rss = _rss_mb(proc.pid)
        if "seeded" in marks:
            phase[0] = "fetching"
            stop_at = stop_at or marks["seeded"] + args.fetch_s
            samples["fetching"] = max(samples["fetching"], rss)
            if time.monotonic() >= stop_at:
                proc.send_signal(signal.SIGINT)
                break
        else:
            samples["seeding"] = max(samples["seeding"], rss)
    if proc.poll() is None and time.monotonic() >= deadline:
        proc.send_signal(signal.SIGINT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=5)
    for line in errors[:200]:
        print("  crawler: " + line, flush=True)
    end = time.monotonic()
    return {"marks": marks, "t0": t0, "end": end, "rss_peak_mb": usage.ru_maxrss / 1024,
            "rss_samples": samples, "cpu_s": usage.ru_utime + usage.ru_stime, "rc": proc.returncode,
            "out": cmd[cmd.index("--out") + 1]}


def _pages_fetched(out: str) -> tuple[int, float, float]:
    import sqlite3

    db = sqlite3.connect(f"file:{out}/crawl.db?mode=ro", uri=True)
    try:
        n, first, last = db.execute(
            "SELECT count(*), min(at), max(at) FROM fetches WHERE kind='page'").fetchone()
        queued = db.execute("SELECT count(*) FROM urls WHERE state='queued'").fetchone()[0]
    finally:
        db.close()
    return n, (last - first) if n > 1 else 0.0, queued


def _print(f: dict, report, n: int) -> None:
    m = f["marks"]
    print()
    if "seeded" not in m:
        print(f"seeding did not finish (crawler exit {f['rc']}); marks: {m}")
        return
    seed_s = m["seeded"] - f["t0"]
    pages, span, queued = _pages_fetched(f["out"])
    print(f"{'figure':44s} value")
    print(f"{'URLs in the seeds file':44s} {n:,}")
    print(f"{'queued after seeding':44s} {m.get('queued', 0):,}")
    print(f"{'seeding, start to all queued':44s} {seed_s:.1f} s  ({n / seed_s:,.0f} URLs/s, "
          f"validation pass included)")
    print(f"{'peak RSS of the crawler':44s} {f['rss_peak_mb']:.0f} MB")
    print(f"{'  sampled peak while seeding':44s} {f['rss_samples']['seeding']:.0f} MB")
    print(f"{'  sampled peak while fetching':44s} {f['rss_samples']['fetching']:.0f} MB")
    print(f"{'crawl.db (+WAL) on disk':44s} {f['disk']['crawl.db']:.0f} MB "
          f"({f['disk']['crawl.db'] * 2**20 / max(n, 1):.0f} B per URL)")
    print(f"{'WARC on disk':44s} {f['disk']['warc']:.0f} MB")
    print(f"{'pages fetched in the fetch phase':44s} {pages:,} in {span:.1f} s "
          f"({pages / span if span else 0:.1f} pages/s)")
    print(f"{'still queued at the end':44s} {queued:,}")
    print(f"{'crawler CPU (user+sys), whole run':44s} {f['cpu_s']:.1f} s")
    print(f"{'crawler exit code (SIGINT: graceful stop)':44s} {f['rc']}")
    print(f"{'politeness violations (server log)':44s} {len(report.violations)}")


if __name__ == "__main__":
    sys.exit(main())
