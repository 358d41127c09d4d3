"""A distributed `search` crawl recrawls changed pages, judged from the simulated web's side.

Three `courtly worker --intent search` processes crawl a simulated web whose
pages change (`--change-rate-per-s`) for a fixed time on a throwaway
PostgreSQL. Each worker plans the recrawls of the partitions it holds (their
change histories are in the shared store) and sends them as conditional GETs.
From the request log: recrawls came from the workers, unchanged pages answered
304, changed ones were fetched again in full, and politeness held per key and
per IP across the cluster.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from courtly.sim.check import check_log
from courtly.sim.reqlog import load_log
from crawl_support import CRAWL_DELAY_S_MAX, DELAY_S
from dist_support import Cluster, agent_of, write_dist_config
from pg_support import pg_fixture

pytestmark = pytest.mark.slow

postgres = pg_fixture(scope="module")

SIM_ARGS = ["--profile", "demo", "--hosts", "6", "--ips", "4", "--pages-per-host", "10", "--seed", "21",
            "--change-rate-per-s", "0.1"]
WORKERS = ("w1", "w2", "w3")
DURATION_S = 25
# one tier, short intervals: every page is due again within seconds
RECRAWL = """
[recrawl]
daily_budget = 3000000
period_s = 2.0
[[recrawl.tiers]]
name = "all"
interval_s_min = 2
interval_s_max = 10
"""


@pytest.fixture(scope="module")
def searched(postgres, tmp_path_factory):
    from courtly.runtime.demo import simweb_process

    tmp = tmp_path_factory.mktemp("dsearch")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        config = write_dist_config(tmp / "dist.toml")
        config.write_text(config.read_text() + RECRAWL)
        c = Cluster(postgres.create_database(), web, tmp, config, str(tmp / "out"))
        try:
            c.submit()
            for w in WORKERS:
                args = [a for a in c.worker_args(w) if a != "--exit-when-done"]
                log = open(tmp / f"{w}.log", "ab")
                c.procs[w] = subprocess.Popen(args + ["--intent", "search", "--duration-s", str(DURATION_S)],
                                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                log.close()
            codes = c.wait(timeout=DURATION_S + 120)
            assert codes == {w: 0 for w in WORKERS}, {w: c.tail(w) for w in WORKERS}
            time.sleep(1.2)   # the server flushes its log every second
            yield {"cluster": c, "web": web, "requests": load_log(web.log_file)}
        finally:
            c.stop_all()


def test_workers_recrawl_with_conditional_gets_and_fetch_changed_pages_again(searched):
    conditional = [r for r in searched["requests"] if r.conditional]
    assert conditional, "recrawls must send If-None-Match / If-Modified-Since"
    assert any(r.status == 304 for r in conditional), "unchanged pages answer 304"
    changed = [r for r in conditional if r.status == 200]
    assert changed, "pages that changed since their last fetch are fetched again in full"
    by_worker = {w: sum(1 for r in conditional if r.agent == agent_of(w)) for w in WORKERS}
    print(f"\nconditional GETs by worker: {by_worker}; {len(changed)} answered 200 (changed), "
          f"{sum(1 for r in conditional if r.status == 304)} answered 304")
    assert sum(1 for n in by_worker.values() if n) >= 2, by_worker   # planned by the partitions' owners


def test_recrawling_on_a_cluster_stays_polite_per_key_and_per_ip(searched):
    web = searched["web"]
    report = check_log(web.log_file, web.manifest_file, delay_s_min=DELAY_S, crawl_delay_s_max=CRAWL_DELAY_S_MAX,
                       duplicate_fetches_max=10**9)
    assert report.ok, report.render()
    hosts = json.loads(web.manifest_file.read_text())["hosts"]
    assert {r.host.split(":")[0] for r in searched["requests"]} <= set(hosts)
