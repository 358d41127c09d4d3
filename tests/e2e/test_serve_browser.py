"""`courtly serve` in headless Chromium on a finished crawl of the simulated web.

The crawl stops at --max-pages so URLs stay queued. The served page is
checked against `courtly hosts --json` and `courtly urls --json` (the same
store read by the terminal commands): the per-host table with the folder's
columns, the queued URLs of a host (a click on its key), the whole-crawl
charts from the fetch log, and a replay link followed to the archived page,
both as the raw record (`/capture`) and through pywb (`--replay`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from crawl_support import courtly_cmd, crawl_args, db_rows, run_courtly, write_config
from warc_support import check_warcs, closed_warcs

from e2e.test_status_browser import (ARGS, LAUNCH_MS, WAIT_MS, artifacts, check_figures_match_metrics,  # noqa: F401
                                     chromium, open_page)

SERVE_START_S = 60


@contextmanager
def serving(out: Path, *extra: str):
    """`courtly serve --out OUT --listen 127.0.0.1:0 ...`; yields its base URL, stops it by PID."""
    proc = subprocess.Popen(courtly_cmd("serve", "--out", str(out), "--listen", "127.0.0.1:0", *extra),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        base = None
        for _ in range(20):   # its first lines: pywb's (with --replay), then where it serves
            line = proc.stderr.readline()
            if not line:
                break
            m = re.search(r" at (http://127\.0\.0\.1:\d+/) ", line)
            if m:
                base = m.group(1)
                break
        assert base, f"courtly serve did not start (status {proc.poll()})"
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=SERVE_START_S)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from courtly.runtime.demo import simweb_process

    tmp = tmp_path_factory.mktemp("serve")
    with simweb_process(tmp / "sim", ["--profile", "demo", "--hosts", "6", "--pages-per-host", "12",
                                      "--seed", "5", "--robots-hang-s", "2"]) as web:
        out = tmp / "crawl"
        proc = run_courtly(*crawl_args(web, out, write_config(tmp / "c.toml")), "--max-pages", "60")
        assert proc.returncode == 0, proc.stderr[-2000:]
    yield out
    check_warcs(closed_warcs(out))


def _json(*args: str) -> dict:
    proc = run_courtly(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


async def _count(page, name: str) -> int:
    return int(await page.evaluate(f"Number(document.body.dataset.{name} || 0)"))


async def _wait_more(page, name: str, before: int) -> None:
    await page.wait_for_function(f"(n) => Number(document.body.dataset.{name} || 0) > n", arg=before,
                                 timeout=WAIT_MS)


async def _served_page(chromium_path: str, base: str, out: Path, shot: Path, *, pywb: bool) -> None:
    from playwright.async_api import async_playwright

    hosts = _json("hosts", "--out", str(out), "--sort", "queued")
    busy = hosts["rows"][0]
    assert busy["queued"] > 0, "the crawl stopped at --max-pages: some host still has URLs queued"
    queued = _json("urls", "--out", str(out), "--host", busy["key"], "--state", "queued", "--limit", "50")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True, timeout=LAUNCH_MS)
        try:
            page, errors = await open_page(browser, base)
            # every tile equals /metrics, both read from the store
            await page.wait_for_function("() => Number(document.body.dataset.snapshots || 0) > 1", timeout=WAIT_MS)
            assert await check_figures_match_metrics(page, base) >= 12

            # the per-host table, with the columns a folder adds
            await page.wait_for_function("() => Number(document.body.dataset.hostLoads || 0) > 0", timeout=WAIT_MS)
            await page.wait_for_selector("#host-table th[data-sort=fetched]:not([hidden])", timeout=WAIT_MS)
            rows = await page.eval_on_selector_all(
                "#host-table tbody tr[data-key]",
                "trs => trs.map(t => [t.dataset.key, ...[...t.children].slice(10).map(td => td.textContent)])")
            want = {r["key"]: [r["state"], f"{r['fetched']:,}", f"{r['denied_total']:,}", f"{r['errors']:,}",
                               ", ".join(f"{k} {n:,}" for k, n in r["denied"].items())]
                    for r in hosts["rows"]}
            assert {r[0]: r[1:] for r in rows} == want

            # a click on a host key lists its queued URLs
            loads = await _count(page, "urlLoads")
            await page.click(f"#host-table tbody tr[data-key='{busy['key']}'] td:first-child")
            await _wait_more(page, "urlLoads", loads)
            await page.wait_for_function("(n) => document.querySelector('#url-count').textContent === n",
                                         arg=f"({queued['total']:,})", timeout=WAIT_MS)
            shown = await page.eval_on_selector_all("#url-table tbody tr[data-url]", "trs => trs.map(t => t.dataset.url)")
            assert shown == [r["url"] for r in queued["rows"]]

            # a URL of the list opens its history
            await page.click(f"#url-table tbody tr[data-url='{shown[0]}'] a.url")
            await page.wait_for_function("() => document.querySelector('#explain-out').dataset.found === '1'",
                                         timeout=WAIT_MS)
            history = await page.inner_text("#explain-out")
            assert shown[0] in history and "queued" in history

            # the whole crawl's charts, from the fetch log
            await page.wait_for_function("() => Number(document.body.dataset.timelineLoads || 0) > 0", timeout=WAIT_MS)
            for cid in ("chart-crawl-requests", "chart-crawl-bytes", "chart-crawl-errors"):
                assert int(await page.get_attribute(f"#{cid}", "data-points") or 0) > 0, cid

            # a fetched page's replay link brings the archived page back
            fetched = _json("urls", "--out", str(out), "--state", "fetched", "--host", busy["key"], "--limit", "50")
            target = next(r for r in fetched["rows"] if r["status"] == 200 and r["url"].endswith("/"))
            title = _archived_title(out, target["url"])
            loads = await _count(page, "urlLoads")
            await page.select_option("#url-state", "fetched")
            await _wait_more(page, "urlLoads", loads)
            link = page.locator(f"#url-table tbody tr[data-url='{target['url']}'] a.replay")
            async with page.context.expect_page() as opened:
                await link.click()
            replay = await opened.value
            await replay.wait_for_load_state()
            if pywb:   # pywb's frame around the capture; the archived page is in the inner frame
                await replay.wait_for_function("() => document.querySelector('iframe') !== null", timeout=WAIT_MS)
                frame = next(f for f in replay.frames if f != replay.main_frame)
                await frame.wait_for_load_state()
                assert title in await frame.title()
            else:
                assert replay.url.startswith(base + "capture?")
                assert await replay.title() == title
            await replay.close()

            await page.evaluate("window.scrollTo(0, 0)")
            await page.screenshot(path=str(shot), full_page=True)
            assert not errors, errors
        finally:
            await browser.close()


def _archived_title(out: Path, url: str) -> str:
    from courtly.shell.warc import iter_records

    for w in sorted((out / "warc").glob("*.warc.gz")):
        for rec in iter_records(w):
            if rec.rec_type == "response" and rec.warc_headers["WARC-Target-URI"] == url:
                m = re.search(rb"<title>(.*?)</title>", rec.payload, re.S)
                assert m, "the simulated web's pages have a title (and are sent uncompressed)"
                return m.group(1).decode()
    raise AssertionError(f"{url} is not in the WARC files")


@pytest.mark.slow
def test_serve_shows_hosts_queued_urls_and_replays_a_capture_in_chromium(chromium, finished):
    shot = artifacts() / "serve-folder.png"
    with serving(finished) as base:
        asyncio.run(_served_page(chromium, base, finished, shot, pywb=False))
    assert shot.stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.pywb
def test_serve_replay_links_open_the_capture_in_pywb(chromium, finished):
    from pywb_support import pywb_venv

    os.environ.setdefault("COURTLY_PYWB_VENV", str(pywb_venv()))
    with serving(finished, "--replay") as base:
        asyncio.run(_served_page(chromium, base, finished, artifacts() / "serve-pywb.png", pywb=True))


def _fetches(out: Path) -> int:
    try:
        return db_rows(out, "SELECT count(*) FROM fetches")[0][0]
    except Exception:   # the crawl has not created its tables yet
        return 0


def _wait_for(what, crawl: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert crawl.poll() is None, f"the crawl ended ({crawl.returncode}): {crawl.stderr.read()}"
        assert time.monotonic() < deadline, "gave up waiting (bounded wait, not a timing assertion)"
        time.sleep(0.2)


@pytest.mark.slow
def test_hosts_urls_and_serve_read_a_running_crawl_without_holding_it_up(tmp_path):
    from courtly.runtime.demo import simweb_process

    with simweb_process(tmp_path / "sim", ["--profile", "demo", "--hosts", "4", "--pages-per-host", "40",
                                           "--seed", "9", "--robots-hang-s", "2"]) as web:
        out = tmp_path / "crawl"
        args = crawl_args(web, out, write_config(tmp_path / "c.toml", delay_s=0.5, crawl_delay_s_max=0.5))
        crawl = subprocess.Popen(courtly_cmd(*args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            _wait_for(lambda: _fetches(out) >= 5, crawl)
            assert crawl.poll() is None, "4 hosts x 40 pages at 0.5 s: the crawl is still running"
            hosts = _json("hosts", "--out", str(out))
            assert hosts["total"] > 0 and sum(r["fetched"] for r in hosts["rows"]) > 0
            queued = _json("urls", "--out", str(out), "--state", "queued", "--limit", "5")
            assert queued["total"] > 0
            with serving(out) as base:
                for path in ("api/hosts?sort=fetched&desc=1", "api/urls?state=fetched&limit=5", "api/timeline"):
                    with urllib.request.urlopen(base + path, timeout=60) as r:
                        assert r.status == 200 and json.loads(r.read())
                seen = _fetches(out)
                _wait_for(lambda: _fetches(out) > seen, crawl)   # the crawl goes on committing beside the readers
        finally:
            if crawl.poll() is None:
                crawl.send_signal(signal.SIGINT)
            crawl.wait(timeout=120)
    assert "Traceback" not in crawl.stderr.read()
