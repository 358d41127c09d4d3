"""Test helpers: start the simulated web in-process and talk to it by IP + Host header."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

import aiohttp

from courtly.sim.server import SimWebServer
from courtly.sim.webconfig import SimWebConfig, profile_config

T = TypeVar("T")


def small_hostile(**overrides: Any) -> SimWebConfig:
    base: dict[str, Any] = dict(seed=7, latency_s=0.2, retry_after_s=1, robots_hang_s=5.0,
                                bomb_bytes=64 << 20, stream_time_max_s=20.0, throttle_window_s=2.0)
    base.update(overrides)
    return profile_config("hostile", **base)


@dataclass
class Got:
    status: int
    headers: Any
    body: bytes


async def get(session: aiohttp.ClientSession, srv: SimWebServer, host: str, target: str = "/",
              headers: dict[str, str] | None = None, **kw: Any) -> Got:
    """GET http://host:port/target, connecting to the host's IP (like --hosts-file)."""
    ip = srv.hosts_map.get(host, host)
    hdrs = {"Host": f"{host}:{srv.port}", **(headers or {})}
    kw.setdefault("allow_redirects", False)
    async with session.get(f"http://{ip}:{srv.port}{target}", headers=hdrs, **kw) as r:
        body = await r.read()
        return Got(r.status, r.headers, body)


def run_with_server(config: SimWebConfig, fn: Callable[[SimWebServer, aiohttp.ClientSession], Awaitable[T]],
                    log_path: Any = None, timeout_s: float = 60.0) -> T:
    async def main() -> T:
        async with SimWebServer(config, log_path, keep_records=True) as srv:
            timeout = aiohttp.ClientTimeout(total=15)
            async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
                return await asyncio.wait_for(fn(srv, session), timeout_s)

    return asyncio.run(main())
