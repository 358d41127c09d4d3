"""The status page in a real browser: Debian's Chromium, headless, driven by Playwright.

Two sources: a fake but realistic one (tests/shell/test_status.py's
FakeSource: 2,000 hosts, moving counters, a trap suspect, URL histories) and a
real short crawl of the simulated web. Each test checks that the page loads
without console errors, that the charts are drawn, that the host table sorts
and searches (on the server), that the URL box shows a history, and that every
figure on the page equals /metrics; it saves a full-page screenshot
(`$COURTLY_TEST_ARTIFACTS`, default /tmp/courtly-artifacts/).

Setup installs what is missing (`apt-get install chromium`, `pip install
playwright`; never `playwright install`, which downloads a browser) and skips
with the reason only when that is impossible.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from courtly.shell.metrics import histogram_quantile
from courtly.shell.status import StatusServer

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CHARTS = ["chart-rate", "chart-bytes", "chart-status", "chart-queue", "chart-hosts", "chart-latency",
          "chart-reasons"]
WAIT_MS = 60_000   # generous upper bounds for the page to catch up, never a timing assertion
LAUNCH_MS = 180_000   # a browser's start on a loaded machine (CI saw one take more than 30 s)


def artifacts() -> Path:
    d = Path(os.environ.get("COURTLY_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "courtly-artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _install_chromium() -> str:
    """'' when /usr/bin/chromium is there (installing it if needed), else why not."""
    if os.path.exists(CHROMIUM):
        return ""
    if not shutil.which("apt-get") or os.geteuid() != 0:
        return "no /usr/bin/chromium and no root apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{' '.join(cmd)} failed: {e}"
        if proc.returncode != 0:
            return f"{' '.join(cmd)} failed: {proc.stderr.strip()[-300:]}"
    return "" if os.path.exists(CHROMIUM) else "apt-get installed chromium but /usr/bin/chromium is missing"


def _install_playwright() -> str:
    import importlib

    try:
        importlib.import_module("playwright.async_api")
        return ""
    except ImportError:
        pass
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "playwright"],
                          capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        return f"pip install playwright failed: {proc.stderr.strip()[-300:]}"
    importlib.invalidate_caches()
    try:
        importlib.import_module("playwright.async_api")
    except ImportError as e:
        return f"playwright installed but not importable: {e}"
    return ""


@pytest.fixture(scope="module")
def chromium():
    why = _install_chromium() or _install_playwright()
    if why:
        pytest.skip(f"browser test needs Chromium and Playwright: {why}")
    return CHROMIUM


# ---- what the page is checked for -------------------------------------------------------------


def parse_metrics(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def fetch_metrics(base: str) -> dict[tuple[str, tuple], float]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base + "metrics") as r:
            assert r.status == 200
            return parse_metrics(await r.text())


def _quantile_from(m: dict, name: str, q: float) -> float | None:
    buckets = sorted(((float(dict(labels)["le"]), v) for (n, labels), v in m.items() if n == name + "_bucket"))
    le = [b for b, _ in buckets if b != float("inf")]
    counts = [c for _, c in buckets]
    return histogram_quantile(q, le, counts)


def expected_value(m: dict, tile: dict) -> float | None:
    name = tile["metric"]
    if tile["quantile"]:
        return _quantile_from(m, name, float(tile["quantile"]))
    if tile["sum"]:
        vals = [v for (n, _), v in m.items() if n == name]
        return sum(vals) if vals else None
    labels = tuple(sorted(json.loads(tile["labels"] or "{}").items()))
    return m.get((name, labels))


TILES_JS = """() => [...document.querySelectorAll('.tile[data-metric]')].map(t => ({
    metric: t.dataset.metric, labels: t.dataset.labels || '', sum: t.dataset.sum || '',
    quantile: t.dataset.quantile || '', value: t.dataset.value, text: t.querySelector('.v').textContent,
    hidden: t.hidden}))"""

INK_JS = """(id) => { const c = document.getElementById(id); const ctx = c.getContext('2d');
    const d = ctx.getImageData(0, 0, c.width, c.height).data; let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }"""


@contextlib.asynccontextmanager
async def headless_chromium(chromium_path: str):
    """A launched headless Chromium (Playwright), closed on the way out."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True, timeout=LAUNCH_MS)
        try:
            yield browser
        finally:
            await browser.close()


