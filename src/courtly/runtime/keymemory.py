"""Bounded memory per key in the running crawl: evict idle keys, read them back.

What it owns: keeping the crawl's long-lived per-key state near
`frontier.key_states_max` entries whatever the number of hosts the crawl
touches: the politeness state of keys and resolved IPs, the robots.txt book,
the ban runs (the per-key request locks free themselves: runtime/keylocks.py).

How it works: at each commit, before the batch is written, `sweep` asks each
structure to evict its idle entries beyond the bound (core/keymemory.py: the
oldest first, at most SCAN_MAX looked at per structure). A key is idle when
it has no queued URL, no lock, nothing in flight, and is past its next fetch
instant and its back-off. The snapshots of evicted keys and origins go into
the batch being committed, so the store holds them from this commit on; when
a key or origin comes back, the structure reads its snapshot back from the
store (`saved_host`, `saved_robots`, given to the core as its `load`), so its
delay, back-off, health and robots.txt copy (with its expiry) are as before:
an eviction never lets a request go early or refetches robots.txt early.

A distributed worker uses this same sweep at each batch it cuts; its store
is async, so it reads a returning key's snapshot ahead, before the key's
claimed URLs are queued (runtime/keyreadback.py, `restore`), and drops the
idle keys of a partition it no longer holds (`drop`: the next owner reads
them from the store and holds them one delay).

What is not saved: an idle IP is dropped only when it remembers no key slow
enough to raise a delay (core/politeness.py, `evict_idle_ips`); a ban run
that is not yet a ban starts over (core/ban.py). Until the first eviction
nothing is ever read back (a crawl under the bound makes no extra query). A resume reads
at most the bound of saved robots.txt states (`load_robots`); it still reads
every saved key's politeness state (the hold after a crash needs each key's
delay), and the sweeps trim them to the bound.

Rules: synchronous; the store's single-key reads (`host`, `robots_of`) are
the only I/O, and only for a key that is not in memory; a snapshot evicted
into a batch the store has not acknowledged yet (its commit failed: the
store is down, runtime/group_commit) is read back from here, never stale
from the store.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Mapping, Protocol

from courtly.core.ban import BanWatch
from courtly.core.politeness import Politeness
from courtly.core.robots import Phase, RobotsBook
from courtly.core.urls import UrlError, politeness_key, split_origin
from courtly.ports import Batch

__all__ = ["KeyMemory", "SavedKeys"]

log = logging.getLogger("courtly")


class SavedKeys(Protocol):
    """The store's reads of one saved key or origin (shell/store/sqlite.py)."""

    def host(self, key: str) -> dict | None: ...

    def robots_of(self, origin: str) -> dict | None: ...

    def robots(self, limit: int = -1) -> dict[str, dict]: ...


