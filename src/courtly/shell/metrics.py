"""Prometheus metrics: their definitions and the exposition of one snapshot.

What it owns: the table `METRICS` (name, type, help, labels) that is the one
list of everything courtly exports, and the mapping from a status snapshot
(the dict `StatusSource.snapshot(now)` returns, see docs/observability.md) to
Prometheus metric families.

How it works: nothing is counted here. `SnapshotCollector` is a custom
collector registered in a private `CollectorRegistry` (one per status
server, never the process-global one); each scrape asks the source for a
fresh snapshot and turns it into families, so `/metrics` always equals what
the crawl holds at that instant and the status page (which reads the same
snapshot as JSON) shows the same figures.

Rules: names follow Prometheus conventions (prefix `courtly_`, snake_case,
base units: seconds and bytes, `_total` on counters); a metric whose feature
does not exist yet is exported as the source reports it (0, or absent when
the snapshot has no value); a missing or malformed snapshot key never raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["PREFIX", "METRICS", "MetricDef", "SnapshotCollector", "families", "new_registry", "exposition",
           "CONTENT_TYPE", "LATENCY_BUCKETS_S", "histogram_quantile"]

PREFIX = "courtly_"
CONTENT_TYPE = CONTENT_TYPE_LATEST
# Upper bounds of the fetch latency histogram (seconds); +Inf is implied.
LATENCY_BUCKETS_S: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Samples = list[tuple[tuple[str, ...], float]]


@dataclass(frozen=True, slots=True)
class MetricDef:
    name: str                    # full name, with prefix; counters end in _total
    kind: str                    # counter | gauge | histogram
    help: str
    labels: tuple[str, ...] = ()
    path: str = ""               # where the value lives in the snapshot (dotted)


def _m(name: str, kind: str, help: str, labels: tuple[str, ...] = (), path: str = "") -> MetricDef:
    return MetricDef(PREFIX + name, kind, help, labels, path)


METRICS: tuple[MetricDef, ...] = (
    _m("fetches_total", "counter", "Requests completed (with a response or a network error), by kind.",
       ("kind",), "fetches"),
    _m("fetches_by_reason_total", "counter", "Page requests by why the page was fetched "
       "(discovery, recrawl, feed).", ("reason",), "fetches_by_reason"),
    _m("http_responses_total", "counter", "Page responses by HTTP status code.", ("status",), "http_responses"),
    _m("bytes_fetched_total", "counter", "Body bytes received and archived (pages and robots.txt).",
       (), "bytes_fetched"),
    _m("decisions_total", "counter", "URLs not fetched, by recorded reason.", ("reason",), "decisions"),
    _m("errors_total", "counter", "Page requests that ended without an HTTP response.", (), "errors"),
    _m("retries_total", "counter", "Page requests queued again after a transient failure.", (), "retries"),
    _m("links_duplicate_total", "counter", "Links to URLs already seen (not queued again).",
       (), "links_duplicate"),
    _m("extract_failures_total", "counter", "Pages whose link extraction failed (dead letters).",
       (), "extract_failures"),
    _m("requests_in_flight", "gauge", "Requests on the wire now.", (), "in_flight"),
    _m("frontier_queued_urls", "gauge", "URLs queued in the frontier and not leased.", (), "frontier.queued_urls"),
    _m("frontier_store_only_urls", "gauge", "Queued URLs waiting in the store only (beyond the in-memory "
       "window; read back per key as it runs low). Included in frontier_queued_urls.", (),
       "frontier.store_only_urls"),
    _m("frontier_leased_urls", "gauge", "URLs in host batches handed to fetch tasks.", (), "frontier.leased_urls"),
    _m("frontier_hosts", "gauge", "Politeness keys with queued URLs, by state: ready (may be fetched now), "
       "waiting (for their next fetch time), leased (being fetched).", ("state",), "frontier.hosts"),
    _m("hosts_backing_off", "gauge", "Politeness keys in back-off after 429/503 (Retry-After or doubled delay).",
       (), "hosts_backing_off"),
    _m("host_delay_seconds", "summary", "Quantiles of the current per-key delay over keys with work.",
       ("quantile",), "host_delay_s"),
    _m("ip_request_rate_max", "gauge", "Request starts per second to the busiest resolved IP, over the last "
       "window (see docs).", (), "ip_request_rate_max"),
    _m("dns_cache_hit_ratio", "gauge", "Share of resolutions answered from the DNS cache.",
       (), "dns_cache_hit_ratio"),
    _m("dns_latency_seconds", "histogram", "Time a DNS lookup took (cache answers excluded).",
       (), "dns_latency_s"),
    _m("dns_failures_total", "counter", "DNS lookups that failed, by outcome: failed (the URL's lookup "
       "failed) or stale (the last good answer was served instead).", ("outcome",), "dns_failures"),
    _m("host_failures_total", "counter", "Requests that failed because of the host, by kind (connect, "
       "reset, timeout, tls, 5xx) or answers that were a ban (ban): each backs its key off.", ("kind",),
       "host_failures"),
    _m("hosts_unhealthy", "gauge", "Politeness keys by health: failing (backing off after failures), "
       "parked (down: probes only), paused (a ban or challenge: probes only) or down (past the horizon: "
       "URLs given up).", ("state",), "hosts_health"),
    _m("fetch_latency_seconds", "histogram", "Time from request start to the end of the response body.",
       (), "fetch_latency_s"),
    _m("seen_bloom_fill_ratio", "gauge", "Estimated share of bits set in the URL-seen Bloom filter "
       "(alarm above 0.5).", (), "seen.bloom_fill_ratio"),
    _m("seen_bloom_lookups_total", "counter", "URL-seen Bloom filter lookups.", (), "seen.lookups"),
    _m("seen_bloom_false_positives_total", "counter", "Bloom filter 'maybe' answers the exact store "
       "found to be new.", (), "seen.false_positives"),
    _m("robots_origins", "gauge", "Origins known to the robots.txt book, by phase.", ("state",), "robots_origins"),
    _m("dup_ratio", "gauge", "Share of fetched pages that duplicate an earlier page, exact or near.",
       ("kind",), "dup_ratio"),
    _m("trap_suspects_open", "gauge", "Open trap suspicions awaiting review.", (), "trap_suspects_open"),
    _m("soft404_ratio", "gauge", "Share of 200 answers classified as soft-404.", (), "soft404_ratio"),
    _m("freshness_age_seconds", "summary", "Time since the last fetch of each tracked URL (the age of the stored "
       "copy, not of the live page's change), p50/p90 per recrawl tier; tier=sample: the coverage sample.",
       ("tier", "quantile"), "freshness_age_s"),
    _m("frontier_disk_bytes", "gauge", "Size of the crawl database on disk (crawl.db plus its WAL).",
       (), "frontier_disk_bytes"),
    _m("recrawl_period_fetches", "gauge", "The last recrawl period's fetch budget (budget), the discovery "
       "fetches charged to it (discovery), the recrawls granted (recrawls), the discovery floor that flowed "
       "back (flowed_back) and what was left (left).", ("part",), "recrawl_period"),
    _m("budget_left_pages", "gauge", "Pages left under --max-pages (absent without a limit).",
       (), "budget_left_pages"),
    _m("crawl_start_time_seconds", "gauge", "Unix time the crawl (this process) started.", (), "started_at"),
    # the seeds' E.1 list and failure table (runtime/health.py)
    _m("coverage_sample_hit_ratio", "gauge", "Share of the coverage sample's URLs fetched at least once.",
       (), "coverage_sample.hit_ratio"),
    _m("coverage_sample_urls", "gauge", "URLs in the coverage sample, by state (fetched, unfetched).",
       ("state",), "coverage_sample.urls"),
    _m("coverage_sample_age_seconds", "summary", "Coverage sample age by stage: waiting = time since an "
       "unfetched URL was queued, fetched = since the last fetch, parsed = since the last parse; p50/p90.",
       ("stage", "quantile"),
       "coverage_sample.age_s"),
    _m("budget_denied_total", "counter", "Fetches a budget refused, by tier: recrawls the daily budget deferred "
       "(recrawl tier) and new URLs refused by a budget (tier=discovery).", ("tier",), "budget_denied"),
    _m("http_status_ratio", "gauge", "Share of page responses with each HTTP status code since the start.",
       ("status",), "http_status_ratio"),
    _m("host_new_url_rate", "gauge", "New URLs admitted per minute over the last 5 minutes, for the 10 "
       "busiest politeness keys.", ("key",), "host_new_url_rate"),
    _m("host_dup_ratio", "gauge", "Near-duplicate share of a key's last judged pages (the trap guard's "
       "window), for the 10 highest keys with 20 pages or more.", ("key",), "host_dup_ratio"),
    _m("fetch_body_bytes", "histogram", "Size of response bodies as received (pages and robots.txt).",
       (), "fetch_body_bytes"),
    _m("policy_takedown_propagation_age_seconds", "histogram", "Time from a purge being recorded to the "
       "crawl applying it.", (), "takedown_propagation_age_s"),
    _m("frontier_disk_used_pct", "gauge", "Percentage (0-100) of the crawl folder's file system in use.",
       (), "frontier_disk_used_pct"),
    _m("abuse_complaints_open", "gauge", "Abuse complaints recorded and not resolved.", (),
       "abuse_complaints_open"),
    _m("parser_restarts_total", "counter", "Link extraction workers lost (killed, crashed, over a limit) "
       "and replaced.", (), "parser_restarts"),
    _m("worker_partitions_held", "gauge", "Partitions this distributed worker holds a lease on and fetches "
       "for (absent on a single machine).", (), "worker_partitions_held"),
    # a distributed worker's own counters (runtime/worker_figures.py; absent on a single machine)
    _m("worker_claimed_urls_total", "counter", "URLs this worker claimed from its partitions' inboxes.",
       (), "worker.claimed"),
    _m("worker_batches_total", "counter", "Batches this worker wrote to the shared store.", (), "worker.batches"),
    _m("worker_stale_batches_total", "counter", "Batches refused for a stale lease epoch (partitions lost).",
       (), "worker.stale_batches"),
    _m("worker_dropped_urls_total", "counter", "URLs dropped here with a lost partition (still queued in "
       "the store for its next owner).", (), "worker.dropped_urls"),
    _m("worker_store_errors_total", "counter", "Calls to the shared store that failed (retried).", (),
       "worker.store_errors"),
    _m("worker_payload_lookups_total", "counter", "Payload digests looked up in the shared store (misses of "
       "this worker's exact-duplicate index).", (), "worker.payload_lookups"),
    _m("worker_payload_lookup_rounds_total", "counter", "Statements those lookups took (the digests of pages "
       "finishing within 20 ms share one).", (), "worker.payload_lookup_rounds"),
    _m("worker_payload_revisits_total", "counter", "Payloads another worker stored first, written here as "
       "revisit records.", (), "worker.payload_revisits"),
    _m("worker_ip_leases_held", "gauge", "IPs whose lease this worker holds now (it applies their per-IP "
       "limits; absent on a single machine).", (), "worker_ip_leases_held"),
    _m("worker_ip_leases_total", "counter", "IP leases this worker took.", (), "worker.ip_leases"),
    _m("worker_ip_waits_total", "counter", "Asks for an IP's lease refused: another worker held it (or it was "
       "just given back).", (), "worker.ip_waits"),
    _m("worker_ip_handovers_total", "counter", "IP leases this worker gave back because another worker wanted "
       "them (shared from then).", (), "worker.ip_handovers"),
    _m("worker_ip_slots_total", "counter", "Requests this worker sent with a slot of a shared IP (two "
       "statements each).", (), "worker.ip_slots"),
    # rendering ([render]; absent when it is off)
    _m("renders_total", "counter", "Renders of script shells, by outcome.", ("outcome",), "render.outcomes"),
    _m("render_seconds", "histogram", "Time a render took, subrequests included.", (), "render.render_s"),
    _m("render_budget_used_ratio", "gauge", "Renders per page fetch so far (render.share_max caps it).",
       (), "render.budget_used"),
    _m("render_budget_raw_total", "counter", "Shells parsed raw because the render budget or queue ran out.",
       (), "render.budget_raw"),
    _m("render_links_added_total", "counter", "Links queued that only a rendered DOM had.", (), "render.links_added"),
    _m("render_subrequests_total", "counter", "Subrequests of renders sent (through the crawl's rules).",
       (), "render.subrequests"),
    _m("render_subrequests_blocked_total", "counter", "Subrequests of renders refused, by reason.",
       ("reason",), "render.blocked"),
    _m("render_browser_restarts_total", "counter", "Browser restarts, by reason (renders, memory, crash, hung).",
       ("reason",), "render.restarts"),
    # the monitor intent (runtime/monitor); absent in other intents
    _m("monitor_watches", "gauge", "Watches in the list, by state (active, paused).", ("state",), "monitor.watches"),
    _m("monitor_checks_total", "counter", "Watch checks answered (2xx judged, 304 unchanged).", (), "monitor.checks"),
    _m("monitor_changes_total", "counter", "Real changes detected (change events).", (), "monitor.changes"),
    _m("monitor_webhook_deliveries_total", "counter", "Webhook deliveries by outcome (delivered, dead).",
       ("outcome",), "monitor.webhook"),
    # [[consumers]] (runtime/consumers); absent without consumers
    _m("consumer_fetches_total", "counter", "Requests delivered to each consumer (shared ones to each).",
       ("consumer",), "consumers.fetches"),
    _m("consumer_bytes_total", "counter", "Body bytes of the requests delivered to each consumer.",
       ("consumer",), "consumers.bytes"),
    _m("consumer_shared_fetches_total", "counter", "Deliveries of requests made for several consumers "
       "(or delivered from an earlier fetch).", ("consumer",), "consumers.shared"),
    _m("consumer_quota_denied_total", "counter", "Requests a consumer wanted and its quota or host share "
       "refused.", ("consumer",), "consumers.denied"),
    _m("consumer_billed_fetches_total", "counter", "Requests billed to each consumer (1/n of a request made "
       "for n consumers).", ("consumer",), "consumers.charged"),
    _m("consumer_quota_used_ratio", "gauge", "Share of its fetches_per_day a consumer has used today "
       "(absent for a consumer without a quota).", ("consumer",), "consumers.quota_used"),
    _m("consumer_cost_total", "counter", "Billed requests times the consumer's price_per_million / 1e6.",
       ("consumer",), "consumers.cost"),
)


def _get(snap: dict, path: str) -> Any:
    cur: Any = snap
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _samples(d: MetricDef, value: Any) -> Samples:
    """(label values, value) pairs for a scalar or a (nested) mapping."""
    if not d.labels:
        n = _number(value)
        return [] if n is None else [((), n)]
    out: Samples = []
    if not isinstance(value, dict):
        return out
    for k in sorted(value, key=str):
        v = value[k]
        if len(d.labels) == 2 and isinstance(v, dict):
            for k2 in sorted(v, key=str):
                n = _number(v[k2])
                if n is not None:
                    out.append(((str(k), str(k2)), n))
        elif len(d.labels) == 1:
            n = _number(v)
            if n is not None:
                out.append(((str(k),), n))
    return out


def _histogram(d: MetricDef, h: Any) -> HistogramMetricFamily | None:
    if not isinstance(h, dict):
        return None
    le, counts = list(h.get("le") or []), list(h.get("counts") or [])
    if len(counts) != len(le) + 1:
        return None
    buckets = [(_le(b), float(c)) for b, c in zip(le, counts)] + [("+Inf", float(counts[-1]))]
    return HistogramMetricFamily(d.name, d.help, buckets=buckets, sum_value=float(h.get("sum") or 0.0))


def _le(bound: float) -> str:
    return repr(float(bound))


def families(snap: dict) -> list[Metric]:
    """The metric families of one snapshot, in `METRICS` order."""
    out: list[Metric] = []
    for d in METRICS:
        value = _get(snap, d.path)
        if d.kind == "histogram":
            fam = _histogram(d, value)
            if fam is not None:
                out.append(fam)
            continue
        samples = _samples(d, value)
        if not samples:
            continue
        if d.kind == "summary":   # quantiles only (no _sum/_count): the "quantile" label is a summary's
            fam = Metric(d.name, d.help, "summary")
            for labels, v in samples:
                fam.add_sample(d.name, dict(zip(d.labels, labels)), v)
            out.append(fam)
            continue
        if d.kind == "counter":
            fam: Metric = CounterMetricFamily(d.name, d.help, labels=list(d.labels))
        else:
            fam = GaugeMetricFamily(d.name, d.help, labels=list(d.labels))
        for labels, v in samples:
            fam.add_metric(list(labels), v)
        out.append(fam)
    return out


class SnapshotCollector:
    """A custom collector: every scrape reads a fresh snapshot from `source`."""

    def __init__(self, snapshot: Callable[[], dict]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from families(self._snapshot())

    def describe(self) -> Iterable[Metric]:
        return ()  # no scrape at registration time


def new_registry(snapshot: Callable[[], dict]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition format."""
    return generate_latest(registry)


def histogram_quantile(q: float, le: list[float], counts: list[float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative `counts` (last is +Inf)."""
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, c in zip(list(le) + [math.inf], counts):
        if c >= rank:
            if math.isinf(bound):
                return float(le[-1]) if le else None
            if c == prev_count:
                return float(bound)
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (c - prev_count)
        prev_bound, prev_count = float(bound), float(c)
    return None
