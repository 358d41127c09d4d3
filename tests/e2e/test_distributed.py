"""Distributed mode end to end: three `courtly worker` processes on a throwaway
PostgreSQL crawl the simulated web, judged from the server's request log.

Every test asserts the same invariants from the server's side: zero
politeness violations per key and per IP across all workers, every reachable
allowed page fetched at least once, and duplicate fetches counted (printed,
allowed: fetching is at-least-once). The fault tests add one fault each: a
worker killed with SIGKILL, a worker frozen with SIGSTOP past its lease, and
PostgreSQL restarted mid-crawl.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from courtly.core.urls import partition_of, politeness_key
from courtly.sim.check import check_log, find_duplicate_fetches
from courtly.sim.manifest import web_from_manifest
from courtly.sim.reqlog import load_log
from crawl_support import FLUSH_MARKER_AGENT, settle_log
from dist_support import (CRAWL_DELAY_S_MAX, DELAY_S, PARTITIONS, TTL_S, Cluster, agent_of,
                          wait_for_log_lines, write_dist_config)
from dist_support import db_rows as _db
from pg_support import pg_fixture

pytestmark = pytest.mark.slow

postgres = pg_fixture(scope="module")
SERVER_LAG_S = 5.0   # how late a loaded simulated web may start a request's handler

SIM_ARGS = ["--profile", "demo", "--hosts", "12", "--pages-per-host", "20", "--seed", "12",
            "--robots-hang-s", "5"]
WORKERS = ("w1", "w2", "w3")


@pytest.fixture
def cluster(postgres, simweb_factory, tmp_path):
    web = simweb_factory(*SIM_ARGS)
    c = Cluster(postgres.create_database(), web, tmp_path, write_dist_config(tmp_path / "dist.toml"),
                str(tmp_path / "out"))
    c.submit()
    yield c
    c.stop_all()


def _invariants(c: Cluster) -> dict:
    """Zero politeness violations (key and IP, cluster-wide), full coverage,
    duplicates counted two ways; returns the report's facts."""
    settle_log(c.web)
    report = check_log(c.web.log_file, c.web.manifest_file, delay_s_min=DELAY_S,
                       crawl_delay_s_max=CRAWL_DELAY_S_MAX, duplicate_fetches_max=10**9, coverage_min=1.0)
    assert report.ok, report.render()
    assert report.coverage is not None and report.coverage.missing == ()
    records = load_log(c.web.log_file)
    web = web_from_manifest(json.loads(c.web.manifest_file.read_text()))
    dups = find_duplicate_fetches(records, web)
    by_pair = Counter()
    for items in dups.values():
        for _i, r in items:
            by_pair[r.agent.split("/")[1].split(" ")[0] if "/" in r.agent else "?"] += 1
    total = sum(len(v) for v in dups.values())
    assert total == sum(report.duplicate_fetches.values())
    print(f"\nduplicate fetches: {total} on {len(dups)} URL(s), by the worker that repeated them: "
          f"{dict(by_pair)}")
    for url, items in sorted(dups.items())[:20]:
        print(f"  {url}: {len(items) + 1} fetches")
    agents = Counter(r.agent for r in records if r.agent != FLUSH_MARKER_AGENT)
    assert set(agents) <= {agent_of(w) for w in WORKERS} | {agent_of("w4")}, agents
    return {"report": report, "records": records, "dups": dups, "agents": agents}


def _db_duplicates(dsn: str) -> int:
    """Duplicate fetches as the store recorded them (same rule as the checker:
    a fetch after a final answer)."""
    rows = _db(dsn, "SELECT url, status FROM fetches WHERE status != 0 ORDER BY url, at")
    n, last = 0, None
    for url, status in rows:
        key = url.split("://", 1)[1]
        key = key.split("/", 1)[0].split(":")[0] + "/" + key.split("/", 1)[1] if "/" in key else key
        if last is not None and last[0] == key and last[1] not in (429, 500, 502, 503, 504):
            n += 1
        last = (key, status)
    return n


def _no_queued(dsn: str) -> None:
    assert _db(dsn, "SELECT count(*) FROM urls WHERE state = 'queued'")[0][0] == 0


