"""Benchmark: memory while a crawl touches a million politeness keys.

    python bench/memory_keys.py                    # 1,000,000 keys, RSS every 100,000
    python bench/memory_keys.py --quick            # 100,000 keys, RSS every 10,000
    python bench/memory_keys.py --mode before      # nothing evicted (what every crawl did before)

What it does: drives the crawler's own per-key structures in one process,
without network, on a virtual clock (1 ms per key): for each of `--keys`
distinct registered domains, one URL is admitted by the trap guard, queued in
the frontier, leased; its robots.txt is fetched (a 2xx with a few rules) and
its page "fetched" under the key's and its IP's politeness (two keys share
each address, as on shared hosting); the ban watch sees the answer; the lease
is completed and the key goes idle. Every 10th visit, the key seen 1.5 x
`key_states_max` keys earlier returns with a second URL: its state is read
back (it was evicted) and its robots.txt copy, not yet expired, is not
fetched again. Every `--commit-every` keys a commit
runs as the crawler's does: `KeyMemory.sweep` (runtime/keymemory.py) evicts
idle state beyond `frontier.key_states_max` into the batch, and the batch
(host and robots.txt snapshots) is written to a real SqliteStore.

Modes: `after` (the default bound, 100,000), `before` (a bound above the key
count, so nothing is ever evicted: memory as it grew before), `both` (each in
its own process, one after the other). Printed per sample: keys so far, RSS
(VmRSS) in MB, entries in memory (politeness keys, IPs, robots.txt origins,
ban runs), evicted, returning visits, read back from the store, robots.txt
fetches (one per key: a returning key's copy is never fetched twice), seconds.

A benchmark, not a test: it prints figures and asserts nothing; the figures
go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import gc
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from courtly.config import Config
from courtly.core.ban import BanWatch
from courtly.core.frontier import Frontier
from courtly.core.politeness import Politeness, PolitenessConfig
from courtly.core.robots import RobotsBook, RobotsFetched
from courtly.core.types import UrlItem
from courtly.core.urlyield import Outcome
from courtly.ports import Batch
from courtly.runtime.budget import BudgetDefence
from courtly.runtime.keymemory import KeyMemory
from courtly.shell.store.sqlite import SqliteStore

T0 = 1_700_000_000.0
STEP_S = 0.001          # virtual time per key
RESPONSE_S = 0.05
BUDGET_SAVE_S = 10.0    # the crawler saves the trap guard's state this often (runtime/crawler.py)
RETURN_EVERY = 10       # every 10th visit, an old key returns: one evicted when the bound is reached
ROBOTS = b"User-agent: *\nDisallow: /private/\nDisallow: /tmp/\nAllow: /private/ok\nSitemap: /sitemap.xml\n"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class KeyWalk:
    """The crawler's per-key structures, driven one key visit at a time."""

    def __init__(self, keys_max: int, folder: Path) -> None:
        cfg = Config().replace("frontier", key_states_max=keys_max)
        self.store = SqliteStore(folder / "crawl.db")
        self.memory = KeyMemory(keys_max, self.store)
        self.frontier = Frontier(random.Random(1))
        self.politeness = Politeness(PolitenessConfig(), rng=random.Random(2), load=self.memory.saved_host)
        self.robots = RobotsBook(load=self.memory.saved_robots)
        self.bans = BanWatch()
        self.budget = BudgetDefence(cfg, random.Random(3))
        self.batch = Batch()
        self.saved_at = T0
        self.robots_fetched = 0
        self.body = b"<html>" + b"x" * 300 + b"</html>"

    def visit(self, i: int, path: str, now: float) -> None:
        """Key `i` gets the URL `path`, is leased, fetched and goes idle."""
        key = f"k{i}.example"
        origin = f"https://www.{key}"
        url = origin + path
        ip = f"10.{(i // 2) >> 16 & 255}.{(i // 2) >> 8 & 255}.{(i // 2) & 255}"
        self.budget.admit(key, url, 0, now, seed=True)
        self.frontier.add(UrlItem(url=url, key=key, band=1), self.politeness.ready_at(key, now))
        lease = self.frontier.lease(now)
        if lease is None or lease.key != key:   # the only ready key must be this visit's
            raise RuntimeError(f"the frontier handed out {lease and lease.key!r}, not {key!r}")
        at = now
        if self.robots.lookup(origin, now).rules is None:   # absent, or expired: fetch it
            self.robots.fetch_started(origin, now)
            at = now + RESPONSE_S
            self.robots.fetch_finished(origin, at, RobotsFetched(200, ROBOTS))
            self.batch.robots[origin] = self.robots.snapshot(origin)
            self.robots_fetched += 1
        self.budget.before_fetch(key, url, at)
        pol = self.politeness
        pol.set_crawl_delay(key, None, at)
        pol.started(key, at)
        token = pol.ip_started(ip, at, key)
        done = at + RESPONSE_S
        pol.ip_finished(ip, token, done)
        ban = self.bans.answered(key, url, 200, self.body)
        pol.finished(key, done, response_s=RESPONSE_S, status=200, ip=ip, ban=ban)
        self.budget.traps.note_fetch(key, url, False, done, outcome=Outcome.EMPTY)
        self.frontier.complete(lease.lease_id, pol.ready_at(key, done))
        self.batch.hosts[key] = pol.key(key).snapshot()

    def commit(self, now: float) -> None:
        """Crawler.commit's steps, in its order."""
        self.frontier.expire(now)   # the main loop's: also drops completed leases' heap entries
        self.memory.sweep(now, self.batch, self.politeness, self.robots, self.bans, self.frontier.has_key)
        if now - self.saved_at >= BUDGET_SAVE_S:
            self.budget.save(self.batch)
            self.saved_at = now
        self.store.apply(self.batch)
        self.batch = Batch()


