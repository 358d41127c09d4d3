"""The per-IP lease table in memory: the rules of `courtly_ip_lease`,
`courtly_ip_slot` and of the renew and give-back statements
(shell/store/pg_schema.py version 8, shell/store/pg_cluster.py) on an
injected clock, for tests of runtime/ip_leases.py without PostgreSQL.
tests/shell/test_postgres_cluster.py runs one story through both and
compares every answer."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from courtly.ports import StoreUnavailableError

BUSY_WAIT_S = 0.05      # PostgresStore.ip_busy_wait_s


@dataclass
class LeaseRow:
    owner: str | None = None
    until: float = 0.0
    free_at: float = 0.0
    wanted: bool = False
    shared_until: float = 0.0
    flights: list[list[float]] = field(default_factory=list)   # [slot expiry (token), its start]
    starts: list[float] = field(default_factory=list)          # window instants, sorted


class LeaseTable:
    """`ip_lease`, `ip_leases_renew`, `ip_leases_give`, `ip_slot`, `ip_release`
    of the store port (ports.IpLeaseStore)."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.rows: dict[str, LeaseRow] = {}
        self.calls: Counter[str] = Counter()
        self.down = False

    def _now(self, now: float | None) -> float:
        if self.down:
            raise StoreUnavailableError("the lease table is down (test)")
        return self.clock.now() if now is None else now

    async def ip_lease(self, ip: str, owner: str, lease_s: float, hold_s: float,
                       now: float | None = None) -> tuple[str, float]:
        t = self._now(now)
        self.calls["lease"] += 1
        r = self.rows.setdefault(ip, LeaseRow())
        if r.owner is not None and r.owner != owner and r.until + hold_s > t:
            r.wanted = True
            return "wait", r.until + hold_s - t
        if r.owner != owner and r.free_at > t:
            return "wait", r.free_at - t
        if r.owner != owner and r.shared_until > t:
            return "shared", r.shared_until - t
        r.wanted = r.owner == owner and r.wanted
        r.owner, r.until = owner, t + lease_s
        return "held", lease_s

    async def ip_leases_renew(self, owner: str, ips, lease_s: float, now: float | None = None) -> set[str]:
        t = self._now(now)
        self.calls["renew"] += 1
        out = set()
        for ip in ips:
            r = self.rows.get(ip)
            if r is not None and r.owner == owner and not r.wanted:
                r.until = t + lease_s
                out.add(ip)
        return out

    async def ip_leases_wanted(self, owner: str) -> set[str]:
        self._now(None)
        self.calls["wanted"] += 1
        return {ip for ip, r in self.rows.items() if r.owner == owner and r.wanted}

    async def ip_leases_give(self, owner: str, ips, span_s: float, shared_s: float = 0.0,
                             now: float | None = None) -> None:
        t = self._now(now)
        self.calls["give"] += 1
        for ip in ips:
            r = self.rows.get(ip)
            if r is not None and r.owner == owner:
                r.owner, r.wanted, r.free_at = None, False, t + span_s
                r.shared_until = max(r.shared_until, t + shared_s)

    async def ip_slot(self, ip: str, now: float | None, concurrency_max: int, rate_per_s: float, *,
                      hold_s: float, shared_s: float, margin_s: float = 0.01) -> float | None:
        t = self._now(now)
        self.calls["slot"] += 1
        r = self.rows.setdefault(ip, LeaseRow())
        if r.owner is not None and r.until + hold_s > t:
            r.wanted = True
            return r.until + hold_s - t
        if r.free_at > t:
            return r.free_at - t
        r.flights = [f for f in r.flights if f[0] > t]           # slots past hold_s lapse
        if len(r.flights) >= concurrency_max:
            return BUSY_WAIT_S
        window = int(rate_per_s) if rate_per_s >= 1 else 1
        span = (1.0 if rate_per_s >= 1 else 1.0 / rate_per_s) + margin_s
        if len(r.starts) >= window:
            oldest = r.starts[len(r.starts) - window]
            if any(f[1] == oldest for f in r.flights):          # the window hinges on a request in flight
                return BUSY_WAIT_S
            if oldest + span > t:
                return oldest + span - t
        r.flights.append([t + hold_s, t])
        r.starts = sorted(r.starts + [t])[-window:]
        r.owner, r.wanted = None, False
        r.shared_until = max(r.shared_until, t + shared_s)
        return None

    async def ip_release(self, ip: str, now: float | None = None) -> None:
        t = self._now(now)
        self.calls["release"] += 1
        r = self.rows.get(ip)
        if r is None or not r.flights:
            return
        expiry, started = r.flights.pop()
        if started in r.starts:                                  # the window counts from completion
            r.starts[r.starts.index(started)] = max(started, t)
            r.starts.sort()