def test_three_workers_crawl_politely_and_completely(cluster):
    local_out = Path(cluster.out)
    cluster.out = f"file://{local_out}"      # WARC through fsspec (spool, then shipped)
    # leases far longer than a loaded machine can stall a worker: this test asserts that no lease
    # was lost, which must not depend on the scheduler (expiry has its own tests below)
    cluster.config = write_dist_config(cluster.tmp / "dist-long-lease.toml", ttl_s=30.0)
    for w in WORKERS:
        cluster.start(w)
    codes = cluster.wait()
    assert codes == {w: 0 for w in WORKERS}, {w: cluster.tail(w) for w in WORKERS}
    facts = _invariants(cluster)
    # the work was shared: every worker fetched pages
    for w in WORKERS:
        assert facts["agents"][agent_of(w)] > 10, facts["agents"]
    # nothing lost and every duplicate is in the store's fetch log too (counted correctly)
    _no_queued(cluster.dsn)
    for w in WORKERS:   # no URL had to be rescued by the safety net, no lease was lost
        last = [e["message"] for e in cluster.log_events(w) if "statements" in e.get("message", "")][-1]
        assert " 0 lost, 0 stale batches, 0 re-adopted" in last, last
    assert _db_duplicates(cluster.dsn) == sum(len(v) for v in facts["dups"].values())
    # leases: every partition was given back at the end, epochs moved with hand-overs
    leases = _db(cluster.dsn, "SELECT owner, epoch FROM partitions")
    assert len(leases) == PARTITIONS and all(o is None for o, _ in leases)
    assert _db(cluster.dsn, "SELECT count(*) FROM workers")[0][0] == 0   # deregistered
    # WARC: names carry the worker id, one CDXJ per file, every fetched page archived
    warcs = sorted((local_out / "warc").glob("*.warc.gz"))
    assert not [p for w in WORKERS for p in (cluster.tmp / f"spool-{w}").glob("*")]   # all shipped
    assert {w for w in WORKERS if any(f"-{w}-" in p.name for p in warcs)} == set(WORKERS)
    for p in warcs:
        assert Path(str(p) + ".cdxj").exists()
    from courtly.shell.warc import iter_records

    archived = {rec.warc_headers["WARC-Target-URI"] for p in warcs for rec in iter_records(p)
                if rec.rec_type in ("response", "revisit")}
    fetched = {r[0] for r in _db(cluster.dsn, "SELECT url FROM urls WHERE state = 'fetched'")}
    assert fetched and fetched <= archived


