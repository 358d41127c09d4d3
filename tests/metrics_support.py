"""Helpers for the tests that scrape a live crawl's /metrics: the seeds' E.1
list mapped to courtly's names, the status URL a crawl or worker prints, and
a bounded wait for a scrape that holds every name.

Used by tests/e2e/test_metrics_e1.py and tests/e2e/test_prometheus.py."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path
from typing import Callable

from prometheus_client.parser import text_string_to_metric_families

# The seeds' E.1 list (000, appendix E) -> (family, a label set one sample must carry).
E1: dict[str, tuple[str, dict[str, str]]] = {
    "crawler.freshness_age_p90{tier}": ("courtly_freshness_age_seconds", {"quantile": "0.9"}),
    "crawler.coverage_sample_hit_ratio": ("courtly_coverage_sample_hit_ratio", {}),
    "crawler.fetches_by_reason{discovery|recrawl|feed}": ("courtly_fetches_by_reason", {"reason": "discovery"}),
    "crawler.budget_denied{tier}": ("courtly_budget_denied", {"tier": "discovery"}),
    "crawler.host_delay_p50": ("courtly_host_delay_seconds", {"quantile": "0.5"}),
    "crawler.ip_request_rate_max": ("courtly_ip_request_rate_max", {}),
    "crawler.http_status_ratio{status}": ("courtly_http_status_ratio", {"status": "200"}),
    "crawler.dns_cache_hit_ratio": ("courtly_dns_cache_hit_ratio", {}),
    "crawler.fetch_latency_p99": ("courtly_fetch_latency_seconds", {"le": "+Inf"}),
    "frontier.disk_used_pct": ("courtly_frontier_disk_used_pct", {}),
    "crawler.dup_ratio{exact}": ("courtly_dup_ratio", {"kind": "exact"}),
    "crawler.dup_ratio{near}": ("courtly_dup_ratio", {"kind": "near"}),
    "crawler.trap_suspects_open": ("courtly_trap_suspects_open", {}),
    "crawler.soft404_ratio": ("courtly_soft404_ratio", {}),
    "abuse.complaints_open": ("courtly_abuse_complaints_open", {}),
    "policy.takedown_propagation_age_p99": ("courtly_policy_takedown_propagation_age_seconds", {"le": "+Inf"}),
}
# From the seeds' failure sections (section 4), those this branch provides.
FAILURE_TABLE: dict[str, tuple[str, dict[str, str]]] = {
    "crawler.host_new_url_rate{host}": ("courtly_host_new_url_rate", {}),
    "fetch.body_bytes_p99": ("courtly_fetch_body_bytes", {"le": "+Inf"}),
    "parser.oom_restarts": ("courtly_parser_restarts", {}),
    "crawler.dns_latency_p99": ("courtly_dns_latency_seconds", {"le": "+Inf"}),
}
# host_dup_ratio needs 20 judged pages on one key, which a small simulated web
# may not give: unit-tested instead.
STATUS_LINE = re.compile(r"status page and /metrics on (http://\S+/)")


def status_url(read_text: Callable[[], str], alive: Callable[[], bool], timeout: float = 60) -> str:
    """The URL a crawl or worker prints when its status server is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = STATUS_LINE.search(read_text())
        if m:
            return m.group(1)
        if not alive():
            raise AssertionError("the process ended before its status server started:\n" + read_text()[-3000:])
        time.sleep(0.05)
    raise AssertionError(f"no status server line in {timeout} s:\n" + read_text()[-3000:])


def scrape(url: str) -> dict[str, list]:
    """family name -> samples of one /metrics scrape."""
    with urllib.request.urlopen(url + "metrics", timeout=10) as r:
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def missing(families: dict[str, list], wanted: dict[str, tuple[str, dict[str, str]]]) -> list[str]:
    """The seed names of `wanted` with no sample in `families`."""
    out = []
    for seed, (name, labels) in wanted.items():
        if not any(labels.items() <= s.labels.items() for s in families.get(name, ())):
            out.append(seed)
    return out


def wait_for_all(url: str, wanted: dict, alive: Callable[[], bool], timeout: float = 90) -> dict[str, list]:
    """Scrape until one scrape holds every name of `wanted` (bounded)."""
    deadline = time.monotonic() + timeout
    last: list[str] = list(wanted)
    while time.monotonic() < deadline and alive():
        try:
            fams = scrape(url)
        except OSError:
            break               # the server went away with its crawl
        last = missing(fams, wanted)
        if not last:
            return fams
        time.sleep(0.1)
    raise AssertionError(f"never in one scrape: {last}")


def read_file(path: Path) -> Callable[[], str]:
    return lambda: path.read_text(errors="replace") if path.exists() else ""
