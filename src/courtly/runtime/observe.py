"""The status source of a live crawl: adapts a `Crawler` to the status server.

What it owns: `CrawlObserver`, which implements `courtly.shell.status.StatusSource`
(structurally: runtime does not import the shell) by reading the crawler's
own state: `stats`, `frontier`, `politeness`, `robots`, `seen`,
`resolver.stats` and the store's folder (`explain` and disk size); and
`page_rows`, the sort/search/page helper that keeps the host table fast.

How it works: almost everything is read on demand. Three things the crawler
does not keep are observed as they happen, through the crawler's observer
hooks (`crawler.observers`; attach before `run()`, e.g. from
`run_crawl(on_start=...)`; `close()` detaches):

- `on_decision`: the recent-decision ring and the count per reason (the
  decisions still waiting in the current batch are counted at attach time,
  so the seeds' decisions are not lost);
- `on_request` / `on_response`: every request timed into the latency
  histogram, each key's IP and origins and each IP's request starts (for
  `ip_request_rate_max`). So the robots.txt counts and the IP column cover
  the origins and keys this process has asked for.
- `on_queued`, `on_admitted`, `on_parsed`: forwarded with `on_response`
  to `HealthWatch` (runtime/health.py), which keeps the coverage sample,
  the per-key new-URL rate and the histograms of body size and takedown
  propagation: the seeds' E.1 figures the crawler does not count itself.

The crawl folder's views (`urls`, `timeline`, `capture`) are those of
`courtly serve` (`runtime.crawlview`, a read-only connection per call, run
in a thread), so the live page lists URLs and replays captures as well.

Cost: counters are read exactly on every call. Aggregates over every key
(delay quantiles, back-off and robots counts, host states, the host table's
order) are recomputed at most once per 20 times what they last cost, so with
100,000 keys they may be a few seconds old and take at most ~5 % of the
event loop however many pages and scrapers are open; with a few hundred
keys they are fresh on every call. Rows of the host table are always current.

Rules: read-only towards the crawl (nothing here changes what it fetches or
when: no call to `politeness.ready_at` or `politeness.key` for unknown keys,
both of which create or move state); called on the event loop, except the
store reads of `explain`, which run in a thread on their own connection;
bounded memory (the ring and the per-IP windows have limits; the per-key
maps grow with the keys, like the politeness state itself).
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import json
import statistics
from collections import Counter, OrderedDict, deque
from pathlib import Path
from typing import Any, Callable, Iterable

from courtly.core.urls import politeness_key, split_origin
from courtly.runtime.health import HealthWatch
from courtly.runtime.crawlview import capture_file, replay_link, timeline_of, url_page

__all__ = ["CrawlObserver", "page_rows", "select_keys", "LATENCY_BUCKETS_S"]

# Upper bounds of the latency histogram; equal to courtly.shell.metrics.LATENCY_BUCKETS_S
# (a test checks it: runtime does not import the shell).
LATENCY_BUCKETS_S: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# equal to courtly.shell.resolver.DNS_LATENCY_BUCKETS_S (a test checks it, as above)
DNS_LATENCY_BUCKETS_S: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                            2.5, 5.0, 10.0)
DECISIONS_MAX = 1000
IP_WINDOW_S = 5.0
IP_STARTS_MAX = 1000          # per IP, within the window
_ROBOTS_ORDER = {"failed": 0, "fetching": 1, "absent": 2, "fresh": 3}


def select_keys(
    keys: Iterable[str],
    value: Callable[[str], Any],
    need: int,
    desc: bool,
    match: Callable[[str], bool] | None = None,
) -> tuple[int, list[str]]:
    """(matching keys, the first `need` of them sorted by `value`).

    A partial heap selection replaces the full sort when `need` is small.
    None values sort last in both directions; ties are broken by key (in
    ascending order both ways), so paging is stable."""
    pool = [k for k in keys if match is None or match(k)]
    if desc:
        def sort_key(k: str):  # noqa: E306
            v = value(k)
            return (v is not None, v if v is not None else 0, _Rev(k))
    else:
        def sort_key(k: str):  # noqa: E306
            v = value(k)
            return (v is None, v if v is not None else 0, k)
    if need < len(pool) // 4:
        chosen = heapq.nlargest(need, pool, key=sort_key) if desc else heapq.nsmallest(need, pool, key=sort_key)
    else:
        chosen = sorted(pool, key=sort_key, reverse=desc)[:need]
    return len(pool), chosen


def page_rows(
    keys: Iterable[str],
    value: Callable[[str], Any],
    row: Callable[[str], dict],
    offset: int,
    limit: int,
    desc: bool,
    match: Callable[[str], bool] | None = None,
) -> tuple[int, list[dict]]:
    """(matching keys, rows of keys[offset:offset+limit] sorted by `value`).

    Only the sort value of each key is computed; `row` is called for the keys
    of the page alone (see `select_keys` for the order)."""
    total, chosen = select_keys(keys, value, offset + limit, desc, match)
    return total, [row(k) for k in chosen[offset:]]


class _Memo:
    """Recomputes an aggregate over every key at most once per max(min_s,
    `factor` x what it cost last time), so however many browsers and
    scrapers ask, these scans take at most about 1/`factor` of the event
    loop. With a few hundred keys that is every few milliseconds: fresh."""

    def __init__(self, now: Callable[[], float], *, factor: float = 20.0, min_s: float = 0.0,
                 entries_max: int = 32) -> None:
        self._now = now
        self._factor = factor
        self._min_s = min_s
        self._entries_max = entries_max
        self._cache: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        start = self._now()
        hit = self._cache.get(key)
        if hit is not None and start < hit[0]:
            return hit[1]
        value = compute()
        cost = max(0.0, self._now() - start)
        if len(self._cache) >= self._entries_max:
            self._cache.clear()
        self._cache[key] = (start + max(self._min_s, self._factor * cost), value)
        return value


class _Rev(str):
    """A string that sorts backwards (descending pages keep keys ascending on ties)."""

    __slots__ = ()

    def __lt__(self, other: str) -> bool:  # type: ignore[override]
        return str.__gt__(self, other)

    def __gt__(self, other: str) -> bool:  # type: ignore[override]
        return str.__lt__(self, other)


class CrawlObserver:
    """A `StatusSource` over a live crawler (see the module docstring)."""

    def __init__(self, crawler, *, decisions_max: int = DECISIONS_MAX, ip_window_s: float = IP_WINDOW_S,
                 out: Path | None = None, extra: Callable[[], dict] | None = None) -> None:
        self._c = crawler
        self._extra = extra     # a deployment's own figures (a worker's: runtime/worker_figures.py)
        store_path = getattr(crawler.store, "path", None)
        # the crawl folder (a worker's local WARC folder: its store is PostgreSQL)
        self._out = Path(out) if out is not None else Path(store_path).parent if store_path else None
        self._key_mode = crawler.cfg.crawl.politeness_key
        self._recent: deque[dict] = deque(maxlen=decisions_max)
        self._by_reason: Counter[str] = Counter()
        self._latency = [0] * (len(LATENCY_BUCKETS_S) + 1)
        self._latency_sum = 0.0
        self._key_ip: dict[str, str] = {}
        self._keys_max = crawler.cfg.frontier.key_states_max
        self._key_origins: OrderedDict[str, dict[str, None]] = OrderedDict()
        self._ip_starts: dict[str, deque[float]] = {}
        self._ip_window_s = ip_window_s
        self._closed = False
        self._memo = _Memo(crawler.clock.now)
        self.health = HealthWatch(crawler, out=self._out)
        for d in list(crawler.batch.decisions):   # (url, key, via, at, state, reason, detail, depth)
            self._note_decision(d[0], d[1], d[5], d[6], d[3])
        crawler.observers.append(self)

    def _freshness(self, now: float) -> dict:
        """Per tier, p50/p90 of the time since each URL's last fetch (recrawl intents)."""
        recrawl = getattr(self._c, "recrawl", None)
        if recrawl is None or recrawl.scheduler is None:
            return {}
        return {str(tier): {"0.5": p50, "0.9": p90}
                for tier, (p50, p90) in enumerate(recrawl.scheduler.age_quantiles(now)) if p50 is not None}

    def _freshness_with_sample(self, now: float) -> dict:
        out = self._freshness(now)
        sample = self.health.sample_freshness(now)
        if sample:
            out["sample"] = sample
        return out

    def close(self) -> None:
        """Stop observing."""
        if self._closed:
            return
        self._closed = True
        if self in self._c.observers:
            self._c.observers.remove(self)

    # ---- what is observed (the crawler's observer hooks) ----------------------------

    def on_decision(self, url: str, key: str, reason, detail: str, at: float) -> None:
        self._note_decision(url, key, reason, detail, at)

    def on_request(self, url: str, ip: str) -> None:
        self._request_started(url, ip)

    def on_response(self, result) -> None:
        self._request_done(result)
        self.health.response(result, self._c.clock.now())

    def on_queued(self, url: str, now: float) -> None:
        self.health.queued(url, now)

    def on_admitted(self, key: str, now: float) -> None:
        self.health.admitted(key, now)

    def on_parsed(self, url: str, now: float) -> None:
        self.health.parsed(url, now)

    def _note_decision(self, url: str, key: str, reason, detail: str, at: float) -> None:
        reason = str(reason)
        self._by_reason[reason] += 1
        self._recent.append({"url": url, "reason": reason, "detail": detail, "at": at, "key": key})

    def _request_started(self, url: str, ip: str) -> None:
        try:
            o = split_origin(url)
            key = politeness_key(o.host, self._key_mode)
        except ValueError:
            return
        key_origins = self._key_origins
        key_origins.setdefault(key, {})[str(o)] = None
        key_origins.move_to_end(key)   # most recent last: the oldest key is forgotten first
        if len(key_origins) > self._keys_max:   # bounded like the crawl's key state (runtime/keymemory)
            gone, _ = key_origins.popitem(last=False)
            self._key_ip.pop(gone, None)
        if ip:
            self._key_ip[key] = ip
            now = self._c.clock.now()
            starts = self._ip_starts.setdefault(ip, deque(maxlen=IP_STARTS_MAX))
            starts.append(now)
            self._prune_ip(ip, now)

    def _request_done(self, result) -> None:
        elapsed = max(0.0, float(getattr(result, "elapsed_s", 0.0) or 0.0))
        self._latency[bisect.bisect_left(LATENCY_BUCKETS_S, elapsed)] += 1
        self._latency_sum += elapsed

    def _prune_ip(self, ip: str, now: float) -> None:
        starts = self._ip_starts.get(ip)
        while starts and starts[0] <= now - self._ip_window_s:
            starts.popleft()
        if starts is not None and not starts:
            del self._ip_starts[ip]

    # ---- StatusSource --------------------------------------------------------------

    def snapshot(self, now: float) -> dict:
        c = self._c
        s = c.stats
        ready, waiting, leased = self._memo.get("counts", lambda: c.frontier.counts(now))
        delays, backing_off = self._memo.get("delays", lambda: self._delays(now))
        counts = [0] * len(self._latency)
        running = 0
        for i, n in enumerate(self._latency):
            running += n
            counts[i] = running
        decisions = self._decision_counts(s.decisions)
        return {
            **self._memo.get("health", lambda: self.health.snapshot(now, decisions)),
            "now": now,
            "started_at": s.started_at or None,
            "fetches": {"page": s.fetched + s.errors, "robots": s.robots_fetched,
                        "soft404_probe": s.probes_fetched},
            "fetches_by_reason": dict(s.by_reason) or {"discovery": 0},
            "http_responses": {str(k): v for k, v in sorted(s.status.items())},
            "bytes_fetched": s.bytes,
            "decisions": decisions,
            "errors": s.errors,
            "retries": s.retries,
            "links_duplicate": s.duplicates,
            "extract_failures": s.extract_failed,
            "in_flight": s.in_flight,
            "frontier": {"queued_urls": len(c.frontier) + len(c.overflow), "leased_urls": c.frontier.leased_count,
                         "store_only_urls": len(c.overflow),
                         "hosts": {"ready": ready, "waiting": waiting, "leased": leased}},
            "hosts_backing_off": backing_off,
            "host_delay_s": _quantiles(delays),
            "ip_request_rate_max": self._ip_rate_max(now),
            "dns_cache_hit_ratio": _hit_ratio(c.resolver),
            **_dns(c.resolver),
            "host_failures": dict(s.host_failures),
            "hosts_health": self._memo.get("health", self._health_counts),
            "fetch_latency_s": {"le": list(LATENCY_BUCKETS_S), "counts": counts, "sum": self._latency_sum,
                                "count": running},
            "seen": {"bloom_fill_ratio": c.seen.fill_ratio, "lookups": c.seen.lookups,
                     "false_positives": c.seen.false_positives},
            "robots_origins": self._memo.get("robots", self._robots_counts),
            "dup_ratio": {"exact": self._page_ratio("exact_dup"), "near": self._page_ratio("near_dup")},
            "trap_suspects_open": len(self._suspects()),
            "soft404_ratio": self._page_ratio("soft404"),
            "freshness_age_s": self._memo.get("freshness", lambda: self._freshness_with_sample(now)),
            "frontier_disk_bytes": self._disk_bytes(),
            "budget_left_pages": c.budget_left(),
            "render": c.renders.snapshot() if c.renders is not None else None,
            "monitor": c.monitor.snapshot(),
            "consumers": c.consumers.metrics() if c.consumers.enabled else None,
            "recrawl_period": _period_parts(getattr(c, "recrawl", None)),
            **(self._extra() if self._extra is not None else {}),
        }

    def hosts(self, offset: int, limit: int, sort: str, desc: bool, query: str) -> tuple[int, list[dict]]:
        now = self._c.clock.now()
        pol = self._c.politeness
        suspects = self._suspects_by_key()
        q = query.lower()
        match = (lambda k: q in k or q in self._key_ip.get(k, "")) if q else None
        value = self._sort_value(sort, now, suspects)
        need = offset + limit
        total, chosen = self._memo.get(("hosts", sort, desc, q, need),
                                       lambda: select_keys(pol.known_keys(), value, need, desc, match))
        return total, [self._row(k, now, suspects) for k in chosen[offset:]]

    def decisions(self, limit: int) -> list[dict]:
        n = len(self._recent)
        return [dict(self._recent[i]) for i in range(n - 1, max(-1, n - 1 - limit), -1)]

    def review_queue(self) -> list[dict]:
        return [{"key": s.key, "rule": s.rule, "scope": s.scope, "evidence": s.evidence, "since": s.since}
                for s in self._suspects()]

    async def explain(self, url: str) -> dict:
        pending = [dict(d) for d in self._recent if d["url"] == url]
        result = await asyncio.to_thread(self._explain_stored, url)
        result["recent_decisions"] = pending
        for f in result.get("fetches", ()):
            f["replay"] = replay_link(f["url"], f["warc"], f["at"]) if f["kind"] == "page" else ""
        return result

    # ---- the crawl folder's views (as `courtly serve` has them; store reads in a thread) ----

    def info(self) -> dict:
        return {"mode": "live", "out": str(self._out), "replay": "record", "views": ["urls", "timeline", "capture"]}

    async def urls(self, *, state: str | None, reason: str | None, host: str | None, offset: int,
                   limit: int) -> tuple[int, list[dict]]:
        return await asyncio.to_thread(lambda: url_page(self._out, state=state, reason=reason, host=host,
                                                        offset=offset, limit=limit))

    async def timeline(self, buckets: int) -> dict:
        return await asyncio.to_thread(timeline_of, self._out, buckets)

    async def capture(self, url: str, warc: str):
        return await asyncio.to_thread(capture_file, self._out, url, warc)

    # ---- helpers -------------------------------------------------------------------

    def _explain_stored(self, url: str) -> dict:
        from courtly.runtime.report import explain

        if self._out is None or not (self._out / "crawl.db").exists():
            return {"url": url, "found": False, "note": "the crawl database does not exist yet"}
        text, found = explain(self._out, url, as_json=True)
        data = json.loads(text)
        data["found"] = found
        return data

    def _decision_counts(self, total: int) -> dict[str, int]:
        counts = dict(sorted(self._by_reason.items()))
        missing = total - sum(counts.values())
        if missing > 0:   # attached after some decisions were committed
            counts["unknown"] = counts.get("unknown", 0) + missing
        return counts

    def _delays(self, now: float) -> tuple[list[float], int]:
        """Delays of keys with work (queued or leased) and how many keys back off."""
        pol, fr = self._c.politeness, self._c.frontier
        delays, backing = [], 0
        for k in pol.known_keys():
            st = pol.key(k)   # known: no state is created
            if st.backoff_reason or st.backoff_until > now:
                backing += 1
            if fr.queued_for(k) or fr.is_leased(k):
                delays.append(st.delay_s)
        return delays, backing

    def _health_counts(self) -> dict[str, int]:
        """Keys failing, parked, paused (bans) or down (core/health.py)."""
        pol = self._c.politeness
        counts = Counter(str(pol.key(k).health) for k in pol.known_keys())
        return {h: counts.get(h, 0) for h in ("failing", "parked", "paused", "down")}

    def _ip_rate_max(self, now: float) -> float:
        for ip in list(self._ip_starts):
            self._prune_ip(ip, now)
        busiest = max((len(d) for d in self._ip_starts.values()), default=0)
        return busiest / self._ip_window_s

    def _robots_counts(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for origins in self._key_origins.values():
            for o in origins:
                phase = str(self._c.robots.phase(o))
                if phase != "absent":
                    counts[phase] += 1
        return dict(sorted(counts.items()))

    def _robots_of(self, key: str) -> str:
        phases = [str(self._c.robots.phase(o)) for o in self._key_origins.get(key, ())]
        if not phases:
            return ""
        worst = min(phases, key=lambda p: _ROBOTS_ORDER.get(p, 9))
        return worst if len(phases) == 1 else f"{worst} ({phases.count(worst)} of {len(phases)})"

    def _suspects(self) -> list:
        """Open trap suspicions (the budget defence's, when the crawler has one)."""
        budget = getattr(self._c, "budget", None)
        if not hasattr(budget, "suspects"):
            return []
        return self._memo.get("suspects", lambda: list(budget.suspects()))

    def _page_ratio(self, what: str) -> float:
        """Share of 2xx page responses the budget defence counted as `what`."""
        counts = getattr(getattr(self._c, "budget", None), "counts", None) or {}
        ok = sum(n for status, n in self._c.stats.status.items() if 200 <= status < 300)
        return counts.get(what, 0) / ok if ok else 0.0

    def _suspects_by_key(self) -> dict[str, str]:
        out: dict[str, list[str]] = {}
        for s in self._suspects():
            out.setdefault(s.key, []).append(s.rule)
        return {k: ", ".join(v) for k, v in out.items()}

    def _budget_left(self, key: str, now: float) -> int | None:
        """New URLs `key` may still admit today, when the trap guard can say."""
        traps = getattr(getattr(self._c, "budget", None), "traps", None)
        fn = getattr(traps, "budget_left", None)
        return fn(key, now) if fn is not None else None

    def _next_at(self, st) -> float:
        return max(st.next_fetch_at, st.backoff_until, self._c.politeness.not_before)

    def _sort_value(self, sort: str, now: float, suspects: dict[str, str]) -> Callable[[str], Any]:
        pol, fr = self._c.politeness, self._c.frontier
        if sort == "key":
            return lambda k: k
        if sort == "ip":
            return lambda k: self._key_ip.get(k) or None
        if sort == "delay_s":
            return lambda k: pol.key(k).delay_s
        if sort == "backoff":
            return lambda k: pol.key(k).backoff_until if pol.key(k).backoff_reason else None
        if sort == "robots":
            return lambda k: self._robots_of(k) or None
        if sort == "queued":
            return fr.queued_for
        if sort == "next_fetch_at":
            return lambda k: self._next_at(pol.key(k))
        if sort == "budget_left":
            return lambda k: self._budget_left(k, now)
        if sort == "trap":
            return lambda k: suspects.get(k)
        if sort == "fetches":
            return lambda k: pol.key(k).fetches
        raise ValueError(f"unknown sort column {sort!r}")

    def _row(self, key: str, now: float, suspects: dict[str, str]) -> dict:
        st = self._c.politeness.key(key)
        backing = bool(st.backoff_reason) or st.backoff_until > now
        return {
            "key": key,
            "ip": self._key_ip.get(key, ""),
            "delay_s": st.delay_s,
            "backoff": (st.backoff_reason or "back-off") if backing else "",
            "backoff_until": st.backoff_until if st.backoff_until > now else None,
            "robots": self._robots_of(key),
            "queued": self._c.frontier.queued_for(key),
            "leased": self._c.frontier.is_leased(key),
            "next_fetch_at": self._next_at(st),
            "budget_left": self._budget_left(key, now),
            "trap": suspects.get(key, ""),
            "fetches": st.fetches,
            "crawl_delay_s": st.crawl_delay_s,
        }

    def _disk_bytes(self) -> int:
        total = 0
        if self._out is None:
            return total
        for name in ("crawl.db", "crawl.db-wal"):
            try:
                total += (self._out / name).stat().st_size
            except OSError:
                pass
        return total


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    if len(values) == 1:
        return {"0.5": values[0], "0.9": values[0]}
    q = statistics.quantiles(values, n=10, method="inclusive")
    return {"0.5": statistics.median(values), "0.9": q[8]}


def _dns(resolver) -> dict:
    """The resolver's lookup latency histogram and failures (shell/resolver.py), if it keeps them."""
    stats = getattr(resolver, "stats", None)
    counts = getattr(stats, "latency_counts", None)
    if not counts:
        return {}
    return {"dns_latency_s": {"le": list(DNS_LATENCY_BUCKETS_S), "counts": list(counts),
                              "sum": stats.latency_sum_s, "count": counts[-1]},
            "dns_failures": {"failed": stats.failures - stats.stale, "stale": stats.stale}}


def _hit_ratio(resolver) -> float:
    stats = getattr(resolver, "stats", None)
    ratio = getattr(stats, "hit_ratio", None)
    return float(ratio) if isinstance(ratio, (int, float)) else 0.0


def _period_parts(recrawl) -> dict | None:
    """The last recrawl period's budget by part (None before the first plan)."""
    rows = getattr(recrawl, "periods", None)
    if not rows:
        return None
    p = rows[-1]
    return {"budget": p["budget"], "discovery": p["discovery_spent"], "recrawls": p["granted"],
            "flowed_back": p["flowed_back"], "left": p["left"]}
