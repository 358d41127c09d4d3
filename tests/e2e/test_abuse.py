"""An abuse complaint in the middle of a real crawl, judged from the server's side.

A crawl of a small simulated web runs through the `courtly` command with
JSON logs. Once the servers have answered a few requests for one host,
another process runs `courtly abuse --host` about it. The crawl logs the
slow-down when it takes the complaint up (its next commit); from the
server's request log, every gap between two requests to that host after
that instant is at least `abuse.delay_factor` x `politeness.delay_s` (with
the politeness checker's tolerance; a loaded machine only makes gaps longer).
"""

from __future__ import annotations

import json

import pytest

from crawl_support import DELAY_S, crawl_with_command_midway, run_courtly, write_config
from courtly.runtime.demo import simweb_process
from courtly.sim.check import CheckParams
from courtly.sim.reqlog import load_log

pytestmark = pytest.mark.slow

# seed 2: site0001.test has an allow-all robots.txt and no Crawl-delay: paced by delay_s alone
SIM_ARGS = ["--profile", "demo", "--hosts", "4", "--pages-per-host", "20", "--seed", "2", "--special-share", "0"]
HOST = "site0001.test"
FACTOR = 5.0
COMPLAIN_AFTER = 4          # requests to the host answered before the complaint
TOLERANCE_S = CheckParams().tolerance_s


def _host_requests(web) -> list:
    try:
        records = load_log(web.log_file)
    except FileNotFoundError:
        return []
    return sorted((r for r in records if r.host.split(":")[0] == HOST and r.path != "/robots.txt"),
                  key=lambda r: r.arrived_at)


@pytest.fixture(scope="module")
def complained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("abuse")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        config = write_config(tmp / "c.toml")
        config.write_text(config.read_text() + f"[abuse]\ndelay_factor = {FACTOR}\n")
        out = tmp / "crawl"
        err_path = tmp / "crawl.stderr"
        p = crawl_with_command_midway(
            web, out, config, err_path, lambda: len(_host_requests(web)) >= COMPLAIN_AFTER,
            ["abuse", "--out", str(out), "--host", HOST, "--contact", "abuse@site0001.test",
             "--note", "e2e complaint", "--json"], "complaint")
        logs = [json.loads(line) for line in err_path.read_text().splitlines() if line.startswith("{")]
        yield {"out": out, "requests": _host_requests(web), "logs": logs, "complaint": json.loads(p.stdout)}


def test_after_the_crawl_takes_the_complaint_up_the_host_waits_factor_times_its_delay(complained):
    (event,) = [e for e in complained["logs"] if e.get("event") == "abuse_slowdown"]
    assert event["key"] == HOST and event["complaint_ids"] == [complained["complaint"]["id"]]
    assert event["delay_s"] == pytest.approx(FACTOR * DELAY_S)
    reqs = complained["requests"]
    before = [r for r in reqs if r.completed_at < event["at"]]
    # the first request after the instant may have left before it: judged from the second on
    after = [r for r in reqs if r.arrived_at > event["at"]][1:]
    assert len(before) >= COMPLAIN_AFTER and len(after) >= 3
    slow = [b.arrived_at - a.completed_at for a, b in zip(after, after[1:])]
    assert min(slow) >= FACTOR * DELAY_S - TOLERANCE_S, slow


def test_the_complaint_stays_open_and_is_listed_by_abuse_and_report(complained):
    out = complained["out"]
    p = run_courtly("abuse", "--out", str(out), "--list", "--json")
    (row,) = json.loads(p.stdout)
    assert (row["host"], row["key"], row["resolved_at"]) == (HOST, HOST, None)
    p = run_courtly("report", "--out", str(out), "--json")
    assert [r["host"] for r in json.loads(p.stdout)["abuse_complaints_open"]] == [HOST]
