"""Benchmark: what `courtly hosts`, `courtly urls` and `courtly serve` cost on a large crawl folder.

    python bench/crawlview.py                          # 1,000,000 URLs over 10,000 keys
    python bench/crawlview.py --urls 200000 --keys 2000

Writes a crawl.db in a temporary folder through SqliteStore.apply (the
crawler's own writes): `--urls` URL records spread over `--keys` politeness
keys, 30 % fetched (one fetch-log row each), 20 % skipped (robots, nofollow
stored with no key as the crawler does, trap, dns), the rest queued, and a
politeness state per key. Then times each read of runtime/crawlview.py, best
of `--rounds`, wall clock (the reads are single-threaded SQLite scans):
the host table (one pass over urls and one over the fetch log), one page of
URLs by reason, by host and state, the whole-crawl timeline, the latency
histogram, and FolderSource's snapshot. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import tempfile
import time
from pathlib import Path

if importlib.util.find_spec("courtly") is None:    # PYTHONPATH picks the tree to measure
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from courtly.ports import Batch  # noqa: E402
from courtly.runtime.crawlview import CrawlView  # noqa: E402
from courtly.runtime.serve import FolderSource  # noqa: E402
from courtly.shell.store.sqlite import SqliteStore  # noqa: E402

START_AT = 1.8e9
REASONS = ("robots", "nofollow", "trap", "dns")


def build(out: Path, urls: int, keys: int, seed: int) -> None:
    rng = random.Random(seed)
    store = SqliteStore(out / "crawl.db")
    names = [f"site{i:05d}.test" for i in range(keys)]
    step = 50_000
    for first in range(0, urls, step):
        b = Batch()
        for i in range(first, min(urls, first + step)):
            key = names[rng.randrange(keys)]
            url = f"http://www.{key}/page/{i}.html"
            at = START_AT + i * 0.01
            roll = rng.random()
            if roll < 0.2:
                reason = REASONS[rng.randrange(len(REASONS))]
                b.decisions.append((url, "" if reason == "nofollow" else key, "", at, "skipped", reason,
                                    "detail", 2))
                continue
            b.new_urls.append((url, key, 4, 2, 0, "", at))
            if roll < 0.5:
                b.fetched.append((at + 1, 200, url))
                b.fetches.append((url, "page", at + 1, 200 if rng.random() < 0.95 else 404, 20_000,
                                  rng.expovariate(20), "127.0.0.1", f"courtly-{i // 20_000:05d}.warc.gz:{i * 9000}",
                                  ""))
        if first == 0:
            b.hosts = {k: {"delay_s": 1.0, "next_fetch_at": START_AT, "crawl_delay_s": None,
                           "last_response_s": 0.05, "backoff_until": 0.0, "backoff_reason": "", "fetches": 1}
                       for k in names}
            b.meta = {"politeness_key": "domain", "started": str(START_AT)}
        store.apply(b)
    store.close()


def best(rounds: int, fn) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="courtly-bench-view-") as tmp:
        out = Path(tmp)
        t0 = time.perf_counter()
        build(out, args.urls, args.keys, args.seed)
        size = sum(p.stat().st_size for p in out.glob("crawl.db*"))
        print(f"crawl.db: {args.urls:,} URLs over {args.keys:,} keys, {size / 2**20:.0f} MiB "
              f"(built in {time.perf_counter() - t0:.1f} s)")
        key = "site00042.test"
        with CrawlView(out) as v:
            cases = [
                ("host table (host_rows)", lambda: v.host_rows(START_AT)),
                ("urls --reason robots --limit 100", lambda: v.urls(reason="robots", limit=100)),
                ("urls --reason robots --limit 100 --offset 50000",
                 lambda: v.urls(reason="robots", limit=100, offset=50_000)),
                (f"urls --host {key} --state queued", lambda: v.urls(host=key, state="queued", limit=100)),
                (f"urls --host {key} --state skipped (keyless nofollow rows)",
                 lambda: v.urls(host=key, state="skipped", limit=100)),
                ("timeline (120 buckets)", lambda: v.timeline(120)),
                ("latency histogram", lambda: v.latency_histogram((0.01, 0.1, 1.0, 10.0))),
            ]
            for name, fn in cases:
                print(f"{name:<60} {best(args.rounds, fn) * 1000:9.1f} ms")
        def fresh(call):   # a new FolderSource each round: nothing cached
            src = FolderSource(out)
            try:
                return call(src)
            finally:
                src.close()

        print(f"{'serve: /api/snapshot (a new FolderSource)':<60} "
              f"{best(args.rounds, lambda: fresh(lambda s: s.snapshot(START_AT))) * 1000:9.1f} ms")
        print(f"{'serve: /api/hosts page of 50 by fetched (a new FolderSource)':<60} "
              f"{best(args.rounds, lambda: fresh(lambda s: s.hosts(0, 50, 'fetched', True, ''))) * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
