"""A takedown during a three-worker crawl, judged from the simulated web's side.

Three `courtly worker` processes crawl the simulated web on a throwaway
PostgreSQL. Once the servers have seen requests of the domain media0.test
(two hosts), a purge of the domain is recorded in the shared store, as
`courtly purge --db` does (PostgresStore's `add_purge`). Every worker takes it
up at its next commit (`store.commit_interval_s`, 0.2 s here) and logs the
instant; the test then checks, from the request log, that after that instant
no worker asked for anything of the domain but the requests it named as
already in flight, that the other domains were still crawled, and that the
store holds the domain's URLs as skipped/purged. The time from record to
effect is printed per worker, never asserted (no wall-clock thresholds).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import asyncpg
import pytest

from courtly.sim.reqlog import load_log
from dist_support import Cluster, agent_of, write_dist_config
from pg_support import pg_fixture

pytestmark = pytest.mark.slow

postgres = pg_fixture(scope="module")

SIM_ARGS = ["--profile", "demo", "--hosts", "8", "--ips", "4", "--pages-per-host", "25", "--seed", "3"]
WORKERS = ("w1", "w2", "w3")
DOMAIN = "media0.test"
PURGE_AFTER_REQUESTS = 30


def _in_domain(host_or_url: str) -> bool:
    host = host_or_url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return host == DOMAIN or host.endswith("." + DOMAIN)


def _requests(web) -> list[dict]:
    try:
        with open(web.log_file, "rb") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def _record_purge(dsn: str) -> tuple[int, float]:
    """`courtly purge --db DSN --domain media0.test`, as an operator runs it: (purge id, recorded at)."""
    proc = subprocess.run([sys.executable, "-m", "courtly", "purge", "--db", dsn, "--domain", DOMAIN,
                           "--reason", "e2e takedown", "--json"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(proc.stdout)
    return stored["purge_id"], stored["recorded_at"]


def _db(dsn: str, sql: str) -> list:
    async def go():
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetch(sql)
        finally:
            await conn.close()
    return asyncio.run(go())


@pytest.fixture(scope="module")
def purged(postgres, tmp_path_factory):
    from courtly.runtime.demo import simweb_process

    tmp = tmp_path_factory.mktemp("dpurge")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        hosts = json.loads(web.manifest_file.read_text())["hosts"]
        assert {"www.media0.test", "news.media0.test"} <= set(hosts), "the web must have the domain's hosts"
        c = Cluster(postgres.create_database(), web, tmp, write_dist_config(tmp / "dist.toml"), str(tmp / "out"))
        try:
            c.submit()
            for w in WORKERS:
                c.start(w)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                seen = _requests(web)
                if len(seen) >= PURGE_AFTER_REQUESTS and any(_in_domain(r["host"]) for r in seen):
                    break
                assert any(p.poll() is None for p in c.procs.values()), "the workers ended before the purge"
                time.sleep(0.05)
            else:
                raise AssertionError("the crawl never reached the domain")
            purge_id, recorded_at = _record_purge(c.dsn)
            codes = c.wait()
            assert codes == {w: 0 for w in WORKERS}, {w: c.tail(w) for w in WORKERS}
            time.sleep(1.2)   # the server flushes its log every second
            yield {"cluster": c, "purge_id": purge_id, "recorded_at": recorded_at,
                   "requests": load_log(web.log_file)}
        finally:
            c.stop_all()


def _applied(purged, worker: str) -> dict:
    (applied,) = [e for e in purged["cluster"].log_events(worker)
                  if e.get("event") == "purge_applied" and e["purge_id"] == purged["purge_id"]]
    return applied


def test_every_worker_stops_requesting_the_purged_domain_once_its_next_commit_takes_the_purge_up(purged):
    took = {}
    for w in WORKERS:
        applied = _applied(purged, w)
        assert applied["applied_at"] >= purged["recorded_at"] and not applied["at_start"]
        in_flight = {u.split("://", 1)[1].split("/", 1)[1] for u in applied["in_flight"]}
        mine = [r for r in purged["requests"] if r.agent == agent_of(w) and _in_domain(r.host)]
        late = [r for r in mine if r.arrived_at > applied["applied_at"]]
        assert all(r.path.lstrip("/") in in_flight for r in late), (w, [(r.host, r.path) for r in late])
        assert len(late) <= len(in_flight)
        took[w] = applied["applied_at"] - purged["recorded_at"]
    print("\npurge to effect, per worker: " + ", ".join(f"{w} {s:.3f} s" for w, s in took.items()))
    ours = [r for r in purged["requests"] if _in_domain(r.host)]
    assert [r for r in ours if r.arrived_at < purged["recorded_at"]], "the domain was crawled before the purge"
    last = max(_applied(purged, w)["applied_at"] for w in WORKERS)
    others = [r for r in purged["requests"] if not _in_domain(r.host) and r.arrived_at > last]
    assert others, "the crawl went on with the other domains"


def test_the_shared_store_holds_every_url_of_the_domain_as_purged_and_none_queued(purged):
    dsn = purged["cluster"].dsn
    rows = [(u, s, r) for u, s, r in _db(dsn, "SELECT url, state, reason FROM urls") if _in_domain(u)]
    assert rows
    assert {(s, r) for _, s, r in rows} == {("skipped", "purged")}, sorted(rows)[:10]
    assert _db(dsn, "SELECT count(*) FROM urls WHERE state = 'queued'")[0][0] == 0
    (applied_at,) = _db(dsn, f"SELECT applied_at FROM purges WHERE id = {purged['purge_id']}")[0]
    assert applied_at is not None and applied_at >= purged["recorded_at"]
