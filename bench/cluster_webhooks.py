"""Micro-benchmark: what the cluster monitor's webhook queue (shell/store/watch_postgres)
costs a worker and the database.

    python bench/cluster_webhooks.py                       # 20,000 watches held, 200 events pending
    python bench/cluster_webhooks.py --watches 100000 --pending 1000

Against a throwaway PostgreSQL (tests/pg_support.py, on loopback), one worker
holding every partition and every watch:
1. the idle poll (`claim_deliveries` when nothing is due: what every worker
   pays every `POLL_S`), with `--done` delivered events in the table;
2. a claim of the due events (the oldest pending one of each watch) and the
   `finish_delivery` of each (the two statements an attempt costs beside its POST);
3. `write_checks` of one commit's states and events (`--per-commit` watches checked).
Prints figures (median of `--rounds`); asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from courtly.core.watch import ChangeEvent, WatchState  # noqa: E402
from courtly.shell.store.postgres import PostgresStore  # noqa: E402
from courtly.shell.store.watch_postgres import PostgresWatchStore  # noqa: E402
from pg_support import pg_server  # noqa: E402

PARTITIONS = 64


def _event(watch_id: int, at: float) -> ChangeEvent:
    return ChangeEvent(watch_id, f"http://h{watch_id}.test/p", at, at - 60, at,
                       {"added": ["price: 24.50"], "removed": ["price: 24.00"], "changed": []}, ("a",), ("b",))


async def _fill(dsn: str, args) -> tuple[PostgresStore, PostgresWatchStore, dict[int, tuple[int, int]]]:
    crawl = await PostgresStore.open(dsn, partitions=PARTITIONS)
    store = await PostgresWatchStore.open(dsn)
    epochs = await crawl.acquire_many(range(PARTITIONS), "w1", 3600.0)
    async with store._pool.acquire() as conn:     # the list and the old events in bulk, not one call each
        await conn.execute("INSERT INTO watches (url, spec) SELECT 'http://h' || i || '.test/p', '{}'::jsonb"
                           " FROM generate_series(1, $1) AS i", args.watches)
        await conn.execute(
            "INSERT INTO changes (watch_id, url, detected_at, event, before, after, webhook, delivery, attempts)"
            " SELECT 1 + i % $1, 'u', i, '{}'::json, '[]'::jsonb, '[]'::jsonb, 'http://hook.test/', 'delivered', 1"
            " FROM generate_series(1, $2) AS i", args.watches, args.done)
        await conn.execute("ANALYZE changes")
    tenure = {i: (i % PARTITIONS, epochs[i % PARTITIONS]) for i in range(1, args.watches + 1)}
    return crawl, store, tenure


async def _timed(coro) -> tuple[float, object]:
    t0 = time.perf_counter()
    got = await coro
    return time.perf_counter() - t0, got


async def bench(dsn: str, args) -> None:
    crawl, store, tenure = await _fill(dsn, args)
    try:
        idle = [(await _timed(store.claim_deliveries("w1", tenure, hold_s=60.0)))[0] for _ in range(args.rounds)]
        claims, finishes, writes = [], [], []
        at = 1e9
        for _ in range(args.rounds):
            step = len(tenure) // args.pending
            checked = {i: tenure[i] for i in list(tenure)[:: max(1, len(tenure) // args.per_commit)]}
            dt, _ = await _timed(store.write_checks({i: WatchState(checks=9) for i in checked}, [], checked))
            writes.append(dt)
            events = [(_event(i, at), "http://hook.test/") for i in list(tenure)[::step][: args.pending]]
            at += 1
            await store.write_checks({}, events, {ev.watch_id: tenure[ev.watch_id] for ev, _ in events})
            dt, rows = await _timed(store.claim_deliveries("w1", tenure, hold_s=60.0, limit=args.pending))
            claims.append(dt)
            t0 = time.perf_counter()
            for r in rows:
                await store.finish_delivery(r.seq, "w1", "delivered", 1)
            finishes.append((time.perf_counter() - t0) / max(1, len(rows)))
        ms = lambda xs: f"{statistics.median(xs) * 1000:.2f} ms"  # noqa: E731
        print(f"{args.watches} watches held on {PARTITIONS} partitions, {args.done} delivered events in the table")
        print(f"  idle poll (nothing due):              {ms(idle)}")
        print(f"  claim of {args.pending} due events:             {ms(claims)}")
        print(f"  finish_delivery, per event:           {ms(finishes)}")
        print(f"  write_checks of {args.per_commit} states (one commit): {ms(writes)}")
    finally:
        await store.close()
        await crawl.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--watches", type=int, default=20_000, help="watches held (default: %(default)s)")
    ap.add_argument("--pending", type=int, default=200, help="events due per round (default: %(default)s)")
    ap.add_argument("--done", type=int, default=100_000, help="delivered events already stored (default: %(default)s)")
    ap.add_argument("--per-commit", type=int, default=500, help="watch states per commit (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, median printed (default: %(default)s)")
    args = ap.parse_args()
    with pg_server() as pg:
        asyncio.run(bench(pg.create_database(), args))


if __name__ == "__main__":
    main()
