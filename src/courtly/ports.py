"""The edges of the core: one `typing.Protocol` per port.

The runtime depends on these shapes, never on a concrete technology, so the
same worker runs against real HTTP and SQLite in production and against
simulated fakes (`Sim*`, `VirtualClock`) in deterministic tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping, Protocol, runtime_checkable

__all__ = ["Clock", "Cancellable", "Resolver", "Fetcher", "Extractor", "WarcSink", "Store", "Batch", "StaleEpochError",
           "StoreUnavailableError"]


@runtime_checkable
class Clock(Protocol):
    """Every wait of the runtime goes through its clock (shell/clock.LoopClock
    holds them once; sim/vloop's VirtualClock runs them in virtual time)."""

    def now(self) -> float:
        """Seconds since the epoch (wall clock, so instants survive restarts)."""

    async def sleep_until(self, at: float) -> None: ...

    async def sleep(self, s: float) -> None:
        """A period of `s` seconds (the commit interval, a retry pause)."""

    def timer(self, at: float, callback: Callable[..., Any], *args: Any) -> Cancellable:
        """`callback(*args)` at the instant `at`, unless cancelled first."""

    async def wait_until(self, aw: Awaitable[Any], at: float | None) -> bool:
        """Until `aw` completes (True) or the instant `at` comes (False)."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Resolver(Protocol):
    async def resolve(self, host: str) -> list[str]:
        """Validated addresses, first is the one to connect to; raises ResolveFailed."""


class Fetcher(Protocol):
    async def fetch(self, url: str, *, ip: str | None = None,
                    headers: Mapping[str, str] | None = None): ...

    async def close(self) -> None: ...


class Extractor(Protocol):
    async def submit(self, body: bytes, url: str, content_type: str, x_robots_tag: str,
                     *, error_print: bool = True): ...

    async def close(self) -> None: ...


class WarcSink(Protocol):
    def write_exchange(self, *, url: str, ip: str, request_head: bytes, response_head: bytes,
                       body: bytes, fetched_at: float, truncated: str | None = None,
                       metadata: dict[str, str] | None = None): ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class Batch:
    """Changes gathered between two commits."""

    new_urls: list[tuple] = field(default_factory=list)     # (url, key, band, depth, redirects, via, at)
    requeued: list[tuple] = field(default_factory=list)     # (attempts, url)
    fetched: list[tuple] = field(default_factory=list)      # (at, status, url)
    decisions: list[tuple] = field(default_factory=list)    # (url, key, via, at, state, reason, detail, depth)
    fetches: list[tuple] = field(default_factory=list)      # (url, kind, at, status, bytes, elapsed, ip, warc, error)
    hosts: dict[str, dict] = field(default_factory=dict)
    robots: dict[str, dict] = field(default_factory=dict)
    dead_letters: list[tuple] = field(default_factory=list)
    flags: list[tuple] = field(default_factory=list)        # (url, at, flag, detail)
    digests: list[tuple] = field(default_factory=list)      # (digest, url, at, record_id)
    simhashes: list[tuple] = field(default_factory=list)    # (doc_id, fp signed int64, scope)
    histories: dict[str, tuple] = field(default_factory=dict)  # url -> (url, host, tier, depth, json)
    meta: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return (len(self.new_urls) + len(self.requeued) + len(self.fetched) + len(self.decisions)
                + len(self.fetches) + len(self.hosts) + len(self.robots) + len(self.dead_letters)
                + len(self.flags) + len(self.digests) + len(self.simhashes) + len(self.histories)
                + len(self.meta))


class Store(Protocol):
    """Durable crawl state. Writes arrive in batches (`apply`), one transaction each."""

    def apply(self, batch) -> None: ...

    def has_url(self, url: str) -> bool: ...

    def iter_urls(self) -> Iterator[str]: ...

    def iter_queued(self) -> Iterable[tuple]: ...

    def close(self) -> None: ...


class StoreUnavailableError(Exception):
    """The shared store cannot be reached now: pause, keep the batch, retry."""


class StaleEpochError(Exception):
    """A write for partitions whose lease the writer no longer holds was refused
    whole; `partitions` names them."""

    partitions: frozenset[int] = frozenset()
