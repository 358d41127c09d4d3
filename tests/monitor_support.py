"""A loopback site for monitor tests: watch pages whose real changes the test
makes, and webhook receivers (one answering 200, one answering 500), in a
thread of their own. Everything is counted, so tests wait on facts, not time."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web

from courtly.sim.watchpage import WatchPage


@dataclass
class Site:
    versions: dict[str, int] = field(default_factory=dict)        # path -> real changes made
    requests: dict[str, int] = field(default_factory=dict)        # path -> requests served
    hooks: dict[str, list[dict]] = field(default_factory=dict)    # hook path -> bodies received
    raw: list[tuple[bytes, str]] = field(default_factory=list)    # every hook body as sent, with its signature
    pages: dict[str, WatchPage] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def count(self, path: str) -> int:
        with self.lock:
            return self.requests.get(path, 0)

    def received(self, hook: str) -> list[dict]:
        with self.lock:
            return list(self.hooks.get(hook, []))

    def change(self, path: str) -> None:
        with self.lock:
            self.versions[path] += 1


def wait_for(what, fact, timeout: float = 60.0) -> None:
    """Wait until `fact()` holds (bounded: a hung crawl fails the test with `what`)."""
    deadline = time.monotonic() + timeout
    while not fact():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def start_site(kinds: dict[str, str]) -> tuple[Site, callable]:
    """Serve `kinds` ({path: "real"|"noise"|"both"}) and /hook-ok, /hook-fail.
    Returns the site and a function that stops it."""
    site = Site()
    for n, (path, kind) in enumerate(sorted(kinds.items())):
        site.versions[path] = 0
        site.pages[path] = WatchPage(path, kind, tuple(float(v) for v in range(1, 100)), 100 + n)

    async def page(request: web.Request) -> web.Response:
        path = request.path
        if path == "/robots.txt":
            return web.Response(status=404)
        if path not in site.pages:
            return web.Response(status=404)
        with site.lock:
            site.requests[path] = site.requests.get(path, 0) + 1
            nonce, version = site.requests[path], site.versions[path]
        p = site.pages[path]
        at = version + 0.5 if p.kind != "noise" else 0.5
        return web.Response(body=p.html(at, nonce), content_type="text/html")

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        with site.lock:
            site.hooks.setdefault(request.path, []).append(json.loads(body))
            site.raw.append((body, request.headers.get("X-Courtly-Signature", "")))
        return web.Response(status=200 if request.path == "/hook-ok" else 500)

    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state = {}

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/hook-ok", hook)
        app.router.add_post("/hook-fail", hook)
        app.router.add_get("/{tail:.*}", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        tcp = web.TCPSite(runner, "127.0.0.1", 0)
        await tcp.start()
        site.port = tcp._server.sockets[0].getsockname()[1]
        state["runner"] = runner
        state["stop"] = asyncio.Event()
        ready.set()
        await state["stop"].wait()
        await runner.cleanup()

    t = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    t.start()
    ready.wait(10)

    def stop() -> None:
        loop.call_soon_threadsafe(state["stop"].set)
        t.join(10)

    return site, stop
