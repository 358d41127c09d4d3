"""A monitor crawl of the simulated web's watch pages (`--watch-pages-per-kind`):
several watches on each host stay polite from the server's side (one request
at a time per key, the delay between), pages with validators are checked with
conditional GETs, noise-only pages never make an event, and every event on a
page with real changes follows a real change made since its previous capture.

The monitor runs until its first real-change event and a 304 (then Ctrl-C),
bounded by --duration-s: a loaded machine takes longer, it does not fail the
test; nothing here asserts how long anything took."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from courtly.sim.reqlog import load_log
from courtly.sim.watchpage import host_watch_pages
from crawl_support import check, courtly_cmd, crawl_args, run_courtly, write_config

pytestmark = pytest.mark.slow

SIM = ["--profile", "demo", "--hosts", "2", "--ips", "2", "--pages-per-host", "10", "--seed", "5",
       "--special-share", "0", "--watch-pages-per-kind", "1", "--watch-gap-s-mean", "6"]
MONITOR_S_MAX = 240   # the bound; the crawl is stopped as soon as it has shown what the test needs


def _monitor_until_a_real_change(args: list[str], out, web) -> None:
    """Run the monitor crawl until changes.jsonl holds an event and the server has
    answered a conditional check of a real-change page with 304; then Ctrl-C."""
    proc = subprocess.Popen(courtly_cmd(*args, "--intent", "monitor", "--duration-s", str(MONITOR_S_MAX)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        while not (_has_event(out) and _has_304(web)):
            if proc.poll() is not None:
                break        # --duration-s ended it: the assertions below say what was missing
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode in (0, 130), stderr[-2000:].decode(errors="replace")   # 130: stopped by SIGINT


def _has_event(out) -> bool:
    path = out / "changes.jsonl"
    return path.exists() and path.read_text().strip() != ""


def _has_304(web) -> bool:
    try:
        return any(r.path == "/watch/real/0" and r.status == 304 for r in load_log(web.log_file))
    except FileNotFoundError:
        return False


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
    _monitor_until_a_real_change(args, out, web)

    report = check(web, duplicate_fetches_max=100_000, coverage=False)
    assert report.ok, report.render()
    log = [r for r in load_log(web.log_file) if r.path.startswith("/watch/")]
    assert {r.path for r in log} == {"/watch/real/0", "/watch/noise/0", "/watch/both/0"}
    real = [r for r in log if r.path == "/watch/real/0"]
    assert any(r.conditional for r in real) and any(r.status == 304 for r in real)

    events = [json.loads(line) for line in (out / "changes.jsonl").read_text().splitlines()]
    assert not [e for e in events if urls[e["url"]] == "noise"]
    assert events, "the monitor was stopped after its first event"
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
