"""The monitor's page (/changes) in headless Chromium: the watch list with what
each watch learned, the change list, and the side-by-side diff view of one
change, drawn from real change events (the simulated web's watch pages judged
by the monitor's core). A screenshot is saved beside the status page's."""

from __future__ import annotations

import asyncio


from courtly.shell.status import StatusServer
from courtly.shell.store.watch_sqlite import SqliteWatchStore
from courtly.shell.watch_api import WatchApi
from e2e.test_status_browser import WAIT_MS, artifacts, chromium, headless_chromium, open_page  # noqa: F401 (a fixture)
from monitor_events import fill
from shell.test_status import FakeSource


async def _scenario(store, seqs, chromium_path: str, shot) -> None:
    server = StatusServer(FakeSource(hosts_n=5), watch_api=WatchApi(store, "", lambda: 1_800_000_000.0))
    base = f"http://127.0.0.1:{await server.start()}/"
    try:
        async with headless_chromium(chromium_path) as browser:
            await _check_page(browser, base, store, seqs, shot)
    finally:
        await server.stop()


async def _check_page(browser, base: str, store, seqs, shot) -> None:  # type: ignore[no-untyped-def]
    page, errors = await open_page(browser, base + "changes")
    await page.wait_for_function("Number(document.body.dataset.loads || 0) >= 1", timeout=WAIT_MS)
    shown = await page.eval_on_selector_all("#change-table tbody tr", "trs => trs.map(t => t.dataset.seq)")
    assert shown == [str(s) for s in sorted(seqs, reverse=True)]
    watches = await page.inner_text("#watch-table")
    assert "Quote of the moment: *" in watches            # what was learned is visible
    assert "/watch/noise/" in watches and "/watch/both/" in watches

    # open the oldest change: its side-by-side view marks what went and what came
    change = store.change(seqs[0])
    await page.click(f"#change-table tr[data-seq='{seqs[0]}'] button")
    await page.wait_for_function("(s) => document.body.dataset.diff === s", arg=str(seqs[0]), timeout=WAIT_MS)
    assert await page.is_visible("#diff")
    before = await page.eval_on_selector_all("#diff-before .blk", "b => b.map(x => x.textContent)")
    after = await page.eval_on_selector_all("#diff-after .blk", "b => b.map(x => x.textContent)")
    assert before == change.before and after == change.after
    gone = await page.eval_on_selector_all("#diff-before .blk.del", "b => b.map(x => x.textContent)")
    came = await page.eval_on_selector_all("#diff-after .blk.ins", "b => b.map(x => x.textContent)")
    assert gone and came and set(gone).isdisjoint(change.after) and set(came).isdisjoint(change.before)
    values = await page.inner_text("#diff-values")
    for v in change.event["diff"]["changed"]:
        assert f"{v['before']} → {v['after']}" in values

    # a link straight to a change opens it too
    page2, errors2 = await open_page(browser, base + f"changes#change-{seqs[-1]}")
    await page2.wait_for_function("(s) => document.body.dataset.diff === s", arg=str(seqs[-1]), timeout=WAIT_MS)
    await page.screenshot(path=str(shot), full_page=True)
    assert not errors and not errors2, errors + errors2


def test_change_list_and_side_by_side_diff_in_chromium(chromium, tmp_path):  # noqa: F811
    store = SqliteWatchStore(tmp_path / "crawl.db")
    try:
        seqs = fill(store)
        assert len(seqs) >= 2
        shot = artifacts() / "monitor-changes.png"
        asyncio.run(_scenario(store, seqs, chromium, shot))
    finally:
        store.close()
    assert shot.stat().st_size > 10_000
