"""Benchmark: distributed workers on PostgreSQL against one simulated web.

    python bench/distributed.py                           # 1, 2 and 4 workers, 200 hosts x 15 pages
    python bench/distributed.py --workers 1 2 --hosts 100 --pages-per-host 20
    python bench/distributed.py --workers 2 4 --regions us,eu    # two regions (issue 21)
    python bench/distributed.py --workers 1 --single      # one worker and `courtly crawl`, same web

For each worker count: a fresh database on a throwaway PostgreSQL (loopback,
temporary folder, stopped at the end), `courtly submit` of the web's seeds,
then N `python -m courtly worker --exit-when-done` processes started together,
exactly as users run them. Printed per run: pages fetched, wall seconds from
the first start to the last exit, pages/s, worker CPU seconds (user+sys of the
worker processes and their extraction children) per 1,000 pages, database
statements per page (the workers' PostgresStore counters: every round trip,
BEGIN and COMMIT included) and the transactions the server committed per
page (pg_stat_database), duplicate fetches and politeness violations from the
server's request log, and the PostgreSQL server's CPU seconds per 1,000 pages
(user+sys of the postmaster and its processes, from /proc: the database's
share of a page, which the workers' figure does not include).

`--single` first runs `python -m courtly crawl` (SQLite, one machine) on the
same simulated web (same profile, size and seed, a fresh server process) with
the same configuration, started and measured the same way, and prints the
ratio of each worker count's CPU per page to the single machine's.

With `--regions us,eu` the web has regions (sim/region.py): a region is a
loopback source address (127.0.2.1, 127.0.2.2, ...), every host is near the
first region except a `--near-share` of them (near the second), and the far
region waits `--far-latency-s` longer for each answer. The crawl is submitted
with the regions, `courtly probe` runs from each region (its wall time is
printed), and worker i serves region i mod R from that region's address, with
its own storage folder. Printed besides: pages per region and requests made
(robots.txt aside: the probes make those from every region) by a worker of
another region than the key's home (must be 0).

The web is the `bench` profile on loopback, so the per-IP limits are raised
(`--ip-rate`, `--ip-concurrency`) without being impolite to anyone; the
per-key rules stay. This is a benchmark, not a test: it measures and prints.
On a small machine the simulated web, PostgreSQL and the workers share the
cores: more workers than cores measure contention, not scale-out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from courtly.runtime.demo import simweb_process  # noqa: E402
from pg_support import pg_server  # noqa: E402


def _config(args, allowed, hosts_file: Path) -> str:
    return (f"[crawl]\ncontact = \"bench@example.invalid\"\nfetch_tasks = {args.fetch_tasks}\n"
            f"[politeness]\ndelay_s = {args.delay_s}\nip_rate = {args.ip_rate}\n"
            f"ip_concurrency = {args.ip_concurrency}\n"
            f"[fetch]\ntotal_s = 20.0\n[network]\nallow = {json.dumps(allowed)}\n"
            f"hosts_file = \"{hosts_file}\"\n"
            + (f"[frontier]\nkey_states_max = {args.key_states_max}\n" if args.key_states_max else "")
            + "[distributed]\nheartbeat_s = 1.0\nlive_s = 3.0\nrebalance_s = 1.0\nclaim_s = 0.2\n")


async def _db(dsn: str, sql: str):
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


def _source(regions: list[str], region: str) -> str:
    return f"127.0.2.{regions.index(region) + 1}"


def _sim_regions(args) -> list[str]:
    """simweb options: the regions' addresses and the hosts near the second region."""
    if not args.regions:
        return []
    out = [a for r in args.regions for a in ("--region", f"{r}={_source(args.regions, r)}")]
    every = max(1, round(1 / args.near_share)) if args.near_share > 0 else 0
    near = [f"site{i:04d}.test" for i in range(args.hosts) if every and i % every == 0]
    return out + [a for h in near for a in ("--region-near", f"{h}={args.regions[1]}")] + [
        "--far-latency-s", str(args.far_latency_s)]


