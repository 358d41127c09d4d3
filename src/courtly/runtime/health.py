"""The operator's figures beyond the crawl's counters: the seeds' E.1 list and failure table.

What it owns: `HealthWatch`, the part of a status snapshot that the crawler
does not count itself (see docs/observability.md for each metric):

- the coverage sample (core/coverage): `coverage_sample` (hit ratio, URLs,
  age per stage) and the sample's freshness;
- `budget_denied` by tier: recrawls the daily budget deferred (recrawl tiers,
  from the scheduler's report) and new URLs a budget refused (`discovery`:
  decisions with reason `budget`);
- `http_status_ratio`: each page status code's share of page responses;
- `host_new_url_rate`: new URLs admitted per minute, the busiest keys;
- `host_dup_ratio`: near-duplicate share of a key's recent pages (the trap
  guard's window), the highest keys;
- `fetch_body_bytes`: a histogram of response body sizes;
- `takedown_propagation_age_s`: a histogram of purge record -> applied;
- `frontier_disk_used_pct`: the share of the crawl folder's file system in use;
- `abuse_complaints_open`: open rows of the crawl database's
  `abuse_complaints` table (0 when it has none or no such table);
- `parser_restarts`: extraction workers lost and replaced.
(A distributed worker's own figures, `worker_partitions_held` among them,
come from runtime/worker_figures.py: the engine does not know its leases.)

How it works: the crawl's hooks feed it (`queued`, `admitted`, `response`,
forwarded by `CrawlObserver`); the rest is read from the crawler at
snapshot time. Reads of the disk and the database are cached for
`DISK_CACHE_S`, so a busy scraper costs one `statvfs` and one indexed
count every few seconds.

Rules: read-only towards the crawl; bounded: the per-key windows hold keys
active in the last `RATE_WINDOW_S` only, and label sets are cut to the
`TOP_KEYS` highest keys (a label per host would be an unbounded series
count for Prometheus).
"""

from __future__ import annotations

import bisect
import os
import sqlite3
from collections import deque
from pathlib import Path
from typing import Callable

from courtly.config import ConfigError
from courtly.core.coverage import CoverageSample
from courtly.core.urls import UrlError, normalize_url

__all__ = ["HealthWatch", "read_canaries", "BODY_BYTES_BUCKETS", "PROPAGATION_BUCKETS_S", "TOP_KEYS", "RATE_WINDOW_S"]

# Upper bounds of the histograms; +Inf is implied.
BODY_BYTES_BUCKETS: tuple[float, ...] = (1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
                                         10485760.0)
PROPAGATION_BUCKETS_S: tuple[float, ...] = (1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 43200.0,
                                            72000.0, 86400.0, 172800.0)
TOP_KEYS = 10              # keys per labelled per-key gauge
RATE_WINDOW_S = 300.0      # host_new_url_rate averages over this window
BUCKET_S = 60.0
DUP_PAGES_MIN = 20         # a key needs this many judged pages before its dup ratio is shown
DISK_CACHE_S = 5.0
CANARIES_MAX = 1_000_000