async def open_page(browser, base: str):
    page = await browser.new_page(viewport={"width": 1440, "height": 1000})
    page.set_default_timeout(WAIT_MS)   # every action and navigation: generous on a loaded machine
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(base)
    return page, errors


async def snapshots(page) -> int:
    return int(await page.evaluate("Number(document.body.dataset.snapshots || 0)"))


async def wait_snapshots(page, n: int) -> None:
    await page.wait_for_function("(n) => Number(document.body.dataset.snapshots || 0) >= n", arg=n,
                                 timeout=WAIT_MS)


async def check_charts(page, charts: list[str]) -> None:
    for cid in charts:
        points = await page.get_attribute(f"#{cid}", "data-points")
        assert points is not None and int(points) > 0, f"{cid} drew nothing"
        ink = await page.evaluate(INK_JS, cid)
        assert ink > 500, f"{cid} is nearly blank ({ink} pixels)"


async def check_figures_match_metrics(page, base: str, polls: int = 6) -> int:
    """Every tile with a value equals its /metrics series; returns how many were compared.

    The page shows the poll before the /metrics read, so a figure that moves with time alone
    (a windowed rate decaying after the crawl) can differ between the two reads: on a mismatch
    wait for the page's next poll and read both again, at most `polls` times."""
    mismatched: list = []
    for _ in range(polls):
        tiles = await page.evaluate(TILES_JS)
        m = await fetch_metrics(base)
        compared, mismatched = 0, []
        for t in tiles:
            if t["value"] in ("", None):
                continue
            want = expected_value(m, t)
            assert want is not None, f"{t['metric']} {t['labels']} is on the page but not in /metrics"
            if float(t["value"]) != pytest.approx(want, rel=1e-9, abs=1e-12):
                mismatched.append((t, want))
            compared += 1
        if not mismatched:
            return compared
        await wait_snapshots(page, await snapshots(page) + 1)
    assert not mismatched, mismatched
    return compared


async def sorted_column(page, index: int) -> list[str]:
    return await page.eval_on_selector_all(
        f"#host-table tbody tr td:nth-child({index})", "tds => tds.map(td => td.textContent)")


async def host_keys(page) -> list[str]:
    return await page.eval_on_selector_all("#host-table tbody tr[data-key]", "trs => trs.map(t => t.dataset.key)")


async def wait_host_load(page, before: int) -> None:
    await page.wait_for_function("(n) => Number(document.body.dataset.hostLoads || 0) > n", arg=before,
                                 timeout=WAIT_MS)


async def wait_text(page, selector: str, text: str) -> None:
    await page.wait_for_function("([sel, text]) => document.querySelector(sel).textContent.includes(text)",
                                 arg=[selector, text], timeout=WAIT_MS)


async def host_loads(page) -> int:
    return int(await page.evaluate("Number(document.body.dataset.hostLoads || 0)"))


# ---- the fake source -------------------------------------------------------------------------


