"""A real crawl of the simulated hostile web, judged from the server's side.

One crawl (module fixture) of a web with robots.txt that answers 500 and one
that hangs, hostile bodies (bombs, drip, endless chunks, huge headers) and
SSRF bait, run through the `courtly` command exactly as a user would. The
tests then read the servers' request log, the crawl store and the WARC files
with independent tools.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from crawl_support import crawl_args, check, db_rows, run_courtly, write_config
from warc_support import check_warcs, tool
from courtly.runtime.demo import simweb_process

pytestmark = pytest.mark.slow

SIM_ARGS = ["--profile", "demo", "--hosts", "10", "--pages-per-host", "10", "--seed", "12",
            "--robots-hang-s", "5"]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        manifest = json.loads(web.manifest_file.read_text())
        variants = {k: v for k, v in manifest["robots_variants"].items() if v}
        assert "error_500" in variants and "timeout" in variants, "the web must exercise unreachable robots"
        out = tmp / "crawl"
        proc = run_courtly(*crawl_args(web, out, write_config(tmp / "c.toml")), timeout=400)
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = check(web, coverage_min=1.0)
        yield {"web": web, "out": out, "report": report, "manifest": manifest, "stderr": proc.stderr}


def test_server_log_shows_zero_politeness_violations(crawled):
    report = crawled["report"]
    assert report.ok, report.render()
    assert report.stats["served_requests"] > 80


def test_robots_unreachable_hosts_get_nothing_but_robots_txt(crawled):
    from courtly.sim.reqlog import load_log

    variants = crawled["manifest"]["robots_variants"]
    blocked = set(variants["error_500"]) | set(variants["timeout"])
    hits = [r for r in load_log(crawled["web"].log_file) if r.host.split(":")[0] in blocked]
    assert hits, "robots.txt of unreachable hosts must have been tried"
    assert all(r.path == "/robots.txt" for r in hits), [r.path for r in hits]


def test_every_reachable_allowed_page_is_fetched(crawled):
    cov = crawled["report"].coverage
    assert cov is not None and cov.reachable > 50
    assert cov.missing == ()


def test_every_url_not_fetched_has_a_reason(crawled):
    out = crawled["out"]
    unexplained = db_rows(out, "SELECT url, state FROM urls WHERE state != 'fetched' "
                               "AND (reason IS NULL OR reason = '')")
    assert unexplained == []
    assert db_rows(out, "SELECT count(*) FROM urls WHERE state = 'queued'") == [(0,)]
    reasons = dict(db_rows(out, "SELECT reason, count(*) FROM urls WHERE reason IS NOT NULL GROUP BY 1"))
    for expected in ("robots", "robots_unreachable", "non_public", "nofollow"):
        assert reasons.get(expected), (expected, reasons)


def test_ssrf_bait_is_refused_with_non_public(crawled):
    out = crawled["out"]
    bait = [u for (u,) in db_rows(out, "SELECT url FROM urls WHERE reason = 'non_public'")]
    assert any("169.254.169.254" in u for u in bait), bait
    assert any("127.0.0.1" in u for u in bait), bait  # decimal/hex forms normalise to this
    assert not crawled["report"].by_rule("ssrf")


def test_warc_files_pass_warcio_check_and_cdxj_indexer(crawled):
    warcs = sorted((crawled["out"] / "warc").glob("*.warc.gz"))
    assert warcs and not list((crawled["out"] / "warc").glob("*.open"))
    check_warcs(warcs)   # warcio check and warcio index from the project's own environment
    for w in warcs:
        proc = subprocess.run([tool("cdxj-indexer"), str(w)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        theirs = sorted(l.split(" ", 2)[2] for l in proc.stdout.splitlines() if l.strip())
        ours = sorted(l.split(" ", 2)[2] for l in Path(str(w) + ".cdxj").read_text().splitlines() if l.strip())
        assert len(theirs) == len(ours)
        assert {json.loads(x)["url"] for x in theirs} == {json.loads(x)["url"] for x in ours}


def test_every_fetched_page_is_in_the_warc_and_duplicates_are_stored_once(crawled):
    from courtly.shell.warc import iter_records

    out = crawled["out"]
    in_warc = set()
    originals = {}   # payload digest -> URLs stored with a full response record
    revisits = []
    for w in sorted((out / "warc").glob("*.warc.gz")):
        for rec in iter_records(w):
            h = rec.warc_headers
            if rec.rec_type == "response":
                in_warc.add(h["WARC-Target-URI"])
                originals.setdefault(h.get("WARC-Payload-Digest"), set()).add(h["WARC-Target-URI"])
            elif rec.rec_type == "revisit":
                in_warc.add(h["WARC-Target-URI"])
                revisits.append(h)
    fetched = {u for (u,) in db_rows(out, "SELECT url FROM urls WHERE state = 'fetched'")}
    assert fetched and fetched <= in_warc, sorted(fetched - in_warc)[:5]
    # exact duplicates (the web's ?print=1 copies) are stored once, plus revisit records
    assert revisits, "the web has exact duplicates; they must be revisits"
    for h in revisits:
        assert h["WARC-Profile"].endswith("/revisit/identical-payload-digest")
        assert h["WARC-Refers-To-Target-URI"] in originals[h["WARC-Payload-Digest"]]
        assert h["WARC-Target-URI"] != h["WARC-Refers-To-Target-URI"]
    # the exact-duplicate index is keyed by the records' own payload digests (one hash per page)
    stored = {d for (d,) in db_rows(out, "SELECT digest FROM digests")}
    assert stored and stored <= set(originals), sorted(stored - set(originals))[:3]


@pytest.mark.pywb
def test_pywb_replays_the_crawl(crawled):
    from pywb_support import fetch_replay, pywb_server
    from courtly.shell.warc import iter_records

    out = crawled["out"]
    warcs = sorted((out / "warc").glob("*.warc.gz"))
    samples = []
    for w in warcs:
        for rec in iter_records(w):
            if rec.rec_type == "response" and rec.http_status == "200" and rec.payload:
                ts = rec.warc_headers["WARC-Date"][:19].replace("-", "").replace(":", "").replace("T", "")
                samples.append((rec.warc_headers["WARC-Target-URI"], ts, rec.payload))
            if len(samples) >= 4:
                break
    assert samples
    with pywb_server(warcs) as base:
        for url, ts, payload in samples:
            status, _headers, body = fetch_replay(base, ts, url)
            assert status == 200, url
            assert body == payload, url


def test_explain_tells_a_fetched_and_a_skipped_url(crawled):
    out = crawled["out"]
    (fetched,) = db_rows(out, "SELECT url FROM urls WHERE state='fetched' AND via != '' LIMIT 1")[0]
    proc = run_courtly("explain", fetched, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "state      fetched" in proc.stdout and "status 200" in proc.stdout and "discovered" in proc.stdout
    (skipped,) = db_rows(out, "SELECT url FROM urls WHERE reason='robots' LIMIT 1")[0]
    proc = run_courtly("explain", skipped, "--out", str(out))
    assert "skipped (robots" in proc.stdout
    proc = run_courtly("explain", "http://never.test/", "--out", str(out))
    assert proc.returncode == 1 and "never seen" in proc.stdout


def test_stats_summarises_the_crawl(crawled):
    proc = run_courtly("stats", "--out", str(crawled["out"]), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["states"]["fetched"] > 50
    assert data["reasons"]["robots"] > 0
    assert data["warc_files"] >= 1
