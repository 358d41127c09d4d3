"""Distribution is configuration: the strategies the crawl engine is built with.

What it owns: the two policies that make one `Crawler` (runtime/crawler.py) a
single-machine crawl or a distributed worker, as small protocols, and their
single-machine implementations. The cluster implementations live with the
worker (runtime/worker.py), which builds the same engine with them.

* `Tenancy` -- who owns which politeness key. One machine owns every key and
  has no lease epoch; a worker owns the keys of the partitions it holds, under
  fenced leases (runtime/ownership.py). The engine takes a `Tenure` (partition,
  epoch) when a host batch starts and hands it down with every request of that
  batch: the last check before a request leaves (`may_send`) and the
  fetcher's send gate judge that tenure, never "the epoch right now".
* `SendPolicy` -- the per-IP limits beyond this process: one machine has
  none (the core's local limits are all there is); a worker sends to an IP
  only while it holds the IP's lease in PostgreSQL (runtime/ip_leases.py).
* `Payloads` -- where the exact-duplicate index looks beyond this process
  (None for one machine, whose index holds every capture; a worker asks the
  shared store, runtime/shared_defence.py).
* `Commits` -- where the engine's batches go when it does not write them to
  its own store (a worker writes them, fenced, to the shared store). None for
  one machine: the engine's `commit` writes the batch itself.

How it works: everything is handed to `Crawler(..., deployment=...)` at
construction; nothing of the engine is replaced afterwards and no class
extends the engine (tests/runtime/test_composition.py).

Rules: protocols name only what the engine calls; the single-machine
implementations do nothing the engine did not do before they existed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Protocol

__all__ = ["Commits", "Deployment", "LocalLimits", "OwnsEverything", "Payloads", "SendPolicy", "Tenancy",
           "Tenure", "single_machine"]


class Tenure(NamedTuple):
    """The partition of a key and the lease epoch it was held under when a
    host batch started (None: no lease, a single machine)."""

    partition: int
    epoch: int | None


class Tenancy(Protocol):
    """Which keys this engine may fetch for, and under which lease."""

    routes: bool     # discovered URLs go to the store, for their partition's owner (not queued here)
    endless: bool    # work arrives from elsewhere: an empty frontier does not end the run

    def owns(self, key: str) -> bool:
        """`key` is this engine's to fetch now."""
        ...

    def tenure(self, key: str) -> Tenure: ...

    def take(self, key: str, now: float) -> float | None:
        """A URL of `key` is queued here: None when the key is not ours (the URL
        stays queued in the store for its owner), else the instant before
        which a key new here must not be fetched (a take-over hold; 0.0 none)."""
        ...

    def refuse(self, url: str, key: str, now: float) -> Any:
        """The answer for a request outside any lease that this engine may not
        send (a robots.txt redirect into a key held elsewhere), or None."""
        ...

    def may_send(self, tenure: Tenure, now: float) -> bool: ...

    def judges(self, url: str, via: str) -> bool:
        """The trap guard here judges `url`, discovered on `via` (else the
        owner of its key judges it when it claims it, runtime/admission)."""
        ...

    def gate(self, tenure: Tenure) -> Callable[[], bool] | None:
        """The fetcher's send gate for a request under `tenure` (asked once the
        connection is ready), or None when there is none to ask."""
        ...

    def begin(self, key: str) -> None:
        """Work for `key` started (a host batch, an extraction): it writes later."""
        ...

    def end(self, key: str) -> None: ...


class SendPolicy(Protocol):
    """Per-IP limits held beyond this process."""

    async def acquire(self, ip: str, key: str) -> bool:
        """A request slot on `ip`: True when held, False after a wait (the
        engine checks every limit again)."""
        ...

    def release(self, ip: str, key: str, now: float) -> None: ...

    def holds(self, ip: str) -> bool:
        """A request acquired on `ip` may still be sent (asked by the fetcher's gate)."""
        ...


class Commits(Protocol):
    """The writer of the engine's batches when it is not the engine itself."""

    def commit(self, *, final: bool = False) -> None:
        """Write the engine's batch soon (now, not at the next tick)."""
        ...

    async def loop(self) -> None:
        """The periodic commit loop (runs beside the fetch tasks until cancelled)."""
        ...


class Payloads(Protocol):
    """The first captures of payloads stored beyond this process."""

    async def recall(self, digest: str, budget: Any) -> None:
        """Make `budget`'s exact index know `digest`'s first capture, if one was stored elsewhere."""
        ...


class OwnsEverything:
    """One machine: every key is ours, there is no lease epoch and no gate."""

    routes = False
    endless = False
    _ALL = Tenure(0, None)

    def owns(self, key: str) -> bool:
        return True

    def tenure(self, key: str) -> Tenure:
        return self._ALL

    def take(self, key: str, now: float) -> float | None:
        return 0.0

    def refuse(self, url: str, key: str, now: float) -> None:
        return None

    def may_send(self, tenure: Tenure, now: float) -> bool:
        return True

    def judges(self, url: str, via: str) -> bool:
        return True

    def gate(self, tenure: Tenure) -> None:
        return None

    def begin(self, key: str) -> None:
        pass

    def end(self, key: str) -> None:
        pass


class LocalLimits:
    """One machine: the core's per-IP limits are all there is."""

    async def acquire(self, ip: str, key: str) -> bool:
        return True

    def release(self, ip: str, key: str, now: float) -> None:
        pass

    def holds(self, ip: str) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Deployment:
    """The strategies of one engine (see the module doc)."""

    tenancy: Tenancy = field(default_factory=OwnsEverything)
    sending: SendPolicy = field(default_factory=LocalLimits)
    commits: Commits | None = None
    payloads: Payloads | None = None


def single_machine() -> Deployment:
    return Deployment()
