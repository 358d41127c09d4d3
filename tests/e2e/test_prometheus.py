"""A real Prometheus (Debian's `prometheus`) scrapes a live crawl of the
simulated web and evaluates the shipped alerting rules.

The server runs on loopback on a free port in a temp folder, scraping the
crawl's /metrics every second, with src/courtly/shell/alerts.yml loaded as
shipped except that every `for:` is cut to 2 s (a test cannot wait 15
minutes). Through its HTTP API the test checks that the seed metrics have
sensible values, and that `CourtlyRobotsFailuresRising` fires: one host of
the web answers its robots.txt with 500 (RFC 9309: unreachable, disallow
all), which makes it one failed origin of about a dozen. Every wait is a
bounded wait-for-condition; both processes are stopped by PID."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from importlib import resources
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from crawl_support import courtly_cmd, crawl_args, write_config
from metrics_support import read_file, status_url

PROMETHEUS = shutil.which("prometheus")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian package "
                                                             "prometheus; .ci/run installs it)")]

SIM_ARGS = ["--profile", "demo", "--hosts", "12", "--pages-per-host", "120", "--seed", "12"]
WAIT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base: str, path: str, **params) -> dict:
    url = f"{base}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]


def _wait(what: str, check, procs, timeout: float = WAIT_S):
    """Call `check` until it returns something truthy; bounded; fails if a process ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in procs.items():
            if p.poll() is not None:
                raise AssertionError(f"{name} ended (status {p.returncode}) while waiting for {what}")
        try:
            got = check()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"no {what} in {timeout:.0f} s")


def _scalar(base: str, query: str) -> float | None:
    result = _api(base, "query", query=query)["result"]
    return float(result[0]["value"][1]) if result else None


def _stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _rules_for_test(dest: Path) -> None:
    shipped = resources.files("courtly.shell").joinpath("alerts.yml").read_text()
    dest.write_text(re.sub(r"^(\s+)for: \S+$", r"\1for: 2s", shipped, flags=re.M))


def test_prometheus_scrapes_a_live_crawl_and_fires_the_robots_alert(simweb_factory, tmp_path):
    web = simweb_factory(*SIM_ARGS)
    manifest = json.loads(web.manifest_file.read_text())
    assert manifest["robots_variants"]["error_500"], "the simulated web must hold a host whose robots.txt fails"
    log = tmp_path / "crawl.log"
    with open(log, "wb") as fh:
        crawl = subprocess.Popen(
            courtly_cmd(*crawl_args(web, tmp_path / "out", write_config(tmp_path / "crawl.toml")),
                        "--status", "127.0.0.1:0"),
            stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    prom = None
    try:
        target = urllib.parse.urlsplit(status_url(read_file(log), lambda: crawl.poll() is None)).netloc
        _rules_for_test(tmp_path / "alerts.yml")
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files: [alerts.yml]\n"
            f"scrape_configs:\n  - job_name: courtly\n    static_configs:\n      - targets: ['{target}']\n")
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        with open(tmp_path / "prometheus.log", "wb") as fh:
            prom = subprocess.Popen(
                [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        procs = {"the crawl": crawl, "prometheus": prom}

        # the scrape works and the seed metrics have sensible values
        _wait("successful scrape", lambda: _scalar(base, 'up{job="courtly"}') == 1.0, procs)
        _wait("pages fetched", lambda: (_scalar(base, 'courtly_fetches_total{kind="page"}') or 0) > 0, procs)
        hit = _wait("coverage sample hits", lambda: _scalar(base, "courtly_coverage_sample_hit_ratio > 0"), procs)
        assert 0.0 < hit <= 1.0
        ok = _wait("2xx answers", lambda: _scalar(base, 'sum(courtly_http_status_ratio{status=~"2.."}) > 0'), procs)
        assert ok <= 1.0 + 1e-9
        disk = _scalar(base, "courtly_frontier_disk_used_pct")
        assert 0.0 < disk <= 100.0
        p99 = _wait("a latency p99", lambda: _scalar(
            base, "histogram_quantile(0.99, courtly_fetch_latency_seconds_bucket)"), procs)
        assert math.isfinite(p99) and 0.0 < p99 <= 60.0
        size_p99 = _scalar(base, "histogram_quantile(0.99, courtly_fetch_body_bytes_bucket)")
        assert 0.0 < size_p99 <= 2_000_000 * 4   # fetch.body_bytes_max of the test config, within a bucket
        assert _scalar(base, "courtly_abuse_complaints_open") == 0.0
        assert 0.0 <= _scalar(base, "courtly_dns_cache_hit_ratio") <= 1.0

        # the provoked alert: robots.txt failures past 5 % of origins
        def firing():
            alerts = _api(base, "alerts")["alerts"]
            return [a for a in alerts if a["labels"]["alertname"] == "CourtlyRobotsFailuresRising"
                    and a["state"] == "firing"]
        fired = _wait("CourtlyRobotsFailuresRising firing", firing, procs)
        assert fired[0]["labels"]["severity"] == "critical"
        failed = _scalar(base, 'courtly_robots_origins{state="failed"}')
        assert failed is not None and failed >= 1
        # a rule whose condition does not hold stays quiet
        rules = {r["name"]: r for g in _api(base, "rules")["groups"] for r in g["rules"]}
        assert rules["CourtlyBloomFillPastAlarm"]["state"] == "inactive"
        assert rules["CourtlyWorkerWithoutLeases"]["state"] == "inactive"   # no such series on one machine
    finally:
        if prom is not None:
            _stop(prom)
        _stop(crawl, signal.SIGINT)
