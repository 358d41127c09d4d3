"""A distributed `monitor` crawl of the simulated web's watch pages, on PostgreSQL.

The watch list is put in the crawl's database with `courtly watch add --db`;
two `courtly worker --intent monitor` processes check the watches of the
partitions each holds, through their frontiers (two partitions: the four hosts
fall two in each, so each worker, once the leases are balanced, holds the
watches of two hosts; the first one holds all of them until then). They run
until the database holds a change event of a real-change page delivered to
its webhook (a receiver on loopback) and both workers have checked watches
(then SIGTERM), bounded by --duration-s: a loaded machine takes longer, it
does not fail the test. Judged from the server's request log (politeness per
key and per IP across the cluster, conditional checks), the `changes` table
(no event on a noise-only page, each real change recorded once, `courtly
watch changes --db` shows them) and the receiver's log (each delivered event
POSTed once, in order per watch, never a noise page's).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from courtly.sim.check import check_log
from courtly.sim.reqlog import load_log
from crawl_support import CRAWL_DELAY_S_MAX, DELAY_S
from dist_support import Cluster, agent_of, db_rows, write_dist_config
from pg_support import pg_fixture

pytestmark = pytest.mark.slow

postgres = pg_fixture(scope="module")

SIM_ARGS = ["--profile", "demo", "--hosts", "4", "--ips", "2", "--pages-per-host", "10", "--seed", "5",
            "--special-share", "0", "--watch-pages-per-kind", "1", "--watch-gap-s-mean", "6"]
WORKERS = ("w1", "w2")
MONITOR_S_MAX = 240     # the bound; the workers are stopped once a real change is recorded


def _courtly(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "courtly", *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def _real_change_recorded(dsn: str) -> bool:
    return bool(db_rows(dsn, "SELECT 1 FROM changes WHERE url LIKE '%/watch/real/%' LIMIT 1"))


def _real_change_delivered(dsn: str) -> bool:
    return bool(db_rows(dsn, "SELECT 1 FROM changes WHERE url LIKE '%/watch/real/%' AND delivery = 'delivered' LIMIT 1"))


class Receiver:
    """A webhook receiver on loopback: every POST's path and JSON body, in arrival order."""

    def __init__(self) -> None:
        got = self.got = []
        lock = self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    got.append((self.path, json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _checked_by_both(web) -> bool:
    try:
        agents = {r.agent for r in load_log(web.log_file) if r.path.startswith("/watch/")}
    except FileNotFoundError:
        return False
    return agents >= {agent_of(w) for w in WORKERS}


@pytest.fixture(scope="module")
def monitored(postgres, tmp_path_factory):
    from courtly.runtime.demo import simweb_process

    tmp = tmp_path_factory.mktemp("dmonitor")
    receiver = Receiver()
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        config = write_dist_config(tmp / "dist.toml")
        # a loaded machine may answer slowly: a POST timing out would be sent again (at least once)
        config.write_text(config.read_text() + "\n[monitor]\nwebhook_timeout_s = 120.0\n")
        c = Cluster(postgres.create_database(), web, tmp, config, str(tmp / "out"))
        try:
            c.submit(partitions=2)
            kinds = {}
            for seed_url in web.seeds:
                for kind in ("real", "noise"):
                    url = f"{seed_url}watch/{kind}/0"
                    kinds[url] = kind
                    add = _courtly("watch", "add", url, "--db", c.dsn, "--every", "1",
                                   "--webhook", receiver.url(f"/hook/{kind}/{len(kinds)}"))
                    assert add.returncode == 0, add.stderr
            for w in WORKERS:
                c.start(w, "--intent", "monitor", "--duration-s", str(MONITOR_S_MAX), exit_when_done=False)
            deadline = time.monotonic() + MONITOR_S_MAX + 30
            while time.monotonic() < deadline and not (_real_change_delivered(c.dsn) and _checked_by_both(web)):
                if any(p.poll() is not None for p in c.procs.values()):
                    break       # ended early: the assertions below say what was missing
                time.sleep(0.5)
            for p in c.procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            codes = c.wait(timeout=120)
            assert codes == {w: 0 for w in WORKERS}, {w: c.tail(w) for w in WORKERS}
            time.sleep(1.2)   # the server flushes its log every second
            with receiver.lock:
                posted = list(receiver.got)
            yield {"cluster": c, "web": web, "kinds": kinds, "requests": load_log(web.log_file), "posted": posted}
        finally:
            c.stop_all()
            receiver.close()


def test_a_real_change_is_recorded_once_in_the_database_and_noise_never(monitored):
    c, kinds = monitored["cluster"], monitored["kinds"]
    rows = db_rows(c.dsn, "SELECT watch_id, url, event::text FROM changes ORDER BY seq")
    events = [(r["watch_id"], r["url"], json.loads(r["event"])) for r in rows]
    assert [u for _, u, _ in events if kinds[u] == "real"], "the workers were stopped after the first real change"
    assert not [u for _, u, _ in events if kinds[u] == "noise"]
    captures = [(w, e["previous_capture"], e["capture"]) for w, _, e in events]
    assert len(captures) == len(set(captures)), captures       # one worker judged each check
    shown = _courtly("watch", "changes", "--db", c.dsn, "--json")
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)) == min(len(events), 20)


def test_watches_are_checked_by_the_workers_with_conditional_gets(monitored):
    watch = [r for r in monitored["requests"] if r.path.startswith("/watch/")]
    assert {r.path for r in watch} == {"/watch/real/0", "/watch/noise/0"}
    assert {r.agent for r in watch} <= {agent_of(w) for w in WORKERS}
    real = [r for r in watch if r.path == "/watch/real/0"]
    assert any(r.conditional for r in real), "a check after the first is a conditional GET"
    by_worker = {w: sum(1 for r in watch if r.agent == agent_of(w)) for w in WORKERS}
    print(f"\nwatch checks by worker: {by_worker}")
    assert all(by_worker.values()), by_worker      # each checks the watches of the partition it holds


def test_monitoring_on_a_cluster_stays_polite_per_key_and_per_ip(monitored):
    web = monitored["web"]
    report = check_log(web.log_file, web.manifest_file, delay_s_min=DELAY_S, crawl_delay_s_max=CRAWL_DELAY_S_MAX,
                       duplicate_fetches_max=10**9)
    assert report.ok, report.render()


def test_each_delivered_change_reaches_its_webhook_once_in_order_per_watch_and_noise_never(monitored):
    c, posted = monitored["cluster"], monitored["posted"]
    rows = db_rows(c.dsn, "SELECT seq, watch_id, url, delivery, attempts FROM changes ORDER BY seq")
    delivered = [r for r in rows if r["delivery"] == "delivered"]
    assert [r for r in delivered if "/watch/real/" in r["url"]], "stopped once a real change was delivered"
    assert sorted(b["seq"] for _, b in posted) == [r["seq"] for r in delivered]     # each once, only those
    assert all(path.startswith("/hook/real/") for path, _ in posted) and all(r["attempts"] == 1 for r in delivered)
    by_watch: dict[int, list[int]] = {}
    for _, b in posted:
        by_watch.setdefault(b["watch"], []).append(b["seq"])
    assert all(seqs == sorted(seqs) for seqs in by_watch.values()), by_watch
    assert all(r["delivery"] in ("delivered", "pending") for r in rows), rows   # stopped mid-way: pending, kept