def read_canaries(path: str, rules=None) -> tuple[str, ...]:
    """The normalised URLs of a canaries file (one a line, # comments);
    raises ConfigError naming the file and line of the first problem."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read coverage.canaries_file {p}: {getattr(e, 'strerror', None) or e}") from e
    out: dict[str, None] = {}
    for n, line in enumerate(lines, 1):
        raw = "" if line.lstrip().startswith("#") else line.strip()
        if not raw:
            continue
        try:
            out[normalize_url(raw, rules) if rules is not None else normalize_url(raw)] = None
        except UrlError as e:
            raise ConfigError(f"coverage.canaries_file {p}:{n}: not a URL to crawl ({e})") from None
        if len(out) > CANARIES_MAX:
            raise ConfigError(f"coverage.canaries_file {p}: more than {CANARIES_MAX:,} URLs")
    if not out:
        raise ConfigError(f"coverage.canaries_file {p} holds no URL")
    return tuple(out)


class _Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def add(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.sum += v

    def snapshot(self) -> dict:
        cumulative, running = [], 0
        for n in self.counts:
            running += n
            cumulative.append(running)
        return {"le": list(self.bounds), "counts": cumulative, "sum": self.sum, "count": running}


class HealthWatch:
    def __init__(self, crawler, *, out: Path | None) -> None:
        self._c = crawler
        self._out = out
        self._started_at = crawler.clock.now()
        cov = crawler.cfg.coverage
        canaries = read_canaries(cov.canaries_file, crawler.rules) if cov.canaries_file else ()
        self.sample = CoverageSample(cov.sample_size, canaries)
        self._new: dict[str, deque[list]] = {}      # key -> [[minute, count], ...]
        self._body = _Histogram(BODY_BYTES_BUCKETS)
        self._propagation = _Histogram(PROPAGATION_BUCKETS_S)
        self._purges_seen = 0
        self._cached: dict[str, tuple[float, object]] = {}

    # ---- hooks ---------------------------------------------------------------------

    def queued(self, url: str, now: float) -> None:
        self.sample.note_known(url, now)

    def admitted(self, key: str, now: float) -> None:
        minute = int(now // BUCKET_S)
        buckets = self._new.get(key)
        if buckets is None:
            buckets = self._new[key] = deque(maxlen=int(RATE_WINDOW_S // BUCKET_S) + 1)
        if buckets and buckets[-1][0] == minute:
            buckets[-1][1] += 1
        else:
            buckets.append([minute, 1])

    def parsed(self, url: str, now: float) -> None:
        self.sample.note_parsed(url, now)

    def response(self, result, now: float) -> None:
        self._body.add(float(len(getattr(result, "body", b"") or b"")))
        if getattr(result, "status", 0):
            self.sample.note_fetched(result.url, now)

    # ---- the snapshot part ---------------------------------------------------------

    def snapshot(self, now: float, by_reason: dict[str, int]) -> dict:
        cov = self.sample.figures(now)
        return {
            "coverage_sample": {
                "hit_ratio": cov.hit_ratio,
                "urls": {"fetched": cov.fetched, "unfetched": cov.sampled - cov.fetched},
                "age_s": {"waiting": _quantiles(cov.waiting_ages_s), "fetched": _quantiles(cov.fetch_ages_s),
                          "parsed": _quantiles(cov.parse_ages_s)},
            },
            "budget_denied": self._budget_denied(by_reason),
            "http_status_ratio": self._status_ratio(),
            "host_new_url_rate": self._new_url_rates(now),
            "host_dup_ratio": self._dup_ratios(),
            "fetch_body_bytes": self._body.snapshot(),
            "takedown_propagation_age_s": self._propagation_snapshot(),
            "frontier_disk_used_pct": self._cache("disk", now, self._disk_used_pct),
            "abuse_complaints_open": self._cache("abuse", now, self._abuse_open),
            "parser_restarts": self._parser_restarts(),
        }

    def sample_freshness(self, now: float) -> dict[str, float]:
        """p50/p90 of the time since the last fetch of sampled URLs (the
        `sample` tier of courtly_freshness_age_seconds)."""
        return _quantiles(self.sample.figures(now).fetch_ages_s)

    def _budget_denied(self, by_reason: dict[str, int]) -> dict[str, int]:
        out = {"discovery": int(by_reason.get("budget", 0))}
        for row in self._c.recrawl.report_rows():
            tier = str(row["tier"])
            out[tier] = out.get(tier, 0) + int(row["denied_budget"])
        return out

    def _status_ratio(self) -> dict[str, float]:
        status = self._c.stats.status
        total = sum(status.values())
        return {str(k): n / total for k, n in sorted(status.items())} if total else {}

    def _new_url_rates(self, now: float) -> dict[str, float]:
        oldest = int((now - RATE_WINDOW_S) // BUCKET_S) + 1
        span_min = max(1.0, min(RATE_WINDOW_S, now - self._started_at) / BUCKET_S)
        rates = {}
        for key in list(self._new):
            n = sum(c for minute, c in self._new[key] if minute >= oldest)
            if n:
                rates[key] = n / span_min
            else:
                del self._new[key]          # quiet for a whole window: forgotten
        top = sorted(rates.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_KEYS]
        return dict(top)

    def _dup_ratios(self) -> dict[str, float]:
        traps = getattr(getattr(self._c, "budget", None), "traps", None)
        if traps is None or not getattr(self._c.budget, "enabled", False):
            return {}
        shares = traps.near_dup_shares(DUP_PAGES_MIN)
        return dict(sorted(shares, key=lambda kv: (-kv[1], kv[0]))[:TOP_KEYS])

    def _propagation_snapshot(self) -> dict:
        applied = getattr(getattr(self._c, "takedowns", None), "applied", [])
        for entry in applied[self._purges_seen:]:
            self._propagation.add(max(0.0, float(entry["effect_s"])))
        self._purges_seen = len(applied)
        return self._propagation.snapshot()

    def _parser_restarts(self) -> int:
        stats = getattr(self._c.extractor, "stats", None)
        got = stats() if callable(stats) else stats
        return int(getattr(got, "workers_lost", 0) or 0)

    def _cache(self, name: str, now: float, compute: Callable[[], object]) -> object:
        hit = self._cached.get(name)
        if hit is not None and now - hit[0] < DISK_CACHE_S:
            return hit[1]
        value = compute()
        self._cached[name] = (now, value)
        return value

    def _disk_used_pct(self) -> float | None:
        if self._out is None:
            return None
        try:
            st = os.statvfs(self._out)
        except OSError:
            return None
        used = st.f_blocks - st.f_bfree
        usable = used + st.f_bavail      # as df: blocks reserved for root are not the crawl's
        return 100.0 * used / usable if usable else None

    def _abuse_open(self) -> int:
        db = self._out / "crawl.db" if self._out is not None else None
        if db is None or not db.exists():
            return 0
        try:
            conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True, timeout=0.5)
        except sqlite3.Error:
            return 0
        try:
            return int(conn.execute("SELECT count(*) FROM abuse_complaints WHERE resolved_at IS NULL").fetchone()[0])
        except sqlite3.Error:       # no such table (yet): no complaint recorded
            return 0
        finally:
            conn.close()


def _quantiles(ascending: tuple[float, ...]) -> dict[str, float]:
    """p50 and p90 of a sorted sequence (nearest rank), {} when empty."""
    if not ascending:
        return {}
    n = len(ascending)
    return {q: ascending[min(n - 1, int(float(q) * n))] for q in ("0.5", "0.9")}
