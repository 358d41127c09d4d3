"""Crawl configuration: frozen dataclasses loaded from strict TOML.

Each TOML table maps onto one dataclass and each key onto a field of the same
name (`[politeness] delay_s = 1.0`). An unknown table or key is an error that
names it; a value of the wrong type is an error that names it. Command-line
flags override the file. `warnings()` lists impolite or risky settings so the
CLI can print them loudly (a delay under 1 s toward hosts that are not ours,
a crawl of the open web with no contact address).

Intents (`archive`, `search`, `monitor`) are profiles: they only change
defaults, never the code path.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from courtly import __version__
from courtly.config_checks import ConfigError, _finite, _non_negative, _positive, check_networks
from courtly.config_cluster import DistributedSection
from courtly.config_services import (AbuseSection, ConsumerSection, CoverageSection, MonitorSection,
                                     RenderSection)

__all__ = [
    "ConfigError",
    "CrawlSection",
    "PolitenessSection",
    "AllowSection",
    "FetchSection",
    "RobotsSection",
    "NetworkSection",
    "UrlsSection",
    "SeenSection",
    "BudgetSection",
    "RecrawlSection",
    "WarcSection",
    "ExtractSection",
    "StoreSection",
    "FrontierSection",
    "DistributedSection",
    "AbuseSection",
    "RenderSection",
    "Config",
    "load_config",
    "config_from_dict",
    "INTENTS",
    "check_networks",
]

INTENTS = ("archive", "search", "monitor")



@dataclass(frozen=True, slots=True)
class CrawlSection:
    intent: str = "archive"
    max_pages: int = 0                 # 0 = no limit
    duration_s: float = 0.0            # stop after this long (0 = when the frontier is done;
                                       # search and monitor crawls run until stopped)
    depth_max: int = 16                # hops from a seed
    politeness_key: str = "domain"     # "domain" (eTLD+1) or "host"
    partitions: int = 1024
    scope: str = "any"                 # "any", "seed-domains" or "seed-hosts"
    user_agent: str = ""               # default: courtly/<version> (+contact)
    contact: str = ""                  # URL or e-mail of the operator
    fetch_tasks: int = 256             # host batches fetched concurrently
    batch_max: int = 20                # URLs per host batch (lease)
    lease_s: float = 300.0
    retries_max: int = 2               # retries after a network error / 5xx
    seed: int = 1                      # the random generator's seed

    def __post_init__(self) -> None:
        if self.intent not in INTENTS:
            raise ConfigError(f"crawl.intent must be one of {', '.join(INTENTS)}, not {self.intent!r}")
        if self.politeness_key not in ("domain", "host"):
            raise ConfigError("crawl.politeness_key must be 'domain' or 'host'")
        if self.scope not in ("any", "seed-domains", "seed-hosts"):
            raise ConfigError("crawl.scope must be 'any', 'seed-domains' or 'seed-hosts'")
        _positive("crawl.partitions", self.partitions)
        _positive("crawl.fetch_tasks", self.fetch_tasks)
        _positive("crawl.batch_max", self.batch_max)
        _non_negative("crawl.max_pages", self.max_pages)
        _non_negative("crawl.duration_s", self.duration_s)
        _non_negative("crawl.depth_max", self.depth_max)
        _non_negative("crawl.retries_max", self.retries_max)
        if self.retries_max > 10:
            raise ConfigError("crawl.retries_max is at most 10")
        _positive("crawl.lease_s", self.lease_s)
        for name in ("user_agent", "contact"):   # sent in the User-Agent header
            value = getattr(self, name)
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
                raise ConfigError(f"crawl.{name} must be one line of printable text, not {value!r}")

    def agent(self) -> str:
        if self.user_agent:
            return self.user_agent
        contact = f"; +{self.contact}" if self.contact else ""
        return f"courtly/{__version__} (polite crawler{contact})"


@dataclass(frozen=True, slots=True)
class AllowSection:
    key: str
    delay_s: float
    owner: str
    expires: str                       # ISO 8601 date or datetime (UTC if no zone)
    ip_concurrency: int = 0
    ip_rate: float = 0.0

    def __post_init__(self) -> None:
        _non_negative(f"politeness.allow {self.key} delay_s", self.delay_s)
        _non_negative(f"politeness.allow {self.key} ip_concurrency", self.ip_concurrency)
        _non_negative(f"politeness.allow {self.key} ip_rate", self.ip_rate)

    def expires_at(self) -> float:
        from datetime import datetime, timezone

        try:
            dt = datetime.fromisoformat(self.expires)
        except ValueError as e:
            raise ConfigError(f"politeness.allow expires {self.expires!r} is not ISO 8601") from e
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()


@dataclass(frozen=True, slots=True)
class PolitenessSection:
    delay_s: float = 1.0
    crawl_delay_s_max: float = 30.0
    response_factor: float = 10.0
    backoff_s_max: float = 3600.0
    ip_concurrency: int = 4
    ip_rate: float = 5.0
    allow: tuple[AllowSection, ...] = ()
    # slowness and host failures (core/politeness.py, core/health.py)
    response_window: int = 5
    response_delay_s_max: float = 30.0
    backoff_jitter: float = 0.1
    park_after: int = 3
    probe_s_min: float = 60.0
    probe_s_max: float = 21600.0
    down_horizon_s: float = 86400.0
    ban_403_run: int = 10
    ban_same_body_run: int = 10

    def __post_init__(self) -> None:
        if self.ban_403_run < 2 or self.ban_same_body_run < 2:
            raise ConfigError("politeness.ban_403_run and ban_same_body_run must be >= 2")
        _positive("politeness.response_window", self.response_window)
        _non_negative("politeness.response_delay_s_max", self.response_delay_s_max)
        _non_negative("politeness.backoff_jitter", self.backoff_jitter)
        _positive("politeness.park_after", self.park_after)
        _positive("politeness.probe_s_min", self.probe_s_min)
        _positive("politeness.down_horizon_s", self.down_horizon_s)
        if self.probe_s_max < self.probe_s_min:
            raise ConfigError("politeness.probe_s_max must be >= politeness.probe_s_min")
        _non_negative("politeness.delay_s", self.delay_s)
        _non_negative("politeness.crawl_delay_s_max", self.crawl_delay_s_max)
        _non_negative("politeness.response_factor", self.response_factor)
        _positive("politeness.ip_concurrency", self.ip_concurrency)
        _positive("politeness.ip_rate", self.ip_rate)
        _positive("politeness.backoff_s_max", self.backoff_s_max)


CONTENT_CODINGS = ("gzip", "deflate", "br", "zstd")   # what shell/decode.py decodes
ARCHIVE_UNREADABLE_CODINGS = ("br", "zstd")          # see FetchSection.accept_encodings


@dataclass(frozen=True, slots=True)
class FetchSection:
    connect_s: float = 10.0
    total_s: float = 60.0
    body_bytes_max: int = 10 * 2**20
    decoded_bytes_max: int = 50 * 2**20
    decode_ratio_max: float = 100.0
    header_bytes_max: int = 64 * 1024
    redirects_max: int = 5
    # Keep-alive connections held open across hosts (in use or idle). A polite
    # crawl visits each host every delay_s, so the pool should outnumber the
    # hosts in rotation, or each visit reconnects; the open-files limit is
    # raised to fit at start-up (or the pool shrunk to fit, with a warning).
    connections_max: int = 2048
    # Content codings asked for (Accept-Encoding). Only those the WARC
    # ecosystem decodes by default: warcio 1.8 (warcio check, pywb) cannot
    # read brotli with the `brotli` package, and few WARC tools know zstd.
    accept_encodings: tuple[str, ...] = ("gzip", "deflate")

    def __post_init__(self) -> None:
        bad = [c for c in self.accept_encodings if c not in CONTENT_CODINGS]
        if bad or len(set(self.accept_encodings)) != len(self.accept_encodings):
            raise ConfigError(f"fetch.accept_encodings takes distinct codings of {', '.join(CONTENT_CODINGS)}"
                              f"{', not ' + repr(bad[0]) if bad else ' (a coding is repeated)'}")
        _positive("fetch.connect_s", self.connect_s)
        _positive("fetch.connections_max", self.connections_max)
        _positive("fetch.total_s", self.total_s)
        _positive("fetch.body_bytes_max", self.body_bytes_max)
        _positive("fetch.decoded_bytes_max", self.decoded_bytes_max)
        _positive("fetch.header_bytes_max", self.header_bytes_max)
        _positive("fetch.decode_ratio_max", self.decode_ratio_max)
        if not 0 <= self.redirects_max <= 20:
            raise ConfigError("fetch.redirects_max must be in 0..20")


@dataclass(frozen=True, slots=True)
class RobotsSection:
    token: str = "courtly"             # product token matched in robots.txt
    cache_s: float = 86400.0           # at most 24 h (RFC 9309 2.4)
    reuse_s: float = 86400.0           # keep the last good copy this long on errors
    retry_s_min: float = 60.0
    retry_s_max: float = 3600.0

    def __post_init__(self) -> None:
        if not 0 < self.cache_s <= 86400:
            raise ConfigError("robots.cache_s must be in (0, 86400]")
        _non_negative("robots.reuse_s", self.reuse_s)
        _positive("robots.retry_s_min", self.retry_s_min)
        if not self.retry_s_min <= self.retry_s_max:
            raise ConfigError("robots.retry_s_max must be >= robots.retry_s_min")
        # RFC 9309 2.2.1: letters, "_" and "-" only. A digit would be cut off
        # when matching (token "bot2" would obey the group of "bot")
        from courtly.core.robots_txt import is_product_token

        if not is_product_token(self.token):
            raise ConfigError("robots.token must be a product token ([A-Za-z_-]+)")


@dataclass(frozen=True, slots=True)
class NetworkSection:
    allow: tuple[str, ...] = ()        # CIDRs allowed beside public addresses
    resolve: tuple[str, ...] = ()      # "host:ip" pins, like curl --resolve
    hosts_file: str = ""               # JSON {"host": "ip"} (e.g. from courtly simweb)
    dns_stale_s_max: float = 3600.0    # a failing lookup serves the last good answer this long past its TTL

    def __post_init__(self) -> None:
        check_networks("network.allow", self.allow)
        _non_negative("network.dns_stale_s_max", self.dns_stale_s_max)


@dataclass(frozen=True, slots=True)
class UrlsSection:
    length_max: int = 2048
    strip_params: tuple[str, ...] = ()            # added to the built-in list
    order_sensitive_hosts: tuple[str, ...] = ()   # keep query order for these
    keep_params_hosts: tuple[str, ...] = ()       # strip no parameter for these (host or parent domain)

    def __post_init__(self) -> None:
        _positive("urls.length_max", self.length_max)


@dataclass(frozen=True, slots=True)
class SeenSection:
    bloom_capacity: int = 10_000_000
    bloom_error_rate: float = 0.001
    # past its fill alarm the filter is rebuilt from crawl.db at twice the
    # capacity, up to this (~1.8 bytes per URL at 0.001: 1.8 GB); beyond, a warning
    bloom_capacity_max: int = 1_000_000_000

    def __post_init__(self) -> None:
        _positive("seen.bloom_capacity", self.bloom_capacity)
        if self.bloom_capacity_max < self.bloom_capacity:
            raise ConfigError("seen.bloom_capacity_max must be >= seen.bloom_capacity")
        if not 0 < self.bloom_error_rate < 1:
            raise ConfigError("seen.bloom_error_rate must be in (0, 1)")


@dataclass(frozen=True, slots=True)
class BudgetAllowSection:
    key: str
    new_urls_per_day: int
    owner: str
    expires: str                       # ISO 8601 date or datetime (UTC if no zone)

    def expires_at(self) -> float:
        return AllowSection(self.key, 0.0, self.owner, self.expires).expires_at()


@dataclass(frozen=True, slots=True)
class BudgetSection:
    """Defending the fetch budget: traps, duplicates, near-duplicates, soft-404s."""

    enabled: bool = True               # false: no trap guard, no dedup (for before/after figures)
    daily_new_urls_max: int = 50_000   # new URLs admitted per host key per day
    near_dup_distance: int = 3         # SimHash Hamming distance for near-duplicates (<= 3)
    soft404_probe: bool = True         # probe once, before its 2nd page, each host that gave no real 404
    allow: tuple[BudgetAllowSection, ...] = ()

    def __post_init__(self) -> None:
        _positive("budget.daily_new_urls_max", self.daily_new_urls_max)
        if not 0 <= self.near_dup_distance <= 3:
            raise ConfigError("budget.near_dup_distance must be in 0..3 (the 4-block index needs it)")


@dataclass(frozen=True, slots=True)
class TierSection:
    name: str
    interval_s_min: float
    interval_s_max: float


@dataclass(frozen=True, slots=True)
class RecrawlSection:
    """The recrawl scheduler (intents search and monitor; archive recrawls nothing)."""

    daily_budget: int = 100_000        # fetches per day, recrawl and discovery together
    period_s: float = 300.0            # how often the scheduler grants the next recrawls
    tiers: tuple[TierSection, ...] = ()  # empty: the intent's tiers (top 15 min..24 h, ...)
    importance_file: str = ""          # optional "URL<TAB>score" lines, used as given (OPIC for the rest)
    importance: str = "opic"           # or "uniform": every page weighs 1 (plain freshness)
    importance_prior_rounds: float = 8.0  # OPIC shrunk toward uniform until it has this many rounds
    tier_budget_share: float = 0.5     # the upper tiers' max ages may commit this share of daily_budget

    def __post_init__(self) -> None:
        _non_negative("recrawl.daily_budget", self.daily_budget)
        _positive("recrawl.period_s", self.period_s)
        _non_negative("recrawl.importance_prior_rounds", self.importance_prior_rounds)
        if not 0.0 <= self.tier_budget_share <= 1.0:
            raise ConfigError(f"recrawl.tier_budget_share is a share in [0, 1], not {self.tier_budget_share}")
        if self.importance not in ("opic", "uniform"):
            raise ConfigError(f"recrawl.importance must be \"opic\" or \"uniform\", not {self.importance!r}")
        if self.importance == "uniform" and self.importance_file:
            raise ConfigError("recrawl.importance_file: OPIC weighs the pages it leaves out: needs importance = \"opic\"")
        for t in self.tiers:
            if not 0 < t.interval_s_min <= t.interval_s_max:
                raise ConfigError(f"recrawl.tiers {t.name}: need 0 < interval_s_min <= interval_s_max")


@dataclass(frozen=True, slots=True)
class WarcSection:
    prefix: str = "courtly"
    file_bytes_max: int = 1_000_000_000
    fsync: bool = True
    # false: `courtly purge` (and the end of a crawl) rewrite the crawl's own WARC
    # files without purged records; true: the raw files stay, exports filter
    keep_purged_originals: bool = True

    def __post_init__(self) -> None:
        if not self.prefix or not all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in self.prefix):
            raise ConfigError(f"warc.prefix may hold letters, digits, '.', '_' and '-' only, not {self.prefix!r}")
        _positive("warc.file_bytes_max", self.file_bytes_max)


@dataclass(frozen=True, slots=True)
class ExtractSection:
    workers: int = 1
    task_s_max: float = 10.0
    memory_bytes_max: int = 512 * 2**20
    links_max: int = 5000
    # A worker is replaced after this many pages (a slow leak cannot grow for
    # ever). Starting a worker costs CPU, so recycling often costs a
    # measurable share of a page (docs/performance.md, "Figures moved out of
    # the code"); the memory limit still caps each worker.
    tasks_per_child: int = 10_000
    # Fetched pages waiting for (or in) extraction. At the limit the fetch
    # tasks wait: fetching cannot run ahead of extraction, so the bodies held
    # stay bounded and a stopped crawl has little left to extract.
    backlog_max: int = 64

    def __post_init__(self) -> None:
        _positive("extract.workers", self.workers)
        _positive("extract.task_s_max", self.task_s_max)
        _positive("extract.memory_bytes_max", self.memory_bytes_max)
        _positive("extract.links_max", self.links_max)
        _positive("extract.tasks_per_child", self.tasks_per_child)
        _positive("extract.backlog_max", self.backlog_max)


@dataclass(frozen=True, slots=True)
class FrontierSection:
    # Queued URLs kept in memory; the rest wait in the store (the `urls` table)
    # and are read back per key as its in-memory queue runs low. About 200 bytes
    # of memory per URL held: the default keeps the frontier near 100 MB whatever
    # the number queued (bench/scale.py: 10 million queued within 1 GB of RSS).
    memory_max: int = 500_000
    key_memory_max: int = 200          # per politeness key (10 leases of 20)
    # Politeness keys, resolved IPs and robots.txt origins whose state is kept
    # in memory; idle ones beyond it are evicted to the store and read back when
    # they return (runtime/keymemory.py). Memory per key: docs/performance.md.
    key_states_max: int = 100_000

    def __post_init__(self) -> None:
        _positive("frontier.memory_max", self.memory_max)
        _positive("frontier.key_memory_max", self.key_memory_max)
        _positive("frontier.key_states_max", self.key_states_max)


@dataclass(frozen=True, slots=True)
class StoreSection:
    commit_interval_s: float = 0.5
    unwritten_max: int = 1000     # requests not yet committed while the store is down: fetching pauses there
    down_s_max: float = 120.0     # a store that cannot be written this long stops the crawl (runtime/group_commit)

    def __post_init__(self) -> None:
        _positive("store.commit_interval_s", self.commit_interval_s)   # 0: the commit loop would spin
        _positive("store.unwritten_max", self.unwritten_max)
        _positive("store.down_s_max", self.down_s_max)


@dataclass(frozen=True, slots=True)
class Config:
    crawl: CrawlSection = field(default_factory=CrawlSection)
    politeness: PolitenessSection = field(default_factory=PolitenessSection)
    fetch: FetchSection = field(default_factory=FetchSection)
    robots: RobotsSection = field(default_factory=RobotsSection)
    network: NetworkSection = field(default_factory=NetworkSection)
    urls: UrlsSection = field(default_factory=UrlsSection)
    seen: SeenSection = field(default_factory=SeenSection)
    budget: BudgetSection = field(default_factory=BudgetSection)
    recrawl: RecrawlSection = field(default_factory=RecrawlSection)
    monitor: MonitorSection = field(default_factory=MonitorSection)
    warc: WarcSection = field(default_factory=WarcSection)
    extract: ExtractSection = field(default_factory=ExtractSection)
    store: StoreSection = field(default_factory=StoreSection)
    frontier: FrontierSection = field(default_factory=FrontierSection)
    distributed: DistributedSection = field(default_factory=DistributedSection)
    coverage: CoverageSection = field(default_factory=CoverageSection)
    abuse: AbuseSection = field(default_factory=AbuseSection)
    render: RenderSection = field(default_factory=RenderSection)
    consumers: tuple[ConsumerSection, ...] = ()

    def __post_init__(self) -> None:
        names = [c.name for c in self.consumers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"consumer {dup[0]} is declared twice")

    def consumer(self, name: str) -> ConsumerSection:
        """The consumer called `name`; ConfigError naming the declared ones otherwise."""
        for c in self.consumers:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.consumers) or "none: add [[consumers]] to the config"
        raise ConfigError(f"unknown consumer {name!r} (declared: {known})")

    def replace(self, section: str, **changes: Any) -> "Config":
        """A copy with some fields of one section changed (CLI overrides)."""
        sec = getattr(self, section)
        try:
            new = dataclasses.replace(sec, **changes)
        except TypeError as e:
            raise ConfigError(str(e)) from e
        return dataclasses.replace(self, **{section: new})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def warnings(self) -> list[str]:
        """Loud warnings for impolite or risky settings."""
        out = []
        from courtly.core.netpolicy import NetPolicy

        only_loopback = bool(self.network.allow) and NetPolicy(self.network.allow).is_loopback_only()
        public_targets = not only_loopback or not self.network.allow
        if self.politeness.delay_s < 1.0 and public_targets:
            out.append(
                f"IMPOLITE: politeness.delay_s = {self.politeness.delay_s} s is below 1 s "
                "and the crawl may reach hosts that are not yours."
            )
        if self.politeness.ip_rate > 5 or self.politeness.ip_concurrency > 4:
            if public_targets:
                out.append("IMPOLITE: per-IP limits above 4 in flight / 5 per second.")
        if not self.crawl.contact and public_targets and not self.crawl.user_agent:
            out.append(
                "No contact: set crawl.contact (a URL or e-mail) so site operators can reach you."
            )
        for a in self.politeness.allow:
            if not a.owner:
                out.append(f"politeness.allow entry for {a.key} has no owner")
        unreadable = [c for c in self.fetch.accept_encodings if c in ARCHIVE_UNREADABLE_CODINGS]
        if unreadable:
            out.append(f"fetch.accept_encodings asks for {', '.join(unreadable)}: responses coded so are stored "
                       "as sent, and warcio (warcio check, pywb) cannot decode them.")
        return out


def _coerce(name: str, tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} must be a number, not {value!r}")
        _finite(name, float(value))
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be an integer, not {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, not {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, not {value!r}")
        return value
    if origin is tuple:
        (inner, _ellipsis) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{name} must be a list, not {value!r}")
        if dataclasses.is_dataclass(inner):
            return tuple(_build(f"{name}[{i}]", inner, v) for i, v in enumerate(value))
        return tuple(_coerce(f"{name}[{i}]", inner, v) for i, v in enumerate(value))
    if origin in (types.UnionType, typing.Union):
        raise ConfigError(f"{name}: unsupported type")
    raise ConfigError(f"{name}: unsupported type {tp!r}")


def _build(name: str, cls: type, table: Any) -> Any:
    if not isinstance(table, dict):
        raise ConfigError(f"[{name}] must be a table")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - fields)
    if unknown:
        raise ConfigError(f"unknown key {name}.{unknown[0]} (known: {', '.join(sorted(fields))})")
    kwargs = {k: _coerce(f"{name}.{k}", hints[k], v) for k, v in table.items()}
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in table
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{name} needs {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"[{name}]: {e}") from e


def config_from_dict(data: dict) -> Config:
    sections = {f.name: f for f in dataclasses.fields(Config)}
    unknown = sorted(set(data) - set(sections))
    if unknown:
        raise ConfigError(f"unknown section [{unknown[0]}] (known: {', '.join(sorted(sections))})")
    hints = typing.get_type_hints(Config)
    built = {name: (_coerce(name, hints[name], table) if typing.get_origin(hints[name]) is tuple
                    else _build(name, hints[name], table)) for name, table in data.items()}
    return Config(**built)


def load_config(path: str | Path | None) -> Config:
    """Read a TOML file (None gives the defaults). Raises ConfigError."""
    if path is None:
        return Config()
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read config {p}: {e.strerror}") from e
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"config {p} is not valid TOML: {e}") from e
    return config_from_dict(data)
