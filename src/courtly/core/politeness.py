"""Politeness state: per politeness key and per resolved IP (invariants 1 and 2).

Theory of operation
-------------------
Each politeness key (registered domain, or exact host) has a `KeyState`:
its current delay, the instant it may next be fetched (`next_fetch_at`),
whether a request is in flight, and any back-off in force. The frontier
guarantees one lease per key, so one fetch loop serves each key; this module
only computes *when*.

    response     = max(median of the key's last `response_window` response
                       times (missing ones count 0), the largest such median
                       of the keys last answered from its IP)
    delay target = max(floor, min(response_factor x response, response_delay_s_max))
    delay        = max(floor, 0.8 x old delay + 0.2 x target)
    floor        = max(delay_s_min, capped Crawl-delay)   (never smoothed below)

The response time is a running median, not the last one: a single slow or
dripping response (a 60 s drip once made a whole registered domain wait
120 s) moves nothing, a host slow on most of its last answers slows down, and
`response_delay_s_max` (30 s) bounds what slowness alone can ask. The IP
term is the slowest of the last IP_KEYS_MAX keys that answered from that
address: one slow site on a shared server slows every key the server hosts
(the seeds' per-IP rule), so they do not load it further.

A 429 or 503 doubles the delay (up to backoff_s_max, 1 h) and honours
Retry-After (delta-seconds or an HTTP-date), so the next request waits for the
later of the two. So does every other failure of the host (connection
refused or reset, timeouts, TLS, any 5xx; `core/health.py`): the delay is
doubled, times a jitter in [1, 1 + backoff_jitter), up to backoff_s_max; after
`park_after` failures in a row the key is parked (one probe on an exponential
schedule) and after `down_horizon_s` down its URLs are given up (`health.py`
has the table). An answer the caller found to be a ban (`core/ban.py`: a 403
wave, a challenge page) pauses the key, probed the same way. Successful
answers let the smoothing bring the delay back gradually; a parked or paused
key that answers resumes at its normal delay. A request with neither an
answer nor a failure of the host (not sent) changes nothing.
The next request may start `delay` after the previous one *completed*.

Each resolved IP has an `IpState`: at most `ip_concurrency` requests in flight
and at most `ip_rate` arrivals in any one-second window. A request reaches the
server somewhere between the moment we stamp it and the moment its answer
completes (a new connection can take a while), so the rule is conservative:
a new request may start one second (plus a small margin) after the
*completion* of the request `ip_rate` starts back; while that one is still in
flight, it waits for a completion.

Allowlist entries (key, faster limits, owner, expiry) replace the defaults for
one key until they expire, then the defaults return by themselves. A key
slowed down (an open abuse complaint, runtime/abuse.py) has its floor raised
to max(factor x floor, delay_s_min) at once, allowlist or not, until lifted.

Bounded memory (core/keymemory.py): `evict_idle` forgets idle keys beyond a
bound and hands back their snapshots; a forgotten key is read back through
the `load` given at construction. `evict_idle_ips` forgets quiet IPs.

The values (settings, allowlist entries, key and IP state, the Retry-After
parser) live in core/politeness_state.py and are re-exported here.

Rules: pure; every function takes `now` (seconds, wall clock of the caller).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterable, Mapping

from courtly.core.health import Effect, FailureKind, Health, Signal, failure_kind, step
from courtly.core.keymemory import SCAN_MAX, sweep
from courtly.core.politeness_state import (
    IP_KEYS_MAX,
    RETRY_AFTER_QUOTED_MAX,
    AllowEntry,
    IpState,
    IpToken,
    KeyState,
    PolitenessConfig,
    median_response,
    parse_retry_after,
    remember_response,
)
from courtly.core.urls import escape_raw_octets

__all__ = [
    "PolitenessConfig",
    "AllowEntry",
    "KeyState",
    "IpState",
    "IpToken",
    "IP_KEYS_MAX",
    "RETRY_AFTER_QUOTED_MAX",
    "Politeness",
    "parse_retry_after",
]


_ON_SUCCESS = {h: step(h, Signal.SUCCESS) for h in Health}   # the table's column, looked up per answer


class Politeness:
    """All key and IP politeness state of one worker. Pure: `now` is an argument."""

    def __init__(self, config: PolitenessConfig, allowlist: tuple[AllowEntry, ...] = (),
                 rng: random.Random | None = None,
                 load: Callable[[str], dict[str, Any] | None] | None = None) -> None:
        self.config = config
        self._load = load   # an evicted key's saved snapshot (evict_idle), read back when it returns
        self._rng = rng if rng is not None else random.Random(0)   # back-off jitter only
        self._allow = {e.key: e for e in allowlist}
        self._slow: dict[str, tuple[float, float]] = {}   # key -> (factor, delay_s_min)
        self._keys: dict[str, KeyState] = {}
        self._ips: dict[str, IpState] = {}
        self.not_before = 0.0   # nothing starts before this (resume after a crash)

    # ---- keys -------------------------------------------------------------

    def _allow_entry(self, key: str, now: float) -> AllowEntry | None:
        e = self._allow.get(key)
        return e if e is not None and now < e.expires_at else None

    def delay_s_min(self, key: str, now: float) -> float:
        e = self._allow_entry(key, now)
        return e.delay_s if e is not None else self.config.delay_s

    def key(self, key: str) -> KeyState:
        st = self._keys.get(key)
        if st is None:
            st = self._new_key(key)
            snap = self._load(key) if self._load is not None else None
            if snap:
                self._apply(st, snap)
        return st

    def _new_key(self, key: str) -> KeyState:
        entry = self._allow.get(key)  # an expired entry is floored in ready_at
        st = self._keys[key] = KeyState(key=key, delay_s=entry.delay_s if entry else self.config.delay_s)
        return st

    def known_keys(self) -> list[str]:
        return list(self._keys)

    def holds(self, key: str) -> bool:
        """`key`'s state is in memory (False: never seen, or evicted)."""
        return key in self._keys

    @property
    def key_count(self) -> int:
        return len(self._keys)

    @property
    def ip_count(self) -> int:
        return len(self._ips)

    def restore(self, key: str, snap: Mapping[str, Any]) -> None:
        st = self._keys.get(key) or self._new_key(key)
        self._apply(st, snap)

    def _apply(self, st: KeyState, snap: Mapping[str, Any]) -> None:
        st.delay_s = float(snap.get("delay_s", st.delay_s))
        st.next_fetch_at = float(snap.get("next_fetch_at", 0.0))
        cd = snap.get("crawl_delay_s")
        st.crawl_delay_s = None if cd is None else float(cd)
        st.last_response_s = float(snap.get("last_response_s", 0.0))
        st.backoff_until = float(snap.get("backoff_until", 0.0))
        st.backoff_reason = str(snap.get("backoff_reason", ""))
        st.fetches = int(snap.get("fetches", 0))
        st.responses = [float(x) for x in snap.get("responses", ())][-self.config.response_window:]
        try:
            st.health = Health(snap.get("health", Health.HEALTHY))
        except ValueError:
            st.health = Health.HEALTHY
        st.failures = int(snap.get("failures", 0))
        st.failure_kind = str(snap.get("failure_kind", ""))
        st.first_failure_at = float(snap.get("first_failure_at", 0.0))
        st.last_failure_at = float(snap.get("last_failure_at", 0.0))
        st.probe_s = float(snap.get("probe_s", 0.0))

    def _floor(self, st: KeyState, now: float) -> float:
        floor = self.delay_s_min(st.key, now)
        if st.crawl_delay_s is not None:
            floor = max(floor, min(st.crawl_delay_s, self.config.crawl_delay_s_max))
        slow = self._slow.get(st.key)
        if slow is not None:
            floor = max(floor * slow[0], slow[1])
        return floor

    def slow_down(self, key: str, factor: float, delay_s_min: float, now: float) -> None:
        """Raise the key's floor to max(factor x floor, delay_s_min) until
        `lift_slow_down`; the next fetch waits the raised delay at once."""
        if factor < 1 or delay_s_min < 0:
            raise ValueError("a slow-down needs factor >= 1 and delay_s_min >= 0")
        self._slow[key] = (factor, delay_s_min)
        self.ready_at(key, now)

    def lift_slow_down(self, key: str, now: float) -> None:
        """The key's ordinary floor again. Its delay drops back to it at once
        unless a 429/503 back-off is in force (the next fetch already planned
        keeps its time)."""
        if self._slow.pop(key, None) is not None:
            st = self.key(key)
            if not st.backoff_reason:
                st.delay_s = min(st.delay_s, self._floor(st, now))

    def slowed_keys(self) -> list[str]:
        return sorted(self._slow)

    def set_crawl_delay(self, key: str, crawl_delay_s: float | None, now: float) -> None:
        """robots.txt Crawl-delay for the key (capped when applied)."""
        st = self.key(key)
        st.crawl_delay_s = crawl_delay_s
        floor = self._floor(st, now)
        if st.delay_s < floor:
            if st.fetches:  # the next fetch waits the raised delay too
                st.next_fetch_at += floor - st.delay_s
            st.delay_s = floor

    def ready_at(self, key: str, now: float) -> float:
        st = self.key(key)
        # An allowlist entry may have expired: re-apply the default floor.
        floor = self._floor(st, now)
        if st.delay_s < floor:
            if st.fetches:  # the next fetch waits the raised delay too
                st.next_fetch_at += floor - st.delay_s
            st.delay_s = floor
        if st.health is Health.DOWN:   # its URLs are given up until the probe is due (gives_up)
            return max(st.next_fetch_at, self.not_before)
        return max(st.next_fetch_at, st.backoff_until, self.not_before)

    def may_start(self, key: str, now: float) -> bool:
        st = self.key(key)
        return not st.in_flight and now >= self.ready_at(key, now)

    def started(self, key: str, now: float) -> None:
        st = self.key(key)
        if st.in_flight:
            raise RuntimeError(f"politeness: second request in flight for {key}")
        if now < self.ready_at(key, now):
            raise RuntimeError(f"politeness: {key} started before its next fetch time")
        if st.health is Health.DOWN and now < st.backoff_until:
            raise RuntimeError(f"politeness: {key} is down and its probe is not due")
        st.in_flight = True

    def unsent(self, key: str) -> None:
        """The request `started` never left (the gate closed while it waited for
        a connection): nothing was learned; the key may start again."""
        self.key(key).in_flight = False

    def finished(
        self,
        key: str,
        now: float,
        *,
        response_s: float,
        status: int,
        retry_after: str | None = None,
        error: str | None = None,
        ip: str | None = None,
        ban: str = "",
    ) -> float:
        """Record a completed request (`error`: the fetcher's error kind when
        status is 0; `ip`: the address it went to; `ban`: the ban this answer
        shows, from core/ban.py); return the key's next fetch instant."""
        st = self.key(key)
        st.in_flight = False
        st.fetches += 1
        st.last_response_s = max(0.0, response_s)
        floor = self._floor(st, now)
        kind = failure_kind(status, error)
        if ban:
            self._failed(st, FailureKind.BAN, now, floor, ban=ban)
        elif kind is not None:
            self._failed(st, kind, now, floor)
        elif status == 0:
            pass   # no answer and no failure of the host (not sent, our own refusal): nothing learned
        elif status == 429:   # a throttle: the host is up (a parked key resumes); back off
            st.health, _ = step(st.health, Signal.SUCCESS)
            st.failures = 0
            st.probe_s = 0.0
            st.delay_s = max(self._doubled(st.delay_s, floor), floor)
        else:
            self._answered(st, ip, now, floor)
        if status in (429, 503):
            until = parse_retry_after(retry_after, now)
            if until is not None:
                # honour the server, but never wait more than the back-off cap
                st.backoff_until = max(st.backoff_until, min(until, now + self.config.backoff_s_max))
            if st.health not in (Health.PARKED, Health.DOWN):
                # the header's raw octets as %XX: the reason is stored, printed and served
                # (and written per key at every commit: a hostile 64 KiB header is cut)
                why = escape_raw_octets(retry_after[:RETRY_AFTER_QUOTED_MAX]) if retry_after else ""
                st.backoff_reason = f"{status}" + (f" Retry-After {why}" if why else "")
        st.next_fetch_at = now + st.delay_s
        return max(st.next_fetch_at, st.backoff_until)

    def _doubled(self, delay_s: float, floor: float) -> float:
        jitter = 1.0 + self.config.backoff_jitter * self._rng.random()
        return min(max(delay_s * 2.0, floor) * jitter, self.config.backoff_s_max)

    def _answered(self, st: KeyState, ip: str | None, now: float, floor: float) -> None:
        """The host answered: smooth the delay towards the response-time target
        (a parked key resumes at its floor)."""
        c = self.config
        remember_response(st.responses, st.last_response_s, c.response_window)
        response = median_response(st.responses, c.response_window)
        if ip is not None:
            response = max(response, self._ip_response(self._ip(ip), st.key, response))
        st.health, effect = _ON_SUCCESS[st.health]
        st.failures = 0
        st.probe_s = 0.0
        if effect is Effect.RESUME:
            st.delay_s = floor
            st.backoff_until = min(st.backoff_until, now)
            st.backoff_reason = ""
            return
        target = max(floor, min(c.response_factor * response, c.response_delay_s_max))
        w = c.smoothing_old
        st.delay_s = max(floor, w * st.delay_s + (1.0 - w) * target)
        if now >= st.backoff_until:
            st.backoff_reason = ""

    @staticmethod
    def _ip_response(ips: IpState, key: str, response: float) -> float:
        """Note `key`'s median on its IP; the slowest recent key's median there."""
        seen = ips.key_response_s
        seen.pop(key, None)
        seen[key] = response      # the most recent last: the oldest key is forgotten first
        if len(seen) > IP_KEYS_MAX:
            gone = next(iter(seen))
            del seen[gone]
            if gone == ips.slowest_key:
                ips.slowest_key = ""
        slowest = seen.get(ips.slowest_key)
        if slowest is None or response >= slowest:
            ips.slowest_key = key
        elif key == ips.slowest_key:   # the slowest got faster: look again (rare)
            ips.slowest_key = max(seen, key=seen.__getitem__)
        return seen[ips.slowest_key]

    def _failed(self, st: KeyState, kind: FailureKind, now: float, floor: float, *, ban: str = "") -> None:
        """The host failed or banned us (health.py): back off, park or pause,
        probe later, or give up."""
        c = self.config
        st.failures += 1
        if st.failures == 1 or (ban and st.health not in (Health.PAUSED, Health.DOWN)):
            st.first_failure_at = now
        st.last_failure_at = now
        st.failure_kind = f"{kind} ({ban})" if ban else str(kind)
        if now - st.first_failure_at >= c.down_horizon_s:
            signal = Signal.HORIZON
        elif ban:
            signal = Signal.BAN
        elif st.failures >= c.park_after:
            signal = Signal.FAILURE_LIMIT
        else:
            signal = Signal.FAILURE
        st.health, effect = step(st.health, signal)
        if effect is Effect.BACK_OFF:   # a parked key's wait is its probe schedule instead
            st.delay_s = max(self._doubled(st.delay_s, floor), floor)
            st.backoff_reason = f"{kind} x{st.failures}"
            return
        first = effect in (Effect.PARK, Effect.PAUSE)
        st.probe_s = c.probe_s_min if first else min(max(st.probe_s, c.probe_s_min / 2) * 2, c.probe_s_max)
        probe = min(st.probe_s * (1.0 + c.backoff_jitter * self._rng.random()), c.probe_s_max)
        st.backoff_until = max(st.backoff_until, now + probe)
        st.backoff_reason = f"{st.health}: {st.failures} failures in a row ({st.failure_kind})"

    def _known(self, key: str) -> KeyState | None:
        """The key's state if it has one, in memory or saved (read back)."""
        st = self._keys.get(key)
        return self.key(key) if st is None and self._load is not None else st

    def health(self, key: str) -> Health:
        st = self._known(key)
        return st.health if st is not None else Health.HEALTHY

    def unreachable(self, key: str) -> bool:
        """The key waits (parked, paused or down) for a host that does not answer
        or bans us. A host whose last failure was a 5xx answer is up: its
        robots.txt failing is RFC 9309's "unreachable, disallow all", not an outage."""
        st = self._known(key)
        return (st is not None and st.health in (Health.PARKED, Health.PAUSED, Health.DOWN)
                and st.failure_kind != FailureKind.HTTP_5XX)

    def gives_up(self, key: str, now: float) -> bool:
        """The key is down past the horizon and no probe is due: a URL it is
        handed is given up (Reason.HOST_DOWN) without a request."""
        st = self._known(key)
        return st is not None and st.health is Health.DOWN and now < st.backoff_until

    def aborted(self, key: str, now: float) -> float:
        """A request that never reached the network (e.g. DNS failure): free the key."""
        st = self.key(key)
        st.in_flight = False
        return max(st.next_fetch_at, st.backoff_until)

    # ---- IPs ----------------------------------------------------------------

    def _ip_limits(self, key: str | None, now: float) -> tuple[int, float]:
        e = self._allow_entry(key, now) if key else None
        conc = e.ip_concurrency if e and e.ip_concurrency else self.config.ip_concurrency
        rate = e.ip_rate if e and e.ip_rate else self.config.ip_rate
        return conc, rate

    def _ip(self, ip: str) -> IpState:
        st = self._ips.get(ip)
        if st is None:
            st = IpState(ip=ip)
            self._ips[ip] = st
        return st

    def hold_key_until(self, key: str, at: float) -> None:
        """`key` does not start before `at` (a partition taken over from another
        worker: its last requests may not be in the shared store yet)."""
        st = self.key(key)
        st.next_fetch_at = max(st.next_fetch_at, at)

    def hold_all_until(self, at: float) -> None:
        """No key or IP starts before `at`: after a crash, requests the dead process
        made in its last moments are unknown, so every key waits out one delay."""
        self.not_before = max(self.not_before, at)

    def ip_ready_at(self, ip: str, now: float, key: str | None = None) -> float | None:
        """When a new request to `ip` may start: `now` if it may start now, a later
        instant for the rate limit, or None when it must wait for a completion
        (the concurrency limit, or the request the rate window hinges on is
        still in flight)."""
        conc, rate = self._ip_limits(key, now)
        st = self._ip(ip)
        if st.in_flight >= conc:
            return None
        window = int(rate) if rate >= 1 else 1
        span = 1.0 if rate >= 1 else 1.0 / rate
        if len(st.starts) < window:
            return max(now, self.not_before)
        stamp, done = st.starts[-window]
        if done is None:
            return None
        return max(now, done + span + self.config.ip_margin_s, self.not_before)

    def ip_started(self, ip: str, now: float, key: str | None = None) -> IpToken:
        """Count a request start; returns its token for `ip_finished`."""
        ready = self.ip_ready_at(ip, now, key)
        if ready is None or ready > now:
            raise RuntimeError(f"politeness: IP {ip} limit exceeded")
        st = self._ip(ip)
        st.in_flight += 1
        token: IpToken = [now, None]   # [stamped at, completed at]
        st.starts.append(token)
        conc, rate = self._ip_limits(key, now)
        window = int(rate) if rate >= 1 else 1
        while len(st.starts) > window:
            st.starts.popleft()
        return token

    def ip_finished(self, ip: str, token: IpToken | None = None, now: float | None = None) -> None:
        """A request to `ip` completed at `now` (`token` from `ip_started`).
        Without them, the oldest open start counts as completed when it began."""
        st = self._ip(ip)
        st.in_flight = max(0, st.in_flight - 1)
        if token is None:
            token = next((t for t in st.starts if t[1] is None), None)
            if token is not None:
                token[1] = token[0]
        else:
            started = token[0]  # never None: set by ip_started
            token[1] = started if now is None or started is None else max(started, now)

    def ip_in_flight(self, ip: str) -> int:
        st = self._ips.get(ip)
        return st.in_flight if st else 0

    # ---- bounded memory (core/keymemory.py) ----------------------------------

    def evict_idle(self, now: float, keep: int, busy: Callable[[str], bool],
                   scan_max: int = SCAN_MAX) -> list[tuple[str, dict[str, Any]]]:
        """Forget idle keys beyond `keep`; returns their snapshots for the caller
        to save. Idle: nothing in flight, not `busy` (queued URLs, a lock), past
        its next fetch instant and its back-off (a lost snapshot could not
        make a request early)."""
        idle = self._idle_key(now, busy)
        return [(k, st.snapshot()) for k, st in sweep(self._keys, keep, idle, scan_max)]

    def forget_idle(self, keys: Iterable[str], now: float, busy: Callable[[str], bool]) -> int:
        """Forget the idle ones of `keys` without a snapshot (their partition
        went to another worker, who reads them from the store and holds them
        one delay); returns how many."""
        idle = self._idle_key(now, busy)
        gone = [k for k in keys if (st := self._keys.get(k)) is not None and idle(k, st)]
        for k in gone:
            del self._keys[k]
        return len(gone)

    @staticmethod
    def _idle_key(now: float, busy: Callable[[str], bool]) -> Callable[[str, KeyState], bool]:
        def idle(key: str, st: KeyState) -> bool:
            return (not st.in_flight and now >= st.next_fetch_at and now >= st.backoff_until
                    and not busy(key))
        return idle

    def evict_idle_ips(self, now: float, keep: int, scan_max: int = SCAN_MAX) -> int:
        """Forget idle IPs beyond `keep`; returns how many. Idle: nothing in
        flight, its last request completed a rate window ago, and the slowest
        key it remembers raises no delay above `delay_s` (that memory is kept:
        it is saved nowhere)."""
        c = self.config
        rate = min([c.ip_rate] + [e.ip_rate for e in self._allow.values() if e.ip_rate])
        span = (1.0 if rate >= 1 else 1.0 / rate) + c.ip_margin_s

        def idle(_ip: str, st: IpState) -> bool:
            if st.in_flight or any(done is None for _, done in st.starts):
                return False
            last = max((done for _, done in st.starts if done is not None), default=None)
            if last is not None and now < last + span:
                return False
            slowest = st.key_response_s.get(st.slowest_key, 0.0)
            return c.response_factor * slowest <= c.delay_s
        return len(sweep(self._ips, keep, idle, scan_max))
