"""Recrawl against the simulated web's changing pages: conditional GET, 304s,
server-not-modified revisits, the report; and a monitor crawl that only
watches its list. Politeness still holds, from the server's side."""

from __future__ import annotations

import json

import pytest

from crawl_support import check, crawl_args, db_rows, run_courtly, write_config

pytestmark = pytest.mark.slow

RECRAWL = """
[recrawl]
daily_budget = 3000000
period_s = 2.0
[[recrawl.tiers]]
name = "top"
interval_s_min = 2
interval_s_max = 10
[[recrawl.tiers]]
name = "mid"
interval_s_min = 3
interval_s_max = 20
[[recrawl.tiers]]
name = "rest"
interval_s_min = 5
interval_s_max = 30
"""


def _config(tmp_path, intent: str, duration_s: float):
    path = write_config(tmp_path / "c.toml")
    text = path.read_text().replace("[crawl]\n", f"[crawl]\nintent = \"{intent}\"\nduration_s = {duration_s}\n")
    path.write_text(text + RECRAWL)
    return path


SIM = ["--profile", "demo", "--hosts", "4", "--ips", "4", "--pages-per-host", "10", "--seed", "21",
       "--change-rate-per-s", "0.1"]


def test_search_recrawls_with_conditional_gets_and_stores_304s_as_revisits(tmp_path, simweb_factory):
    from courtly.shell.warc import iter_records
    from courtly.sim.reqlog import load_log

    web = simweb_factory(*SIM)
    out = tmp_path / "crawl"
    proc = run_courtly(*crawl_args(web, out, _config(tmp_path, "search", 25)), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = check(web, duplicate_fetches_max=100_000)
    assert report.ok, report.render()          # recrawling stays polite
    log = load_log(web.log_file)
    conditional = [r for r in log if r.conditional]
    assert conditional, "recrawls must send If-None-Match / If-Modified-Since"
    assert any(r.status == 304 for r in conditional), "unchanged pages answer 304"
    records = []
    for w in sorted((out / "warc").glob("*.warc.gz")):
        records += [r for r in iter_records(w) if r.rec_type in ("response", "revisit")]
    revisits = [r.warc_headers for r in records if r.rec_type == "revisit"]
    not_modified = [h for h in revisits if h["WARC-Profile"].endswith("/server-not-modified")]
    assert not_modified, "a 304 is stored as a server-not-modified revisit"
    # each names the record holding the payload its validators came from, by its URI and WARC-Date
    responses = {(r.warc_headers["WARC-Target-URI"], r.warc_headers["WARC-Date"]) for r in records
                 if r.rec_type == "response"}
    assert all((h["WARC-Refers-To-Target-URI"], h["WARC-Refers-To-Date"]) in responses for h in not_modified)
    kinds = dict(db_rows(out, "SELECT kind, count(*) FROM fetches GROUP BY kind"))
    assert kinds.get("recrawl", 0) > 0 and kinds.get("page", 0) > 0
    histories = db_rows(out, "SELECT count(*) FROM histories")[0][0]
    assert histories >= kinds["page"] // 2
    rep = run_courtly("report", "--out", str(out), "--json")
    assert rep.returncode == 0, rep.stderr
    data = json.loads(rep.stdout)
    assert data["tiers"] and sum(t["allocated"] for t in data["tiers"]) > 0
    assert {r["reason"] for r in data["fetches"]} >= {"discovery", "recrawl"}
    # sitemaps (robots.txt Sitemap lines or /sitemap.xml) were read for discovery and hints
    assert any(r.path.startswith("/sitemap") and r.status == 200 for r in log)
    text = run_courtly("report", "--out", str(out)).stdout
    assert "recrawl scheduler, per day and tier" in text and "denied:budget" in text


def test_monitor_watches_only_its_list(tmp_path, simweb_factory):
    from courtly.sim.reqlog import load_log

    web = simweb_factory(*SIM)
    out = tmp_path / "crawl"
    watch = web.seeds[:2]
    seeds = tmp_path / "watch.txt"
    seeds.write_text("\n".join(watch) + "\n")
    args = crawl_args(web, out, _config(tmp_path, "monitor", 15))
    args[args.index("--seeds-file") + 1] = str(seeds)
    proc = run_courtly(*args, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = check(web, duplicate_fetches_max=100_000, coverage=False)
    assert report.ok, report.render()
    pages = [r for r in load_log(web.log_file)
             if r.path != "/robots.txt" and not r.path.startswith("/courtly-404-probe-")]
    watched = {(u.split("//", 1)[1].split("/", 1)[0].split(":")[0]) for u in watch}
    assert pages and all(r.host.split(":")[0] in watched and r.path == "/" for r in pages), \
        sorted({(r.host, r.path) for r in pages})[:10]
    assert sum(r.conditional for r in pages) >= 1    # watched again, cheaply
