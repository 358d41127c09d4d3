"""Micro-benchmark: CPU of the crawler's store commits (SqliteStore.apply).

    python bench/store_micro.py                        # S1-like: 20,000 pages, 380 a batch
    python bench/store_micro.py --pages-per-batch 760  # what a 1 s commit interval would batch

Builds the batches of an S1 crawl (`bench/crawl.py`: 1,000 hosts, ~760
pages/s, one commit every 0.5 s) before timing, then applies them into a
fresh SqliteStore in a temporary folder and prints the CPU (user+sys, so the
kernel's share of the WAL writes and checkpoints counts) per fetched page,
best of `--rounds`, and the bytes the process wrote. The shapes follow a
recorded S1 crawl: per fetched page ~3.5 new URLs (97 % of them to the
page's own host, so a batch's inserts cluster by host), 0.6 decisions
(nofollow, robots), 1.1 fetch-log rows (robots.txt and soft-404 probes of
new hosts), one politeness snapshot per touched host, ~0.95 payload digests
and ~0.9 SimHashes; every 20th batch (10 s) the trap guard's and the
soft-404 book's snapshots (~370 B of trap state per page crawled so far).
The trap snapshot's encoding is not timed here (core/traps.py, in the
crawler), only its write. This is a benchmark: it prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import random
import shutil
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

if importlib.util.find_spec("courtly") is None:    # PYTHONPATH picks the tree to measure
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from courtly.shell.store.sqlite import Batch, SqliteStore  # noqa: E402

SYLLABLES = ("lo", "ba", "mun", "tel", "cor", "zu", "ri", "nox", "sel", "qua", "do", "ge", "fi", "pa")
SECTIONS = ("news", "blog", "guides", "about", "private", "events", "archive", "shop")


class Crawl:
    """A deterministic S1-like crawl producing one Batch per commit."""

    def __init__(self, hosts: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.hosts = [f"site{i:04d}.test" for i in range(hosts)]
        self.queues: dict[str, deque] = {h: deque() for h in self.hosts}
        self.fetched_hosts: set[str] = set()
        self.now = 1_796_076_000.0
        self.pages = 0
        self.serial = 0

    def _url(self, host: str) -> str:
        self.serial += 1
        r = self.rng
        word = "".join(r.choice(SYLLABLES) for _ in range(r.randint(2, 4)))
        return f"http://{host}:44463/{r.choice(SECTIONS)}/{word}-{self.serial}.html"

    def seeds(self) -> Batch:
        b = Batch()
        for h in self.hosts:
            url = f"http://{h}:44463/"
            self.queues[h].append((url, 0))
            b.new_urls.append((url, h, 1, 0, 0, "", self.now))
        return b

    def batch(self, pages: int, traps: bool) -> Batch:
        r, b = self.rng, Batch()
        ready = [h for h in self.hosts if self.queues[h]]
        for _ in range(pages):
            self.now += 0.5 / pages
            host = r.choice(ready)
            if not self.queues[host]:
                continue
            url, depth = self.queues[host].popleft()
            self.pages += 1
            if host not in self.fetched_hosts:     # robots.txt and a soft-404 probe first
                self.fetched_hosts.add(host)
                for kind in ("robots", "soft404-probe"):
                    b.fetches.append((f"http://{host}:44463/robots.txt", kind, self.now, 200, 300, 0.01,
                                      "127.0.1.2", "", ""))
                b.robots[f"http://{host}:44463"] = {"v": 1, "phase": "fresh", "good": {"groups": [
                    {"agents": ["*"], "rules": [["disallow", "/private/"]], "crawl_delay_s": None}],
                    "sitemaps": []}, "good_at": self.now, "expires_at": self.now + 86400, "failures": 0}
            b.fetched.append((self.now, 200, url))
            b.fetches.append((url, "page", self.now, 200, 24_000, 0.05, "127.0.1.2",
                              f"courtly-00000.warc.gz:{self.pages * 11_000}", ""))
            b.hosts[host] = {"delay_s": 0.5 + r.random(), "next_fetch_at": self.now + 0.5,
                             "crawl_delay_s": None, "last_response_s": 0.05, "backoff_until": 0.0,
                             "backoff_reason": "", "fetches": self.pages}
            if r.random() < 0.95:
                b.digests.append(("sha256:" + hashlib.sha256(url.encode()).hexdigest(), url, self.now, ""))
            if r.random() < 0.9:
                b.simhashes.append((url, r.getrandbits(64) - (1 << 63), host))
            for _ in range(int(r.expovariate(1 / 3.5) + 0.5)):
                h = host if r.random() < 0.965 else r.choice(self.hosts)
                new = self._url(h)
                self.queues[h].append((new, depth + 1))
                b.new_urls.append((new, h, 4, depth + 1, 0, url, self.now))
            if r.random() < 0.6:
                reason = "nofollow" if r.random() < 0.75 else "robots"
                b.decisions.append((self._url(host), host, url, self.now, "skipped", reason,
                                    "page nofollow", depth + 1))
        if traps:
            b.meta["traps"] = self.rng.randbytes(self.pages * 185).hex()
            b.meta["soft404"] = "x" * 60_000
        return b


def wchar() -> int:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_round(batches: list[Batch], pages: int) -> tuple[float, float, float, float]:
    folder = Path(tempfile.mkdtemp(prefix="courtly-store-micro-"))
    try:
        store = SqliteStore(folder / "crawl.db")
        w0, t0 = wchar(), os.times()
        for b in batches:
            store.apply(b)
        t1, w1 = os.times(), wchar()
        store.close()
        size = sum(f.stat().st_size for f in folder.iterdir())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    cpu = (t1.user - t0.user) + (t1.system - t0.system)
    return cpu / pages * 1e6, (t1.system - t0.system) / pages * 1e6, (w1 - w0) / 1e6, size / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--pages-per-batch", type=int, default=380)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--traps-every", type=int, default=20, help="batches between trap snapshots (10 s)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    pages = min(args.pages, args.hosts * 200)   # bounded
    crawl = Crawl(args.hosts, args.seed)
    batches = [crawl.seeds()]
    n = 0
    while crawl.pages < pages and n < 10_000:
        n += 1
        batches.append(crawl.batch(min(args.pages_per_batch, pages - crawl.pages), n % args.traps_every == 0))
    new = sum(len(b.new_urls) for b in batches)
    print(f"{len(batches)} batches, {crawl.pages} pages, {new} new URLs, {args.pages_per_batch} pages a batch")
    started = time.monotonic()
    results = []
    for _ in range(max(1, args.rounds)):
        results.append(one_round(batches, crawl.pages))
        if time.monotonic() - started > 300:
            break
    best = min(results)
    print(f"store apply: {best[0]:.1f} us CPU per page (sys {best[1]:.1f}), {best[2]:.0f} MB written,"
          f" crawl.db {best[3]:.0f} MB;"
          f" rounds: {', '.join(f'{r[0]:.1f}' for r in results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
