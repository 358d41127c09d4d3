"""Traps courtly was not written against, on a real crawl: the sim/wildtrap
sites served by `courtly simweb --wild all` beside a few plain hosts, crawled
by the `courtly` command with the default budget defence.

Judged from the server's request log (trap pages are tagged
``trap_wild_<kind>``) and from what the crawl left in its folder (the review
queue in crawl.db, `courtly review`, the denials): every wild trap domain is
in review within 200 of its requests and costs at most 500 trap requests;
the real deep site (wild-deep.test) is never flagged or denied and is
fetched whole. Config as tests/e2e/test_traps.py (short loopback delays,
`depth_max = 100` so the trap rules alone must stop the traps).
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from crawl_support import crawl_args, db_rows, run_courtly, settle_log
from courtly.core.traps import TrapConfig, TrapGuard
from courtly.core.urls import registered_domain
from courtly.runtime.demo import simweb_process
from courtly.sim.reqlog import load_log
from courtly.sim.wildtrap import WILD_TRAPS
from courtly.sim.wildweb import wild_domain

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SIM_ARGS = ["--profile", "bench", "--hosts", "4", "--pages-per-host", "10", "--ips", "4", "--seed", "18",
            "--wild", "all"]
REVIEW_WITHIN, TRAP_REQUESTS_MAX = 200, 500
CONFIG = """
[crawl]
contact = "tests@example.org"
fetch_tasks = 64
depth_max = 100
[politeness]
delay_s = 0.02
crawl_delay_s_max = 0.02
response_factor = 2.0
ip_rate = 100.0
ip_concurrency = 8
[fetch]
total_s = 3.0
connect_s = 2.0
[store]
commit_interval_s = 0.2
"""


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wild")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        config = tmp / "wild.toml"
        config.write_text(CONFIG)
        out = tmp / "crawl"
        proc = run_courtly(*crawl_args(web, out, config), "--max-pages", "8000", timeout=800)
        assert proc.returncode == 0, proc.stderr[-3000:]
        settle_log(web)
        log = sorted(load_log(web.log_file), key=lambda r: r.arrived_at)
    (snapshot,) = db_rows(out, "SELECT v FROM meta WHERE k = 'traps'")[0]
    suspects = TrapGuard.restore(json.loads(snapshot), TrapConfig(), random.Random(0)).suspects()
    review = json.loads(run_courtly("review", "--out", str(out), "--json").stdout)
    return {"out": out, "log": log, "suspects": suspects, "review": review}


def _domain(record) -> str:
    return registered_domain(record.host.rsplit(":", 1)[0])


@pytest.mark.parametrize("kind", WILD_TRAPS)
def test_wild_trap_domain_is_in_review_within_200_requests(crawled, kind):
    domain = wild_domain(kind)
    mine = [s for s in crawled["suspects"] if s.key == domain]
    assert mine, f"{kind}: never in review; suspects {[(s.key, s.rule) for s in crawled['suspects']]}"
    since = min(s.since for s in mine)
    before = sum(1 for r in crawled["log"] if _domain(r) == domain and r.arrived_at <= since)
    assert before <= REVIEW_WITHIN, (kind, before, [(s.rule, s.scope) for s in mine])


@pytest.mark.parametrize("kind", WILD_TRAPS)
def test_wild_trap_domain_costs_at_most_500_trap_requests(crawled, kind):
    tags = Counter(r.tag for r in crawled["log"] if _domain(r) == wild_domain(kind))
    assert 0 < tags["trap_" + kind] <= TRAP_REQUESTS_MAX, tags


@pytest.mark.parametrize("kind", WILD_TRAPS)
def test_courtly_review_names_the_template_figures_and_examples_of_every_wild_trap(crawled, kind):
    mine = [s for s in crawled["review"] if s["key"] == wild_domain(kind) and s["rule"] == "yield"]
    assert len(mine) == 1, crawled["review"]
    evidence = mine[0]["evidence"]
    assert evidence.startswith("template ") and "distinct URLs seen" in evidence and "fetched (" in evidence
    assert f".{wild_domain(kind)}:" in evidence or f"//{wild_domain(kind)}:" in evidence   # example URLs


def test_real_deep_site_is_never_flagged_or_denied_and_is_fetched_whole(crawled):
    domain = wild_domain("wild_deep")
    assert [s for s in crawled["suspects"] if s.key == domain] == []
    denied = dict(db_rows(crawled["out"], "SELECT reason, count(*) FROM urls WHERE key = ? AND state = 'skipped' "
                                          "GROUP BY reason", (domain,)))
    assert not {"trap", "budget", "depth"} & set(denied), denied
    pages = {r.path for r in crawled["log"] if _domain(r) == domain and r.status == 200 and r.path != "/robots.txt"}
    assert len(pages) > 3500, len(pages)   # 3,000 articles, 200 list pages, 341 category pages, 300 months
