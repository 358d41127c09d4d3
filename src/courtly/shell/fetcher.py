"""The HTTP fetcher: one GET, bounded in time and size, pinned to a checked IP.

`AiohttpFetcher.fetch(url)` returns a `FetchResult` value and never raises
for network or protocol trouble; `result.error` names the kind instead.

How it works:

- Address: the caller's `ip`, else the first address `SafeResolver` returns
  (policy-checked, DNS-cached). The address is pinned for the request in a
  context variable that aiohttp's connector reads through `_PinnedResolver`,
  so the socket goes to exactly that address: there is no second lookup.
  aiohttp's own DNS cache is off. The Host header and TLS SNI stay the name.
- aiohttp runs with ``allow_redirects=False`` (each redirect hop is a new
  URL for the crawler) and ``auto_decompress=False``: `body` is the raw bytes
  after transfer-decoding, still content-encoded, for the WARC record;
  `content` is decoded here by `courtly.shell.decode` with caps.
- One deadline, `total_s`, covers the lookup, the connect, the head and the
  body. A body cut by it keeps the bytes read and says ``truncated="time"``;
  over `body_bytes_max` it says ``"length"``; a peer that hangs up mid-body
  says ``"disconnect"``. A truncated body is still a response (error None).
- One `TCPConnector` is shared (keep-alive pool, `connections_max` total and
  `connections_per_host_max` per host). A reused connection keeps the address
  it was opened to (checked then, so reuse is safe); `result.ip` is the peer
  actually used.

- Send gate (opt-in, `send_gate=True`): `fetch(..., gate=callable)` asks
  `gate()` once a connection is ready (reused, or about to be opened) and
  sends nothing when it says no: error ``not_sent``. A distributed worker
  uses it to check its partition lease at the last moment, after any wait
  for a connection slot.

Error kinds: dns, non_public, invalid_url, invalid_request, timeout, connect,
tls, reset, too_large_headers, protocol, decode, decode_bomb, not_sent. With an error
other than decode/decode_bomb, status is 0 and there is no body.
"""

from __future__ import annotations

import asyncio
import contextvars
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from courtly.core.netpolicy import parse_ip
from courtly.shell.decode import decode_body
from courtly.shell.resolver import ResolveFailed, SafeResolver, normalise_host

__all__ = ["FetchResult", "AiohttpFetcher", "ACCEPT_DEFAULT", "ACCEPT_ENCODING"]

ACCEPT_DEFAULT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_ENCODING = "gzip, deflate, br, zstd"
DECODE_INLINE_BYTES_MAX = 1 << 20  # larger encoded bodies are decoded in a thread
HEADERS_COUNT_MAX = 128

_EMPTY_HEADERS: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())
# (normalised host, ip) the current task's request must connect to
_PIN: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("courtly_pin", default=None)
# the current task's send gate (see `fetch(gate=...)`)
_GATE: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar("courtly_gate", default=None)


class _NotSent(aiohttp.ClientError):
    """The send gate said no once a connection was ready: nothing was sent."""