class KeyMemory:
    def __init__(self, keys_max: int, store: SavedKeys, key_mode: str = "domain") -> None:
        if keys_max < 1:
            raise ValueError("key_states_max must be >= 1")
        self.keys_max = keys_max
        self._store = store
        self._key_mode = key_mode   # crawl.politeness_key: an origin's key, for `busy`
        self.evicted = 0      # keys, IPs and origins evicted so far
        self.read_back = 0    # keys and origins read back from the store
        self._left_saved = False   # a resume left saved state in the store only
        # evicted snapshots not yet acknowledged by the store (read back from here until `written`)
        self._unwritten_hosts: dict[str, dict] = {}
        self._unwritten_robots: dict[str, dict] = {}

    def saved_host(self, key: str) -> dict | None:
        """An evicted key's politeness snapshot (None: never saved, or nothing evicted yet)."""
        if not self.may_be_saved():
            return None
        snap = self._unwritten_hosts.pop(key, None)
        return self._counted(snap if snap is not None else self._store.host(key))

    def saved_robots(self, origin: str) -> dict | None:
        """An evicted origin's robots.txt snapshot."""
        if not self.may_be_saved():
            return None
        snap = self._unwritten_robots.pop(origin, None)
        return self._counted(snap if snap is not None else self._store.robots_of(origin))

    def take_unwritten(self, keys: Iterable[str], origins: Iterable[str]) -> tuple[dict[str, dict], dict[str, dict]]:
        """The evicted snapshots of `keys` and `origins` the store has not
        acknowledged yet (the newest of each), handed over to be read back."""
        hosts = {k: snap for k in keys if (snap := self._unwritten_hosts.pop(k, None)) is not None}
        robots = {o: snap for o in origins if (snap := self._unwritten_robots.pop(o, None)) is not None}
        return hosts, robots

    @property
    def unwritten(self) -> int:
        """Evicted snapshots kept until the store has them (0 once every batch is written)."""
        return len(self._unwritten_hosts) + len(self._unwritten_robots)

    def written(self) -> None:
        """The batches holding the evicted snapshots are in the store."""
        self._unwritten_hosts.clear()
        self._unwritten_robots.clear()

    def load_robots(self, robots: RobotsBook) -> int:
        """At a resume: at most `keys_max` saved robots.txt states into memory
        (the rest are read back as their origins return); returns how many."""
        return self.take_robots(self._store.robots(self.keys_max + 1), robots)

    def take_robots(self, saved: Mapping[str, dict], robots: RobotsBook) -> int:
        """`load_robots` for states already read (at most `keys_max` + 1 of them)."""
        self._left_saved = len(saved) > self.keys_max
        for origin, snap in list(saved.items())[:self.keys_max]:
            robots.restore(origin, snap)
        return min(len(saved), self.keys_max)

    def may_be_saved(self) -> bool:
        """Is any state in the store only? (Not before the first eviction or a
        resume that left some there: a crawl under the bound never asks.)"""
        return bool(self.evicted or self._left_saved)

    def _counted(self, snap: dict | None) -> dict | None:
        if snap is not None:
            self.read_back += 1
        return snap

    def restore(self, hosts: Mapping[str, dict], origins: Mapping[str, dict], politeness: Politeness,
                robots: RobotsBook) -> int:
        """Snapshots read back ahead of time (a worker's async store) into
        memory, for keys and origins not in memory; returns how many."""
        n = 0
        for key, snap in hosts.items():
            if not politeness.holds(key):
                politeness.restore(key, snap)
                n += 1
        for origin, snap in origins.items():
            if robots.phase(origin) is Phase.ABSENT:
                robots.restore(origin, snap)
                n += 1
        self.read_back += n
        return n

    def drop(self, keys: Iterable[str], now: float, politeness: Politeness, bans: BanWatch,
             busy: Callable[[str], bool]) -> int:
        """Forget the idle state of `keys`, whose partition went to another
        worker (not saved: the store has what was committed, and the next
        owner holds each key one delay); returns how many entries."""
        keys = list(keys)
        return politeness.forget_idle(keys, now, busy) + bans.forget(keys, busy)

    def sweep(self, now: float, batch: Batch, politeness: Politeness, robots: RobotsBook,
              bans: BanWatch, busy: Callable[[str], bool],
              evicted: Callable[[str], None] | None = None) -> int:
        """Evict idle state beyond the bound into `batch` (committed next);
        returns how many entries were evicted. `evicted` hears each key whose
        politeness state left memory. The robots.txt copy of an origin whose
        key is busy stays (it is asked before the key's next request: a
        worker could not read it back then)."""
        keep = self.keys_max
        n = 0
        for key, snap in politeness.evict_idle(now, keep, busy):
            batch.hosts[key] = self._unwritten_hosts[key] = snap
            n += 1
            if evicted is not None:
                evicted(key)
        def origin_busy(origin: str) -> bool:
            try:
                return busy(politeness_key(split_origin(origin).host, self._key_mode))
            except UrlError:
                return False

        for origin, snap in robots.evict_idle(keep, busy=origin_busy):
            batch.robots[origin] = self._unwritten_robots[origin] = snap
            n += 1
        n += politeness.evict_idle_ips(now, keep)
        n += bans.evict_idle(keep, busy)
        if n:
            self.evicted += n
            log.debug("evicted %d idle key states (keys %d, IPs %d, origins %d in memory)",
                      n, politeness.key_count, politeness.ip_count, len(robots))
        return n
