"""crawl_support.settle_log: the e2e tests' wait for the simulated web's log.

The server writes its log in batches (about every second, later when the
machine is loaded); a check run before the last batch is written misses the
end of the crawl. settle_log waits for a marker request instead of sleeping.
"""

from __future__ import annotations

import http.client
import json

from crawl_support import FLUSH_MARKER_HOST, settle_log
from courtly.runtime.demo import simweb_process
from courtly.sim.check import check_log
from courtly.sim.reqlog import load_log

SIM_ARGS = ["--hosts", "2", "--pages-per-host", "10", "--seed", "7"]


def _get(ip: str, port: int, host: str, path: str) -> int:
    conn = http.client.HTTPConnection(ip, port, timeout=60)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}", "User-Agent": "courtly"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_settle_log_returns_with_every_earlier_request_in_the_file_and_checkers_skip_its_marker(tmp_path):
    with simweb_process(tmp_path / "sim", SIM_ARGS) as web:
        name, ip = min((n, i) for n, i in json.loads(
            web.hosts_file.read_text()).items() if n.startswith("site"))
        assert _get(ip, web.port, name, "/robots.txt") == 200
        settle_log(web)
        records = load_log(web.log_file)     # read while the server still runs: no flush on exit
        raw = [json.loads(line) for line in web.log_file.read_text().splitlines() if line.strip()]
        report = check_log(web.log_file, web.manifest_file, delay_s_min=0.0, coverage=False)
    assert [r.path for r in records if r.host.startswith(name)] == ["/robots.txt"]
    marker = [r for r in raw if r["host"].startswith(FLUSH_MARKER_HOST)]
    assert len(marker) == 1 and marker[0]["tag"] == "unknown_host"   # in the file...
    assert not [r for r in records if r.host.startswith(FLUSH_MARKER_HOST)]   # ...and no reader counts it
    assert report.ok and report.stats["served_requests"] == 1, report.render()