async def _check_gate(session, ctx, params) -> None:
    gate = _GATE.get()
    if gate is not None and not gate():
        raise _NotSent("send gate closed before the request was sent")


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What one GET produced. status 0 means no response head was received."""

    url: str
    ip: str
    status: int
    request_head: bytes       # request line + headers as sent, CRLFCRLF-terminated
    response_head: bytes      # status line + raw header lines, CRLFCRLF-terminated
    headers: Mapping[str, str]  # case-insensitive (a CIMultiDictProxy)
    body: bytes               # after transfer-decoding, still content-encoded
    content: bytes            # decoded per Content-Encoding, capped
    truncated: str | None     # WARC-Truncated: "length", "time", "disconnect"
    started_at: float         # wall clock, seconds since the epoch
    elapsed_s: float
    error: str | None = None
    error_detail: str = ""


class _PinnedResolver(AbstractResolver):
    """aiohttp resolver answering with the address pinned for this request."""

    def __init__(self, resolver: SafeResolver) -> None:
        self._resolver = resolver

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        pin = _PIN.get()
        if pin is not None and pin[0] == normalise_host(host):
            ip = pin[1]
        else:  # not reached by AiohttpFetcher.fetch, which always pins
            ip = (await self._resolver.resolve(host))[0]
        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        return [{"hostname": host, "host": ip, "port": port, "family": fam, "proto": 0, "flags": socket.AI_NUMERICHOST}]

    async def close(self) -> None:
        return None


class AiohttpFetcher:
    """Fetches URLs with aiohttp; see the module docstring for the rules."""

    def __init__(
        self,
        resolver: SafeResolver,
        *,
        user_agent: str,
        connect_s: float = 10,
        total_s: float = 60,
        body_bytes_max: int = 10 * 2**20,
        decoded_bytes_max: int = 50 * 2**20,
        decode_ratio_max: float = 100.0,
        header_bytes_max: int = 64 * 1024,
        connections_max: int = 500,
        connections_per_host_max: int = 4,
        accept: str = ACCEPT_DEFAULT,
        ssl_context: ssl.SSLContext | None = None,
        wall_clock: Callable[[], float] = time.time,
        send_gate: bool = False,
    ) -> None:
        for name, value in (("connect_s", connect_s), ("total_s", total_s), ("body_bytes_max", body_bytes_max),
                            ("decoded_bytes_max", decoded_bytes_max), ("decode_ratio_max", decode_ratio_max),
                            ("header_bytes_max", header_bytes_max), ("connections_max", connections_max),
                            ("connections_per_host_max", connections_per_host_max)):
            if value <= 0:
                raise ValueError(f"{name} must be > 0")
        self.resolver = resolver
        self._policy = resolver.policy
        self._total_s = total_s
        self._connect_s = connect_s
        self._body_bytes_max = body_bytes_max
        self._decoded_bytes_max = decoded_bytes_max
        self._ratio_max = decode_ratio_max
        self._header_bytes_max = header_bytes_max
        self._connections_max = connections_max
        self._per_host_max = connections_per_host_max
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._wall_clock = wall_clock
        self._send_gate = send_gate
        self._base_headers = {"User-Agent": user_agent, "Accept": accept, "Accept-Encoding": ACCEPT_ENCODING}
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    # -- lifecycle ----------------------------------------------------------

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            resolver=_PinnedResolver(self.resolver),
            use_dns_cache=False,
            limit=self._connections_max,
            limit_per_host=self._per_host_max,
            ssl=self._ssl,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            trust_env=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_s),
            max_line_size=self._header_bytes_max,
            max_field_size=self._header_bytes_max,
            max_headers=HEADERS_COUNT_MAX,
            trace_configs=[self._gate_trace()] if self._send_gate else None,
        )
        return self._session

    @staticmethod
    def _gate_trace() -> aiohttp.TraceConfig:
        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_check_gate)       # right before the request is written
        trace.on_connection_create_start.append(_check_gate)    # before a new connection is opened
        return trace

    async def close(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def __aenter__(self) -> "AiohttpFetcher":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- fetch --------------------------------------------------------------

    async def fetch(self, url: str, *, ip: str | None = None, headers: dict[str, str] | None = None,
                    gate: Callable[[], bool] | None = None) -> FetchResult:
        """GET `url` (connecting to `ip` when given). Never raises for network trouble.
        With `gate` (and `send_gate=True`) nothing is sent unless `gate()` holds
        once the connection is ready."""
        if self._closed:
            raise RuntimeError("AiohttpFetcher.fetch after close()")
        loop = asyncio.get_running_loop()
        started_at = self._wall_clock()
        t0 = loop.time()
        f = _Fetch(url, ip or "")
        gate_token = _GATE.set(gate) if gate is not None else None
        try:
            async with asyncio.timeout(self._total_s):
                await self._run(f, url, ip, headers)
        except _NotSent as exc:
            f.fail("not_sent", str(exc))
        except TimeoutError as exc:
            if f.resp is not None and f.status:
                f.truncated = "time"
            elif isinstance(exc, aiohttp.ServerTimeoutError):
                f.fail("timeout", _describe(exc))
            else:
                f.fail("timeout", f"no response head within total_s={self._total_s}")
        except ResolveFailed as exc:
            f.fail(exc.reason.value, exc.detail)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            kind, detail = _classify(exc)
            f.fail(kind, detail)
        finally:
            if gate_token is not None:
                _GATE.reset(gate_token)
            if f.resp is not None and not f.complete:
                f.resp.close()  # unread body: the connection cannot be reused

        elapsed_s = loop.time() - t0  # network time; decoding is not the server's
        body = _join(f.chunks)
        content = b""
        if body and f.error is None:
            encoding = f.headers.get("Content-Encoding")
            if encoding and len(body) > DECODE_INLINE_BYTES_MAX:
                decoded = await asyncio.to_thread(
                    decode_body, body, encoding, decoded_bytes_max=self._decoded_bytes_max, ratio_max=self._ratio_max
                )
            else:
                decoded = decode_body(body, encoding, decoded_bytes_max=self._decoded_bytes_max, ratio_max=self._ratio_max)
            content = decoded.content
            if decoded.error is not None:
                f.error, f.detail = decoded.error, decoded.detail
        return FetchResult(
            url=url,
            ip=f.ip,
            status=f.status,
            request_head=f.request_head,
            response_head=f.response_head,
            headers=f.headers,
            body=body,
            content=content,
            truncated=f.truncated,
            started_at=started_at,
            elapsed_s=elapsed_s,
            error=f.error,
            error_detail=f.detail,
        )

    async def _run(self, f: "_Fetch", url: str, ip: str | None, headers: dict[str, str] | None) -> None:
        try:
            target = URL(url, encoded=True) if url.isascii() and " " not in url else URL(url)
            raw_host = target.raw_host
        except (ValueError, TypeError) as exc:
            f.fail("invalid_url", _describe(exc))
            return
        if target.scheme not in ("http", "https") or not raw_host:
            f.fail("invalid_url", f"not an absolute http(s) URL: {url!r}")
            return
        host = normalise_host(raw_host)
        if ip is None or _is_literal(host):
            # aiohttp connects to an IP literal itself, so the literal is what we check
            known = self.resolver.cached(host)
            ip = known[0] if known is not None else (await self.resolver.resolve(host))[0]
        elif not self._policy.permits(ip := normalise_host(ip)):
            f.fail("non_public", f"{ip} is not permitted by the network policy")
            return
        f.ip = ip
        session = self._session or self._open()
        token = _PIN.set((host, ip))
        try:
            resp = await session.get(
                target,
                headers={**self._base_headers, **headers} if headers else self._base_headers,
                allow_redirects=False,
            )
        finally:
            _PIN.reset(token)
        f.resp = resp
        conn = resp.connection
        if conn is not None and conn.transport is not None:
            peer = conn.transport.get_extra_info("peername")
            if peer:
                f.ip = peer[0]
        info = resp.request_info
        f.request_head = _request_head(info.method, info.url.raw_path_qs, info.headers)
        head = _response_head(resp)
        if len(head) > self._header_bytes_max:
            f.fail("too_large_headers", f"response head is {len(head)} bytes, over {self._header_bytes_max}")
            return
        f.status = resp.status
        f.response_head = head
        f.headers = resp.headers
        content = resp.content
        chunks = f.chunks
        left = self._body_bytes_max
        try:
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                if len(chunk) > left:
                    chunks.append(chunk[:left])
                    f.truncated = "length"
                    return
                chunks.append(chunk)
                left -= len(chunk)
        except aiohttp.ClientPayloadError as exc:
            f.truncated = "disconnect"
            f.detail = _describe(exc)
            return
        f.complete = True


class _Fetch:
    """Mutable state of one fetch, so a timeout keeps what was gathered."""

    __slots__ = ("ip", "status", "request_head", "response_head", "headers", "chunks",
                 "truncated", "error", "detail", "resp", "complete")

    def __init__(self, url: str, ip: str) -> None:
        self.ip = ip
        self.status = 0
        self.request_head = b""
        self.response_head = b""
        self.headers: Mapping[str, str] = _EMPTY_HEADERS
        self.chunks: list[bytes] = []
        self.truncated: str | None = None
        self.error: str | None = None
        self.detail = ""
        self.resp: aiohttp.ClientResponse | None = None
        self.complete = False

    def fail(self, kind: str, detail: str) -> None:
        self.error = kind
        self.detail = detail
        self.status = 0
        self.response_head = b""
        self.headers = _EMPTY_HEADERS
        self.chunks = []
        self.truncated = None


def _is_literal(host: str) -> bool:
    return bool(host) and (host[0].isdigit() or ":" in host) and parse_ip(host) is not None


def _join(chunks: list[bytes]) -> bytes:
    if not chunks:
        return b""
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _request_head(method: str, target: str, headers: Mapping[str, str]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    lines.append("\r\n")
    return "\r\n".join(lines).encode("utf-8")


def _response_head(resp: aiohttp.ClientResponse) -> bytes:
    v = resp.version
    parts = [f"HTTP/{v.major}.{v.minor} {resp.status} {resp.reason or ''}".rstrip(" ").encode("latin-1", "replace")]
    parts.extend(name + b": " + value for name, value in resp.raw_headers)
    parts.append(b"\r\n")
    return b"\r\n".join(parts)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _classify(exc: BaseException) -> tuple[str, str]:
    """Error kind for an exception raised while connecting or reading the head."""
    detail = _describe(exc)
    if isinstance(exc, aiohttp.InvalidURL):
        return "invalid_url", detail
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "timeout", detail
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
        return "tls", detail
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect", detail
    if isinstance(exc, aiohttp.ClientResponseError):
        message = str(exc.message).lower()
        if "too long" in message or "got more than" in message or "too many headers" in message:
            return "too_large_headers", detail
        return "protocol", detail
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError, ConnectionError)):
        return "reset", detail
    if isinstance(exc, (aiohttp.ClientOSError, OSError)):
        return "reset", detail
    if isinstance(exc, ValueError):
        return "invalid_request", detail
    return "protocol", detail
