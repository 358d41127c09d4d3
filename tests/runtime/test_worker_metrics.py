"""A distributed worker's /metrics (`courtly worker --status`) carries its own
figures beside its engine's: the partitions it holds and its counters
(runtime/worker_figures.py), scraped over loopback from a real status
server and read with prometheus_client's parser (and promtool when
installed)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import urllib.request
from types import SimpleNamespace

import pytest

from courtly.config import Config
from courtly.core.lease import PartitionView
from courtly.runtime.wiring import status_server
from courtly.runtime.worker import Worker
from courtly.runtime.worker_figures import COUNTERS, render_counters, summed_counters, worker_figures
from clock_support import ManualClock

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from worker_fakes import OneRegionStore  # noqa: E402

T0 = 1_700_000_000.0


class _Pg(OneRegionStore):
    """What the metrics read: the partition count only."""


def _worker() -> Worker:
    return Worker(Config(), clock=ManualClock(T0), resolver=None, fetcher=None,
                  warc=SimpleNamespace(flush=lambda: None), store=_Pg(), extractor=None, worker_id="w1")


async def _scrape(w: Worker) -> str:
    server = status_server(w.engine, ("127.0.0.1", 0), extra=lambda: worker_figures(w))
    port = await server.start()
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return await asyncio.to_thread(
            lambda: opener.open(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode())
    finally:
        await server.stop()


def test_a_workers_metrics_carry_the_partitions_it_holds_and_its_counters():
    w = _worker()
    for p in (1, 5):
        w.own.views[p] = PartitionView.granted(p, 3, T0, w.own.terms)
    w.wstats.batches, w.wstats.stale_batches, w.wstats.claimed = 7, 1, 40
    w.payloads.stats.asked, w.payloads.stats.rounds, w.payloads.stats.found = 12, 4, 2
    w.wstats.ip_leases, w.wstats.ip_waits, w.wstats.ip_handovers, w.wstats.ip_slots = 9, 5, 3, 11
    w.slots._until.update({"192.0.2.1": T0 + 10, "192.0.2.2": T0 + 10})    # two leases held
    text = asyncio.run(asyncio.wait_for(_scrape(w), 60))
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    assert values["courtly_worker_partitions_held"] == 2
    assert values["courtly_worker_batches_total"] == 7
    assert values["courtly_worker_stale_batches_total"] == 1
    assert values["courtly_worker_claimed_urls_total"] == 40
    assert values["courtly_worker_payload_lookups_total"] == 12
    assert values["courtly_worker_payload_lookup_rounds_total"] == 4
    assert values["courtly_worker_payload_revisits_total"] == 2
    assert values["courtly_worker_ip_leases_held"] == 2
    assert (values["courtly_worker_ip_leases_total"], values["courtly_worker_ip_waits_total"],
            values["courtly_worker_ip_handovers_total"], values["courtly_worker_ip_slots_total"]) == (9, 5, 3, 11)
    assert values["courtly_errors_total"] == 0        # the engine's own figures are there too
    if shutil.which("promtool"):
        res = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True,
                             timeout=60)
        assert res.returncode == 0, (res.stdout + res.stderr).decode()[-3000:]


def test_status_sums_the_counters_each_worker_published_and_skips_an_unreadable_row():
    rows = {"worker_stats/a": '{"batches": 3, "payload_revisits": 1, "partitions": 4}',
            "worker_stats/b": '{"batches": 5, "claimed": 9}',
            "worker_stats/c": "not json"}
    d = summed_counters(rows)
    assert sorted(d["worker_counters"]) == ["a", "b"]
    assert d["worker_totals"]["batches"] == 8 and d["worker_totals"]["claimed"] == 9
    assert d["worker_totals"]["payload_revisits"] == 1
    assert set(d["worker_totals"]) == set(COUNTERS)
    assert "summed over 2 worker(s)" in render_counters(d)[0]
    assert "none published yet" in render_counters(summed_counters({}))[0]
