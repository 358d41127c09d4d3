"""courtly: a polite, host-partitioned web crawler.

The public conformance surface (stable, documented in the README):

    robots_allowed(robots_txt: bytes, user_agent: str, url: str) -> bool
    normalize_url(url: str) -> str
    resolve_url(base: str, ref: str) -> str
    is_public_address(ip: str) -> bool
    target_allowed(url: str, resolve) -> bool     # resolve(host) -> list[str]
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "robots_allowed",
    "normalize_url",
    "resolve_url",
    "is_public_address",
    "target_allowed",
]


def robots_allowed(robots_txt: bytes, user_agent: str, url: str) -> bool:
    """RFC 9309: may `user_agent` fetch `url` under this robots.txt body?"""
    from courtly.core.robots import robots_allowed as impl

    return impl(robots_txt, user_agent, url)


def normalize_url(url: str) -> str:
    """Canonical form of an http(s) URL (raises ValueError if not crawlable)."""
    from courtly.core.urls import normalize_url as impl

    return impl(url)


def resolve_url(base: str, ref: str) -> str:
    """RFC 3986 section 5.2 reference resolution."""
    from courtly.core.urls import resolve_url as impl

    return impl(base, ref)


def is_public_address(ip: str) -> bool:
    """True for globally routable unicast addresses (IPv4-in-IPv6 forms judged by the IPv4)."""
    from courtly.core.netpolicy import is_public_address as impl

    return impl(ip)


def target_allowed(url: str, resolve) -> bool:
    """May the crawler connect for `url`? `resolve(host) -> list[str]` stands in for DNS."""
    from courtly.core.target import target_allowed as impl

    return impl(url, resolve)
