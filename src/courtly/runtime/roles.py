"""What each collaborator of the crawl engine may ask of it: narrow protocols.

What it owns: one `typing.Protocol` per collaborator of `runtime/crawler.py`
(admission, results, overflow, takedowns, consumers, the Bloom watch, the
complaints, seed refusal and seed feeding), naming exactly the members of the
crawler that collaborator uses. The crawler satisfies them all structurally.

How it works: a collaborator is built with the crawler (`Admission(self)`) but
sees it only through its protocol here, so it imports this module and never
`runtime/crawler.py`; the import graph of `runtime/` has no cycle
(tests/test_layout.py). The crawler's own collaborators that would close a
cycle (admission, results, takedowns, renders) appear as their own small
protocols below.

Rules: members only, no behaviour; a collaborator that needs one more member of
the crawler adds it to its protocol here (so the list stays the truth). The
store is typed `Any`: it is more than `ports.Store` today (issue 16, item 2).
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol

from courtly.config import Config
from courtly.core.ban import BanWatch
from courtly.core.frontier import Frontier
from courtly.core.intent import IntentProfile
from courtly.core.urls import NormalizeRules
from courtly.core.politeness import Politeness
from courtly.core.seen import SeenFilter
from courtly.core.types import Reason, UrlItem
from courtly.ports import Batch, Clock, Extractor, WarcSink
from courtly.core.robots import RobotsBook
from courtly.runtime.budget import BudgetDefence
from courtly.runtime.distribution import Payloads, SendPolicy, Tenancy
from courtly.runtime.monitor import Monitor
from courtly.runtime.recrawl import Recrawl

__all__ = ["AdmissionHost", "BloomHost", "ConsumersHost", "OverflowHost", "RefusalHost", "RequestsHost",
           "ResultsHost", "SeedsHost", "SlowdownHost", "TakedownHost", "Admits", "Extracting", "PurgeMatch"]


# ---- the crawler's collaborators, as the others see them ----------------------------------------

class Admits(Protocol):
    """runtime/admission.Admission, as the other collaborators use it."""

    def set_seeds(self, seeds: Iterable[str]) -> None: ...
    def in_scope(self, host: str) -> bool: ...
    def admit(self, raw: str, *, via: str | None, band: int, depth: int, now: float,
              redirects: int = 0) -> bool: ...
    def admit_many(self, urls: Iterable[str], *, via: str, band: int, depth: int, now: float) -> int: ...
    def admit_redirect(self, location: str, item: UrlItem, now: float) -> None: ...
    def admit_links(self, page: Any, item: UrlItem, now: float, *, low_value: bool = False) -> None: ...
    def normalize(self, raw: str) -> str: ...
    def normalized(self, urls: Iterable[str]) -> list[str]: ...


class Archives(Protocol):
    """runtime/results.Results, as the request path uses it: archive an exchange."""

    def archive(self, url: str, result: Any, *, kind: str, meta: dict[str, str]) -> str: ...


class Extracting(Protocol):
    """runtime/results.Results, as the overflow sees it: pages being extracted."""

    extracting: set[str]


class PurgeMatch(Protocol):
    """runtime/takedown.Takedowns, as admission and results use it."""

    def match(self, url: str) -> Any: ...
    def decide(self, url: str, key: str, via: str, purge: Any, now: float, depth: int = 0) -> None: ...


# ---- shared members -----------------------------------------------------------------------------

class _Queues(Protocol):
    def queue(self, item: UrlItem, now: float, *, stored: bool = False) -> bool: ...


class _Decides(Protocol):
    def decide(self, url: str, key: str, via: str, reason: Reason, detail: str, now: float,
               depth: int = 0, state: str = "skipped") -> None: ...


# ---- one protocol per collaborator --------------------------------------------------------------

class AdmissionHost(_Queues, _Decides, Protocol):
    cfg: Config
    store: Any
    seen: SeenFilter
    rules: NormalizeRules
    batch: Batch
    budget: BudgetDefence
    stats: Any
    observers: list
    takedowns: PurgeMatch


class BloomHost(Protocol):
    cfg: Config
    clock: Clock
    crawl_id: str
    seen: SeenFilter
    store: Any

    def swap_seen(self, seen: SeenFilter) -> None: ...


class ConsumersHost(_Queues, Protocol):
    cfg: Config
    store: Any
    seen: SeenFilter
    politeness: Politeness
    admission: Admits
    overflow: Any    # runtime/overflow.Overflow: `note` (URLs queued again at a new day)


class OverflowHost(_Queues, Protocol):
    cfg: Config
    store: Any
    frontier: Frontier
    results: Extracting
    attempts: dict[str, int]

    def wake(self) -> None: ...


class RefusalHost(_Queues, Protocol):
    cfg: Config
    store: Any
    batch: Batch
    crawl_id: str
    admission: Admits


class RequestsHost(Protocol):
    cfg: Config
    clock: Clock
    token: str
    rules: NormalizeRules
    resolver: Any
    fetcher: Any
    frontier: Frontier
    politeness: Politeness
    robots: RobotsBook
    bans: BanWatch
    budget: BudgetDefence
    batch: Batch
    stats: Any
    observers: list
    admission: Admits
    results: Archives
    takedowns: PurgeMatch
    tenancy: Tenancy
    sending: SendPolicy
    profile: IntentProfile

    @property
    def stopping(self) -> bool: ...
    async def pause_until(self, at: float) -> None: ...
    def commit(self, *, final: bool = False) -> None: ...


class ResultsHost(_Queues, _Decides, Protocol):
    cfg: Config
    clock: Clock
    token: str
    warc: WarcSink
    extractor: Extractor
    batch: Batch
    stats: Any
    observers: list
    attempts: dict[str, int]
    admission: Admits
    budget: BudgetDefence
    bans: BanWatch
    politeness: Politeness
    recrawl: Recrawl
    monitor: Monitor
    takedowns: PurgeMatch
    tenancy: Tenancy
    payloads: Payloads | None   # first captures stored by other workers (cluster), or None
    profile: IntentProfile
    renders: Any      # runtime/render.PageRenders, or None

    def track(self, t: Any) -> None: ...


class SeedsHost(Protocol):
    crawl_id: str

    @property
    def stopping(self) -> bool: ...
    def add_seeds(self, seeds: Iterable[str]) -> int: ...
    def commit(self, *, final: bool = False) -> None: ...


class SlowdownHost(Protocol):
    cfg: Config
    store: Any
    batch: Batch
    crawl_id: str
    politeness: Politeness


class TakedownHost(_Decides, Protocol):
    store: Any
    crawl_id: str
    frontier: Frontier
    recrawl: Recrawl

    def in_flight_urls(self) -> list[str]: ...
