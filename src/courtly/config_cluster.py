"""The configuration of a distributed worker (re-exported by config.py, which
composes it into `Config`): partition and IP leases, heartbeats, claims,
the connection pool, the region and its egress (docs/distributed.md)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from courtly.config_checks import ConfigError, _positive

__all__ = ["DistributedSection"]


@dataclass(frozen=True, slots=True)
class DistributedSection:
    """`courtly worker` on PostgreSQL (docs/distributed.md). Lease times are on
    the database's clock for who owns what, on the worker's clock for when it
    stops fetching."""

    lease_ttl_s: float = 30.0          # a partition lease lasts this long after the request that took or renewed it
    renew_before_s: float = 20.0       # renew when this much is left (10 s into a 30 s lease)
    stop_margin_s: float = 5.0         # stop fetching this long before the lease ends if not renewed
    renew_retry_s: float = 2.0         # a failed renewal is tried again after this
    ip_lease_s: float = 15.0           # an IP's lease (its per-IP limits held by one worker), renewed every third
    heartbeat_s: float = 5.0           # a worker heartbeats this often ...
    live_s: float = 15.0               # ... and counts as live while its heartbeat is younger than this
    rebalance_s: float = 5.0           # how often a worker compares its partitions with the placement
    claim_s: float = 0.5               # how often new URLs of held partitions are taken from the inbox
    claim_max: int = 2000              # URLs per claim
    local_queue_max: int = 50_000      # no claim while this many URLs wait in the worker's frontier
    store_retry_s_max: float = 10.0    # back-off cap while PostgreSQL is unreachable
    pool_max: int = 8                  # connections per worker
    region: str = ""                   # this worker's region in a crawl of several (issue 21; --region)
    source_address: str = ""           # local IP the worker's requests leave from ('' = the system's choice)

    def __post_init__(self) -> None:
        if self.region and not all(c.isalnum() or c == "-" for c in self.region):
            raise ConfigError(f"distributed.region may hold letters, digits and '-' only: {self.region!r}")
        if self.source_address:
            try:
                ipaddress.ip_address(self.source_address)
            except ValueError:
                raise ConfigError(f"distributed.source_address is not an IP address: {self.source_address!r}") \
                    from None
        for name in ("lease_ttl_s", "renew_before_s", "stop_margin_s", "renew_retry_s", "ip_lease_s", "heartbeat_s",
                     "live_s", "rebalance_s", "claim_s", "store_retry_s_max"):
            _positive(f"distributed.{name}", getattr(self, name))
        for name in ("claim_max", "local_queue_max", "pool_max"):
            _positive(f"distributed.{name}", getattr(self, name))
        if not 0 < self.stop_margin_s < self.renew_before_s < self.lease_ttl_s:
            raise ConfigError("distributed: need 0 < stop_margin_s < renew_before_s < lease_ttl_s")
        if self.renew_retry_s > self.renew_before_s - self.stop_margin_s:
            raise ConfigError("distributed.renew_retry_s must leave room for a retry before the stop margin")
        if self.live_s <= self.heartbeat_s:
            raise ConfigError("distributed.live_s must be longer than heartbeat_s")
