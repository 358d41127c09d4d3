"""Politeness keys: which site a host belongs to, and its partition.

`registered_domain` uses the Public Suffix List snapshot bundled in
tldextract (never fetched, no disk cache), INCLUDING the private section:
``alice.github.io`` and ``bob.github.io`` are different sites with different
owners, and the per-IP limit (DESIGN invariant 2) still protects the shared
servers behind them. A suffix the list does not know (``.test``,
``.internal``) follows the PSL default rule ``*``. `politeness_key` is that
or the exact host; `partition_of` spreads keys over partitions with blake2b.
(Split out of `courtly.core.urls`, which re-exports all three.)

Pure: no clock, no I/O (the PSL snapshot is package data read once).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress

__all__ = ["registered_domain", "politeness_key", "partition_of"]


@functools.lru_cache(maxsize=1)
def _extractor():  # type: ignore[no-untyped-def]
    import tldextract

    # suffix_list_urls=() and cache_dir=None: the bundled snapshot only,
    # no HTTP, no cache files.
    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )


@functools.lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """eTLD+1 of `host` (PSL incl. private suffixes, default rule ``*``);
    an IP literal is returned as the canonical IP, a public suffix as itself."""
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    h = h.rstrip(".")
    try:
        return ipaddress.ip_address(h).compressed
    except ValueError:
        pass
    if not h or "." not in h:
        return h
    result = _extractor().extract_str(h)
    if result.suffix == "":  # unknown TLD: the last label is the suffix
        return ".".join(h.split(".")[-2:])
    if result.domain == "":  # the host is itself a public suffix
        return h
    return f"{result.domain}.{result.suffix}"


def politeness_key(host: str, mode: str = "domain") -> str:
    """The key politeness and partitioning use: registered domain or exact host."""
    if mode == "domain":
        return registered_domain(host)
    if mode == "host":
        h = host.strip().lower().rstrip(".")
        return h[1:-1] if h.startswith("[") and h.endswith("]") else h
    raise ValueError(f"politeness key mode must be 'domain' or 'host', not {mode!r}")


def partition_of(key: str, partitions: int) -> int:
    """Stable partition of a politeness key: blake2b-64 (big-endian) mod P."""
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions
