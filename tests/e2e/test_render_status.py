"""The status page during a crawl that renders: the render tiles show, and every
figure on the page equals /metrics (Debian's chromium, as in test_status_browser)."""

from __future__ import annotations

import asyncio
import json

import pytest

from e2e.test_status_browser import (  # noqa: F401  (chromium: a fixture)
    ARGS, LAUNCH_MS, WAIT_MS, check_figures_match_metrics, chromium, fetch_metrics, open_page, snapshots, wait_snapshots)
from courtly.shell.status import StatusServer

pytestmark = pytest.mark.slow

RENDER_TILES = ("courtly_renders_total", "courtly_render_budget_used_ratio", "courtly_render_seconds",
                "courtly_render_subrequests_blocked_total")


async def _scenario(cfg, out, seeds, chromium_path: str) -> tuple[dict, list[dict], dict]:
    from playwright.async_api import async_playwright

    from courtly.runtime.observe import CrawlObserver
    from courtly.runtime.wiring import run_crawl

    attached: asyncio.Future = asyncio.get_running_loop().create_future()
    crawl = asyncio.create_task(run_crawl(cfg, out, seeds, install_signals=False,
                                          on_start=lambda c: attached.set_result(CrawlObserver(c))))
    await asyncio.wait({crawl, attached}, return_when=asyncio.FIRST_COMPLETED)
    if not attached.done():
        crawl.result()
    observer = attached.result()
    server = StatusServer(observer)
    base = f"http://127.0.0.1:{await server.start()}/"
    try:
        await asyncio.wait_for(crawl, 600)   # the figures are final once the crawl has ended
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium_path, args=ARGS, headless=True, timeout=LAUNCH_MS)
            try:
                page, errors = await open_page(browser, base)
                # figures are still now only once the IP rate window has emptied
                await page.wait_for_function(
                    "() => document.querySelector('.tile[data-metric=courtly_ip_request_rate_max]')"
                    ".dataset.value === '0'", timeout=WAIT_MS)
                await wait_snapshots(page, await snapshots(page) + 1)
                compared = await check_figures_match_metrics(page, base)
                tiles = await page.evaluate("""() => [...document.querySelectorAll('.tile[data-metric]')]
                    .map(t => ({metric: t.dataset.metric, hidden: t.hidden, text: t.querySelector('.v').textContent}))""")
                assert not errors, errors
            finally:
                await browser.close()
        return {"compared": compared}, tiles, await fetch_metrics(base)
    finally:
        await server.stop()
        observer.close()


def test_status_page_shows_rendering_figures_equal_to_metrics(chromium, tmp_path):
    from courtly.config import config_from_dict
    from courtly.runtime.demo import simweb_process

    with simweb_process(tmp_path / "sim", ["--profile", "demo", "--hosts", "6", "--pages-per-host", "10",
                                           "--seed", "19", "--special-share", "0", "--spa-hosts", "5"]) as web:
        allowed = json.loads(web.manifest_file.read_text())["allowed_networks"]
        cfg = config_from_dict({
            "crawl": {"contact": "tests@example.org", "fetch_tasks": 64},
            "politeness": {"delay_s": 0.2, "crawl_delay_s_max": 0.3, "response_factor": 2.0},
            "fetch": {"total_s": 3.0, "connect_s": 2.0},
            "store": {"commit_interval_s": 0.2},
            "network": {"allow": allowed, "hosts_file": str(web.hosts_file)},
            "render": {"enabled": True, "share_max": 1.0, "burst": 5, "navigation_s": 6.0, "deadline_s": 20.0,
                       "launch_s": 180.0},
        })
        result, tiles, m = asyncio.run(_scenario(cfg, tmp_path / "crawl", web.seeds, chromium))
    shown = {t["metric"] for t in tiles if not t["hidden"]}
    assert set(RENDER_TILES) <= shown, sorted(shown)
    assert result["compared"] >= 15
    assert m[("courtly_renders_total", (("outcome", "rendered"),))] >= 3
    assert m[("courtly_render_subrequests_blocked_total", (("reason", "robots"),))] >= 1
