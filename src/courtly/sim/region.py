"""Regions in the simulated web: a host near one region and far from another,
and a host that geo-blocks a region.

What it owns: how the simulated servers tell which region a request comes
from and what that changes. A region is a client source address (a crawler
of region `eu` connects from 127.0.0.2, say: `clients`); every host is near
one region (`near`, default: the first region) and answers clients of any
other region `far_latency_s` later, as a transatlantic round trip would; a
host in `blocked` answers the region named there with `451 Unavailable For
Legal Reasons` (RFC 7725) and nothing else, the way geo-blocking sites do.

The server applies it to the reply `route.route` chose (`adjust`), so the
rest of the web (pages, robots.txt, hostile behaviours) is unchanged and the
request log shows the region's effect (`tag` = `geo_block`, or the longer
duration). Used by tests of home-region choice (core/region.py).

Rules: pure; source addresses not listed belong to no region (unchanged).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

from courtly.sim.route import Reply

__all__ = ["RegionWeb"]

_BLOCKED_BODY = b"<html><body><h1>451</h1><p>Not available in your region.</p></body></html>\n"


@dataclass(frozen=True, slots=True)
class RegionWeb:
    regions: tuple[str, ...]
    clients: Mapping[str, str]                              # client source IP -> region
    near: Mapping[str, str] = field(default_factory=dict)   # host name -> the region it is near
    blocked: Mapping[str, str] = field(default_factory=dict)   # host name -> the region it refuses
    far_latency_s: float = 0.2

    def __post_init__(self) -> None:
        for what, mapping in (("clients", self.clients), ("near", self.near), ("blocked", self.blocked)):
            unknown = sorted(set(mapping.values()) - set(self.regions))
            if unknown:
                raise ValueError(f"{what} names unknown region {unknown[0]!r} (regions: {self.regions})")
        if self.far_latency_s < 0:
            raise ValueError("far_latency_s must be >= 0")

    def region_of(self, client_ip: str) -> str:
        return self.clients.get(client_ip, "")

    def adjust(self, host: str, client_ip: str, reply: Reply) -> Reply:
        """The reply as a client of `client_ip`'s region gets it."""
        region = self.region_of(client_ip)
        if not region:
            return reply
        name = host.rsplit(":", 1)[0].lower() if not host.endswith("]") else host
        if self.blocked.get(name) == region:
            return Reply(451, [("Content-Type", "text/html; charset=utf-8")], _BLOCKED_BODY,
                         delay_s=reply.delay_s, tag="geo_block")
        if self.near.get(name, self.regions[0]) != region:
            return dataclasses.replace(reply, delay_s=reply.delay_s + self.far_latency_s)
        return reply