def test_status_shows_workers_and_sigterm_releases_everything(cluster):
    from crawl_support import run_courtly

    proc = cluster.start("w1")
    deadline = time.monotonic() + 60
    data = {}
    while time.monotonic() < deadline and proc.poll() is None:
        out = run_courtly("status", "--db", cluster.dsn, "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        if data["workers"] and data["workers"][0]["partitions"] == PARTITIONS:
            break
        time.sleep(0.2)
    assert data["workers"][0]["id"] == "w1" and data["workers"][0]["live"], data
    assert data["partitions"] == PARTITIONS and data["queued"] >= 0
    text = run_courtly("status", "--db", cluster.dsn).stdout
    assert "w1" in text and "64 partitions" in text and "queued URLs" in text
    proc.send_signal(signal.SIGTERM)                     # graceful: commit, release, deregister
    assert proc.wait(timeout=60) == 0, cluster.tail("w1")
    assert all(o is None for o, _ in _db(cluster.dsn, "SELECT owner, epoch FROM partitions"))
    assert _db(cluster.dsn, "SELECT count(*) FROM workers")[0][0] == 0
    bad = run_courtly("status", "--db", "postgresql://nobody@127.0.0.1:1/none")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "cannot reach PostgreSQL" in bad.stderr
    bad = run_courtly("status", "--db", "mysql://x")
    assert bad.returncode == 2 and "postgresql://" in bad.stderr


def test_killed_worker_partitions_move_after_lease_expiry_and_crawl_completes(cluster):
    for w in WORKERS:
        cluster.start(w)
    wait_for_log_lines(cluster.web, 120, procs=list(cluster.procs.values()))
    # w2's leases as the database has them just before the kill: w2 can only extend them after
    leases = {r["id"]: r["lease_until"] for r in _db(cluster.dsn, "SELECT id, lease_until FROM partitions "
                                                                   "WHERE owner = 'w2'")}
    killed_at = time.time()
    os.kill(cluster.procs["w2"].pid, signal.SIGKILL)
    codes = cluster.wait()
    assert codes["w1"] == 0 and codes["w3"] == 0 and codes["w2"] == -signal.SIGKILL
    facts = _invariants(cluster)
    _no_queued(cluster.dsn)
    # the server logs a request when its handler starts: one w2 sent just before the kill can be
    # logged later on a loaded machine, never seconds later
    late = [r for r in facts["records"] if r.agent == agent_of("w2") and r.arrived_at > killed_at + SERVER_LAG_S]
    assert late == []
    # w2's partitions were taken over by the others, only after its lease expired
    held = _held_by(cluster, "w2")
    assert held, "w2 held no partition when it was killed"
    took = {p: t for w in ("w1", "w3") for t, p in cluster.acquisitions(w) if t > killed_at and p in held}
    assert set(took) == held, sorted(held - set(took))
    # granted only once the lease had run out: the grant is logged after the database's answer
    granted = {p: e["at"] for w in ("w1", "w3") for e in cluster.log_events(w)
               if e.get("event") == "partitions_acquired" and e["asked_at"] > killed_at
               for p in e["partitions"] if p in held}
    early = sorted((p, granted[p], leases[p]) for p in granted if p in leases and granted[p] < leases[p])
    assert leases and early == [], early[:3]


def _held_by(cluster: Cluster, worker: str) -> set[int]:
    """The partitions `worker` holds by its own log (acquired and not released)."""
    held: set[int] = set()
    for e in cluster.log_events(worker):
        if e.get("event") == "partitions_acquired":
            held |= set(e["partitions"])
        elif e.get("event") == "partitions_released":
            held -= set(e["partitions"])
    return held


def _taken_over(cluster: Cluster, since: float) -> set[int]:
    """The partitions w1 and w3 acquired after `since`, once one of them is w2's:
    waited for (bounded, far past the lease TTL), not slept for, since a loaded
    machine makes the take-over late."""
    held = _held_by(cluster, "w2")
    deadline = time.monotonic() + TTL_S + 120.0
    while True:
        taken = {p for t, p in cluster.acquisitions("w1") + cluster.acquisitions("w3") if t > since}
        if taken & held or time.monotonic() > deadline:
            return taken
        time.sleep(0.2)


def test_frozen_worker_never_fetches_or_writes_for_partitions_it_lost(cluster):
    for w in WORKERS:
        cluster.start(w)
    wait_for_log_lines(cluster.web, 100, procs=list(cluster.procs.values()))
    frozen = cluster.procs["w2"]
    os.kill(frozen.pid, signal.SIGSTOP)
    stopped_at = time.time()
    taken = _taken_over(cluster, stopped_at)   # past its leases: the others take its partitions over
    before = {r[0] for r in _db(cluster.dsn, "SELECT id FROM fetches WHERE warc LIKE '%-w2-%'")}
    resumed_at = time.time()
    os.kill(frozen.pid, signal.SIGCONT)
    codes = cluster.wait()
    assert codes == {w: 0 for w in WORKERS}, cluster.tail("w2")
    facts = _invariants(cluster)
    _no_queued(cluster.dsn)
    assert taken, "the frozen worker's partitions were not taken over"
    # after it thawed, w2 fetched only for partitions it acquired again after thawing
    regained = sorted(cluster.acquisitions("w2"))
    mode = "domain"

    def part(host: str) -> int:
        return partition_of(politeness_key(host.split(":")[0], mode), PARTITIONS)

    for r in facts["records"]:
        if r.agent != agent_of("w2") or r.arrived_at < resumed_at:
            continue
        p = part(r.host)
        assert any(p == q and resumed_at <= t <= r.arrived_at for t, q in regained), \
            f"w2 fetched {r.host}{r.path} (partition {p}) at {r.arrived_at} without holding it"
    # and nothing it wrote after thawing was for a partition it had lost, unless regained first
    rows = _db(cluster.dsn, "SELECT id, url, at FROM fetches WHERE warc LIKE '%-w2-%'")
    for fid, url, at in rows:
        if fid in before:
            continue
        p = part(url.split("://", 1)[1].split("/", 1)[0])
        if p in taken:
            assert at >= resumed_at and any(q == p and resumed_at <= t <= at for t, q in regained), \
                f"a stale write landed: {url} fetched at {at} for lost partition {p}"
    lost = [e for e in cluster.log_events("w2") if e.get("event") == "partition_lost"]
    assert lost, "w2 must have noticed it lost its partitions"


def test_postgres_restart_mid_crawl_pauses_workers_and_loses_nothing(cluster, postgres):
    for w in WORKERS:
        cluster.start(w)
    wait_for_log_lines(cluster.web, 120, procs=list(cluster.procs.values()))
    postgres.restart(mode="fast", down_s=2.0)
    codes = cluster.wait()
    assert codes == {w: 0 for w in WORKERS}, {w: cluster.tail(w) for w in WORKERS}
    _invariants(cluster)
    _no_queued(cluster.dsn)
    events = [e.get("event") for w in WORKERS for e in cluster.log_events(w)]
    assert "store_unavailable" in events and "store_back" in events
