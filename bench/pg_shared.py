"""Micro-benchmark: what PostgresStore's shared state (shell/store/pg_shared.py)
costs a worker and the database.

    python bench/pg_shared.py                     # 2,000 trap hosts, 100,000 URLs
    python bench/pg_shared.py --hosts 20000 --urls 300000

1. The trap guard's save (every 10 s of a crawl, runtime/crawler.py): the
   engine hands the whole snapshot text to `apply`, which parses it and
   keeps the rows that changed. Timed without a database (`_plan_shared` of a
   store made with no pool): CPU per save with `--changed` hosts touched
   since the last one, and the snapshot's size.
2. Against a throwaway PostgreSQL (tests/pg_support.py, on loopback):
   `add_purge` of one host among `--urls` queued URLs on `--url-hosts` hosts
   (a full scan of `urls` with a cheap filter, then the core's match on what
   it keeps), `apply_purges` of it again (what each worker does when it takes
   the purge up), and `digest_record` against `--urls` digests.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from courtly.core.purge import purge_of  # noqa: E402
from courtly.core.traps import TrapGuard  # noqa: E402
from courtly.shell.store.postgres import PostgresStore  # noqa: E402
from courtly.shell.store.sqlite import Batch  # noqa: E402
from pg_support import pg_server  # noqa: E402

PARTITIONS = 64


def _guard(hosts: int, rng: random.Random) -> TrapGuard:
    guard = TrapGuard(rng=random.Random(1))
    for h in range(hosts):
        key = f"h{h}.test"
        for i in range(15):   # ~1 KB of state per host, as a crawl's hosts after a few dozen pages
            url = f"http://{key}/p/{i}?x={i}"
            guard.check_new_url(key, url, 2, 100.0 + i)
            guard.note_fetch(key, url, False, 100.0 + i, fp=rng.getrandbits(64))
    return guard


def bench_save(args) -> None:
    rng = random.Random(args.seed)
    guard = _guard(args.hosts, rng)
    store = PostgresStore(None, PARTITIONS)
    held = {p: 1 for p in range(PARTITIONS)}
    text = guard.snapshot_json()
    store._shared_done(store._plan_shared({"traps": text}, held))   # as after the first save
    times = []
    for _ in range(args.rounds):
        for h in rng.sample(range(args.hosts), args.changed):
            key = f"h{h}.test"
            guard.note_fetch(key, f"http://{key}/q", False, 200.0, fp=rng.getrandbits(64))
        text = guard.snapshot_json()
        t = time.process_time()
        plan = store._plan_shared({"traps": text}, held)
        times.append(time.process_time() - t)
        store._shared_done(plan)
    rows = len(plan["rows"]["traps"])
    print(f"trap save: {args.hosts} hosts, snapshot {len(text) / 1e6:.2f} MB; {args.changed} changed -> "
          f"{rows} rows written; parse and compare {min(times) * 1000:.1f} ms CPU (best of {args.rounds}), "
          f"{min(times) / args.hosts * 1e6:.1f} us per host held")


async def bench_pg(dsn: str, args) -> None:
    store = await PostgresStore.open(dsn, partitions=PARTITIONS)
    try:
        epochs = await store.acquire_many(range(PARTITIONS), "bench", 3600.0)
        chunk = 10_000
        for start in range(0, args.urls, chunk):
            rows = [(f"http://h{i % args.url_hosts}.test/p/{i}", f"h{i % args.url_hosts}.test", 4, 1, 0, "", 1.0)
                    for i in range(start, min(args.urls, start + chunk))]
            digests = [(f"sha1:{i:032d}", r[0], 1.0, "") for i, r in zip(range(start, start + chunk), rows)]
            await store.apply(Batch(new_urls=rows, digests=digests), partition_epochs=epochs)
        t = time.perf_counter()
        stored, counts = await store.add_purge(purge_of("host", "h7.test"), 10.0)
        add_s = time.perf_counter() - t
        t = time.perf_counter()
        await store.apply_purges([stored], 11.0)
        again_s = time.perf_counter() - t
        n = 2_000
        t = time.perf_counter()
        for i in range(n):
            await store.digest_record(f"sha1:{(i * 7919) % args.urls:032d}")
        lookup_s = (time.perf_counter() - t) / n
        print(f"purge of one host among {args.urls} URLs on {args.url_hosts} hosts: add_purge "
              f"{add_s * 1000:.0f} ms ({counts['queued']} queued dropped), apply_purges again "
              f"{again_s * 1000:.0f} ms (wall, loopback)")
        print(f"digest_record among {args.urls} digests: {lookup_s * 1e6:.0f} us a lookup (wall, one round trip)")
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=2_000, help="trap hosts held by the worker (default: 2000)")
    ap.add_argument("--changed", type=int, default=200, help="hosts touched between two saves (default: 200)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--urls", type=int, default=100_000, help="URL records for the purge (default: 100000)")
    ap.add_argument("--url-hosts", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-db", action="store_true", help="only the save (no PostgreSQL)")
    args = ap.parse_args()
    bench_save(args)
    if not args.no_db:
        with pg_server() as pg:
            asyncio.run(bench_pg(pg.create_database(), args))


if __name__ == "__main__":
    main()
