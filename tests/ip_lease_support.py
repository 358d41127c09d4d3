"""The per-IP lease table in memory: the rules of `courtly_ip_lease` and of the
renew and give-back statements (shell/store/pg_schema.py version 8,
shell/store/pg_cluster.py) on an injected clock, for tests of
runtime/ip_leases.py without PostgreSQL. tests/shell/test_postgres_cluster.py
runs one scenario through both and compares every answer."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from courtly.ports import StoreUnavailableError


@dataclass
class LeaseRow:
    owner: str | None = None
    until: float = 0.0
    free_at: float = 0.0
    wanted: bool = False


class LeaseTable:
    """`ip_lease`, `ip_leases_renew`, `ip_leases_give` of the store port (ports.IpLeaseStore)."""

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
                       now: float | None = None) -> tuple[bool, float]:
        t = self._now(now)
        self.calls["lease"] += 1
        r = self.rows.setdefault(ip, LeaseRow())
        if r.owner is not None and r.owner != owner and r.until + hold_s > t:
            r.wanted = True
            return False, r.until + hold_s - t
        if r.owner is None and r.free_at > t:
            return False, r.free_at - t
        r.wanted = r.owner == owner and r.wanted
        r.owner, r.until = owner, t + lease_s
        return True, lease_s

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

    async def ip_leases_give(self, owner: str, ips, span_s: float, now: float | None = None) -> None:
        t = self._now(now)
        self.calls["give"] += 1
        for ip in ips:
            r = self.rows.get(ip)
            if r is not None and r.owner == owner:
                r.owner, r.wanted, r.free_at = None, False, t + span_s
