"""The cluster's tenancy for the crawl engine: whose keys, under which lease.

What it owns: `WorkerStats` (a worker's counters), `Partitions`, the engine's tenancy on a cluster (the keys of
the partitions this worker holds, under their lease epochs; discovered URLs
routed to their owners; work in progress counted per partition). It
implements runtime/distribution.Tenancy; runtime/worker.py builds the engine
with it and with the send policy of runtime/ip_leases.py.

How it works: a host batch takes its key's `Tenure` (partition, epoch) when
it starts; `may_send` and the fetcher's gate judge that tenure against
`Ownership` (runtime/ownership.py) at the moment of sending, so a partition
lost meanwhile sends nothing. A key new to this worker after a take-over is
held until `hold(until)`: the previous owner's last requests may not be in
the store yet.

Rules: no shell imports (the store is the port's shape); waits are bounded.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable
from dataclasses import dataclass, field

from courtly.core.urls import partition_of, politeness_key, split_origin
from courtly.runtime.distribution import Tenure
from courtly.runtime.ownership import Ownership

__all__ = ["Partitions", "WorkerStats"]


@dataclass(slots=True)
class WorkerStats:
    claimed: int = 0
    claims: int = 0
    batches: int = 0
    stale_batches: int = 0
    dropped_urls: int = 0       # queued locally when their partition was lost
    not_owner_hops: int = 0     # robots.txt redirects into a partition held elsewhere
    store_errors: int = 0
    ip_waits: int = 0           # asks for an IP's lease refused (held elsewhere, just given back, yielded)
    ip_leases: int = 0          # IP leases taken (runtime/ip_leases)
    ip_handovers: int = 0       # IP leases given back because another worker wanted them (shared from then)
    ip_slots: int = 0           # requests sent with a slot of a shared IP
    readopted: int = 0          # partitions adopted again by the safety net (see Worker._sweep)
    not_sent: int = 0           # requests the last-moment gate stopped
    refused_claims: int = 0     # claimed URLs the owner's trap guard or budget refused (each with a decision)
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Unsent:
    """The answer to a request this worker may not send (a robots.txt redirect
    into a partition another worker holds): a network failure, so robots.txt
    counts as unreachable and is retried later (RFC 9309: disallow meanwhile)."""

    url: str
    started_at: float
    status: int = 0
    ip: str = ""
    error: str = "not_owner"
    error_detail: str = "redirect target's partition is held by another worker"
    request_head: bytes = b""
    response_head: bytes = b""
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    content: bytes = b""
    truncated: str | None = None
    elapsed_s: float = 0.0


class Partitions:
    """The engine's tenancy on a cluster (runtime/distribution.Tenancy): the keys
    of the partitions `own` holds, under their lease epochs; discovered URLs
    are routed to their owners; work in progress is counted per partition."""

    routes = True
    endless = True     # a worker waits for more work; it stops on stop()

    def __init__(self, own: Ownership, partitions: int, cfg, clock, stats: WorkerStats, *,
                 part_of_key: Callable[[str], int] | None = None) -> None:
        self.own = own
        self.n = partitions
        # the store's answer when keys have home regions (pg_region): a key's
        # partition lies in its home region's range, not simply hash mod n
        self._part_of_key = part_of_key
        self.mode = cfg.crawl.politeness_key
        self.clock = clock
        self.stats = stats
        self._keys_of: dict[int, set[str]] = {}
        self._busy: Counter[int] = Counter()
        self._part_of_host: dict[str, int] = {}
        self._hold_until = 0.0                    # keys first seen before this wait (take-over)

    def partition(self, key: str) -> int:
        return partition_of(key, self.n) if self._part_of_key is None else self._part_of_key(key)

    def partition_of_url(self, url: str) -> int:
        try:
            host = split_origin(url).host
        except Exception:
            return self.partition("")
        p = self._part_of_host.get(host)
        if p is None:
            if len(self._part_of_host) > 100_000:
                self._part_of_host.clear()
            p = self._part_of_host[host] = self.partition(politeness_key(host, self.mode))
        return p

    # ---- the engine's tenancy --------------------------------------------------

    def owns(self, key: str) -> bool:
        return self.own.epoch(self.partition(key)) is not None

    def tenure(self, key: str) -> Tenure:
        p = self.partition(key)
        return Tenure(p, self.own.epoch(p))

    def take(self, key: str, now: float) -> float | None:
        p = self.partition(key)
        if self.own.epoch(p) is None:
            return None
        keys = self._keys_of.setdefault(p, set())
        if key in keys:
            return 0.0
        keys.add(key)
        return self._hold_until

    def refuse(self, url: str, key: str, now: float) -> _Unsent | None:
        if self.own.epoch(self.partition(key)) is not None:
            return None
        self.stats.not_owner_hops += 1
        return _Unsent(url=url, started_at=now)

    def may_send(self, tenure: Tenure, now: float) -> bool:
        return self.own.may_fetch(tenure.partition, tenure.epoch, now)

    def judges(self, url: str, via: str) -> bool:
        """A URL found on a page of its own partition is judged by the trap
        guard of the worker that fetched the page (its owner); any other (or
        a seed) by its owner when it claims it, with its own counts of the
        key: each URL is counted once, by the trap guard that keeps the key."""
        return bool(via) and self.partition_of_url(url) == self.partition_of_url(via)

    def gate(self, tenure: Tenure):
        p, epoch = tenure

        def gate() -> bool:
            if self.own.may_fetch(p, epoch, self.clock.now()):
                return True
            self.stats.not_sent += 1    # the lease ended while it waited for a connection
            return False

        return gate

    def begin(self, key: str) -> None:
        self._busy[self.partition(key)] += 1

    def end(self, key: str) -> None:
        p = self.partition(key)
        self._busy[p] -= 1
        if self._busy[p] <= 0:
            del self._busy[p]

    # ---- for the worker --------------------------------------------------------

    def busy(self, partition: int) -> bool:
        return self._busy.get(partition, 0) > 0

    def forget(self, partition: int) -> set[str]:
        """The keys queued here for `partition`, forgotten (it was lost)."""
        return self._keys_of.pop(partition, set())

    def evicted(self, key: str) -> None:
        """`key`'s state left memory (runtime/keymemory): it is new here when it returns."""
        keys = self._keys_of.get(self.partition(key))
        if keys is not None:
            keys.discard(key)

    def hold(self, until: float) -> None:
        """Keys new here from now on wait until `until` (a take-over)."""
        self._hold_until = max(self._hold_until, until)
