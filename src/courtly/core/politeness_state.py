"""Politeness values: the settings, the allowlist entry, and the state of one key and one IP.

What it owns: the plain values core/politeness.py computes with
(`PolitenessConfig`, `AllowEntry`, `KeyState` with its snapshot, `IpState`),
the Retry-After parser and the running-median helpers, split from that
module by size. core/politeness.py re-exports the public names, so callers
import them from there as before.

How it works: `KeyState.snapshot` is what the store keeps per key (and what
an eviction hands back, core/keymemory.py); `median_response` is the
delay rule's "response" (the module doc of core/politeness.py).

Rules: pure; values and functions of their arguments only.
"""

from __future__ import annotations

import collections
import datetime
import email.utils
from dataclasses import dataclass, field
from typing import Any

from courtly.core.health import Health

__all__ = [
    "PolitenessConfig", "AllowEntry", "KeyState", "IpState", "IpToken", "IP_KEYS_MAX",
    "RETRY_AFTER_QUOTED_MAX", "parse_retry_after", "median_response", "remember_response",
]


@dataclass(frozen=True, slots=True)
class PolitenessConfig:
    delay_s: float = 1.0              # minimum gap between requests to one key
    crawl_delay_s_max: float = 30.0   # cap on a robots.txt Crawl-delay we honour
    response_factor: float = 10.0     # delay >= factor x median response time
    response_window: int = 5          # response times the median is taken over
    response_delay_s_max: float = 30.0   # cap on the delay slowness alone asks for
    smoothing_old: float = 0.8        # weight of the old delay in the average
    backoff_s_max: float = 3600.0     # failure / 429 doubling stops here
    backoff_jitter: float = 0.1       # a doubled delay is x U[1, 1 + jitter)
    park_after: int = 3               # failures in a row that park the key
    probe_s_min: float = 60.0         # first probe of a parked key, then doubling
    probe_s_max: float = 6 * 3600.0   # ... up to this
    down_horizon_s: float = 86400.0   # down this long: its URLs are given up
    ip_concurrency: int = 4           # requests in flight per resolved IP
    ip_rate: float = 5.0              # request starts per second per IP
    ip_margin_s: float = 0.01         # slack added to the 1 s window (jitter)

    def __post_init__(self) -> None:
        if self.delay_s < 0 or self.crawl_delay_s_max < 0 or self.backoff_s_max <= 0:
            raise ValueError("politeness delays must be non-negative")
        if self.ip_concurrency < 1 or self.ip_rate <= 0:
            raise ValueError("ip_concurrency must be >= 1 and ip_rate > 0")
        if not 0 <= self.smoothing_old < 1:
            raise ValueError("smoothing_old must be in [0, 1)")
        if self.response_window < 1 or self.response_delay_s_max < 0 or self.backoff_jitter < 0:
            raise ValueError("response_window must be >= 1, response_delay_s_max and backoff_jitter >= 0")
        if self.park_after < 1 or not 0 < self.probe_s_min <= self.probe_s_max or self.down_horizon_s <= 0:
            raise ValueError("park_after >= 1 and 0 < probe_s_min <= probe_s_max, down_horizon_s > 0")


@dataclass(frozen=True, slots=True)
class AllowEntry:
    """A negotiated exception: faster limits for one key until `expires_at`."""

    key: str
    delay_s: float
    owner: str
    expires_at: float
    ip_concurrency: int | None = None
    ip_rate: float | None = None


RETRY_AFTER_QUOTED_MAX = 64   # characters of a Retry-After value kept in the back-off reason


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Retry-After as an absolute instant, or None if absent or unparseable.

    RFC 9110 10.2.3: either delta-seconds or an HTTP-date."""
    if not value:
        return None
    v = value.strip()
    if v.isascii() and v.isdigit():  # RFC 9110 delta-seconds is ASCII DIGITs only
        return now + float(v)
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:  # asctime form: HTTP-dates are always GMT (RFC 9110 5.6.7)
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return max(now, dt.timestamp())


@dataclass(slots=True)
class KeyState:
    key: str
    delay_s: float
    next_fetch_at: float = 0.0
    in_flight: bool = False
    crawl_delay_s: float | None = None
    last_response_s: float = 0.0
    backoff_until: float = 0.0
    backoff_reason: str = ""
    fetches: int = 0
    responses: list[float] = field(default_factory=list)   # the last response_window times
    health: Health = Health.HEALTHY
    failures: int = 0                  # host failures in a row
    failure_kind: str = ""             # the last one's FailureKind
    first_failure_at: float = 0.0      # of the current run of failures
    last_failure_at: float = 0.0
    probe_s: float = 0.0               # interval to the next probe (parked, down)

    def snapshot(self) -> dict[str, Any]:
        return {
            "delay_s": self.delay_s,
            "next_fetch_at": self.next_fetch_at,
            "crawl_delay_s": self.crawl_delay_s,
            "last_response_s": self.last_response_s,
            "backoff_until": self.backoff_until,
            "backoff_reason": self.backoff_reason,
            "fetches": self.fetches,
            "responses": list(self.responses),
            "health": str(self.health),
            "failures": self.failures,
            "failure_kind": self.failure_kind,
            "first_failure_at": self.first_failure_at,
            "last_failure_at": self.last_failure_at,
            "probe_s": self.probe_s,
        }


# one request to an IP: [started at, completed at (None while in flight)]
IpToken = list[float | None]


@dataclass(slots=True)
class IpState:
    ip: str
    in_flight: int = 0
    starts: collections.deque[IpToken] = field(default_factory=collections.deque)
    key_response_s: dict[str, float] = field(default_factory=dict)   # key -> its median, last IP_KEYS_MAX
    slowest_key: str = ""              # the key of the largest of those (kept as they change)


IP_KEYS_MAX = 64   # keys whose response time an IP remembers


def median_response(times: list[float], window: int) -> float:
    """Median of the last `window` response times, missing ones counted 0: a
    key's first slow answer is no trend yet."""
    padded = sorted(times)
    if len(padded) < window:   # times are >= 0: the missing zeros sort first
        padded[:0] = [0.0] * (window - len(padded))
    return padded[window // 2] if window % 2 else (padded[window // 2 - 1] + padded[window // 2]) / 2


def remember_response(times: list[float], sample: float, window: int) -> None:
    times.append(sample)
    if len(times) > window:
        del times[:-window]
