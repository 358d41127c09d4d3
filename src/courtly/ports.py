"""The edges of the core: one `typing.Protocol` per port, and the values that cross them.

The runtime depends on these shapes, never on a concrete technology, so the
same worker runs against real HTTP and SQLite in production and against
simulated fakes (`Sim*`, `VirtualClock`) in deterministic tests.

What it owns:

* the ports: `Clock`, `Resolver`, `Fetcher`, `Extractor`, `WarcSink`, and the
  store split by what its callers need (`BatchWriter`, `UrlLookup`,
  `QueueStore`, `HostStateStore`, `MetaStore`, `DecisionStore`,
  `PurgeStore`, `ComplaintStore`, `IndexStore`); `Store` is their union,
  what the single-machine store (`shell/store/sqlite.py`) implements whole.
  A collaborator asks for the narrowest one it uses, so a fake implements
  two methods, not forty. The cluster's shared store is async and has its
  own narrow ports, by what a worker calls (`SharedBatchWriter`,
  `LeaseStore`, `InboxStore`, `IpLeaseStore`, `SharedHostState`,
  `SharedMeta`, `SharedTakeUp`, `SharedDefenceStore`; `ClusterStore` is
  their union, what `shell/store/postgres.py` implements whole).
* what crosses them: `FetchResult` with its `FetchError` and `Truncation`
  kinds, `ResolveFailed`, the store's errors, the `Batch` of writes and
  its rows, and the rows the store reads back (`NamedTuple`s: a row is
  still a tuple, so positional unpacking and `executemany` keep working).

Rules: nothing here does I/O or imports the shell or the runtime (the shell
re-exports `FetchResult` and `ResolveFailed` from here under their old
names); `mypy --strict` holds it with the core (`[tool.mypy]` in
pyproject.toml, tests/test_typing.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import (TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping,
                    NamedTuple, Protocol, Sequence, runtime_checkable)

from courtly.core.types import Reason

if TYPE_CHECKING:  # types only: the ports do not load the link extractor
    from courtly.core.fingerprint import FirstCapture
    from courtly.core.lease import LeaseRecord
    from courtly.core.links import ExtractFailed, PageLinks
    from courtly.core.purge import Purge

__all__ = [
    "Clock", "Cancellable", "Resolver", "Fetcher", "Extractor", "WarcSink", "WarcLocation",
    "FetchResult", "FetchError", "Truncation", "FetchKind", "UrlState", "ResolveFailed",
    "BatchWriter", "UrlLookup", "QueueStore", "HostStateStore", "MetaStore", "DecisionStore", "PurgeStore",
    "ComplaintStore", "IndexStore", "Store",
    "SharedBatchWriter", "LeaseStore", "InboxStore", "IpLeaseStore", "SharedHostState", "SharedMeta", "SharedTakeUp",
    "SharedDefenceStore", "ClusterStore", "ClaimedRow",
    "Batch", "NewUrlRow", "AttemptsRow", "FetchedRow", "DecisionRow", "FetchLogRow", "DeadLetterRow", "FlagRow",
    "DigestRow", "SimhashRow", "HistoryRow", "QueuedRow", "RefusedRow", "PurgeRow", "ComplaintRow",
    "StaleEpochError", "StoreUnavailableError",
]


# ---- outcomes and kinds ---------------------------------------------------------------

class FetchError(StrEnum):
    """Why a fetch has no usable response (`FetchResult.error`); a string in the fetch log."""

    NOT_SENT = "not_sent"                  # the request never left (pool closed, send gate shut)
    TIMEOUT = "timeout"                    # connect or whole-request deadline
    CONNECT = "connect"                    # refused, unreachable
    RESET = "reset"                        # closed before a complete response head
    TLS = "tls"                            # handshake or certificate failure
    PROTOCOL = "protocol"                  # not HTTP/1.1 we can read honestly
    TOO_LARGE_HEADERS = "too_large_headers"
    INVALID_URL = "invalid_url"
    INVALID_REQUEST = "invalid_request"    # a header we refuse to send
    DNS = "dns"                            # from ResolveFailed (Reason.DNS)
    NON_PUBLIC = "non_public"              # from ResolveFailed or the network policy (Reason.NON_PUBLIC)
    DECODE = "decode"                      # a content-coding that cannot be undone
    DECODE_BOMB = "decode_bomb"            # decoded output over its cap (the content is cut there)


class Truncation(StrEnum):
    """WARC-Truncated values the fetcher produces (`FetchResult.truncated`)."""

    LENGTH = "length"
    TIME = "time"
    DISCONNECT = "disconnect"


class FetchKind(StrEnum):
    """What a fetch log row was fetched for (`FetchLogRow.kind`)."""

    PAGE = "page"
    RECRAWL = "recrawl"
    ROBOTS = "robots"
    SOFT404_PROBE = "soft404-probe"
    RENDER_SUBREQUEST = "render-subrequest"


class UrlState(StrEnum):
    """The state of a URL record (`DecisionRow.state`, the store's `urls.state`)."""

    QUEUED = "queued"
    FETCHED = "fetched"
    SKIPPED = "skipped"     # a decision with a Reason: not fetched on purpose
    FAILED = "failed"       # fetched and failed for good (Reason.ERROR, HOST_DOWN, ...)


# ---- clock, network, extraction, archive ------------------------------------------------

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


class ResolveFailed(Exception):
    """A host that may not be connected to: Reason.DNS or Reason.NON_PUBLIC."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail


class Resolver(Protocol):
    async def resolve(self, host: str) -> list[str]:
        """Validated addresses, first is the one to connect to; raises ResolveFailed."""


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What one GET produced. status 0 means no response head was received."""

    url: str
    ip: str
    status: int
    request_head: bytes       # request line + headers as sent, CRLFCRLF-terminated
    response_head: bytes      # status line + raw header lines, CRLFCRLF-terminated
    headers: Mapping[str, str]  # case-insensitive (a CIMultiDictProxy)
    body: bytes               # after transfer-decoding, still content-encoded
    content: bytes            # decoded per Content-Encoding, capped
    truncated: Truncation | None  # WARC-Truncated: "length", "time", "disconnect"
    started_at: float         # wall clock, seconds since the epoch
    elapsed_s: float
    error: FetchError | None = None  # None when the response is usable (a StrEnum: equal to its string)
    error_detail: str = ""


class Fetcher(Protocol):
    async def fetch(self, url: str, *, ip: str | None = None,
                    headers: dict[str, str] | None = None) -> FetchResult:
        """GET `url` (connecting to `ip` when given); never raises for network trouble."""

    async def close(self) -> None: ...


class Extractor(Protocol):
    async def submit(self, body: bytes, url: str, content_type: str, x_robots_tag: str,
                     *, error_print: bool = True) -> PageLinks | ExtractFailed: ...

    async def close(self) -> None: ...


class WarcLocation(Protocol):
    """Where a written record lives (shell/warc.py's WarcRef)."""

    @property
    def filename(self) -> str: ...

    @property
    def offset(self) -> int: ...

    @property
    def record_id(self) -> str: ...


class WarcSink(Protocol):
    def write_exchange(self, *, url: str, ip: str, request_head: bytes, response_head: bytes,
                       body: bytes, fetched_at: float, truncated: str | None = None,
                       metadata: dict[str, str] | None = None,
                       payload_digest: str | None = None) -> WarcLocation: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


# ---- the store's rows ---------------------------------------------------------------------
# Written in a Batch (the runtime may still append plain tuples of the same
# fields: a row is positional) or read back from the store.

class NewUrlRow(NamedTuple):
    url: str
    key: str
    band: int
    depth: int
    redirects: int
    via: str                # the page it was found on, "" for a seed
    at: float


class AttemptsRow(NamedTuple):
    attempts: int
    url: str


class FetchedRow(NamedTuple):
    at: float
    status: int
    url: str


class DecisionRow(NamedTuple):
    url: str
    key: str
    via: str                # the page it was found on, "" for a seed
    at: float
    state: str              # a UrlState
    reason: str             # a Reason
    detail: str
    depth: int


class FetchLogRow(NamedTuple):
    url: str
    kind: str               # a FetchKind
    at: float
    status: int
    nbytes: int
    elapsed_s: float
    ip: str
    warc: str               # "file:offset" of the response record, "" when none was written
    error: str              # a FetchError, "" when none


class DeadLetterRow(NamedTuple):
    url: str
    at: float
    reason: str


class FlagRow(NamedTuple):
    url: str
    at: float
    flag: str               # exact_dup | near_dup | soft404 | noindex
    detail: str


class DigestRow(NamedTuple):
    digest: str
    url: str
    at: float
    record_id: str


class SimhashRow(NamedTuple):
    doc_id: str
    fp: int                 # the fingerprint as a signed 64-bit integer
    scope: str


class HistoryRow(NamedTuple):
    url: str
    host: str
    tier: int
    depth: int
    history: str            # JSON of the URL's change history


class QueuedRow(NamedTuple):
    url: str
    key: str
    band: int
    depth: int
    redirects: int
    via: str                # the page it was found on, "" for a seed
    attempts: int


class RefusedRow(NamedTuple):
    url: str
    key: str
    via: str                # the page it was found on, "" for a seed
    reason: str
    detail: str


class PurgeRow(NamedTuple):
    id: int
    scope: str
    value: str
    reason: str
    at: float
    applied_at: float | None


class ComplaintRow(NamedTuple):
    id: int
    host: str
    key: str
    contact: str
    note: str
    recorded_at: float
    resolved_at: float | None


@dataclass(slots=True)
class Batch:
    """Changes gathered between two commits."""

    new_urls: list[NewUrlRow] = field(default_factory=list)
    requeued: list[AttemptsRow] = field(default_factory=list)
    fetched: list[FetchedRow] = field(default_factory=list)
    decisions: list[DecisionRow] = field(default_factory=list)
    fetches: list[FetchLogRow] = field(default_factory=list)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)     # key -> politeness snapshot
    robots: dict[str, dict[str, Any]] = field(default_factory=dict)    # origin -> robots entry
    dead_letters: list[DeadLetterRow] = field(default_factory=list)
    flags: list[FlagRow] = field(default_factory=list)
    digests: list[DigestRow] = field(default_factory=list)
    simhashes: list[SimhashRow] = field(default_factory=list)
    histories: dict[str, HistoryRow] = field(default_factory=dict)      # url -> its latest history
    meta: dict[str, str] = field(default_factory=dict)
    # 'traps' / 'soft404' -> key or origin -> its JSON row, changed since the last save: for a
    # store that keeps them as rows (a worker's, runtime/shared_defence); one machine saves
    # the whole snapshots in `meta` instead
    defence: dict[str, dict[str, str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return (len(self.new_urls) + len(self.requeued) + len(self.fetched) + len(self.decisions)
                + len(self.fetches) + len(self.hosts) + len(self.robots) + len(self.dead_letters)
                + len(self.flags) + len(self.digests) + len(self.simhashes) + len(self.histories)
                + len(self.meta) + sum(len(v) for v in self.defence.values()))


# ---- the store, by what its callers need ------------------------------------------------

class BatchWriter(Protocol):
    """Every write of a crawl: one Batch, one transaction (group commit)."""

    def apply(self, batch: Batch) -> None: ...


class UrlLookup(Protocol):
    """The exact URL-seen test behind the Bloom filter (admission, resume)."""

    def has_url(self, url: str) -> bool: ...

    def iter_urls(self) -> Iterator[str]: ...


class QueueStore(Protocol):
    """The queued URLs: all of them on resume, one key's when its queue refills."""

    def iter_queued(self) -> Iterator[QueuedRow]: ...

    def queued_of_key(self, key: str, limit: int) -> list[QueuedRow]: ...


class HostStateStore(Protocol):
    """Per-key politeness state and the robots cache, read back on resume."""

    def hosts(self) -> dict[str, dict[str, Any]]: ...

    def robots(self) -> dict[str, dict[str, Any]]: ...


class MetaStore(Protocol):
    """The crawl's settings and counters (written through `Batch.meta`)."""

    def get_meta(self, k: str) -> str | None: ...


class DecisionStore(Protocol):
    """Recorded decisions read back and revised (seed refusals, allowlists, dead letters)."""

    def count_denied(self, key: str, reason: str) -> int: ...

    def requeue_denied(self, key: str, reason: str, rule: str | None = None) -> int: ...

    def refused_at_depth0(self, reasons: list[str], limit: int) -> list[RefusedRow]: ...

    def requeue(self, rows: list[tuple[str, str]]) -> int: ...

    def seed_states(self) -> dict[str, int]: ...

    def dead_letters(self, limit: int) -> list[DeadLetterRow]: ...


class PurgeStore(Protocol):
    """Takedowns: recorded with their marks, polled and applied at every commit."""

    def add_purge(self, purge: Purge, at: float) -> tuple[Purge, dict[str, int]]: ...

    def purges(self, after_id: int = 0) -> list[PurgeRow]: ...

    def purges_max_id(self) -> int: ...

    def apply_purges(self, purges: Iterable[Purge], applied_at: float | None) -> dict[str, int]: ...


class ComplaintStore(Protocol):
    """Abuse complaints: a key is slowed while one is open (polled at every commit)."""

    def add_complaint(self, host: str, key: str, contact: str, note: str, at: float) -> int: ...

    def resolve_complaint(self, complaint_id: int, at: float) -> bool: ...

    def complaints(self, *, open_only: bool = False) -> list[ComplaintRow]: ...


class IndexStore(Protocol):
    """What rebuilds the duplicate indexes and the recrawl histories on resume."""

    def iter_digests(self) -> Iterator[DigestRow]: ...

    def iter_simhashes(self) -> Iterator[SimhashRow]: ...

    def iter_flags(self, flags: tuple[str, ...]) -> Iterator[FlagRow]: ...

    def iter_histories(self) -> Iterator[HistoryRow]: ...


class Store(BatchWriter, UrlLookup, QueueStore, HostStateStore, MetaStore, DecisionStore, PurgeStore,
            ComplaintStore, IndexStore, Protocol):
    """Durable crawl state, whole: every narrow port above, and `close`."""

    def close(self) -> None: ...


# ---- the shared store of a cluster (async), by what a worker needs ---------------------------
# shell/store/postgres.py implements them all (tests/ports_conformance.py).

class ClaimedRow(NamedTuple):
    """A URL claimed from a partition's inbox (`claim_new`)."""

    url: str
    key: str
    band: int
    depth: int
    redirects: int
    via: str | None         # the page it was found on, None or "" for a seed
    attempts: int
    judged: bool            # the owner's trap guard judged it before (an adoption's, a requeue's)


class SharedBatchWriter(Protocol):
    """A worker's batches, fenced by the epochs of the partitions it holds and
    applied once per `batch_id`; raises StaleEpochError or StoreUnavailableError."""

    async def apply(self, batch: Batch, *, partition_epochs: Mapping[int, int] | None = None,
                    batch_id: str | None = None) -> bool: ...


class LeaseStore(Protocol):
    """Workers and partition leases, on the database clock (runtime/ownership)."""

    async def register(self, worker_id: str) -> float: ...

    async def heartbeat(self, worker_id: str) -> float: ...

    async def deregister(self, worker_id: str) -> None: ...

    async def live_workers(self, ttl_s: float) -> list[str]: ...

    async def acquire_many(self, partitions: Iterable[int], worker_id: str, ttl_s: float) -> dict[int, int]: ...

    async def renew_many(self, worker_id: str, partition_epochs: Mapping[int, int], ttl_s: float) -> set[int]: ...

    async def release_many(self, worker_id: str, partition_epochs: Mapping[int, int]) -> set[int]: ...

    async def leases(self) -> list[LeaseRecord]: ...


class InboxStore(Protocol):
    """Work pick-up: a partition's inbox rebuilt at adoption, claimed from, and the queue's state."""

    async def adopt(self, partition: int, epoch: int) -> int: ...

    async def claim_new(self, partition_epochs: Mapping[int, int], limit: int) -> list[ClaimedRow]: ...

    async def queue_state(self) -> tuple[bool, bool]: ...

    async def queued_partitions(self, partitions: Iterable[int]) -> dict[int, str]: ...


class IpLeaseStore(Protocol):
    """Which worker holds each IP's per-IP limits, or the slots of a shared IP
    (runtime/ip_leases.IpLeases)."""

    async def ip_lease(self, ip: str, owner: str, lease_s: float, hold_s: float,
                       now: float | None = None) -> tuple[str, float]: ...

    async def ip_leases_renew(self, owner: str, ips: Sequence[str], lease_s: float,
                              now: float | None = None) -> set[str]: ...

    async def ip_leases_wanted(self, owner: str) -> set[str]: ...

    async def ip_leases_give(self, owner: str, ips: Sequence[str], span_s: float, shared_s: float = 0.0,
                             now: float | None = None) -> None: ...

    async def ip_slot(self, ip: str, now: float | None, concurrency_max: int, rate_per_s: float, *,
                      hold_s: float, shared_s: float, margin_s: float = 0.01) -> float | None: ...

    async def ip_release(self, ip: str, now: float | None = None) -> None: ...


class SharedHostState(Protocol):
    """Politeness and robots.txt state: a partition's at adoption, evicted
    keys' when they return (runtime/keyreadback), robots.txt at start."""

    async def hosts(self, partitions: Iterable[int] | None = None) -> dict[str, dict[str, Any]]: ...

    async def hosts_of(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]: ...

    async def robots_first(self, limit: int) -> dict[str, dict[str, Any]]: ...

    async def robots_for(self, origins: Sequence[str]) -> dict[str, dict[str, Any]]: ...


class SharedMeta(Protocol):
    async def get_meta(self, k: str) -> str | None: ...


class SharedTakeUp(Protocol):
    """What every worker takes up at each commit: purges and open complaints."""

    async def purges(self, after_id: int = 0) -> list[PurgeRow]: ...

    async def apply_purges(self, purges: Iterable[Purge], applied_at: float | None) -> dict[str, int]: ...

    async def complaints(self, *, open_only: bool = False) -> list[ComplaintRow]: ...


class SharedDefenceStore(Protocol):
    """The budget defence and recrawl state kept per partition (runtime/shared_defence)."""

    async def trap_snapshot(self, partitions: Iterable[int] | None = None) -> dict[str, Any]: ...

    async def soft404_snapshot(self, partitions: Iterable[int] | None = None) -> dict[str, Any]: ...

    # rows of SimhashRow's and HistoryRow's fields, as plain tuples
    def iter_simhashes(self, partitions: Iterable[int] | None = None) -> AsyncIterator[tuple[Any, ...]]: ...

    def iter_histories(self, partitions: Iterable[int] | None = None) -> AsyncIterator[tuple[Any, ...]]: ...

    async def digest_records(self, digests: Sequence[str]) -> dict[str, FirstCapture]: ...


class ClusterStore(SharedBatchWriter, LeaseStore, InboxStore, IpLeaseStore, SharedHostState, SharedMeta,
                   SharedTakeUp, SharedDefenceStore, Protocol):
    """The shared store as a worker uses it: every async port above, and the layout."""

    partitions: int | None

    def region_range(self) -> range | None: ...

    def partition_of_key(self, key: str) -> int: ...


class StoreUnavailableError(Exception):
    """The shared store cannot be reached now: pause, keep the batch, retry."""


class StaleEpochError(Exception):
    """A write for partitions whose lease the writer no longer holds was refused
    whole; `partitions` names them."""

    partitions: frozenset[int] = frozenset()
