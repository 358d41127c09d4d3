"""Failing hosts on loopback: a host that goes down and comes back, 5xx
bursts, a host turning into a challenge page, an IP whose answers slow down.

What it owns: `OutageWeb`, a small web of five hosts, each on a fixed
loopback address (two share one), with behaviours on a schedule:

    down.outage.test       127.0.5.1  after `down_after_pages` page answers it
                                      goes down: for `refused_s` every
                                      connection is cut at once (tag
                                      outage_refused), then for `hang_s`
                                      connections are accepted and never
                                      answered (tag outage_hang: the client
                                      times out), then it is healthy again
    burst.outage.test      127.0.5.2  page requests `burst_after` + 1 ..
                                      `burst_after` + `burst_len` answer 500,
                                      502, 504 in turn (tag outage_5xx)
    challenge.outage.test  127.0.5.3  after `challenge_after` pages every page
                                      is one challenge body (tag outage_challenge)
    slow.outage.test       127.0.5.4  each answer (robots.txt too) `slow_step_s`
                                      slower than the last, up to `slow_max_s`
                                      (pages tagged outage_slow; it links
                                      to `slow_pages` pages only)
    neighbour.outage.test  127.0.5.4  fast, on the slow host's IP

Every host serves robots.txt as 404 (allow all), `/` linking to `/p0` ..
`/p{pages-1}`, and distinct small pages. Every request, and every cut or
hung connection, is logged in the simulated web's request log format
(`reqlog.py`): a cut connection has no request, so its path is "" and its
status 0. A refusal by the kernel could not be logged, so "refused" is a
connection cut at accept: the crawler sees a reset, counted the same
(core/health.py). `outage_check.py` judges a crawl from that log.

Rules: loopback only; every hang is bounded by `hang_s`; the schedule is
relative to the server's start and to what it has answered, so tests can
scale it down.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from courtly.sim.reqlog import LogRecord, RequestLog

__all__ = ["OutageConfig", "OutageWeb", "HOSTS", "DOWN", "BURST", "CHALLENGE", "SLOW", "NEIGHBOUR",
           "CHALLENGE_BODY"]

DOWN, BURST, CHALLENGE = "down.outage.test", "burst.outage.test", "challenge.outage.test"
SLOW, NEIGHBOUR = "slow.outage.test", "neighbour.outage.test"
HOSTS: dict[str, str] = {DOWN: "127.0.5.1", BURST: "127.0.5.2", CHALLENGE: "127.0.5.3",
                         SLOW: "127.0.5.4", NEIGHBOUR: "127.0.5.4"}
CHALLENGE_BODY = (b"<!doctype html><html><head><title>Just a moment...</title></head><body>"
                  + b"<p>Checking your browser before accessing the site.</p>" * 20 + b"</body></html>")
_BURST_STATUSES = (500, 502, 504)
_HTML = "text/html; charset=utf-8"


@dataclass(frozen=True, slots=True)
class OutageConfig:
    pages: int = 12
    down_after_pages: int = 3
    refused_s: float = 4.0
    hang_s: float = 4.0
    burst_after: int = 3
    burst_len: int = 6
    challenge_after: int = 3
    slow_step_s: float = 0.05
    slow_max_s: float = 0.5
    slow_pages: int = 6       # the slow host links to this many pages only (it is crawled slowly)

    def __post_init__(self) -> None:
        if self.pages < 1 or self.refused_s < 0 or self.hang_s < 0 or self.slow_step_s < 0:
            raise ValueError("pages >= 1; refused_s, hang_s and slow_step_s >= 0")


@dataclass(slots=True)
class _State:
    pages: dict[str, int] = field(default_factory=dict)     # page answers per host
    down_at: float | None = None
    slow_answers: int = 0

    def phase(self, now: float, cfg: OutageConfig) -> str:
        """up, refused or hang: the down host's state at `now`."""
        if self.down_at is None:
            return "up"
        if now < self.down_at + cfg.refused_s:
            return "refused"
        if now < self.down_at + cfg.refused_s + cfg.hang_s:
            return "hang"
        return "up"


class _Cut(asyncio.Protocol):
    """A connection to the down host while it is down: cut at once, or held
    unanswered until the client gives up (at most the rest of the hang)."""

    def __init__(self, web_: "OutageWeb", phase: str) -> None:
        self.web = web_
        self.phase = phase
        self.arrived_at = time.time()
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else ""
        if self.phase == "refused":
            transport.abort()
            return
        st, cfg = self.web.state, self.web.config
        left = (st.down_at or 0.0) + cfg.refused_s + cfg.hang_s - time.time()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, left), transport.abort)

    def data_received(self, data: bytes) -> None:
        pass   # never answered

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.web.log_cut(self.arrived_at, self.peer, self.phase)


