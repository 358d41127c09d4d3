"""A monitor crawl of the simulated web's watch pages (`--watch-pages-per-kind`):
several watches on each host stay polite from the server's side (one request
at a time per key, the delay between), pages with validators are checked with
conditional GETs, noise-only pages never make an event, and every event on a
page with real changes follows a real change made since its previous capture.

Bounded by --duration-s; nothing here asserts how long anything took."""

from __future__ import annotations

import json

import pytest

from courtly.sim.reqlog import load_log
from courtly.sim.watchpage import host_watch_pages
from crawl_support import check, crawl_args, run_courtly, write_config

pytestmark = pytest.mark.slow

SIM = ["--profile", "demo", "--hosts", "2", "--ips", "2", "--pages-per-host", "10", "--seed", "5",
       "--special-share", "0", "--watch-pages-per-kind", "1", "--watch-gap-s-mean", "6"]


def test_monitor_of_simulated_watch_pages_is_polite_and_reports_only_real_changes(tmp_path, simweb_factory):
    web = simweb_factory(*SIM)
    manifest = json.loads(web.manifest_file.read_text())
    out = tmp_path / "crawl"
    urls = {}
    for seed_url in web.seeds:
        for kind in ("real", "noise", "both"):
            url = f"{seed_url}watch/{kind}/0"
            urls[url] = kind
            add = run_courtly("watch", "add", url, "--out", str(out), "--every", "1")
            assert add.returncode == 0, add.stderr
    args = crawl_args(web, out, write_config(tmp_path / "c.toml"))
    i = args.index("--seeds-file")
    del args[i:i + 2]                     # the watch list only
    proc = run_courtly(*args, "--intent", "monitor", "--duration-s", "15", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]

    report = check(web, duplicate_fetches_max=100_000, coverage=False)
    assert report.ok, report.render()
    log = [r for r in load_log(web.log_file) if r.path.startswith("/watch/")]
    assert {r.path for r in log} == {"/watch/real/0", "/watch/noise/0", "/watch/both/0"}
    real = [r for r in log if r.path == "/watch/real/0"]
    assert any(r.conditional for r in real) and any(r.status == 304 for r in real)

    events = [json.loads(line) for line in (out / "changes.jsonl").read_text().splitlines()]
    assert not [e for e in events if urls[e["url"]] == "noise"]
    assert events, "real changes were made every ~6 s for 15 s"
    from datetime import datetime

    def served(host: str, path: str, stamp: str):
        """The server's record of the request a capture came from: the first
        to arrive after the crawler started it (one machine, one clock)."""
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        return min((r for r in log if r.host.split(":")[0] == host and r.path == path and r.arrived_at >= at),
                   key=lambda r: r.arrived_at)

    cfg = manifest["config"]
    for e in events:
        host = e["url"].split("//", 1)[1].split("/", 1)[0].split(":")[0]
        path = "/watch/" + urls[e["url"]] + "/0"
        page = host_watch_pages(1, cfg["watch_gap_s_mean"], cfg["seed"], manifest["hosts"][host]["index"])[path]
        before = served(host, path, e["previous_capture"])
        after = served(host, path, e["capture"])
        assert after.status == 200
        # the server rendered an older version for the previous capture than for this one: a real change
        assert page.version(before.arrived_at - manifest["started_at"]) < \
            page.version(after.arrived_at - manifest["started_at"]), (e, page.change_at[:10])
        assert e["diff"]["added"] or e["diff"]["removed"] or e["diff"]["changed"]