async def _fake_scenario(src, chromium_path: str, shot: Path) -> None:
    from playwright.async_api import async_playwright

    server = StatusServer(src)
    port = await server.start()
    base = f"http://127.0.0.1:{port}/"
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True, timeout=LAUNCH_MS)
            try:
                page, errors = await open_page(browser, base)
                await wait_snapshots(page, 4)
                await check_charts(page, CHARTS + ["chart-freshness"])

                # sort by requests, descending (server-side): the biggest host comes first
                loads = await host_loads(page)
                await page.click("#host-table th[data-sort=fetches]")
                await page.wait_for_selector("#host-table th[data-sort=fetches][aria-sort=descending]",
                                             timeout=WAIT_MS)
                await wait_host_load(page, loads)
                want = sorted(src.rows.values(), key=lambda r: (-r["fetches"], r["key"]))[:50]
                assert await host_keys(page) == [r["key"] for r in want]
                shown = [int(x.replace(",", "")) for x in await sorted_column(page, 10)]
                assert shown == sorted(shown, reverse=True)
                await page.click("#host-table th[data-sort=fetches]")   # again: ascending
                await page.wait_for_selector("#host-table th[data-sort=fetches][aria-sort=ascending]",
                                             timeout=WAIT_MS)
                shown = [int(x.replace(",", "")) for x in await sorted_column(page, 10)]
                assert shown == sorted(shown)

                # search (server-side), then page forward
                await page.fill("#host-q", "omega")
                omegas = sorted((k for k in src.rows if "omega" in k), key=lambda k: (src.rows[k]["fetches"], k))
                await wait_text(page, "#host-count", f"({len(omegas)} matching)")
                keys = await host_keys(page)
                assert keys == omegas[:50]
                await page.click("#host-next")
                await wait_text(page, "#host-range", "51–100 of")
                assert await host_keys(page) == omegas[50:100]
                await page.fill("#host-q", "")
                await wait_text(page, "#host-count", f"({len(src.rows):,})")

                # the URL box shows one URL's history
                key = next(iter(src.rows))
                await page.fill("#explain-url", f"https://{key}/article/1")
                await page.click("#explain-form button")
                await page.wait_for_selector("#explain-fetches", timeout=WAIT_MS)
                history = await page.inner_text("#explain-out")
                assert "fetched" in history and "503" in history and "200" in history
                assert "courtly-00003.warc.gz:88812" in history

                # the review queue and the decisions are listed
                await page.wait_for_selector("#review-table tbody tr", timeout=WAIT_MS)
                assert "calendar" in await page.inner_text("#review-table")
                await page.wait_for_selector("#decision-table tbody tr", timeout=WAIT_MS)

                # figures on the page equal /metrics (freeze the source, wait for one more poll)
                src.frozen = True
                await wait_snapshots(page, await snapshots(page) + 2)
                assert await check_figures_match_metrics(page, base) >= 20
                pages_tile = await page.inner_text(".tile[data-labels='{\"kind\":\"page\"}'] .v")
                assert pages_tile == f"{src._snap['fetches']['page']:,}"

                await page.evaluate("window.scrollTo(0, 0)")
                await page.screenshot(path=str(shot), full_page=True)
                assert not errors, errors
            finally:
                await browser.close()
    finally:
        await server.stop()


def test_status_page_in_chromium_with_a_realistic_source(chromium):
    from shell.test_status import FakeSource

    src = FakeSource(hosts_n=2000)
    shot = artifacts() / "status-fake.png"
    asyncio.run(_fake_scenario(src, chromium, shot))
    assert shot.stat().st_size > 10_000


# ---- a real crawl of the simulated web ------------------------------------------------------


