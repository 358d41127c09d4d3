"""Live progress: the goal and its ETA, fetched, rate, queued, hosts
ready/waiting, errors, and, in a tail, the keys holding the crawl back.

On a terminal it is a rich live line refreshed twice a second; otherwise
(CI logs, pipes) a plain line every 10 s. Reads the crawler's counters only.

The goal: with --max-pages, "page N/M (P%)" and an ETA at the rate of the
last RATE_WINDOW_S; with --duration-s, the time left (exact: the run stops
then); with both, the nearer end. The tail: when at most TAIL_KEYS_MAX
politeness keys still hold queued URLs and they are at most a quarter of the
keys met, the crawl is waiting on them alone; the line then names the
slowest (by current delay) with that delay and why it is so long: a back-off
after 429/503, robots.txt Crawl-delay, slow responses (the delay follows
response time), or the crawl's own delay.

Rules: read-only towards the crawl (no `politeness.ready_at`, which moves
state; `politeness.key` only for keys it already has); the clock is the
crawler's.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from typing import NamedTuple

__all__ = ["Progress", "progress_line", "goal_text", "eta_text", "tail_keys", "why_delay", "SlowKey"]

RATE_WINDOW_S = 60.0     # the ETA's rate: pages over the last minute (the whole run before that)
TAIL_KEYS_MAX = 5        # at most this many keys with work left ...
TAIL_SHARE_MAX = 0.25    # ... and at most this share of the keys met: a tail
TAIL_NAMED = 3           # keys named in a tail


class SlowKey(NamedTuple):
    key: str
    delay_s: float
    why: str
    queued: int


def eta_text(seconds: float) -> str:
    """45s, 5m10s, 2h03m."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def goal_text(*, fetched: int, max_pages: int, elapsed_s: float, duration_s: float, rate: float) -> str:
    """Progress against --max-pages and --duration-s, with the ETA; "" without either."""
    parts, etas = [], []
    if max_pages:
        done = min(fetched, max_pages)
        parts.append(f"page {done}/{max_pages} ({100 * done / max_pages:.0f}%)")
        if done >= max_pages:
            etas.append(0.0)
        elif rate > 0:
            etas.append((max_pages - done) / rate)
    if duration_s:
        parts.append(f"{eta_text(min(elapsed_s, duration_s))} of {eta_text(duration_s)}")
        etas.append(max(0.0, duration_s - elapsed_s))
    if not parts:
        return ""
    eta = f"ETA {eta_text(min(etas))}" if etas else "ETA -"
    return ", ".join(parts) + f", {eta}"


def why_delay(st, *, delay_s_min: float, crawl_delay_s_max: float, response_factor: float, now: float) -> str:
    """Why the key's delay is what it is (`st`: a politeness KeyState)."""
    if st.backoff_until > now or st.backoff_reason:
        return f"back-off after {st.backoff_reason}" if st.backoff_reason else "back-off"
    crawl_delay = min(st.crawl_delay_s, crawl_delay_s_max) if st.crawl_delay_s is not None else 0.0
    by_response = response_factor * st.last_response_s
    if crawl_delay >= max(by_response, delay_s_min) and crawl_delay > delay_s_min:
        return f"robots.txt Crawl-delay {crawl_delay:g} s"
    if by_response > delay_s_min:
        return f"slow responses (last {st.last_response_s:.2f} s, x{response_factor:g})"
    if st.delay_s > max(delay_s_min, crawl_delay) * 1.05:
        return "coming down after slow responses or a back-off"
    return "the crawl's delay"


def tail_keys(crawler, now: float) -> list[SlowKey]:
    """The keys holding the crawl back when it is in a tail, slowest first; [] otherwise."""
    fr, pol = crawler.frontier, crawler.politeness
    active = fr.key_count
    if not 0 < active <= TAIL_KEYS_MAX:
        return []
    known = pol.known_keys()
    if active > TAIL_SHARE_MAX * len(known):
        return []
    p = crawler.cfg.politeness
    slow = []
    for key in known:
        if not fr.has_key(key):
            continue
        st = pol.key(key)
        why = why_delay(st, delay_s_min=pol.delay_s_min(key, now), crawl_delay_s_max=p.crawl_delay_s_max,
                        response_factor=p.response_factor, now=now)
        slow.append(SlowKey(key, max(st.delay_s, st.backoff_until - now), why, fr.queued_for(key)))
    slow.sort(key=lambda s: (-s.delay_s, s.key))
    return slow[:TAIL_NAMED]


def progress_line(crawler, rate: float | None = None) -> str:
    """The line; `rate` is the recent pages/s for the ETA (default: the run's)."""
    s = crawler.stats
    now = crawler.clock.now()
    elapsed = max(1e-9, now - s.started_at) if s.started_at else 1e-9
    ready, waiting, leased = crawler.frontier.counts(now)
    c = crawler.cfg.crawl
    goal = goal_text(fetched=s.fetched, max_pages=c.max_pages, elapsed_s=elapsed, duration_s=c.duration_s,
                     rate=s.fetched / elapsed if rate is None else rate)
    line = (
        (f"{goal}  " if goal else "")
        + f"fetched {s.fetched} ({s.fetched / elapsed:.1f}/s)  queued {len(crawler.frontier) + len(crawler.overflow)}"
        f"  hosts ready {ready} waiting {waiting} active {leased}"
        f"  in-flight {s.in_flight}  errors {s.errors}  skipped {s.decisions}"
        f"  {s.bytes / 2**20:.1f} MiB"
    )
    slow = tail_keys(crawler, now)
    if slow:
        line += "  | tail, waiting on: " + "; ".join(
            f"{k.key} ({k.queued} queued, delay {k.delay_s:.1f} s: {k.why})" for k in slow)
    return line


class _Rate:
    """Pages per second over the last RATE_WINDOW_S, from samples taken at each refresh."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque(maxlen=1024)

    def note(self, now: float, fetched: int) -> float | None:
        self._samples.append((now, fetched))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()
        t0, f0 = self._samples[0]
        if now - t0 < RATE_WINDOW_S / 4:
            return None   # too short a window: the run's own rate
        return (fetched - f0) / (now - t0)


class Progress:
    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._task: asyncio.Task | None = None
        self._live = None

    def attach(self, crawler) -> None:
        if not self.enabled:
            return
        self._task = asyncio.get_running_loop().create_task(self._run(crawler))

    async def _run(self, crawler) -> None:
        rate = _Rate()

        def line() -> str:
            return progress_line(crawler, rate.note(crawler.clock.now(), crawler.stats.fetched))

        if sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            from rich.text import Text

            with Live(console=Console(stderr=True), refresh_per_second=4, transient=True) as live:
                self._live = live
                while True:
                    live.update(Text(line()))   # plain text: "[::1]" is a host, not markup
                    await asyncio.sleep(0.5)
        else:
            last = time.monotonic()
            while True:
                await asyncio.sleep(1.0)
                text = line()
                if time.monotonic() - last >= 10:
                    last = time.monotonic()
                    print("courtly: " + text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
