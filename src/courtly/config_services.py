"""The configuration sections of the services built on the crawl (re-exported
by config.py, which composes them into `Config`): the monitor's watch list,
the coverage sample, abuse complaints, rendering and consumers."""

from __future__ import annotations

from dataclasses import dataclass

from courtly.config_checks import ConfigError, _finite, _non_negative, _positive

__all__ = ["AbuseSection", "ConsumerSection", "CoverageSection", "MonitorSection", "RenderSection"]


@dataclass(frozen=True, slots=True)
class MonitorSection:
    """The monitor intent's watch list (runtime/monitor): webhooks and the HTTP API."""

    webhook_attempts_max: int = 5        # then the event is a dead letter
    webhook_backoff_s: float = 1.0       # first retry after this, doubling
    webhook_backoff_s_max: float = 300.0
    webhook_backoff_jitter: float = 0.1  # each retry's wait is x U[1, 1 + jitter): receivers are not hit in step
    webhook_timeout_s: float = 10.0      # per attempt
    api_token: str = ""                  # Bearer token for the status server's watch API writes ("" = no writes)
    webhook_secret: str = ""             # signs each webhook body (X-Courtly-Signature: sha256=HMAC); "" = unsigned

    def __post_init__(self) -> None:
        _positive("monitor.webhook_attempts_max", self.webhook_attempts_max)
        _positive("monitor.webhook_backoff_s", self.webhook_backoff_s)
        _positive("monitor.webhook_backoff_s_max", self.webhook_backoff_s_max)
        _non_negative("monitor.webhook_backoff_jitter", self.webhook_backoff_jitter)
        _positive("monitor.webhook_timeout_s", self.webhook_timeout_s)


@dataclass(frozen=True, slots=True)
class CoverageSection:
    """The coverage sample behind courtly_coverage_sample_hit_ratio (docs/observability.md)."""

    sample_size: int = 1000            # URLs sampled by hash among those queued (0: none)
    canaries_file: str = ""            # one URL a line: sample exactly these instead (the seeds' canaries)

    def __post_init__(self) -> None:
        _non_negative("coverage.sample_size", self.sample_size)


@dataclass(frozen=True, slots=True)
class AbuseSection:
    """An open abuse complaint (`courtly abuse`) slows its host's politeness key
    to max(delay_factor x its delay floor, delay_s_min) until it is resolved."""

    delay_factor: float = 10.0
    delay_s_min: float = 0.0

    def __post_init__(self) -> None:
        _finite("abuse.delay_factor", self.delay_factor)
        if self.delay_factor < 1:
            raise ConfigError(f"abuse.delay_factor must be >= 1 (a complaint never speeds a host up), "
                              f"not {self.delay_factor}")
        _non_negative("abuse.delay_s_min", self.delay_s_min)


@dataclass(frozen=True, slots=True)
class RenderSection:
    """[render]: a budgeted headless-browser pass over pages that look like
    script shells (README: Rendering; core/render_policy, runtime/render)."""

    enabled: bool = False
    share_max: float = 0.05            # renders per fetch, per host key and over the crawl
    burst: int = 1                     # renders allowed beyond the share (a small host's first shell)
    band_max: int = 4                  # pages in priority bands above this are never rendered
    executable_path: str = "/usr/bin/chromium"   # Debian's chromium; never a downloaded browser
    contexts_max: int = 2              # isolated browser contexts (pages) at once
    launch_s: float = 60.0             # the browser must start within this (a cold start on a busy machine is slow)
    queue_max: int = 64                # shells waiting for a context; beyond it they are parsed raw (flagged)
    navigation_s: float = 10.0         # the page's own load must end within this
    deadline_s: float = 20.0           # a whole render, subrequests included
    settle_s: float = 1.0              # after load, time for timers and late fetches (within the deadline)
    renders_per_browser_max: int = 200 # the browser is restarted after this many renders
    memory_bytes_max: int = 1024 * 2**20   # the browser's resident memory; above it, a restart
    subrequests_max: int = 100         # per render; the rest are refused
    images: bool = False               # images, fonts and media are refused unless true
    # the shell test (core/render_policy.ShellTest)
    text_chars_max: int = 200          # visible text below this ...
    script_share_min: float = 0.5      # ... and scripts make at least this share of the bytes
    roots: tuple[str, ...] = ('id="root"', 'id="app"', 'id="__next"', 'id="__nuxt"', "<app-root", "ng-app")

    def __post_init__(self) -> None:
        if not 0 <= self.share_max <= 1:
            raise ConfigError(f"render.share_max must be within 0..1, not {self.share_max}")
        if not 0 <= self.script_share_min <= 1:
            raise ConfigError(f"render.script_share_min must be within 0..1, not {self.script_share_min}")
        for name in ("contexts_max", "launch_s", "queue_max", "navigation_s", "deadline_s", "renders_per_browser_max",
                     "memory_bytes_max", "subrequests_max"):
            _positive(f"render.{name}", getattr(self, name))
        for name in ("settle_s", "band_max", "text_chars_max", "burst"):
            _non_negative(f"render.{name}", getattr(self, name))
        if self.navigation_s > self.deadline_s:
            raise ConfigError("render.navigation_s must not exceed render.deadline_s")


@dataclass(frozen=True, slots=True)
class ConsumerSection:
    """[[consumers]]: a named tenant of the one fetch layer (README: Consumers;
    core/consumers, runtime/consumers). Its quota counts requests made for it."""

    name: str
    fetches_per_day: int = 0           # requests a UTC day; 0: no limit
    weight: float = 1.0                # its share of a host's turns against other consumers
    sink: str = ""                     # folder for its results.jsonl (relative: to the crawl folder), or a webhook URL
    priority_min: int = 0              # the priority bands (0 highest .. 7) it may submit with
    priority_max: int = 7
    priority: int = 1                  # the band of its submissions unless --priority says otherwise
    host_share: float = 0.0            # share of one host's daily capacity (86400 / delay) it may use; 0: any
    price_per_million: float = 0.0     # chargeback: cost of a million fetches
    token: str = ""                    # bearer token of its submissions on the status server ("": none)

    def __post_init__(self) -> None:
        if not self.name or not all(ch.isalnum() or ch in "._-" for ch in self.name):
            raise ConfigError(f"consumers.name must be letters, digits, '.', '_' or '-', not {self.name!r}")
        _non_negative("consumers.fetches_per_day", self.fetches_per_day)
        _positive("consumers.weight", self.weight)
        _non_negative("consumers.price_per_million", self.price_per_million)
        if not 0 <= self.priority_min <= self.priority_max <= 7:
            raise ConfigError(f"consumer {self.name}: need 0 <= priority_min <= priority_max <= 7")
        if not self.priority_min <= self.priority <= self.priority_max:
            raise ConfigError(f"consumer {self.name}: priority {self.priority} is outside "
                              f"{self.priority_min}..{self.priority_max}")
        if not 0 <= self.host_share <= 1:
            raise ConfigError(f"consumer {self.name}: host_share must be within 0..1, not {self.host_share}")
        if self.sink.startswith(("http://", "https://")):   # a webhook (shell/stream_webhook)
            from urllib.parse import urlsplit

            try:
                host = urlsplit(self.sink).hostname
            except ValueError:
                host = None
            if not host or any(c.isspace() for c in self.sink):
                raise ConfigError(f"consumer {self.name}: sink {self.sink!r} is not a webhook URL")
