"""Which IP addresses the crawler may connect to (the SSRF guard, invariant 4).

Links are attacker-chosen, so every resolved address is checked before a
connection is made, and the connection goes to that checked address. An
address is *public* when it is globally routable unicast: not loopback,
private (RFC 1918, ULA), link-local (incl. the 169.254.169.254 metadata
service), CGNAT, "this network" 0.0.0.0/8, documentation, benchmarking,
multicast, broadcast or reserved. IPv6 forms that embed an IPv4 address
(IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) are judged by the address
they embed, so ``::ffff:127.0.0.1`` is loopback.

A crawl may explicitly allow extra networks (the simulated web lives on
127.0.0.0/8); `NetPolicy` combines the two rules. An allowed IPv4 network
also opens its IPv4-mapped forms (the same destination), not its NAT64, 6to4,
Teredo or IPv4-compatible ones. Pure: no DNS here.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from typing import Iterable

__all__ = ["is_public_address", "embedded_ipv4", "NetPolicy", "parse_ip"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4_NOT_PUBLIC = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",        # "this network"
        "10.0.0.0/8",       # private
        "100.64.0.0/10",    # CGNAT (shared address space)
        "127.0.0.0/8",      # loopback
        "169.254.0.0/16",   # link-local, cloud metadata 169.254.169.254
        "172.16.0.0/12",    # private
        "192.0.0.0/24",     # IETF protocol assignments
        "192.0.2.0/24",     # TEST-NET-1
        "192.88.99.0/24",   # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",   # private
        "198.18.0.0/15",    # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",   # TEST-NET-3
        "224.0.0.0/4",      # multicast
        "240.0.0.0/4",      # reserved, incl. broadcast 255.255.255.255
    )
)

_V6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_V6_NOT_PUBLIC = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "2001::/23",        # IETF protocol assignments (Teredo handled first)
        "2001:db8::/32",    # documentation
        "2002::/16",        # 6to4 (handled first, by its embedded address)
        "3fff::/20",        # documentation (RFC 9637)
    )
)
_V6_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_V6_COMPAT = ipaddress.IPv6Network("::/96")
_V6_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_V6_TEREDO = ipaddress.IPv6Network("2001::/32")
_V6_6TO4 = ipaddress.IPv6Network("2002::/16")


def parse_ip(text: str) -> IPAddress | None:
    """The address in `text` (brackets and an IPv6 zone id tolerated), or None.

    A zone id follows an IPv6 address only: ``93.184.216.34%.evil.test`` is a
    name, not 93.184.216.34. Judged as that address it would be passed on as
    the address to connect to, and connect() would resolve it (getaddrinfo
    falls back to DNS for what is not numeric): a second lookup that decides
    the destination."""
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1]
    t, pct, zone = t.partition("%")
    try:
        addr = ipaddress.ip_address(t)
    except ValueError:
        return None
    if pct and (addr.version != 6 or not zone):
        return None
    return addr


def embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 transition form carries, if any."""
    if addr in _V6_MAPPED:
        return addr.ipv4_mapped
    if addr in _V6_NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _V6_TEREDO:
        # client address, obfuscated (bit-inverted) in the low 32 bits
        return ipaddress.IPv4Address(~int(addr) & 0xFFFFFFFF)
    if addr in _V6_6TO4:
        return ipaddress.IPv4Address((int(addr) >> 80) & 0xFFFFFFFF)
    if addr in _V6_COMPAT and int(addr) > 1:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def _v4_public(addr: ipaddress.IPv4Address) -> bool:
    return not any(addr in net for net in _V4_NOT_PUBLIC)


def _is_public(addr: IPAddress) -> bool:
    if isinstance(addr, ipaddress.IPv4Address):
        return _v4_public(addr)
    inner = embedded_ipv4(addr)
    if inner is not None:
        return _v4_public(inner)
    if addr in _V6_COMPAT:  # :: and ::1
        return False
    if addr not in _V6_GLOBAL_UNICAST:  # ULA, link-local, multicast, site-local...
        return False
    return not any(addr in net for net in _V6_NOT_PUBLIC)


@functools.lru_cache(maxsize=1 << 16)
def _permits(allowed_networks: tuple[str, ...], ip: str) -> bool:
    """Public, or inside an allowed network. An IPv6 address counts as its
    embedded IPv4 only in the IPv4-mapped form, the one the kernel connects to
    that very IPv4 address; NAT64, 6to4, Teredo and IPv4-compatible forms go
    to a translator, a relay or nowhere, not into the listed network, so they
    are opened only by a network that names them as IPv6."""
    addr = parse_ip(ip)
    if addr is None:
        return False
    if _is_public(addr):
        return True
    candidates: list[IPAddress] = [addr]
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        candidates.append(addr.ipv4_mapped)
    for net in allowed_networks:
        network = ipaddress.ip_network(net, strict=False)
        if any(c.version == network.version and c in network for c in candidates):
            return True
    return False


@functools.lru_cache(maxsize=1 << 16)
def is_public_address(ip: str) -> bool:
    """True when `ip` is a globally routable unicast address. Garbage is not public."""
    addr = parse_ip(ip)
    return addr is not None and _is_public(addr)


@dataclass(frozen=True, slots=True)
class NetPolicy:
    """Public addresses, plus networks the crawl config explicitly allows."""

    allowed_networks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for net in self.allowed_networks:
            ipaddress.ip_network(net, strict=False)  # raises ValueError on garbage

    @classmethod
    def allowing(cls, networks: Iterable[str]) -> "NetPolicy":
        return cls(tuple(networks))

    def permits(self, ip: str) -> bool:
        # asked before every request: remembered per address (a pure function of both)
        return _permits(self.allowed_networks, ip)

    def is_loopback_only(self) -> bool:
        """True when every allowed network lies inside loopback (used by the
        impolite-config warning: fast delays are fine against our own test web)."""
        loop = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
        for net in self.allowed_networks:
            n = ipaddress.ip_network(net, strict=False)
            if not any(n.version == lo.version and n.subnet_of(lo) for lo in loop):  # type: ignore[arg-type]
                return False
        return True
