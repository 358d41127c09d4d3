"""Every metric of the seeds' E.1 list (and the failure-table metrics this
project provides) is exposed by a live crawl of the simulated web, read from
its /metrics in one scrape: on a single machine (`courtly crawl --status`) and
on a distributed worker (`courtly worker --status`) against PostgreSQL.
The names and their mapping: tests/metrics_support.py and docs/observability.md."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

pytest.importorskip("prometheus_client")

from crawl_support import courtly_cmd, crawl_args, write_config
from metrics_support import E1, FAILURE_TABLE, read_file, status_url, wait_for_all
from pg_support import pg_fixture

pytestmark = pytest.mark.slow

postgres = pg_fixture(scope="module")

SIM_ARGS = ["--profile", "demo", "--hosts", "12", "--pages-per-host", "30", "--seed", "12"]
# the coverage sample's ages by stage (the seeds' E.4), fed by the crawler's hooks
STAGES = {f"coverage age {stage}": ("courtly_coverage_sample_age_seconds", {"stage": stage})
          for stage in ("fetched", "parsed")}


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _check_sensible(fams) -> None:
    value = {s.name: s.value for f in fams.values() for s in f if not s.labels}
    assert 0.0 < value["courtly_coverage_sample_hit_ratio"] <= 1.0
    assert 0.0 < value["courtly_frontier_disk_used_pct"] <= 100.0
    assert value["courtly_abuse_complaints_open"] == 0.0
    ratios = [s.value for s in fams["courtly_http_status_ratio"]]
    assert sum(ratios) == pytest.approx(1.0)


def _passes_promtool(url: str) -> None:
    # Prometheus' own linter: names, types, and the "quantile" label only on summaries
    import shutil
    import urllib.request

    if shutil.which("promtool") is None:
        return   # tests/shell/test_alerts.py says why promtool tests skip
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "metrics", timeout=30) as r:
        text = r.read()
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert res.returncode == 0, (res.stdout + res.stderr).decode()[-3000:]


def test_a_single_machine_crawl_exposes_every_e1_metric(simweb_factory, tmp_path):
    web = simweb_factory(*SIM_ARGS)
    config = write_config(tmp_path / "crawl.toml")
    log = tmp_path / "crawl.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(courtly_cmd(*crawl_args(web, tmp_path / "out", config), "--status", "127.0.0.1:0"),
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        alive = lambda: proc.poll() is None   # noqa: E731
        url = status_url(read_file(log), alive)
        fams = wait_for_all(url, {**E1, **FAILURE_TABLE, **STAGES}, alive)
        _check_sensible(fams)
        _passes_promtool(url)
        assert "courtly_worker_partitions_held" not in fams            # a worker's only
    finally:
        _stop(proc)


def test_a_distributed_worker_exposes_every_e1_metric(postgres, simweb_factory, tmp_path):
    from dist_support import Cluster, write_dist_config

    web = simweb_factory(*SIM_ARGS)
    cluster = Cluster(postgres.create_database(), web, tmp_path, write_dist_config(tmp_path / "dist.toml"),
                      str(tmp_path / "out"))
    cluster.submit()
    proc = cluster.start("w1", "--status", "127.0.0.1:0")
    try:
        alive = lambda: proc.poll() is None   # noqa: E731
        url = status_url(read_file(tmp_path / "w1.log"), alive)
        fams = wait_for_all(url, {**E1, **FAILURE_TABLE, **STAGES, "leases": ("courtly_worker_partitions_held", {})},
                            alive)
        _check_sensible(fams)
        _passes_promtool(url)
    finally:
        cluster.stop_all()
