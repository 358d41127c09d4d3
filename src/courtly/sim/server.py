"""Loopback HTTP servers for the simulated web (aiohttp's low-level server).

One `aiohttp.web.Server` handles every host: it listens on each host IP
(127.0.1.1, ...) and on the bait IP 127.0.0.1, all on one port, and tells
hosts apart by the Host header (a bare IP literal serves that IP's first
host). `route.route` decides each reply; this file only plays it: latency,
the body, and the hostile streams (one-byte drip, endless chunked body, short
body), each bounded by `stream_bytes_max` and `stream_time_max_s`. Every
answer takes at least `service_time_s` (5 ms), so requests a client sends in
parallel are in flight together in the log even when pages render in
microseconds (otherwise one event loop would serialise them). Handler
cancellation is on, so a client that gives up (timeout) ends the request
at once and the log shows when it really ended.

A reply's completion time is read just before its last bytes are handed to
the socket: the client cannot have the whole answer earlier, so a gap the
checker measures from it is never longer than the one the client saw. Read
after the write, it came late whenever this process lost its core between the
two (a loaded machine), and the checker saw gaps shorter than the crawler made.

Every request is logged (`reqlog.RequestLog`) with arrival and completion
time, connection id and local IP, for the checkers in `check.py`.
Nothing listens outside 127.0.0.0/8.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from courtly.sim import hostile
from courtly.sim.manifest import build_manifest
from courtly.sim.model import BAIT_IP, SimWeb
from courtly.sim.reqlog import LogRecord, RequestLog
from courtly.sim.route import Reply, Request, RouteState, route
from courtly.sim.webconfig import SimWebConfig

__all__ = ["SimWebServer"]

_PORT_ATTEMPTS = 20
_ENDLESS_CHUNK = b"<p>" + b"endless " * 2000 + b"</p>\n"


class SimWebServer:
    """`async with SimWebServer(config, log_path) as srv:` serves the web on loopback.

    Attributes once started: `port`, `web` (the SimWeb model), `hosts_map`
    (name -> IP), `seeds` (root URLs with the port), `manifest` (dict),
    `started_at` (time.time() at start; page epochs count from it), `log`.
    """

    def __init__(self, config: SimWebConfig | SimWeb, log_path: str | Path | None = None, *,
                 port: int = 0, keep_records: bool = False, bait: bool = True, regions=None) -> None:
        self.web = config if isinstance(config, SimWeb) else SimWeb(config)
        self.regions = regions   # sim/region.RegionWeb: per-region latency and geo-blocking (None: one region)
        self.config = self.web.config
        self.requested_port = port
        self.port = 0
        self.bait = bait
        self.log = RequestLog(log_path, keep=keep_records)
        self.hosts_map = self.web.hosts_map()
        self.seeds: list[str] = []
        self.manifest: dict[str, Any] = {}
        self.started_at = 0.0
        self._state: RouteState | None = None
        self._server: web.Server | None = None
        self._listeners: list[asyncio.base_events.Server] = []
        self._flusher: asyncio.Task[None] | None = None
        self._streams: set[asyncio.Task[Any]] = set()

    # ---- lifecycle ------------------------------------------------------

    async def __aenter__(self) -> "SimWebServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self._server = web.Server(self._handle, handler_cancellation=True, access_log=None,
                                  keepalive_timeout=75.0)
        ips = list(self.web.ips) + ([BAIT_IP] if self.bait else [])
        for ip in ips:
            if not ipaddress.ip_address(ip).is_loopback:
                raise ValueError(f"refusing to listen on non-loopback {ip}")
        await self._bind(ips)
        self.started_at = time.time()
        self._state = RouteState(started_at=self.started_at)
        self.seeds = self.web.seeds(self.port)
        self.manifest = build_manifest(self.web, self.port, self.started_at)
        self._flusher = asyncio.create_task(self.log.run_flusher())

    async def _bind(self, ips: list[str]) -> None:
        loop = asyncio.get_running_loop()
        attempts = 1 if self.requested_port else _PORT_ATTEMPTS
        last: OSError | None = None
        assert self._server is not None
        for _ in range(attempts):
            port = self.requested_port
            listeners: list[asyncio.base_events.Server] = []
            try:
                for ip in ips:
                    srv = await loop.create_server(self._server, host=ip, port=port,
                                                   reuse_address=True, backlog=2048)
                    listeners.append(srv)
                    if port == 0:
                        port = srv.sockets[0].getsockname()[1]
            except OSError as e:
                last = e
                for srv in listeners:
                    srv.close()
                continue
            self._listeners = listeners
            self.port = port
            return
        raise OSError(f"could not bind {len(ips)} loopback IPs on one port: {last}")

    async def stop(self) -> None:
        for srv in self._listeners:
            srv.close()
        for task in list(self._streams):
            task.cancel()
        if self._server is not None:
            await self._server.shutdown(timeout=1.0)
        for srv in self._listeners:
            try:
                await asyncio.wait_for(srv.wait_closed(), timeout=2.0)
            except asyncio.TimeoutError:
                pass
        self._listeners = []
        if self._flusher is not None:
            self._flusher.cancel()
            try:
                await self._flusher
            except asyncio.CancelledError:
                pass
            self._flusher = None
        self.log.close()

    def flush(self) -> None:
        self.log.flush()

    def records(self) -> list[LogRecord]:
        return self.log.records()

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    # ---- requests -------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        arrived_at = time.time()
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport else None
        sock = transport.get_extra_info("sockname") if transport else None
        local_ip = sock[0] if sock else ""
        headers = request.headers
        req = Request(request.method, headers.get("Host", local_ip), request.raw_path, local_ip,
                      headers, self.port)
        assert self._state is not None
        reply = route(self.web, self._state, req, arrived_at)
        if self.regions is not None and peer:
            reply = self.regions.adjust(req.host, peer[0], reply)
        played = _Played()
        resp: web.StreamResponse | None = None
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            resp = await self._play(request, reply, played)
        except (asyncio.CancelledError, ConnectionError):
            played.aborted = True
            raise
        finally:
            self._streams.discard(task)  # type: ignore[arg-type]
            self.log.add(LogRecord(
                arrived_at=arrived_at, completed_at=played.completed_at(), host=req.host,
                conn=f"{peer[0]}:{peer[1]}" if peer else "", ip=local_ip, method=req.method,
                path=req.target, status=played.status, bytes=played.nbytes,
                conditional=("If-None-Match" in headers or "If-Modified-Since" in headers),
                tag=reply.tag, retry_after_at=reply.retry_after_at, aborted=played.aborted,
                agent=headers.get("User-Agent", ""),
            ))
        return resp

    async def _play(self, request: web.BaseRequest, reply: Reply, played: "_Played") -> web.StreamResponse:
        delay_s = max(reply.delay_s, self.config.service_time_s)
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        body = reply.body
        if reply.bomb is not None:
            body = await hostile.bomb(reply.bomb, self.config.bomb_bytes)
        headers = CIMultiDict(reply.headers)
        if reply.stream is None:
            resp = web.Response(status=reply.status, body=body, headers=headers)
            await resp.prepare(request)
            played.status = reply.status
            played.ending_at = time.time()
            await resp.write_eof()
            played.nbytes = 0 if request.method == "HEAD" else len(body)
            return resp
        resp = web.StreamResponse(status=reply.status, headers=headers)
        deadline = time.monotonic() + self.config.stream_time_max_s
        if reply.stream == "endless-chunked":
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            played.status = reply.status
            while played.nbytes < self.config.stream_bytes_max and time.monotonic() < deadline:
                await resp.write(_ENDLESS_CHUNK)
                played.nbytes += len(_ENDLESS_CHUNK)
        elif reply.stream == "drip":
            resp.content_length = len(body)
            await resp.prepare(request)
            played.status = reply.status
            for i in range(len(body)):
                if time.monotonic() >= deadline:
                    break
                played.ending_at = time.time()
                await resp.write(body[i:i + 1])
                played.nbytes += 1
                await asyncio.sleep(self.config.drip_interval_s)
        elif reply.stream == "length-mismatch":
            resp.content_length = len(body) + 100_000
            await resp.prepare(request)
            played.status = reply.status
            played.ending_at = time.time()
            await resp.write(body)
            played.nbytes = len(body)
            if request.transport is not None:
                request.transport.close()
            return resp
        if reply.stream != "drip":
            played.ending_at = time.time()
        await resp.write_eof()
        return resp


class _Played:
    __slots__ = ("status", "nbytes", "aborted", "ending_at")

    def __init__(self) -> None:
        self.ending_at = 0.0   # just before the last bytes went to the socket; 0 until then
        self.status = 0
        self.nbytes = 0
        self.aborted = False

    def completed_at(self) -> float:
        """When the answer ended, as the client saw it at the earliest; a client
        that gave up is logged when the server noticed (never earlier)."""
        if self.aborted or not self.ending_at:
            return time.time()
        return self.ending_at