def _probe(dsn: str, cfg: Path, args) -> float:
    """`courtly probe` from every region, one after the other; wall seconds."""
    t0 = time.monotonic()
    for r in args.regions:
        p = subprocess.run([sys.executable, "-m", "courtly", "probe", "--db", dsn, "--config", str(cfg),
                            "--region", r, "--source-address", _source(args.regions, r), "--samples", "3"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(p.stderr)
    return time.monotonic() - t0
def _server_cpu_s(pg) -> float:
    """User+sys seconds the PostgreSQL server has spent so far: the postmaster
    with the processes it reaped, and its live processes."""
    pid = int((pg.data / "postmaster.pid").read_text().split()[0])
    ticks = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue        # ended meanwhile: its time is in the postmaster's reaped children
        if int(d.name) == pid:
            ticks += sum(int(x) for x in f[11:15])      # utime stime cutime cstime
        elif int(f[1]) == pid:
            ticks += int(f[11]) + int(f[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _spy(args, name: str) -> list[str]:
    """The `py-spy record` prefix writing DIR/name.txt, or nothing."""
    if args.py_spy is None:
        return []
    args.py_spy.mkdir(parents=True, exist_ok=True)
    return [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw", "--rate", "100",
            "--subprocesses", "--output", str(args.py_spy / f"{name}.txt"), "--"]


def run_one(pg, web, tmp: Path, n: int, args) -> dict:
    dsn = pg.create_database(f"bench_{n}w_{int(time.time())}")
    allowed = json.loads(web.manifest_file.read_text())["allowed_networks"]
    cfg = tmp / "bench.toml"
    cfg.write_text(_config(args, allowed, web.hosts_file))
    regions = ["--regions", ",".join(args.regions)] if args.regions else []
    sub = subprocess.run([sys.executable, "-m", "courtly", "submit", "--db", dsn, "--partitions",
                          str(args.partitions), "--seeds-file", str(web.out / "seeds.txt"), *regions],
                         capture_output=True, text=True)
    if sub.returncode != 0:
        raise SystemExit(sub.stderr)
    probe_s = _probe(dsn, cfg, args) if args.regions else 0.0
    xact0 = asyncio.run(_db(pg.dsn, "SELECT sum(xact_commit) FROM pg_stat_database"))[0][0]
    server0 = _server_cpu_s(pg)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    procs = []
    for i in range(n):
        log = open(tmp / f"{n}w-{i}.log", "w")
        region = args.regions[i % len(args.regions)] if args.regions else ""
        where = ["--region", region, "--source-address", _source(args.regions, region)] if region else []
        procs.append(subprocess.Popen(
            [*_spy(args, f"{n}w-{i}"), sys.executable, "-m", "courtly", "worker", "--db", dsn, "--config", str(cfg),
             "--out", str(tmp / f"out-{n}{'-' + region if region else ''}"), "--worker-id", f"b{n}-{i}",
             "--exit-when-done", "--quiet", *where],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    for p in procs:
        p.wait(timeout=args.timeout_s)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    server_cpu = _server_cpu_s(pg) - server0
    xact1 = asyncio.run(_db(pg.dsn, "SELECT sum(xact_commit) FROM pg_stat_database"))[0][0]
    pages = asyncio.run(_db(dsn, "SELECT count(*) FROM urls WHERE state = 'fetched'"))[0][0]
    statements = lost = readopted = 0
    for i in range(n):
        text = (tmp / f"{n}w-{i}.log").read_text()
        m = re.search(r"(\d+) statements, .* (\d+) lost, .* (\d+) re-adopted", text)
        if procs[i].returncode != 0 or not m:
            raise SystemExit(f"worker {i} of {n} failed:\n{text[-3000:]}")
        statements += int(m.group(1))
        lost += int(m.group(2))
        readopted += int(m.group(3))
    time.sleep(1.2)     # the server flushes its request log every second
    from courtly.sim.check import check_log

    report = check_log(web.log_file, web.manifest_file, delay_s_min=args.delay_s, ip_rate=args.ip_rate,
                       ip_concurrency=args.ip_concurrency, coverage=False, duplicate_fetches_max=10**9)
    by_region, misplaced = _regions_of(dsn, web, args) if args.regions else ({}, 0)
    return {"workers": n, "pages": pages, "wall_s": wall, "cpu_s": cpu, "server_cpu_s": server_cpu,
            "statements": statements, "probe_s": probe_s, "by_region": by_region, "misplaced": misplaced,
            "xacts": int(xact1 - xact0), "violations": len(report.violations), "lost": lost,
            "readopted": readopted,
            "duplicates": sum(report.duplicate_fetches.values()), "report": report,
            "robots": _robots_requests(web)}


def _robots_requests(web) -> int:
    """robots.txt requests in the server's log (one per origin unless a copy expired or was lost)."""
    from courtly.sim.reqlog import load_log

    return sum(1 for r in load_log(web.log_file) if r.path == "/robots.txt")


def _regions_of(dsn: str, web, args) -> tuple[dict[str, int], int]:
    """Pages fetched per home region, and requests sent from another region's
    address than the key's home (the server's log)."""
    from courtly.core.urls import politeness_key
    from courtly.sim.reqlog import load_log

    homes = dict(asyncio.run(_db(dsn, "SELECT key, region FROM homes")))
    rows = asyncio.run(_db(dsn, "SELECT key, count(*) FROM urls WHERE state = 'fetched' GROUP BY key"))
    by_region: dict[str, int] = {}
    for key, count in rows:
        by_region[homes[key]] = by_region.get(homes[key], 0) + count
    source = {_source(args.regions, r): r for r in args.regions}
    misplaced = 0
    for r in load_log(web.log_file):
        region = source.get(r.conn.rsplit(":", 1)[0])
        key = politeness_key(r.host.rsplit(":", 1)[0], "domain")
        if region and "probe" not in r.agent and r.path != "/robots.txt" and homes.get(key) != region:
            misplaced += 1
    return by_region, misplaced
def run_single(web, tmp: Path, args) -> dict:
    """`courtly crawl` on SQLite over the same web, measured like the workers."""
    allowed = json.loads(web.manifest_file.read_text())["allowed_networks"]
    cfg = tmp / "single.toml"
    cfg.write_text(_config(args, allowed, web.hosts_file).split("[distributed]")[0])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(tmp / "single.log", "w") as log:
        proc = subprocess.run(
            [*_spy(args, "single"), sys.executable, "-m", "courtly", "crawl", "--config", str(cfg), "--seeds-file",
             str(web.out / "seeds.txt"), "--out", str(tmp / "out-single"), "--quiet"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=args.timeout_s)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"courtly crawl failed:\n{(tmp / 'single.log').read_text()[-3000:]}")
    from courtly.shell.store.sqlite import SqliteStore

    store = SqliteStore(tmp / "out-single" / "crawl.db")
    pages = store.counts()["states"].get("fetched", 0)
    store.close()
    time.sleep(1.2)     # the server flushes its request log every second
    from courtly.sim.check import check_log

    report = check_log(web.log_file, web.manifest_file, delay_s_min=args.delay_s, ip_rate=args.ip_rate,
                       ip_concurrency=args.ip_concurrency, coverage=False, duplicate_fetches_max=10**9)
    return {"workers": 0, "pages": pages, "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "server_cpu_s": 0.0, "statements": 0, "probe_s": 0.0, "by_region": {}, "misplaced": 0, "xacts": 0, "violations": len(report.violations), "lost": 0, "readopted": 0,
            "duplicates": sum(report.duplicate_fetches.values()), "report": report}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages-per-host", type=int, default=15)
    ap.add_argument("--ips", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=256)
    ap.add_argument("--delay-s", type=float, default=0.0)
    ap.add_argument("--ip-rate", type=float, default=1000.0)
    ap.add_argument("--ip-concurrency", type=int, default=64)
    ap.add_argument("--fetch-tasks", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=900.0)
    ap.add_argument("--regions", type=lambda v: [r for r in v.split(",") if r], default=[],
                    help="two or more regions, e.g. us,eu (default: one region)")
    ap.add_argument("--near-share", type=float, default=0.3, help="share of hosts near the second region")
    ap.add_argument("--far-latency-s", type=float, default=0.1, help="extra latency from the far region")
    ap.add_argument("--key-states-max", type=int, default=0,
                    help="[frontier] key_states_max of the workers (default: the config's, 100,000); with a"
                         " small one, idle keys are evicted and read back (the robots.txt requests are printed)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (worker logs, WARC)")
    ap.add_argument("--py-spy", metavar="DIR", type=Path,
                    help="run every worker (and the single crawl) under `py-spy record` and write collapsed"
                         " stacks (--format raw, 100 Hz) to DIR; its CPU is counted too: compare CPU figures"
                         " only between runs without it")
    ap.add_argument("--single", action="store_true",
                    help="also run `courtly crawl` (one machine, SQLite) on the same web and print the CPU ratio")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="courtly-dbench-"))
    rows = []
    sim_args = ["--profile", "bench", "--hosts", str(args.hosts), "--pages-per-host",
                str(args.pages_per_host), "--ips", str(args.ips), "--seed", str(args.seed), *_sim_regions(args)]
    try:
        if args.single:
            with simweb_process(tmp / "sim-single", sim_args, ready_s=120) as web:
                print(f"one machine: {args.hosts} hosts x {args.pages_per_host} pages ...", flush=True)
                rows.append(run_single(web, tmp, args))
                if rows[-1]["violations"]:
                    print(rows[-1]["report"].render()[:3000])
        with pg_server() as pg:
            for n in args.workers:
                with simweb_process(tmp / f"sim-{n}", sim_args, ready_s=120) as web:
                    print(f"{n} worker(s): {args.hosts} hosts x {args.pages_per_host} pages ...", flush=True)
                    rows.append(run_one(pg, web, tmp, n, args))
                    if rows[-1]["violations"]:
                        print(rows[-1]["report"].render()[:3000])
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"{'workers':>7} {'pages':>6} {'wall s':>7} {'pages/s':>8} {'CPU s/1k pages':>15} {'server CPU':>10} "
          f"{'statements/page':>16} {'xacts/page':>11} {'dup fetches':>11} {'violations':>10} "
          f"{'lost':>5} {'re-adopted':>10}")
    for r in rows:
        p = max(r["pages"], 1)
        print(f"{r['workers'] or 'single':>7} {r['pages']:>6} {r['wall_s']:>7.1f} {r['pages'] / r['wall_s']:>8.1f} "
              f"{r['cpu_s'] / p * 1000:>15.2f} {r['server_cpu_s'] / p * 1000:>10.2f} {r['statements'] / p:>16.2f} {r['xacts'] / p:>11.2f} "
              f"{r['duplicates']:>11} {r['violations']:>10} {r['lost']:>5} {r['readopted']:>10}")
    print("(CPU: user+sys of the worker processes and their children; server CPU: PostgreSQL's, s/1k pages;"
          " statements: PostgresStore round trips;"
          " xacts: transactions committed by the server, all sessions;"
          " lost: partition leases lost; re-adopted: partitions the quiet-time safety net adopted again)")
    for r in rows:
        if args.regions and r["workers"]:
            print(f"{r['workers']} worker(s): probes {r['probe_s']:.1f} s (every region, before the workers); "
                  f"pages by home region {r['by_region']}; requests from outside the key's home region "
                  f"{r['misplaced']}")
    if args.key_states_max:
        for r in rows:
            if r["workers"]:
                print(f"{r['workers']} worker(s), key_states_max {args.key_states_max}: {r['robots']} robots.txt"
                      f" requests for {args.hosts} hosts")
    if args.single and len(rows) > 1:
        base = rows[0]["cpu_s"] / max(rows[0]["pages"], 1)
        for r in rows[1:]:
            ratio = r["cpu_s"] / max(r["pages"], 1) / base if base else float("nan")
            print(f"{r['workers']} worker(s): CPU per page {ratio:.2f}x the single machine's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
