"""Rendering on the simulated web: script shells rendered in Debian's chromium,
their subrequests held to the crawl's rules, judged from the server's log.

One crawl (module fixture) of a small web with five single-page-app hosts
(sim/spa.py: an API fetch, a timer, a script that never ends, a script that
asks for an SSRF bait address and a robots-disallowed path, a burst of eight
parallel fetches), run through the `courtly` command as a user would. Skips
with the reason only when the browser cannot be found.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawl_support import crawl_args, check, db_rows, run_courtly, write_config
from e2e.test_status_browser import LAUNCH_MS, WAIT_MS
from courtly.runtime.demo import simweb_process
from courtly.shell.clock import SystemClock
from courtly.shell.render import ChromiumRenderer

pytestmark = pytest.mark.slow

SIM_ARGS = ["--profile", "demo", "--hosts", "8", "--pages-per-host", "10", "--seed", "19",
            "--special-share", "0", "--spa-hosts", "5"]
RENDER = """
[render]
enabled = true
share_max = 1.0
burst = 5
contexts_max = 2
launch_s = 180.0
navigation_s = 6.0
deadline_s = 20.0
settle_s = 1.0
"""


def _why_not() -> str:
    return ChromiumRenderer(executable_path="/usr/bin/chromium", clock=SystemClock()).available()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    why = _why_not()
    if why:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("render")
    with simweb_process(tmp / "sim", SIM_ARGS) as web:
        manifest = json.loads(web.manifest_file.read_text())
        config = write_config(tmp / "c.toml")
        config.write_text(config.read_text() + RENDER)
        out = tmp / "crawl"
        proc = run_courtly(*crawl_args(web, out, config), timeout=400)
        assert proc.returncode == 0, proc.stderr[-3000:]
        # The server stamps a request's completion when its handler resumes after the
        # last write; with chromium busy on the same cores that came up to ~0.1 s after
        # the client had the answer, so gaps are judged with 0.2 s of slack.
        report = check(web, tolerance_s=0.2)
        yield {"web": web, "out": out, "report": report, "manifest": manifest, "port": web.port}


def _spa_hosts(crawled) -> dict[str, str]:
    """variant -> host name."""
    from courtly.sim.model import SimWeb
    from courtly.sim.manifest import web_from_manifest
    from courtly.sim.spa import spa_variant

    web: SimWeb = web_from_manifest(crawled["manifest"])
    return {spa_variant(web, s): s.name for s in web.hosts if s.has("spa")}


def _flags(out: Path, flag: str) -> dict[str, str]:
    return dict(db_rows(out, "SELECT url, detail FROM flags WHERE flag = ?", (flag,)))


def test_shells_are_rendered_and_links_that_exist_only_after_rendering_are_crawled(crawled):
    out, port = crawled["out"], crawled["port"]
    hosts = _spa_hosts(crawled)
    rendered = _flags(out, "rendered")
    for variant in ("api", "timer", "guarded", "burst"):
        home = f"http://{hosts[variant]}:{port}/"
        assert home in rendered, (variant, sorted(rendered))
        # a page of its own host that only the script links to, fetched, found on the rendered home
        fetched_via_home = db_rows(out, "SELECT url FROM urls WHERE via = ? AND state = 'fetched' AND url LIKE ?",
                                   (home, f"http://{hosts[variant]}:{port}/%.html"))
        assert fetched_via_home, variant
    links = _flags(out, "render_link")
    assert len(links) >= 4 * 5


def test_the_looping_script_is_cut_at_the_deadline_and_the_crawl_goes_on(crawled):
    out, port = crawled["out"], crawled["port"]
    loop_home = f"http://{_spa_hosts(crawled)['loop']}:{port}/"
    failed = _flags(out, "render_failed")
    assert loop_home in failed and failed[loop_home].split(":")[0] in ("navigation", "deadline")
    assert loop_home not in _flags(out, "rendered")
    # pages fetched while the looping page was being rendered: the crawl went on meanwhile
    (fetched_at,) = db_rows(out, "SELECT at FROM fetches WHERE url = ? AND kind = 'page'", (loop_home,))[0]
    (cut_at,) = db_rows(out, "SELECT at FROM flags WHERE flag = 'render_failed' AND url = ?", (loop_home,))[0]
    meanwhile = db_rows(out, "SELECT count(*) FROM fetches WHERE at > ? AND at < ?", (fetched_at, cut_at))[0][0]
    assert meanwhile > 0


def test_subrequests_to_the_bait_address_and_the_disallowed_path_are_never_sent(crawled):
    from courtly.sim.reqlog import load_log
    from courtly.sim.spa import FORBIDDEN_PATHS

    records = load_log(crawled["web"].log_file)
    assert not [r for r in records if r.path in FORBIDDEN_PATHS]
    assert not [r for r in records if "intranet.test" in r.host]
    assert not crawled["report"].by_rule("ssrf_bait") and not crawled["report"].by_rule("robots_disallowed")
    blocked = _flags(crawled["out"], "render_blocked")
    reasons = {url.split("/")[-1] or url: detail.split(":")[0] for url, detail in blocked.items()}
    assert reasons.get("spa-secret.json") == "robots"
    assert reasons.get("internal") == "non_public"


def test_politeness_holds_for_subrequests_too(crawled):
    report = crawled["report"]
    assert report.ok, report.render()
    from courtly.sim.reqlog import load_log

    burst_host = _spa_hosts(crawled)["burst"]
    parts = [r for r in load_log(crawled["web"].log_file)
             if r.host.startswith(burst_host) and r.path.startswith("/spa/api/part-")]
    assert len(parts) == 8   # all eight parallel fetches were sent, one after another


def test_rendered_dom_is_a_conversion_record_referring_to_the_raw_response(crawled):
    from warcio.archiveiterator import ArchiveIterator

    out, port = crawled["out"], crawled["port"]
    home = f"http://{_spa_hosts(crawled)['api']}:{port}/"
    responses, conversions = {}, []
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                if rec.rec_type == "response" and uri == home:
                    responses[rec.rec_headers.get_header("WARC-Record-ID")] = rec.content_stream().read()
                elif rec.rec_type == "conversion" and uri == home:
                    conversions.append((rec.rec_headers.get_header("WARC-Refers-To"), rec.content_stream().read()))
    assert conversions
    refers_to, dom = conversions[0]
    assert refers_to in responses
    assert b"<a href=" not in responses[refers_to] and b"<a href=" in dom


def test_report_counts_rendered_pages_and_the_links_they_added(crawled):
    proc = run_courtly("report", "--out", str(crawled["out"]), "--json")
    assert proc.returncode == 0, proc.stderr
    rendering = json.loads(proc.stdout)["rendering"]
    assert rendering["pages_rendered"] >= 4
    assert rendering["links_added"] == len(_flags(crawled["out"], "render_link"))
    assert rendering["subrequests_blocked"] >= 2


def _captures(out: Path, host: str, port: int) -> dict[str, tuple[str, bytes]]:
    """path -> (14-digit timestamp, payload) of the 200 responses archived for `host`."""
    from courtly.shell.warc import iter_records

    found = {}
    for w in sorted((out / "warc").glob("*.warc.gz")):
        for rec in iter_records(w):
            uri = rec.warc_headers.get("WARC-Target-URI", "")
            if rec.rec_type == "response" and rec.http_status == "200" and uri.startswith(f"http://{host}:{port}/"):
                ts = "".join(ch for ch in rec.warc_headers["WARC-Date"][:19] if ch.isdigit())
                found[uri.split(f":{port}", 1)[1]] = (ts, rec.payload)
    return found


@pytest.mark.pywb
def test_pywb_replays_a_rendered_page_with_its_script_and_the_answers_it_got(crawled):
    """The shell, its script and the API answer come back from the archive (id_),
    and the page replayed in chromium through pywb shows the links rendering found."""
    from playwright.sync_api import sync_playwright

    from pywb_support import fetch_replay, pywb_server

    out, port = crawled["out"], crawled["port"]
    host = _spa_hosts(crawled)["api"]
    captures = _captures(out, host, port)
    assert {"/", "/spa/app.js", "/spa/api/links.json"} <= set(captures)
    with pywb_server(sorted((out / "warc").glob("*.warc.gz"))) as base:
        for path in ("/", "/spa/app.js", "/spa/api/links.json"):
            ts, payload = captures[path]
            status, _headers, body = fetch_replay(base, ts, f"http://{host}:{port}{path}")
            assert (status, body) == (200, payload), path
        ts = captures["/"][0]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--no-first-run"], timeout=LAUNCH_MS)
            try:
                page = browser.new_page()
                page.set_default_timeout(WAIT_MS)   # generous on a loaded machine
                page.goto(f"{base}/coll/{ts}/http://{host}:{port}/")   # pywb's frame
                anchors = page.frame_locator("iframe").first.locator("#root a")
                anchors.first.wait_for(timeout=WAIT_MS)
                replayed = anchors.evaluate_all("els => els.map(e => e.getAttribute('href'))")
            finally:
                browser.close()
    from courtly.sim.manifest import web_from_manifest
    from courtly.sim.spa import home_hrefs

    web = web_from_manifest(crawled["manifest"])
    assert len(replayed) == len(home_hrefs(web, web.by_name[host], port))

