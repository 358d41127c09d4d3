"""The SSRF-safe resolver: host name -> permitted addresses, with a DNS cache.

`SafeResolver.resolve(host)` answers, in order of precedence:

1. an IP literal: itself;
2. an override (``--resolve HOST:IP`` or a hosts file, like curl's);
3. the cache (positive answers live for their DNS TTL clamped to
   [ttl_s_min, ttl_s_max]; failures for negative_ttl_s);
4. a lookup: c-ares (aiodns) getaddrinfo, which sends the A and AAAA queries,
   reads /etc/hosts and reports TTLs; `loop.getaddrinfo` when aiodns is not
   installed (no TTLs there, so ttl_s_min applies).

Every address is checked with `NetPolicy.permits`; refused addresses are
removed, order is kept, and when none remain the answer is
``ResolveFailed(Reason.NON_PUBLIC)``. The first address is the one the
crawler connects to (the fetcher pins its connection to it).

When a lookup fails (Reason.DNS: a timeout, SERVFAIL, no answer) and the
host had a good answer that expired at most `stale_s_max` ago, that answer
is served again (re-checked by the policy) and cached for `negative_ttl_s`,
so a resolver that fails intermittently does not fail the host's URLs
(RFC 8767's serve-stale, bounded). Lookups are timed into a latency
histogram (`DNS_LATENCY_BUCKETS_S`) and failures and stale answers counted:
the `courtly_dns_*` metrics.

Rules: concurrent lookups of one host share one query (a shielded task, so a
cancelled caller does not cancel the others); the cache is an LRU bounded by
`cache_entries_max`; time comes from the injected `clock` only.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any, Awaitable, Callable, Sequence

from courtly.core.netpolicy import NetPolicy, parse_ip
from courtly.core.types import Reason
from courtly.ports import ResolveFailed  # declared with the ports; re-exported here

aiodns: ModuleType | None
try:  # pragma: no cover - exercised by whichever is installed
    import aiodns
except ImportError:  # pragma: no cover
    aiodns = None

__all__ = ["ResolveFailed", "ResolverStats", "SafeResolver", "Lookup", "DNS_LATENCY_BUCKETS_S"]

# A lookup returns (address, ttl_s) pairs in preference order, or raises
# ResolveFailed(Reason.DNS). Injected by tests; the default uses c-ares.
Lookup = Callable[[str], Awaitable[list[tuple[str, float]]]]

_HOST_LEN_MAX = 253
# Upper bounds of the lookup latency histogram (seconds); +Inf is implied.
DNS_LATENCY_BUCKETS_S: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                            2.5, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class ResolverStats:
    """Counters for the dns_cache_hit_ratio metric (literals and overrides excluded)."""

    hits: int          # answered from a positive cache entry
    negative_hits: int  # answered from a cached failure
    misses: int        # started a lookup
    coalesced: int     # joined a lookup already in flight
    entries: int       # cache size now
    failures: int = 0  # lookups that failed (Reason.DNS), stale answers served included
    stale: int = 0     # of those, answered from the last good answer
    latency_counts: tuple[int, ...] = ()   # lookups per DNS_LATENCY_BUCKETS_S bucket (+Inf last)
    latency_sum_s: float = 0.0

    @property
    def hit_ratio(self) -> float:
        answered = self.hits + self.negative_hits
        total = answered + self.misses + self.coalesced
        return answered / total if total else 0.0


def normalise_host(host: str) -> str:
    """Lower case, no brackets, no trailing dot: the cache and override key."""
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    return h.rstrip(".")


class SafeResolver:
    """Resolves names to addresses the policy permits, caching answers."""

    def __init__(
        self,
        policy: NetPolicy,
        *,
        overrides: dict[str, list[str]] | None = None,
        ttl_s_min: float = 60,
        ttl_s_max: float = 3600,
        negative_ttl_s: float = 300,
        clock: Callable[[], float] = time.monotonic,
        cache_entries_max: int = 100_000,
        nameservers: Sequence[str] | None = None,
        lookup: Lookup | None = None,
        stale_s_max: float = 3600,
    ) -> None:
        if not 0 <= ttl_s_min <= ttl_s_max:
            raise ValueError("need 0 <= ttl_s_min <= ttl_s_max")
        if cache_entries_max < 1:
            raise ValueError("cache_entries_max must be >= 1")
        if stale_s_max < 0:
            raise ValueError("stale_s_max must be >= 0")
        self.policy = policy
        self._ttl_s_min = ttl_s_min
        self._ttl_s_max = ttl_s_max
        self._negative_ttl_s = negative_ttl_s
        self._clock = clock
        self._entries_max = cache_entries_max
        self._nameservers = list(nameservers) if nameservers else None
        self._lookup: Lookup = lookup or self._default_lookup
        self._aiodns: Any = None   # an aiodns.DNSResolver once the first lookup needs one
        # host -> (expires_at, addresses or the failure)
        self._cache: OrderedDict[str, tuple[float, list[str] | ResolveFailed]] = OrderedDict()
        self._inflight: dict[str, asyncio.Task[list[str]]] = {}
        self._overrides: dict[str, list[str] | ResolveFailed] = {}
        for name, ips in (overrides or {}).items():
            self._overrides[normalise_host(name)] = self._permitted(name, _literal_list(name, ips))
        self._hits = self._negative_hits = self._misses = self._coalesced = 0
        self._stale_s_max = stale_s_max
        # host -> (expires_at, addresses) of its last good lookup, for serve-stale (LRU, same bound)
        self._good: OrderedDict[str, tuple[float, list[str]]] = OrderedDict()
        self._failures = self._stale = 0
        self._latency = [0] * (len(DNS_LATENCY_BUCKETS_S) + 1)
        self._latency_sum_s = 0.0

    # -- public -------------------------------------------------------------

    async def resolve(self, host: str) -> list[str]:
        """Permitted addresses of `host`, preferred first; raises ResolveFailed."""
        key = normalise_host(host)
        answer = self._cached(key)
        if answer is not None:
            return answer
        task = self._inflight.get(key)
        if task is not None:
            self._coalesced += 1
        else:
            self._misses += 1
            task = asyncio.ensure_future(self._lookup_and_store(key))
            self._inflight[key] = task
            task.add_done_callback(partial(self._lookup_done, key))
        return list(await asyncio.shield(task))

    def cached(self, host: str) -> list[str] | None:
        """The answer without any lookup (literal, override, fresh cache entry),
        or None when a lookup is needed. Raises ResolveFailed like `resolve`."""
        return self._cached(normalise_host(host))

    def _cached(self, key: str) -> list[str] | None:
        if key and (key[0].isdigit() or ":" in key) and parse_ip(key) is not None:
            return self._checked(self._permitted(key, [key]))
        over = self._overrides.get(key)
        if over is not None:
            return self._checked(over)
        entry = self._cache.get(key)
        if entry is None:
            return None
        expires_at, value = entry
        if self._clock() >= expires_at:
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        if isinstance(value, ResolveFailed):
            self._negative_hits += 1
            raise ResolveFailed(value.reason, value.detail)
        self._hits += 1
        return list(value)

    @property
    def stats(self) -> ResolverStats:
        counts, running = [], 0
        for n in self._latency:   # cumulative, as Prometheus buckets are
            running += n
            counts.append(running)
        return ResolverStats(self._hits, self._negative_hits, self._misses, self._coalesced, len(self._cache),
                             self._failures, self._stale, tuple(counts), self._latency_sum_s)

    def forget(self, host: str) -> None:
        """Drop the cache entry for `host` (e.g. after connection failures)."""
        self._cache.pop(normalise_host(host), None)

    async def close(self) -> None:
        res, self._aiodns = self._aiodns, None
        if res is not None:
            await res.close()

    # -- internals ----------------------------------------------------------

    @staticmethod
    def _checked(value: list[str] | ResolveFailed) -> list[str]:
        if isinstance(value, ResolveFailed):
            raise ResolveFailed(value.reason, value.detail)  # a fresh traceback each time
        return list(value)

    def _permitted(self, host: str, addrs: list[str]) -> list[str] | ResolveFailed:
        kept = [a for a in addrs if self.policy.permits(a)]
        if kept:
            return kept
        return ResolveFailed(Reason.NON_PUBLIC, f"{host}: no permitted address in {', '.join(addrs)}")

    def _lookup_done(self, key: str, task: asyncio.Task[list[str]]) -> None:
        self._inflight.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here, so no warning when every caller left

    async def _lookup_and_store(self, key: str) -> list[str]:
        try:
            if not key or len(key) > _HOST_LEN_MAX:
                raise ResolveFailed(Reason.DNS, f"{key!r}: not a valid host name")
            started = self._clock()
            try:
                answers = await self._lookup(key)
            finally:
                self._timed(self._clock() - started)
            if not answers:
                raise ResolveFailed(Reason.DNS, f"{key}: no addresses")
        except ResolveFailed as exc:
            self._failures += 1
            stale = self._stale_answer(key) if exc.reason is Reason.DNS else None
            if stale is not None:
                self._stale += 1
                self._store(key, self._clock() + self._negative_ttl_s, stale)
                return self._checked(stale)
            self._store(key, self._clock() + self._negative_ttl_s, ResolveFailed(exc.reason, exc.detail))
            raise
        addrs = list(dict.fromkeys(addr for addr, _ in answers))
        ttl_s = min(ttl for _, ttl in answers)
        ttl_s = min(max(ttl_s, self._ttl_s_min), self._ttl_s_max)
        value = self._permitted(key, addrs)
        self._store(key, self._clock() + ttl_s, value)
        if not isinstance(value, ResolveFailed):
            good = self._good
            good[key] = (self._clock() + ttl_s, value)
            good.move_to_end(key)
            while len(good) > self._entries_max:
                good.popitem(last=False)
        return self._checked(value)

    def _stale_answer(self, key: str) -> list[str] | ResolveFailed | None:
        """The last good answer if it expired at most stale_s_max ago (policy checked again)."""
        entry = self._good.get(key)
        if entry is None or self._clock() - entry[0] > self._stale_s_max:
            return None
        return self._permitted(key, entry[1])

    def _timed(self, elapsed_s: float) -> None:
        elapsed_s = max(0.0, elapsed_s)
        self._latency_sum_s += elapsed_s
        i = next((i for i, b in enumerate(DNS_LATENCY_BUCKETS_S) if elapsed_s <= b), len(DNS_LATENCY_BUCKETS_S))
        self._latency[i] += 1

    def _store(self, key: str, expires_at: float, value: list[str] | ResolveFailed) -> None:
        cache = self._cache
        cache[key] = (expires_at, value)
        cache.move_to_end(key)
        while len(cache) > self._entries_max:
            cache.popitem(last=False)

    async def _default_lookup(self, host: str) -> list[tuple[str, float]]:
        if aiodns is None:
            return await _getaddrinfo_lookup(host)
        if self._aiodns is None:
            kwargs = {"nameservers": self._nameservers} if self._nameservers else {}
            self._aiodns = aiodns.DNSResolver(loop=asyncio.get_running_loop(), **kwargs)
        try:
            result = await self._aiodns.getaddrinfo(host, family=socket.AF_UNSPEC)
        except aiodns.error.DNSError as exc:
            code = exc.args[0] if exc.args else None
            text = exc.args[1] if len(exc.args) > 1 else str(exc)
            raise ResolveFailed(Reason.DNS, f"{host}: {text} (c-ares {code})") from None
        out = []
        for node in result.nodes:
            addr = node.addr[0]
            if isinstance(addr, bytes):
                addr = addr.decode("ascii")
            out.append((addr, float(node.ttl)))
        return out


async def _getaddrinfo_lookup(host: str) -> list[tuple[str, float]]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ResolveFailed(Reason.DNS, f"{host}: {exc}") from None
    return [(str(info[4][0]), 0.0) for info in infos]


def _literal_list(name: str, ips: list[str]) -> list[str]:
    out = []
    for ip in ips:
        addr = parse_ip(ip)
        if addr is None:
            raise ValueError(f"override for {name!r}: {ip!r} is not an IP address")
        out.append(normalise_host(ip))  # as given, minus brackets
    if not out:
        raise ValueError(f"override for {name!r} lists no address")
    return out
