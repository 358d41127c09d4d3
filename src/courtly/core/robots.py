"""robots.txt per origin: the fetch state (`RobotsBook`). The parser and
the matcher are core/robots_txt.py's (re-exported here).

Fetch state (`RobotsBook`)
--------------------------
One entry per origin string (``http://a.test:8080``), driven by the table
`TRANSITIONS` of (phase, event) -> (phase, effect). DESIGN invariant 3:

- 2xx: parse, cache `cache_s` (at most 24 h);
- 3xx at the end of the chain, more than 5 redirects, or 4xx other than 429:
  unavailable, allow all (the error body is never parsed), cached likewise;
- 429, 5xx, other statuses, timeout, network error: unreachable. The last
  good copy (2xx or 4xx outcome) is reused if obtained within `stale_s_max`
  (24 h), else DISALLOW_ALL; retry after `retry_s_min` doubling to
  `retry_s_max`. We never switch to allow-all after long unreachability
  (RFC 9309 2.3.1.4 permits it after ~30 days; we prefer staying polite);
- dns / non_public: we cannot read the file (and could not fetch the pages
  either): DISALLOW_ALL, never the old copy, retried with the same back-off.

A fetch started but not finished within `fetch_timeout_s` counts as a timeout
(applied lazily by `lookup`/`fetch_started`). A finish without a start is
ignored; a start while fetching raises `RobotsStateError`. HTTP caching
headers are not consulted. Pure: callers pass `now`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Callable, Mapping

from courtly.core.keymemory import SCAN_MAX, sweep

from courtly.core.robots_txt import (
    ALLOW_ALL, CACHE_S_MAX, DISALLOW_ALL, PARSE_BYTES_MAX, REDIRECTS_MAX, RobotsGroup, RobotsRule,
    RobotsRules, parse_robots, product_token, robots_allowed,
)
from courtly.core.types import Origin, Reason

__all__ = [
    "PARSE_BYTES_MAX", "REDIRECTS_MAX", "CACHE_S_MAX", "RobotsRule", "RobotsGroup",
    "RobotsRules", "ALLOW_ALL", "DISALLOW_ALL", "parse_robots", "product_token",
    "robots_allowed", "RobotsFetched", "RobotsFailed", "RobotsFailure", "RobotsState", "RobotsView",
    "Phase", "Event", "Effect", "TRANSITIONS", "classify", "RobotsStateError", "RobotsBook",
]


@dataclass(frozen=True, slots=True)
class RobotsFetched:
    """robots.txt answered with an HTTP status after `redirects` hops."""

    status: int
    body: bytes = b""
    redirects: int = 0


class RobotsFailure(StrEnum):
    """Why robots.txt could not be fetched (`RobotsFailed.kind`)."""

    TIMEOUT = "timeout"
    NETWORK = "network"
    DNS = "dns"
    NON_PUBLIC = "non_public"
    TOO_MANY_REDIRECTS = "too_many_redirects"


@dataclass(frozen=True, slots=True)
class RobotsFailed:
    """robots.txt could not be fetched; `kind` a RobotsFailure (its string is taken too)."""

    kind: RobotsFailure

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", RobotsFailure(self.kind))
        except ValueError:
            raise ValueError(f"unknown robots failure kind {self.kind!r}") from None


class RobotsState(StrEnum):
    NEED_FETCH = "need_fetch"   # fetch robots.txt before any page of the origin
    FETCHING = "fetching"       # a fetch is in flight: wait
    READY = "ready"             # `rules` are in force


class Phase(StrEnum):
    ABSENT = "absent"
    FETCHING = "fetching"
    FRESH = "fresh"      # a good outcome (2xx parsed, or unavailable -> allow all)
    FAILED = "failed"    # unreachable or blocked, in back-off


class Event(StrEnum):
    START = "start"
    LOADED = "loaded"            # 2xx
    UNAVAILABLE = "unavailable"  # 3xx end, > 5 redirects, 4xx except 429
    UNREACHABLE = "unreachable"  # 429, 5xx, timeout, network error
    BLOCKED = "blocked"          # dns failure, non-public address


class Effect(StrEnum):
    BEGIN = "begin"
    STORE = "store"
    STORE_ALLOW_ALL = "store_allow_all"
    BACK_OFF = "back_off"
    BLOCK = "block"
    IGNORE = "ignore"
    REJECT = "reject"


_FINISH = (Event.LOADED, Event.UNAVAILABLE, Event.UNREACHABLE, Event.BLOCKED)
TRANSITIONS: Mapping[tuple[Phase, Event], tuple[Phase, Effect]] = {
    **{(p, Event.START): (Phase.FETCHING, Effect.BEGIN) for p in (Phase.ABSENT, Phase.FRESH, Phase.FAILED)},
    (Phase.FETCHING, Event.START): (Phase.FETCHING, Effect.REJECT),
    (Phase.FETCHING, Event.LOADED): (Phase.FRESH, Effect.STORE),
    (Phase.FETCHING, Event.UNAVAILABLE): (Phase.FRESH, Effect.STORE_ALLOW_ALL),
    (Phase.FETCHING, Event.UNREACHABLE): (Phase.FAILED, Effect.BACK_OFF),
    (Phase.FETCHING, Event.BLOCKED): (Phase.FAILED, Effect.BLOCK),
    **{(p, e): (p, Effect.IGNORE) for p in (Phase.ABSENT, Phase.FRESH, Phase.FAILED) for e in _FINISH},
}


def classify(outcome: RobotsFetched | RobotsFailed) -> Event:
    """The event an outcome is (RFC 9309 2.3.1)."""
    if isinstance(outcome, RobotsFailed):
        if outcome.kind is RobotsFailure.TOO_MANY_REDIRECTS:
            return Event.UNAVAILABLE
        return Event.BLOCKED if outcome.kind in (RobotsFailure.DNS, RobotsFailure.NON_PUBLIC) else Event.UNREACHABLE
    status = outcome.status
    if outcome.redirects > REDIRECTS_MAX or 300 <= status < 400:
        return Event.UNAVAILABLE
    if 200 <= status < 300:
        return Event.LOADED
    if 400 <= status < 500 and status != 429:
        return Event.UNAVAILABLE
    return Event.UNREACHABLE


class RobotsStateError(RuntimeError):
    """A robots.txt fetch was started while one is in flight."""


@dataclass(frozen=True, slots=True)
class RobotsView:
    """What the crawler may do with an origin now."""

    state: RobotsState
    rules: RobotsRules | None = None
    expires_at: float | None = None   # READY from a good copy: refetch at
    retry_at: float | None = None     # READY after a failure: retry at
    unreachable: bool = False         # rules are the failure policy (DISALLOW_ALL)

    def skip_reason(self, token: str, path: str) -> Reason | None:
        """None when a READY view allows `path`; else the Reason to record."""
        if self.state is not RobotsState.READY or self.rules is None:
            raise RobotsStateError(f"robots.txt not ready ({self.state})")
        if self.rules.allowed(token, path):
            return None
        return Reason.ROBOTS_UNREACHABLE if self.unreachable else Reason.ROBOTS


_NEED_FETCH = RobotsView(RobotsState.NEED_FETCH)
_FETCHING = RobotsView(RobotsState.FETCHING)


@dataclass(frozen=True, slots=True)
class _Entry:
    phase: Phase
    resting: Phase = Phase.ABSENT        # phase before the fetch in flight
    good: RobotsRules | None = None      # last good copy
    good_at: float | None = None
    expires_at: float | None = None
    failures: int = 0
    retry_at: float | None = None
    blocked: bool = False
    started_at: float | None = None


_SNAPSHOT_VERSION = 1


class RobotsBook:
    """Per-origin robots.txt state for the origins one worker owns."""

    def __init__(
        self,
        *,
        cache_s: float = CACHE_S_MAX,
        retry_s_min: float = 60.0,
        retry_s_max: float = 3_600.0,
        fetch_timeout_s: float = 120.0,
        stale_s_max: float = CACHE_S_MAX,
        load: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        if not 0 < cache_s <= CACHE_S_MAX:
            raise ValueError(f"cache_s must be in (0, {CACHE_S_MAX}]")
        if not 0 < retry_s_min <= retry_s_max:
            raise ValueError("need 0 < retry_s_min <= retry_s_max")
        if not 0 < fetch_timeout_s or not 0 <= stale_s_max <= CACHE_S_MAX:
            raise ValueError("bad fetch_timeout_s or stale_s_max")
        self.cache_s, self.retry_s_min, self.retry_s_max = cache_s, retry_s_min, retry_s_max
        self.fetch_timeout_s, self.stale_s_max = fetch_timeout_s, stale_s_max
        self._entries: dict[str, _Entry] = {}
        self._fresh_views: dict[str, RobotsView] = {}   # origin -> the view of its fresh copy
        self._load = load   # an evicted origin's saved snapshot (evict_idle), read back when it returns

    def __len__(self) -> int:
        return len(self._entries)

    def phase(self, origin: str | Origin) -> Phase:
        """The phase in memory (a status question: an evicted origin is not read back)."""
        e = self._entries.get(str(origin))
        return Phase.ABSENT if e is None else e.phase

    def lookup(self, origin: str | Origin, now: float) -> RobotsView:
        key = str(origin)
        e = self._settle(key, now)
        if e is None or e.phase is Phase.ABSENT:
            return _NEED_FETCH
        if e.phase is Phase.FETCHING:
            return _FETCHING
        if e.phase is Phase.FRESH:
            assert e.expires_at is not None and e.good is not None
            if now >= e.expires_at:
                return _NEED_FETCH
            # asked for every URL: the view of a fresh copy is made once per copy
            view = self._fresh_views.get(key)
            if view is None or view.rules is not e.good or view.expires_at != e.expires_at:
                view = self._fresh_views[key] = RobotsView(RobotsState.READY, e.good, expires_at=e.expires_at)
            return view
        assert e.retry_at is not None
        if now >= e.retry_at:
            return _NEED_FETCH
        if not e.blocked and e.good is not None and e.good_at is not None and now - e.good_at <= self.stale_s_max:
            return RobotsView(RobotsState.READY, e.good, retry_at=e.retry_at)
        return RobotsView(RobotsState.READY, DISALLOW_ALL, retry_at=e.retry_at, unreachable=True)

    def fetch_started(self, origin: str | Origin, now: float) -> None:
        key = str(origin)
        self._step(key, self._settle(key, now), Event.START, now, None)

    def fetch_finished(
        self, origin: str | Origin, now: float, outcome: RobotsFetched | RobotsFailed
    ) -> RobotsView:
        key = str(origin)
        self._step(key, self._entry(key), classify(outcome), now, outcome)
        return self.lookup(key, now)

    def fetch_abandoned(self, origin: str | Origin) -> None:
        """The fetch in flight ended with no answer to judge (the lease was
        lost, the crawl stops): the origin is as it was before it started, so
        the next lookup asks for a fetch again. Left FETCHING, its URLs would
        wait for `fetch_timeout_s` and then be refused as unreachable."""
        key = str(origin)
        e = self._entries.get(key)
        if e is None or e.phase is not Phase.FETCHING:
            return
        if e.resting is Phase.ABSENT:
            self.forget(key)
        else:
            self._entries[key] = replace(e, phase=e.resting, resting=Phase.ABSENT, started_at=None)
            self._fresh_views.pop(key, None)

    def next_due_at(self, origin: str | Origin) -> float | None:
        """When the origin next needs attention (None: unknown to the book)."""
        e = self._entry(str(origin))
        if e is None:
            return None
        if e.phase is Phase.FETCHING:
            return (e.started_at or 0.0) + self.fetch_timeout_s
        return e.expires_at if e.phase is Phase.FRESH else e.retry_at

    def forget(self, origin: str | Origin) -> None:
        self._entries.pop(str(origin), None)
        self._fresh_views.pop(str(origin), None)

    def prune(self, now: float) -> int:
        """Drop good copies too old to be reused; returns how many."""
        old = [
            k for k, e in self._entries.items()
            if e.phase is Phase.FRESH and e.good_at is not None and now - e.good_at > self.stale_s_max
            and now >= (e.expires_at or 0.0)
        ]
        for k in old:
            del self._entries[k]
            self._fresh_views.pop(k, None)
        return len(old)

    def snapshot(self, origin: str | Origin) -> dict[str, Any] | None:
        """JSON-serialisable state; a fetch in flight is not persisted."""
        e = self._entry(str(origin))
        return None if e is None else self._snapshot(e)

    @staticmethod
    def _snapshot(e: _Entry) -> dict[str, Any] | None:
        if e.phase is Phase.FETCHING:
            if e.resting is Phase.ABSENT:
                return None
            e = replace(e, phase=e.resting, started_at=None)
        return {
            "v": _SNAPSHOT_VERSION, "phase": e.phase.value,
            "good": None if e.good is None else e.good.to_dict(),
            "good_at": e.good_at, "expires_at": e.expires_at, "failures": e.failures,
            "retry_at": e.retry_at, "blocked": e.blocked,
        }

    def restore(self, origin: str | Origin, data: Mapping[str, Any] | None) -> None:
        if data is None:
            self.forget(origin)
            return
        if data.get("v") != _SNAPSHOT_VERSION or data["phase"] not in ("fresh", "failed"):
            raise ValueError(f"unsupported robots snapshot {data!r:.80}")
        good = None if data["good"] is None else RobotsRules.from_dict(data["good"])
        self._entries[str(origin)] = _Entry(
            Phase(data["phase"]), good=good, good_at=data["good_at"],
            expires_at=data["expires_at"], failures=int(data["failures"]),
            retry_at=data["retry_at"], blocked=bool(data["blocked"]),
        )

    # -- internals --

    def evict_idle(self, keep: int, scan_max: int = SCAN_MAX,
                   busy: Callable[[str], bool] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Forget origins beyond `keep` with no fetch in flight and not `busy`
        (an origin whose key has URLs queued: it is asked soon); returns their
        snapshots, which the caller saves (`load` reads them back, so an
        evicted copy is neither refetched before it expires nor retried
        before its back-off ends)."""
        def idle(origin: str, e: _Entry) -> bool:
            return e.phase is not Phase.FETCHING and (busy is None or not busy(origin))
        gone = sweep(self._entries, keep, idle, scan_max)
        out = []
        for k, e in gone:
            self._fresh_views.pop(k, None)
            snap = self._snapshot(e)
            if snap is not None:
                out.append((k, snap))
        return out

    def _entry(self, key: str) -> _Entry | None:
        """The origin's entry, read back from its saved snapshot if evicted."""
        e = self._entries.get(key)
        if e is None and self._load is not None:
            data = self._load(key)
            if data is not None:
                self.restore(key, data)
                e = self._entries.get(key)
        return e

    def _settle(self, key: str, now: float) -> _Entry | None:
        """Turn a fetch that outlived `fetch_timeout_s` into a timeout."""
        e = self._entry(key)
        if e is not None and e.phase is Phase.FETCHING:
            if now >= (e.started_at or 0.0) + self.fetch_timeout_s:
                e = self._step(key, e, Event.UNREACHABLE, now, RobotsFailed(RobotsFailure.TIMEOUT))
        return e

    def _backoff_s(self, failures: int) -> float:
        return min(self.retry_s_max, self.retry_s_min * 2.0 ** min(failures - 1, 60))

    def _step(
        self, key: str, e: _Entry | None, event: Event, now: float,
        outcome: RobotsFetched | RobotsFailed | None,
    ) -> _Entry | None:
        phase = Phase.ABSENT if e is None else e.phase
        nxt, effect = TRANSITIONS[(phase, event)]
        if effect is Effect.REJECT:
            raise RobotsStateError(f"robots.txt fetch for {key} already in flight")
        if effect is Effect.IGNORE:
            return e
        cur = e or _Entry(Phase.ABSENT)
        if effect is Effect.BEGIN:
            new = replace(cur, phase=nxt, resting=phase, started_at=now)
        elif effect in (Effect.STORE, Effect.STORE_ALLOW_ALL):
            body = outcome.body if isinstance(outcome, RobotsFetched) else b""
            rules = parse_robots(body) if effect is Effect.STORE else ALLOW_ALL
            new = _Entry(nxt, good=rules, good_at=now, expires_at=now + self.cache_s)
        else:  # BACK_OFF or BLOCK
            failures = cur.failures + 1
            new = replace(
                cur, phase=nxt, resting=Phase.ABSENT, failures=failures, started_at=None,
                retry_at=now + self._backoff_s(failures), blocked=effect is Effect.BLOCK,
                expires_at=None,
            )
        self._entries[key] = new
        return new
