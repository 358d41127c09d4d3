"""Micro-benchmark: CPU of reading the store's rows as NamedTuples (ports.QueuedRow, DigestRow).

    python bench/store_rows.py                 # 200,000 queued URLs and payload digests
    python bench/store_rows.py --rows 1000000

SqliteStore reads rows back as the NamedTuples of courtly.ports (a row is
still a tuple: the callers unpack it by position). This fills a fresh store
in a temporary folder, then times, interleaved round by round, the resume
scan (`iter_queued`), the duplicate index's start (`iter_digests`) and the
overflow refill (`queued_of_key`, 200 rows a read) against the same SELECT
read as sqlite3's plain tuples, and prints the median CPU (user+sys) per row
and the difference. Figures go to docs/performance.md. This is a benchmark:
it prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

if importlib.util.find_spec("courtly") is None:    # PYTHONPATH picks the tree to measure
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from courtly.ports import DigestRow, NewUrlRow  # noqa: E402
from courtly.shell.store.sqlite import Batch, SqliteStore  # noqa: E402

HOSTS = 1000
REFILL = 200     # rows per overflow read (the frontier's key_memory_max default)


def _fill(store: SqliteStore, rows: int) -> None:
    for start in range(0, rows, 50_000):
        b = Batch()
        for i in range(start, min(rows, start + 50_000)):
            host = f"h{i % HOSTS}.test"
            b.new_urls.append(NewUrlRow(f"http://{host}/p/{i}", host, 4, 1, 0, f"http://{host}/", float(i)))
            b.digests.append(DigestRow(f"sha1:{i:032d}", f"http://{host}/p/{i}", float(i), f"<urn:uuid:{i}>"))
        store.apply(b)


def _cpu(f: Callable[[], object]) -> float:
    t0 = time.process_time()
    f()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000, help="queued URLs and digests (default 200,000)")
    ap.add_argument("--rounds", type=int, default=9, help="rounds; the median is printed (default 9)")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="courtly-store-rows-"))
    try:
        store = SqliteStore(folder / "crawl.db")
        _fill(store, args.rows)
        db = store._db   # the same connection, for the plain-tuple twin of each read
        queued = "SELECT url, key, band, depth, redirects, via, attempts FROM urls WHERE state='queued'"
        by_key = ("SELECT url, key, band, depth, redirects, via, attempts FROM urls INDEXED BY urls_queued_key"
                  " WHERE key = ? AND state = 'queued' ORDER BY band, discovered_at LIMIT ?")
        keys = [f"h{i}.test" for i in range(HOSTS)]
        reads: dict[str, tuple[Callable[[], object], Callable[[], object], int]] = {
            "iter_queued (resume)": (lambda: list(store.iter_queued()), lambda: list(db.execute(queued)), args.rows),
            "iter_digests (exact-duplicate index)": (
                lambda: list(store.iter_digests()),
                lambda: list(db.execute("SELECT digest, url, at, record_id FROM digests")), args.rows),
            f"queued_of_key ({REFILL} a read, {HOSTS} keys)": (
                lambda: [store.queued_of_key(k, REFILL) for k in keys],
                lambda: [db.execute(by_key, (k, REFILL)).fetchall() for k in keys],
                HOSTS * min(REFILL, args.rows // HOSTS)),
        }
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in reads}
        for _ in range(args.rounds):
            for name, (named, plain, _n) in reads.items():
                times[name][0].append(_cpu(named))
                times[name][1].append(_cpu(plain))
        print(f"{args.rows:,} queued URLs and digests, median of {args.rounds} rounds, CPU per row:")
        for name, (_named, _plain, n) in reads.items():
            a, b = statistics.median(times[name][0]) / n * 1e9, statistics.median(times[name][1]) / n * 1e9
            print(f"  {name}: NamedTuple {a:,.0f} ns, plain tuple {b:,.0f} ns, difference {a - b:+,.0f} ns")
        store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