def run(keys: int, every: int, commit_every: int, keys_max: int, lag: int, folder: Path,
        seconds_max: float) -> None:
    walk = KeyWalk(keys_max, folder)
    started = time.monotonic()
    returned = 0
    print(f"mode key_states_max={keys_max}: {keys} keys, commit every {commit_every}, "
          f"every {RETURN_EVERY}th visit also the key {lag:,} keys older")
    print(f"{'keys':>9} {'RSS MB':>8} {'pol keys':>9} {'IPs':>8} {'robots':>8} {'bans':>8} "
          f"{'evicted':>9} {'returned':>9} {'read back':>9} {'robots.txt':>10} {'s':>7}")
    for i in range(1, keys + 1):
        now = T0 + i * STEP_S
        walk.visit(i, "/", now)
        if i % RETURN_EVERY == 0 and i > lag:   # an old key comes back: read back, no robots.txt again
            walk.visit(i - lag, "/again", now)
            returned += 1
        if i % commit_every == 0:
            walk.commit(now)
        if i % every == 0:
            gc.collect()
            pol = walk.politeness
            print(f"{i:>9} {rss_mb():>8.0f} {pol.key_count:>9} {pol.ip_count:>8} {len(walk.robots):>8} "
                  f"{len(walk.bans):>8} {walk.memory.evicted:>9} {returned:>9} {walk.memory.read_back:>9} "
                  f"{walk.robots_fetched:>10} {time.monotonic() - started:>7.1f}", flush=True)
            if time.monotonic() - started > seconds_max:
                print(f"stopped after {i} keys: --seconds-max {seconds_max:g} reached")
                break
    walk.store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000, help="distinct politeness keys touched")
    ap.add_argument("--every", type=int, default=0, help="print a sample every N keys (0: keys / 10)")
    ap.add_argument("--commit-every", type=int, default=500,
                    help="keys per commit (500 ms of a crawl at 1,000 keys/s, the store's default interval)")
    ap.add_argument("--mode", choices=("after", "before", "both"), default="after",
                    help="after: the default key_states_max; before: nothing evicted; both: one then the other")
    ap.add_argument("--key-states-max", type=int, default=Config().frontier.key_states_max,
                    help="the bound in mode after")
    ap.add_argument("--quick", action="store_true", help="100,000 keys and a bound of 10,000")
    ap.add_argument("--seconds-max", type=float, default=420.0,
                    help="stop at the first sample past this many seconds (each mode)")
    a = ap.parse_args()
    keys = 100_000 if a.quick else a.keys
    bound = 10_000 if a.quick and a.key_states_max == Config().frontier.key_states_max else a.key_states_max
    every = a.every or max(1, keys // 10)
    if a.mode == "both":
        for mode in ("before", "after"):
            subprocess.run([sys.executable, __file__, "--keys", str(keys), "--every", str(every),
                            "--commit-every", str(a.commit_every), "--mode", mode, "--key-states-max",
                            str(bound), "--seconds-max", str(a.seconds_max)], check=False)
        return
    keys_max = keys + 1 if a.mode == "before" else bound
    with tempfile.TemporaryDirectory(prefix="courtly-memkeys-") as d:
        # returning keys: 1.5 x the bound back (evicted in mode after), the same visits in both modes
        run(keys, every, a.commit_every, keys_max, bound * 3 // 2, Path(d), a.seconds_max)


if __name__ == "__main__":
    main()
