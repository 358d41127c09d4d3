"""The monitor end to end: `courtly watch add`, then `courtly crawl --intent
monitor` against loopback watch pages whose real changes the test makes.
Webhook receivers get exactly one event per real change and none for noise;
a failing receiver gets its retries and the event becomes a dead letter; the
change log, the report and the Atom feeds (read by feedparser) agree.

No timing thresholds: the test waits (bounded) for facts it can count."""

from __future__ import annotations

import json
import signal
import subprocess

import feedparser
import pytest

from courtly.core.watch import LEARN_CHECKS
from courtly.shell.webhook import signature
from crawl_support import courtly_cmd, db_rows, run_courtly
from monitor_support import start_site, wait_for

pytestmark = pytest.mark.slow

CONFIG = """
[crawl]
contact = "tests@example.org"
[politeness]
delay_s = 0.1
response_factor = 1.0
[store]
commit_interval_s = 0.2
[monitor]
webhook_attempts_max = 3
webhook_backoff_s = 0.1
webhook_timeout_s = 5.0
api_token = "t0ken"
webhook_secret = "s3cret"
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base: str, method: str, path: str, body: dict | None = None, token: str = "") -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def site():
    s, stop = start_site({"/real": "real", "/noise": "noise", "/both": "both", "/later": "real"})
    yield s
    stop()


def test_monitor_reports_each_real_change_once_retries_failing_hooks_and_publishes_feeds(tmp_path, site):
    out = tmp_path / "crawl"
    for path, hook in (("/real", "/hook-ok"), ("/noise", "/hook-ok"), ("/both", "/hook-fail")):
        add = run_courtly("watch", "add", site.url(path), "--out", str(out), "--every", "1",
                          "--webhook", site.url(hook))
        assert add.returncode == 0, add.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    proc = subprocess.Popen(courtly_cmd("crawl", "--intent", "monitor", "--out", str(out), "--config", str(cfg),
                                        "--allow-network", "127.0.0.0/8", "--duration-s", "300", "--quiet",
                                        "--status", f"127.0.0.1:{port}"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the learning checks", lambda: all(site.count(p) > LEARN_CHECKS for p in ("/real", "/noise", "/both")))
        site.change("/real")
        site.change("/both")
        wait_for("the first change's event", lambda: len(site.received("/hook-ok")) >= 1)
        n = site.count("/real")
        wait_for("three more checks", lambda: site.count("/real") >= n + 3)
        site.change("/real")
        wait_for("the second change's event", lambda: len(site.received("/hook-ok")) >= 2)
        wait_for("the failing hook's attempts", lambda: len(site.received("/hook-fail")) >= 3)
        wait_for("the dead letter", lambda: db_rows(out, "SELECT count(*) FROM changes WHERE delivery = 'dead'")[0][0] == 1)
        n = site.count("/noise")
        wait_for("more noise checks", lambda: site.count("/noise") >= n + 5 and site.count("/real") >= n + 5)

        # the status server's API: reads open, a write needs the token, the crawl takes the new watch
        status, body = api(base, "GET", "api/watches")
        assert status == 200 and len(json.loads(body)["rows"]) == 3
        assert api(base, "POST", "api/watches", {"url": site.url("/later"), "every_s": 1})[0] == 401
        status, body = api(base, "POST", "api/watches", {"url": site.url("/later"), "every_s": 1}, token="t0ken")
        assert status == 201, body
        wait_for("the new watch's checks", lambda: site.count("/later") > LEARN_CHECKS)
        status, feed_body = api(base, "GET", "changes.atom")
        assert status == 200 and len(feedparser.parse(feed_body).entries) == 3
        metrics = api(base, "GET", "metrics")[1].decode()
        for line in ("courtly_monitor_changes_total 3.0", 'courtly_monitor_webhook_deliveries_total{outcome="dead"} 1.0',
                     'courtly_monitor_webhook_deliveries_total{outcome="delivered"} 2.0'):
            assert line in metrics, metrics[-1500:]
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]   # stopped by SIGINT: resumable (runtime/exits)

    ok = site.received("/hook-ok")
    assert [e["url"] for e in ok] == [site.url("/real")] * 2, ok     # one per real change, none for noise
    first, second = ok
    assert first["diff"]["changed"] or first["diff"]["added"]
    assert first["previous_capture"] < first["capture"] <= first["detected_at"]
    assert second["previous_capture"] >= first["capture"]
    assert all(sig == signature("s3cret", body) for body, sig in site.raw) and len(site.raw) == 5
    failed = site.received("/hook-fail")
    assert len(failed) == 3 and {e["seq"] for e in failed} == {failed[0]["seq"]}
    assert failed[0]["url"] == site.url("/both")

    dead = json.loads(run_courtly("watch", "dead", "--out", str(out), "--json").stdout)
    assert [(d["url"], d["attempts"]) for d in dead] == [(site.url("/both"), 3)]
    assert dead[0]["last_error"] == "status 500"

    lines = [json.loads(line) for line in (out / "changes.jsonl").read_text().splitlines()]
    assert sorted(e["url"] for e in lines) == sorted([site.url("/real")] * 2 + [site.url("/both")])
    assert all(set(e) >= {"url", "detected_at", "previous_capture", "capture", "diff"} for e in lines)

    listed = json.loads(run_courtly("watch", "list", "--out", str(out), "--json").stdout)
    noise = next(w for w in listed if w["url"] == site.url("/noise"))
    assert noise["changes"] == 0 and "Quote of the moment: *" in noise["noise_learned"]

    feed = feedparser.parse(run_courtly("watch", "feed", "--out", str(out)).stdout)
    assert not feed.bozo, feed.bozo_exception
    assert len(feed.entries) == 3 and all(e.link.startswith(site.url("/")) for e in feed.entries)
    one = next(w["id"] for w in listed if w["url"] == site.url("/real"))
    per_watch = feedparser.parse(run_courtly("watch", "feed", "--out", str(out), "--id", str(one)).stdout)
    assert not per_watch.bozo and [e.link for e in per_watch.entries] == [site.url("/real")] * 2