async def _crawl_scenario(cfg, out: Path, seeds: list[str], chromium_path: str, shot: Path) -> dict:
    from playwright.async_api import async_playwright

    from courtly.runtime.observe import CrawlObserver
    from courtly.runtime.wiring import run_crawl

    loop = asyncio.get_running_loop()
    attached: asyncio.Future = loop.create_future()
    crawl = asyncio.create_task(run_crawl(cfg, out, seeds, install_signals=False,
                                          on_start=lambda c: attached.set_result(CrawlObserver(c))))
    await asyncio.wait({crawl, attached}, return_when=asyncio.FIRST_COMPLETED)
    if not attached.done():
        crawl.result()   # raises what stopped the crawl
    observer = attached.result()
    server = StatusServer(observer)
    port = await server.start()
    base = f"http://127.0.0.1:{port}/"
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True, timeout=LAUNCH_MS)
            try:
                page, errors = await open_page(browser, base)
                await wait_snapshots(page, 2)
                stats = await asyncio.wait_for(crawl, 600)   # the crawl ends; the page keeps polling
                # figures are still now only once the IP rate window has emptied
                await page.wait_for_function(
                    "() => document.querySelector('.tile[data-metric=courtly_ip_request_rate_max]')"
                    ".dataset.value === '0'", timeout=WAIT_MS)
                await wait_snapshots(page, await snapshots(page) + 1)
                await check_charts(page, ["chart-rate", "chart-bytes", "chart-status", "chart-queue",
                                          "chart-hosts", "chart-latency"])
                assert await check_figures_match_metrics(page, base) >= 15
                m = await fetch_metrics(base)
                assert m[("courtly_fetches_total", (("kind", "page"),))] == stats.fetched + stats.errors > 0
                assert m[("courtly_fetch_latency_seconds_count", ())] > 0

                loads = await host_loads(page)
                await page.click("#host-table th[data-sort=fetches]")
                await wait_host_load(page, loads)
                shown = [int(x.replace(",", "")) for x in await sorted_column(page, 10)]
                assert shown and shown == sorted(shown, reverse=True) and shown[0] > 0
                first_key = (await host_keys(page))[0]
                await page.fill("#host-q", first_key)
                await wait_text(page, "#host-count", "matching")
                assert first_key in await host_keys(page)

                await page.fill("#explain-url", seeds[0])
                await page.click("#explain-form button")
                await page.wait_for_selector("#explain-fetches", timeout=WAIT_MS)
                assert "fetched" in await page.inner_text("#explain-out")

                # the crawl folder's views are the live page's too: its URLs, each capture replayed
                await page.wait_for_function("() => Number(document.body.dataset.urlLoads || 0) > 0",
                                             timeout=WAIT_MS)
                href = await page.get_attribute("#explain-fetches a.replay", "href")
                async with aiohttp.ClientSession() as http:
                    async with http.get(base + href) as r:
                        assert r.status == 200 and r.headers["Courtly-Archived-Status"]
                        assert "sandbox" in r.headers["Content-Security-Policy"]

                await page.fill("#host-q", "")
                await page.evaluate("window.scrollTo(0, 0)")
                await page.screenshot(path=str(shot), full_page=True)
                assert not errors, errors
                return {"fetched": stats.fetched}
            finally:
                await browser.close()
    finally:
        await server.stop()
        observer.close()
        if not crawl.done():
            crawl.cancel()


@pytest.mark.slow
def test_status_page_follows_a_real_crawl_of_the_simulated_web(chromium, tmp_path):
    from courtly.config import config_from_dict
    from courtly.runtime.demo import simweb_process

    with simweb_process(tmp_path / "sim", ["--profile", "demo", "--hosts", "8", "--pages-per-host", "10",
                                           "--seed", "3", "--robots-hang-s", "2"]) as web:
        allowed = json.loads(web.manifest_file.read_text())["allowed_networks"]
        cfg = config_from_dict({
            "crawl": {"contact": "tests@example.org", "fetch_tasks": 64},
            "politeness": {"delay_s": 0.2, "crawl_delay_s_max": 0.3, "response_factor": 2.0},
            "fetch": {"total_s": 3.0, "connect_s": 2.0, "body_bytes_max": 2_000_000},
            "store": {"commit_interval_s": 0.2},
            "network": {"allow": allowed, "hosts_file": str(web.hosts_file)},
        })
        shot = artifacts() / "status-crawl.png"
        result = asyncio.run(_crawl_scenario(cfg, tmp_path / "crawl", web.seeds, chromium, shot))
    assert result["fetched"] > 0
    assert shot.stat().st_size > 10_000
