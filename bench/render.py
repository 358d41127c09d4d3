"""Benchmark: rendering script shells in Debian's chromium, alone and inside a crawl.

    python bench/render.py                      # renders/s, memory per context, a 5 %-shell crawl
    python bench/render.py --renders 40 --hosts 40 --pages-per-host 10

1. Renders per second: `ChromiumRenderer` renders one single-page-app shell
   (its script fetches a JSON list and writes the links) `--renders` times
   with 1 and with 2 contexts at once; the gate answers from memory, so this
   is the browser's own cost (settle_s 0: the page is read when the network
   is idle).
2. Memory per context: resident memory of the browser's process tree (from
   /proc) with no page open, then with `--contexts` contexts each holding a
   rendered shell; the difference divided by the number of contexts.
3. CPU share of rendering in a crawl: the bench-profile simulated web with
   `--hosts` hosts of `--pages-per-host` pages, of which `--shell-share` of
   the pages are shells (the home pages of that many single-page-app hosts,
   sim/spa.py, every variant including the script that never ends),
   crawled twice through `python -m courtly crawl`: with `[render] enabled`
   (share_max 1.0: every shell) and without. CPU is user+sys of the crawler
   and everything it started and waited for (the browser too; bench/harness).
   The share is (CPU with - CPU without) / CPU with.

A benchmark, not a test: it prints figures and asserts nothing; figures go in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from courtly.core.render import SubResponse  # noqa: E402
from courtly.runtime.demo import simweb_process  # noqa: E402
from courtly.shell.clock import SystemClock  # noqa: E402
from courtly.shell.render import ChromiumRenderer, tree_rss  # noqa: E402
from harness import courtly_command, run_measured  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
HTML = (("content-type", "text/html; charset=utf-8"),)
SHELL = (b'<!doctype html><html><head><title>app</title></head><body><div id="root"></div>'
         b'<script src="/app.js"></script></body></html>')
APP = (b"fetch('/api').then(r=>r.json()).then(h=>{const root=document.getElementById('root');"
       b"for(const x of h){const a=document.createElement('a');a.href=x;a.textContent=x;root.appendChild(a);}});")
API = json.dumps([f"/item/{i}.html" for i in range(50)]).encode()


async def _gate(req):
    if req.url.endswith("/app.js"):
        return SubResponse(200, (("content-type", "application/javascript"),), APP)
    if req.url.endswith("/api"):
        return SubResponse(200, (("content-type", "application/json"),), API)
    return "refused"


async def renders_per_second(n: int, contexts: int) -> tuple[float, int]:
    r = ChromiumRenderer(executable_path=CHROMIUM, clock=SystemClock(), contexts_max=contexts,
                         settle_s=0.0, renders_per_browser_max=10_000)
    try:
        await r.render("http://warm.test/", SubResponse(200, HTML, SHELL), _gate)   # start the browser
        t0 = time.monotonic()
        outs = await asyncio.gather(*(r.render(f"http://app{i}.test/", SubResponse(200, HTML, SHELL), _gate)
                                      for i in range(n)))
        wall = time.monotonic() - t0
    finally:
        await r.close()
    return n / wall, sum(o.outcome == "rendered" for o in outs)


async def memory_per_context(k: int) -> tuple[float, float]:
    """(MB of the browser tree with no page, MB per open context holding a rendered shell)."""
    from playwright.async_api import async_playwright

    from courtly.shell.render import browser_args
    import os

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=browser_args(as_root=os.geteuid() == 0))
        try:
            await asyncio.sleep(1.0)
            base = tree_rss()
            contexts = []
            for i in range(k):
                ctx = await browser.new_context(service_workers="block")
                await ctx.route("**/*", _route_from_gate(f"http://app{i}.test/"))
                page = await ctx.new_page()
                await page.goto(f"http://app{i}.test/", wait_until="networkidle")
                contexts.append(ctx)
            await asyncio.sleep(1.0)
            loaded = tree_rss()
            for ctx in contexts:
                await ctx.close()
        finally:
            await browser.close()
    return base / 2**20, (loaded - base) / k / 2**20


def _route_from_gate(page_url: str):
    async def route(r):
        if r.request.url == page_url:
            await r.fulfill(status=200, headers=dict(HTML), body=SHELL)
            return
        answer = await _gate(r.request)
        if isinstance(answer, str):
            await r.abort()
        else:
            await r.fulfill(status=answer.status, headers=dict(answer.headers), body=answer.body)
    return route


def crawl_cpu(tmp: Path, *, hosts: int, pages_per_host: int, spa_hosts: int, render: bool) -> dict:
    sim_args = ["--profile", "bench", "--hosts", str(hosts), "--pages-per-host", str(pages_per_host),
                "--ips", str(min(8, hosts)), "--seed", "1", "--spa-hosts", str(spa_hosts)]
    with simweb_process(tmp / "sim", sim_args, ready_s=180) as web:
        allowed = list(json.loads(web.manifest_file.read_text())["allowed_networks"])
        cmd = courtly_command(tmp, web, allowed, max_pages=0, fetch_tasks=64, delay_s=0.05, ip_rate=100.0,
                              ip_concurrency=16)
        cfg = tmp / "bench.toml"
        cfg.write_text(cfg.read_text() + (
            "[render]\nenabled = true\nshare_max = 1.0\ncontexts_max = 2\nnavigation_s = 5.0\n"
            "deadline_s = 10.0\nsettle_s = 0.5\n" if render else ""))
        m = run_measured(cmd, tmp / "run", cpu=1, timeout_s=900)
    db = sqlite3.connect(str(tmp / "crawl" / "crawl.db"))
    try:
        pages = db.execute("SELECT count(*) FROM fetches WHERE kind = 'page'").fetchone()[0]
        flags = dict(db.execute("SELECT flag, count(*) FROM flags GROUP BY flag").fetchall())
    finally:
        db.close()
    return {"cpu_s": m.cpu_s, "wall_s": m.wall_s, "rss_mb": m.rss_mb, "pages": pages, "rc": m.returncode,
            "rendered": flags.get("rendered", 0), "render_failed": flags.get("render_failed", 0),
            "links_added": flags.get("render_link", 0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--renders", type=int, default=20)
    ap.add_argument("--contexts", type=int, default=4)
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--pages-per-host", type=int, default=10)
    ap.add_argument("--shell-share", type=float, default=0.05)
    ap.add_argument("--skip-crawl", action="store_true")
    args = ap.parse_args()
    why = ChromiumRenderer(executable_path=CHROMIUM, clock=SystemClock()).available()
    if why:
        print(f"cannot render here: {why}")
        return 2
    for contexts in (1, 2):
        rate, ok = asyncio.run(renders_per_second(args.renders, contexts))
        print(f"renders/s, {contexts} context(s): {rate:.1f} ({ok}/{args.renders} rendered)")
    base_mb, per_ctx_mb = asyncio.run(memory_per_context(args.contexts))
    print(f"browser tree with no page: {base_mb:.0f} MB; per context with a rendered shell: {per_ctx_mb:.1f} MB "
          f"({args.contexts} contexts)")
    if args.skip_crawl:
        return 0
    spa_hosts = max(1, round(args.shell_share * args.hosts * args.pages_per_host))
    spa_hosts = min(spa_hosts, args.hosts)
    print(f"crawl: {args.hosts} hosts x {args.pages_per_host} pages, {spa_hosts} shells "
          f"({spa_hosts / (args.hosts * args.pages_per_host):.1%} of pages)")
    runs = {}
    for render in (False, True):
        with tempfile.TemporaryDirectory(prefix="courtly-bench-render-") as tmp:
            runs[render] = r = crawl_cpu(Path(tmp), hosts=args.hosts, pages_per_host=args.pages_per_host,
                                         spa_hosts=spa_hosts, render=render)
        print(f"  render {'on ' if render else 'off'}: {r['pages']} pages, CPU {r['cpu_s']:.1f} s, "
              f"wall {r['wall_s']:.1f} s, peak RSS {r['rss_mb']:.0f} MB, rendered {r['rendered']}, "
              f"failed {r['render_failed']}, links added {r['links_added']}, exit {r['rc']}")
    on, off = runs[True], runs[False]
    print(f"CPU share of rendering: {(on['cpu_s'] - off['cpu_s']) / on['cpu_s']:.1%} "
          f"({on['cpu_s'] - off['cpu_s']:.1f} CPU-s for {on['rendered'] + on['render_failed']} renders, "
          f"{on['pages'] - off['pages']} more pages found)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
