"""Loopback servers and helpers for the fetcher tests (tests/shell/test_fetcher.py,
tests/shell/test_http1.py). Every server binds a 127.0.0.0/8 address on port 0."""

from __future__ import annotations

import asyncio

from aiohttp import web

from courtly.core.netpolicy import NetPolicy
from courtly.shell.fetcher import FetchResult, Http1Fetcher
from courtly.shell.resolver import SafeResolver

UA = "courtly-test/0.1 (+https://example.invalid/bot)"
LOOPBACK = NetPolicy.allowing(["127.0.0.0/8"])


def run(coro, timeout_s: float = 20):
    async def bounded():
        return await asyncio.wait_for(coro, timeout_s)

    return asyncio.run(bounded())


def fetcher(policy: NetPolicy = LOOPBACK, overrides=None, **kw) -> Http1Fetcher:
    return Http1Fetcher(SafeResolver(policy, overrides=overrides), user_agent=UA, **kw)


class AppServer:
    """An aiohttp web app on `host`, port 0."""

    def __init__(self, routes: dict, host: str = "127.0.0.1") -> None:
        self.app = web.Application()
        for path, handler in routes.items():
            self.app.router.add_get(path, handler)
        self.host = host
        self.peers: list[tuple] = []

    async def __aenter__(self) -> "AppServer":
        @web.middleware
        async def note_peer(request, handler):
            self.peers.append(request.transport.get_extra_info("peername"))
            return await handler(request)

        self.app.middlewares.append(note_peer)
        self.runner = web.AppRunner(self.app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()

    def url(self, path: str = "/", host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"


class RawServer:
    """asyncio server running `handler(reader, writer)`; records connections and requests."""

    def __init__(self, handler, host: str = "127.0.0.1") -> None:
        self.handler = handler
        self.host = host
        self.connections: list[tuple] = []   # (local sockname, peer)
        self.requests: list[bytes] = []
        self.tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> "RawServer":
        self.server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def read_request(self, reader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        self.requests.append(head)
        return head

    async def _serve(self, reader, writer) -> None:
        task = asyncio.current_task()
        self.tasks.add(task)
        self.connections.append((writer.get_extra_info("sockname"), writer.get_extra_info("peername")))
        try:
            await self.handler(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self.tasks.discard(task)

    def url(self, path: str = "/", host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"


def fixed_response(head: bytes, body: bytes = b""):
    async def handler(server, reader, writer):
        await server.read_request(reader)
        writer.write(head + body)
        await writer.drain()

    return handler


def fetch_one_raw(handler, f: Http1Fetcher | None = None, path: str = "/", **kw) -> FetchResult:
    async def go():
        async with RawServer(handler) as s, (f or fetcher()) as ff:
            return await ff.fetch(s.url(path), **kw)

    return run(go())
