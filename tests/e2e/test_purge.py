"""A takedown in the middle of a real crawl, judged from the server's side.

One crawl (module fixture) of the simulated web through the `courtly` command
with JSON logs. Once the servers have seen a few requests, another process
runs `courtly purge --domain media0.test` (the web serves www.media0.test and
news.media0.test: a registered domain with two hosts). The crawl goes on to
the end. The tests then check, from the request log, the store, the JSON log
and every export read back, that the domain is gone and the rest is there.

The crawl has its SLO: requests that arrived between the purge being
recorded and the crawl applying it are allowed; after the instant the crawl
logged as "applied", only requests it named as already in flight may arrive.
The interval is printed, never asserted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from crawl_support import crawl_with_command_midway, db_rows, log_lines, run_courtly, write_config
from warc_support import check_warcs, closed_warcs
from courtly.runtime.demo import simweb_process

pytestmark = pytest.mark.slow

SIM_ARGS = ["--profile", "demo", "--hosts", "6", "--ips", "4", "--pages-per-host", "25", "--seed", "3"]
DOMAIN = "media0.test"
PURGE_AFTER_REQUESTS = 15


def _in_domain(host_or_url: str) -> bool:
    host = host_or_url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return host == DOMAIN or host.endswith("." + DOMAIN)


def _domain_requested(web) -> bool:
    """The servers have logged a request of the domain (it is being crawled)."""
    try:
        with open(web.log_file, "rb") as fh:
            return any(_in_domain(json.loads(line)["host"]) for line in fh if line.strip())
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def purged(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("purge")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        hosts = json.loads(web.manifest_file.read_text())["hosts"]
        assert {"www.media0.test", "news.media0.test"} <= set(hosts), "the web must have the domain's hosts"
        out = tmp / "crawl"
        err_path = tmp / "crawl.stderr"
        p = crawl_with_command_midway(
            web, out, write_config(tmp / "c.toml"), err_path,
            lambda: log_lines(web) >= PURGE_AFTER_REQUESTS and _domain_requested(web),
            ["purge", "--out", str(out), "--domain", DOMAIN, "--reason", "e2e takedown", "--json"], "purge")
        from courtly.sim.reqlog import load_log

        yield {"web": web, "out": out, "tmp": tmp, "purge": json.loads(p.stdout),
               "stderr": err_path.read_text(), "requests": load_log(web.log_file)}
    check_warcs(closed_warcs(tmp))   # the crawl's files and every export of the module's tests


def _log_lines(purged) -> list[dict]:
    lines = [l for l in purged["stderr"].splitlines() if l.strip()]
    return [json.loads(l) for l in lines]   # every line is one JSON object


def _applied(purged) -> dict:
    (applied,) = [l for l in _log_lines(purged)
                  if l.get("event") == "purge_applied" and l["purge_id"] == purged["purge"]["purge_id"]]
    return applied


def test_purge_is_applied_by_the_running_crawl_and_the_interval_is_shown(purged):
    applied = _applied(purged)
    recorded_at = purged["purge"]["recorded_at"]
    assert applied["recorded_at"] == pytest.approx(recorded_at)
    assert applied["applied_at"] >= recorded_at and not applied["at_start"]
    assert applied["crawl_id"] == purged["purge"]["crawl_id"]
    print(f"\npurge to full effect: {applied['applied_at'] - recorded_at:.3f} s "
          f"({len(applied['in_flight'])} request(s) of the domain were in flight)")
    listing = run_courtly("purge", "--list", "--json", "--out", str(purged["out"]))
    (row,) = json.loads(listing.stdout)
    assert row["applied_at"] == pytest.approx(applied["applied_at"])
    assert row["effect_s"] == pytest.approx(applied["effect_s"])


def test_nothing_of_the_domain_is_requested_after_the_purge_took_effect(purged):
    applied = _applied(purged)
    in_flight = {u.split("://", 1)[1].split("/", 1)[1] for u in applied["in_flight"]}
    ours = [r for r in purged["requests"] if _in_domain(r.host)]
    assert ours, "the domain was crawled before the purge"
    late = [r for r in ours if r.arrived_at > applied["applied_at"]]
    assert all(r.path.lstrip("/") in in_flight for r in late), [(r.host, r.path) for r in late]
    assert len(late) <= len(in_flight)
    others = [r for r in purged["requests"] if not _in_domain(r.host) and r.arrived_at > applied["applied_at"]]
    assert others, "the crawl went on with the other domains"


def test_the_domain_has_no_queued_urls_and_every_url_of_it_carries_a_purged_decision(purged):
    out = purged["out"]
    rows = [(u, s, r) for u, s, r in db_rows(out, "SELECT url, state, reason FROM urls") if _in_domain(u)]
    assert rows
    assert [u for u, s, _ in rows if s == "queued"] == []
    assert {(s, r) for _, s, r in rows} == {("skipped", "purged")}
    # the purge landed mid-crawl: URLs of the domain were still waiting, and were dropped
    assert purged["purge"]["queued_dropped"] + _dropped_after(purged) > 0
    assert db_rows(out, "SELECT count(*) FROM urls WHERE state = 'queued'") == [(0,)]


def _dropped_after(purged) -> int:
    return sum(1 for l in _log_lines(purged) if l.get("event") == "decision" and l["reason"] == "purged")


def test_json_log_decision_lines_carry_crawl_id_url_and_reason(purged):
    lines = _log_lines(purged)
    crawl_id = db_rows(purged["out"], "SELECT v FROM meta WHERE k = 'crawl_id'")[0][0]
    decisions = [l for l in lines if l.get("event") == "decision"]
    assert decisions
    for d in decisions:
        assert d["crawl_id"] == crawl_id and d["url"] and d["reason"], d
    reasons = {d["reason"] for d in decisions}
    assert "purged" in reasons and len(reasons) > 1
    # every decision the store holds was logged (nothing dropped silently, nothing unlogged)
    stored = db_rows(purged["out"], "SELECT count(*) FROM urls WHERE state != 'fetched'")[0][0]
    assert len({d["url"] for d in decisions}) >= stored - purged["purge"]["records_marked"]


def test_exports_contain_nothing_of_the_domain_and_everything_else(purged):
    out, tmp = purged["out"], purged["tmp"]
    for kind, to in (("warc", tmp / "x-warc"), ("cdxj", tmp / "x.cdxj"), ("text", tmp / "x.jsonl")):
        p = run_courtly("export", kind, "--out", str(out), "--to", str(to), "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["records_dropped"] > 0

    from courtly.shell.warc import iter_records

    kept_hosts = set()
    files = sorted((tmp / "x-warc").glob("*.warc.gz"))
    assert files
    for w in files:
        _warcio_check(w)
        for rec in iter_records(w):
            h = rec.warc_headers
            assert not _in_domain(h.get("WARC-Target-URI", "")), h
            assert not _in_domain(h.get("WARC-Refers-To-Target-URI", "")), h
            if rec.rec_type == "response":
                kept_hosts.add(h["WARC-Target-URI"].split("/")[2].split(":")[0])
        cdxj = Path(str(w) + ".cdxj").read_text().splitlines()
        assert cdxj and not any(_in_domain(json.loads(l.split(" ", 2)[2])["url"]) for l in cdxj)
    assert len(kept_hosts) >= 3, kept_hosts

    index = [json.loads(l.split(" ", 2)[2]) for l in (tmp / "x.cdxj").read_text().splitlines()]
    assert index and not any(_in_domain(e["url"]) for e in index)
    assert {e["url"].split("/")[2].split(":")[0] for e in index} >= kept_hosts

    texts = [json.loads(l) for l in (tmp / "x.jsonl").read_text().splitlines()]
    assert texts and not any(_in_domain(t["url"]) for t in texts)
    assert all(t["text"] and t["fetched_at"] for t in texts)
    assert any(t.get("title") for t in texts)
    assert len({t["url"].split("/")[2] for t in texts}) >= 3

    # the raw originals are kept by default: the crawl's own files still hold the domain
    originals = [rec.warc_headers.get("WARC-Target-URI", "")
                 for w in sorted((out / "warc").glob("*.warc.gz")) for rec in iter_records(w)]
    assert any(_in_domain(u) for u in originals)


def test_without_keep_purged_originals_the_crawl_files_are_rewritten(purged):
    out = purged["tmp"] / "crawl-rewrite"
    shutil.copytree(purged["out"], out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["warc"]["keep_purged_originals"] = False
    (out / "config.json").write_text(json.dumps(cfg))
    p = run_courtly("purge", "--out", str(out), "--host", "site0000.test", "--json")
    assert p.returncode == 0, p.stderr
    assert "rewritten" in json.loads(p.stdout)["originals_rewritten"]

    from courtly.shell.warc import iter_records

    records = {}
    for w in sorted((out / "warc").glob("*.warc.gz")):
        _warcio_check(w)
        for rec in iter_records(w):
            url = rec.warc_headers.get("WARC-Target-URI", "")
            assert not _in_domain(url) and "site0000.test" not in url, url
            records[(w.name, rec.offset)] = rec
    # the fetch log points at the records' new places
    refs = db_rows(out, "SELECT url, warc FROM fetches WHERE warc != ''")
    assert refs
    for url, ref in refs:
        name, offset = ref.rsplit(":", 1)
        assert records[(name, int(offset))].warc_headers["WARC-Target-URI"] == url


def _warcio_check(path: Path) -> None:
    from pywb_support import pywb_venv

    proc = subprocess.run([str(pywb_venv() / "bin" / "warcio"), "check", "-v", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