class OutageWeb:
    """`async with OutageWeb(config, log_path) as w:` serves the hosts on loopback (`w.port`)."""

    def __init__(self, config: OutageConfig | None = None, log_path: str | Path | None = None) -> None:
        self.config = config or OutageConfig()
        self.log = RequestLog(log_path, keep=True)
        self.state = _State()
        self.port = 0
        self.started_at = 0.0
        self._server: web.Server | None = None
        self._listeners: list[asyncio.base_events.Server] = []
        self._flusher: asyncio.Task[None] | None = None

    @property
    def seeds(self) -> list[str]:
        return [f"http://{h}:{self.port}/" for h in HOSTS]

    @property
    def up_at(self) -> float | None:
        """When the down host is answering again (None before it went down)."""
        st, cfg = self.state, self.config
        return None if st.down_at is None else st.down_at + cfg.refused_s + cfg.hang_s

    async def __aenter__(self) -> "OutageWeb":
        self._server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        loop = asyncio.get_running_loop()
        port = 0
        for ip in dict.fromkeys(HOSTS.values()):
            factory = self._down_factory if ip == HOSTS[DOWN] else self._server
            srv = await loop.create_server(factory, host=ip, port=port, reuse_address=True)
            self._listeners.append(srv)
            port = port or srv.sockets[0].getsockname()[1]
        self.port = port
        self.started_at = time.time()
        self._flusher = asyncio.create_task(self.log.run_flusher())
        return self

    async def __aexit__(self, *exc: object) -> None:
        for srv in self._listeners:
            srv.close()
        if self._server is not None:
            await self._server.shutdown(timeout=1.0)
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        self.log.close()

    def _down_factory(self) -> asyncio.BaseProtocol:
        phase = self.state.phase(time.time(), self.config)
        assert self._server is not None
        return self._server() if phase == "up" else _Cut(self, phase)

    def log_cut(self, arrived_at: float, peer: str, phase: str, path: str = "") -> None:
        self.log.add(LogRecord(arrived_at=arrived_at, completed_at=time.time(), host=DOWN, conn=peer,
                               ip=HOSTS[DOWN], method="", path=path, status=0, bytes=0, conditional=False,
                               tag=f"outage_{phase}", aborted=True))

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        arrived_at = time.time()
        host = request.headers.get("Host", "").split(":")[0]
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport else None
        conn = f"{peer[0]}:{peer[1]}" if peer else ""
        phase = self.state.phase(arrived_at, self.config) if host == DOWN else "up"
        if phase != "up":   # a keep-alive connection from before the outage
            if transport is not None:
                transport.abort()
            self.log_cut(arrived_at, conn, phase, request.raw_path)
            raise asyncio.CancelledError
        status, body, delay_s, tag = self._reply(host, request.raw_path)
        if delay_s:
            await asyncio.sleep(delay_s)
        resp = web.Response(status=status, body=body, headers={"Content-Type": _HTML})
        self.log.add(LogRecord(arrived_at=arrived_at, completed_at=time.time(), host=request.headers.get("Host", ""),
                               conn=conn, ip=transport.get_extra_info("sockname")[0] if transport else "",
                               method=request.method, path=request.raw_path, status=status, bytes=len(body),
                               conditional=False, tag=tag, agent=request.headers.get("User-Agent", "")))
        return resp

    def _slow_s(self) -> float:
        n = self.state.slow_answers = self.state.slow_answers + 1
        return min(self.config.slow_step_s * n, self.config.slow_max_s)

    def _reply(self, host: str, path: str) -> tuple[int, bytes, float, str | None]:
        """(status, body, delay, tag) of one request; counts page answers."""
        cfg, st = self.config, self.state
        if host not in HOSTS:
            return 404, b"unknown host", 0.0, "unknown_host"
        slow_s = self._slow_s() if host == SLOW else 0.0   # every answer of the slow host is slower
        if path == "/robots.txt":
            return 404, b"not found", slow_s, None
        if path == "/":
            n = min(cfg.pages, cfg.slow_pages) if host == SLOW else cfg.pages
            links = "".join(f'<a href="/p{i}">page {i}</a> ' for i in range(n))
            return 200, f"<html><body>{host} {links}</body></html>".encode(), slow_s, None
        if not (path.startswith("/p") and path[2:].isdigit() and int(path[2:]) < cfg.pages):
            return 404, b"not found", slow_s, None
        n = st.pages[host] = st.pages.get(host, 0) + 1
        page = f"<html><body><h1>{host}{path}</h1><p>{'text ' * 40}</p></body></html>".encode()
        if host == DOWN and n >= cfg.down_after_pages and st.down_at is None:
            st.down_at = time.time()   # this answer is the last before the outage
        if host == BURST and cfg.burst_after < n <= cfg.burst_after + cfg.burst_len:
            k = n - cfg.burst_after - 1
            return _BURST_STATUSES[k % 3], b"<html>server error</html>", 0.0, "outage_5xx"
        if host == CHALLENGE and n > cfg.challenge_after:
            return 200, CHALLENGE_BODY, 0.0, "outage_challenge"
        if host == SLOW:
            return 200, page, slow_s, "outage_slow"
        return 200, page, 0.0, None
