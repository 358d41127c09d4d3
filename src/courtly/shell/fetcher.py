"""The HTTP fetcher: one GET, bounded in time and size, pinned to a checked IP.

`Http1Fetcher.fetch(url)` returns a `FetchResult` value and never raises
for network or protocol trouble; `result.error` names the kind instead.

How it works (the wire protocol is `courtly.shell.http1`: an asyncio
`Protocol` with llhttp's parser through httptools):

- Address: the caller's `ip`, else the first address `SafeResolver` returns
  (policy-checked, DNS-cached). The socket is opened to exactly that address:
  there is no second lookup. The Host header and TLS SNI stay the name; TLS
  is verified per `ssl_context` (default: the system's verifying context).
- Redirects are not followed (each hop is a new URL for the crawler) and
  nothing is decompressed on the wire: `body` is the raw bytes after
  transfer-decoding, still content-encoded, for the WARC record; `content`
  is decoded here by `courtly.shell.decode` with caps. A transfer coding
  other than chunked (unasked for: we send no TE) is undone into `body` with
  the same caps, or the fetch fails ``protocol``.
- `request_head` is exactly the bytes sent (request line and headers,
  pre-encoded but for the target, Host and caller headers);
  `response_head` is the final response's status line and header lines as
  received, CRLFCRLF-terminated (1xx interim heads are skipped).
- One deadline, `total_s`, covers the lookup, the wait for a pool slot, the
  connect (also capped by `connect_s`), the head and the body. A body cut by
  it keeps the bytes read and says ``truncated="time"``; over
  `body_bytes_max` it says ``"length"``; a peer that hangs up before the
  framed end (Content-Length or chunked) says ``"disconnect"``; a body
  delimited by the close is complete. A truncated body is still a response
  (error None). The head is capped at `header_bytes_max` bytes and
  HEADERS_COUNT_MAX lines.
- Keep-alive pool keyed by (scheme, host, ip, port): `connections_max` total
  and `connections_per_host_max` per host; a request waits for a slot when
  both are reached; idle connections close after `idle_s`. A reused
  connection keeps the address it was opened to (checked then, so reuse is
  safe); `result.ip` is the peer actually used. A reused connection that the
  server closed before any byte of the response came is retried once on a
  new connection (GET is idempotent); nothing else is retried. `close()`
  closes every connection; requests still waiting for one end ``not_sent``.

- Send gate (opt-in, `send_gate=True`): `fetch(..., gate=callable)` asks
  `gate()` once a connection is ready (reused, or about to be opened) and
  sends nothing when it says no: error ``not_sent``. A distributed worker
  uses it to check its partition lease at the last moment, after any wait
  for a connection slot. The one retry above asks again.

Error kinds: dns, non_public, invalid_url, invalid_request, timeout, connect,
tls, reset, too_large_headers, protocol, decode, decode_bomb, not_sent. With an error
other than decode/decode_bomb, status is 0 and there is no body.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Callable, Mapping

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from courtly.core.netpolicy import parse_ip
from courtly.core.urlfast import DEFAULT_PORTS as _DEFAULT_PORT
from courtly.core.types import Reason
from courtly.core.urlfast import common_match
from courtly.ports import FetchError, FetchResult, Truncation  # FetchResult: declared with the ports; re-exported here
from courtly.shell.decode import Decoded, decode_body
from courtly.shell.http1 import Connection, Exchange, Pool, PoolClosed
from courtly.shell.resolver import ResolveFailed, SafeResolver, normalise_host

__all__ = ["FetchResult", "Http1Fetcher", "ACCEPT_DEFAULT", "ACCEPT_ENCODING"]

ACCEPT_DEFAULT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
# Only codings the WARC ecosystem decodes (config: fetch.accept_encodings);
# br and zstd are decoded when a server sends them anyway.
ACCEPT_ENCODING = "gzip, deflate"
DECODE_INLINE_BYTES_MAX = 1 << 20  # larger encoded bodies are decoded in a thread
HEADERS_COUNT_MAX = 128

_EMPTY_HEADERS: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_BASE_NAMES = ("user-agent", "accept", "accept-encoding")


class _Failed(Exception):
    """A fetch failed with an error kind before any response was taken."""

    def __init__(self, kind: FetchError, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class Http1Fetcher:
    """Fetches URLs over HTTP/1.1; see the module docstring for the rules."""

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
        idle_s: float = 15.0,
        accept: str = ACCEPT_DEFAULT,
        accept_encoding: str = ACCEPT_ENCODING,
        ssl_context: ssl.SSLContext | None = None,
        wall_clock: Callable[[], float] = time.time,
        send_gate: bool = False,
        source_address: str = "",
    ) -> None:
        for name, value in (("connect_s", connect_s), ("total_s", total_s), ("body_bytes_max", body_bytes_max),
                            ("decoded_bytes_max", decoded_bytes_max), ("decode_ratio_max", decode_ratio_max),
                            ("header_bytes_max", header_bytes_max), ("connections_max", connections_max),
                            ("connections_per_host_max", connections_per_host_max), ("idle_s", idle_s)):
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
        self._ssl = ssl_context
        self._wall_clock = wall_clock
        self._send_gate = send_gate
        # a region's egress (distributed.source_address): connections leave from it
        self._local_addr = (source_address, 0) if source_address else None
        self._base = {"User-Agent": user_agent, "Accept": accept, "Accept-Encoding": accept_encoding}
        for header, text in self._base.items():
            if not _header_ok(header, text):
                raise ValueError(f"invalid header {header}: {text!r}")
        self._base_bytes = _encode_headers(self._base)
        self._pool = Pool(connections_max, connections_per_host_max, idle_s)
        self._closed = False

    # -- lifecycle ----------------------------------------------------------

    async def close(self) -> None:
        self._closed = True
        self._pool.close()
        await asyncio.sleep(0)  # let the transports' connection_lost run

    async def __aenter__(self) -> "Http1Fetcher":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connections_open(self) -> int:
        """Connections open or opening now (idle ones included)."""
        return self._pool.open_count

    # -- fetch --------------------------------------------------------------

    async def fetch(self, url: str, *, ip: str | None = None, headers: dict[str, str] | None = None,
                    gate: Callable[[], bool] | None = None) -> FetchResult:
        """GET `url` (connecting to `ip` when given). Never raises for network trouble.
        With `gate` (and `send_gate=True`) nothing is sent unless `gate()` holds
        once the connection is ready."""
        if self._closed:
            raise RuntimeError("Http1Fetcher.fetch after close()")
        loop = asyncio.get_running_loop()
        started_at = self._wall_clock()
        t0 = loop.time()
        f = _Fetch(ip or "", gate if self._send_gate else None)
        try:
            async with asyncio.timeout(self._total_s):
                await self._run(f, url, ip, headers)
        except _Failed as exc:
            f.fail(exc.kind, exc.detail)
        except ResolveFailed as exc:
            f.fail(FetchError.NON_PUBLIC if exc.reason == Reason.NON_PUBLIC else FetchError.DNS, exc.detail)
        except PoolClosed as exc:
            f.fail(FetchError.NOT_SENT, str(exc))
        except TimeoutError:
            x = f.exchange
            if x is not None and x.head_done and x.error is None:
                if not x.ended:
                    x.truncated = Truncation.TIME
            else:
                f.fail(FetchError.TIMEOUT, f"no response head within total_s={self._total_s}")
        finally:
            conn, f.conn = f.conn, None
            if conn is not None:  # not released by _run: cancelled, timed out or failed
                self._pool.release(conn, False)

        elapsed_s = loop.time() - t0  # network time; decoding is not the server's
        x = f.exchange
        status, response_head, hdrs, body, truncated = 0, b"", _EMPTY_HEADERS, b"", None
        if f.error is None and x is not None:
            if x.codings and x.chunks and x.error is None:
                await self._undo_transfer_codings(x)
            if x.error is not None:
                f.error, f.detail = x.error, x.detail
            else:
                status, response_head, truncated = x.status, x.head, x.truncated
                hdrs = CIMultiDictProxy(x.headers)
                body = _join(x.chunks)
                if x.detail:
                    f.detail = x.detail
        content = b""
        if body:
            # every Content-Encoding line, in order: one list (RFC 9110 5.3, 8.4)
            decoded = await self._decode(body, ", ".join(hdrs.getall("Content-Encoding", ())), self._decoded_bytes_max)
            content = decoded.content
            if decoded.error is not None:
                f.error, f.detail = decoded.error, decoded.detail
        return FetchResult(
            url=url,
            ip=f.ip,
            status=status,
            request_head=f.request_head,
            response_head=response_head,
            headers=hdrs,
            body=body,
            content=content,
            truncated=truncated,
            started_at=started_at,
            elapsed_s=elapsed_s,
            error=f.error,
            error_detail=f.detail,
        )

    async def _decode(self, body: bytes, codings: str | None, limit: int) -> Decoded:
        """`decode_body` of `body` to at most `limit` bytes; in a thread when large."""
        if codings and len(body) > DECODE_INLINE_BYTES_MAX:
            return await asyncio.to_thread(decode_body, body, codings, decoded_bytes_max=limit, ratio_max=self._ratio_max)
        return decode_body(body, codings, decoded_bytes_max=limit, ratio_max=self._ratio_max)

    async def _undo_transfer_codings(self, x: Exchange) -> None:
        """Undo the transfer codings llhttp leaves on the body (all but a final
        chunked, RFC 9112 7), so that `body` is after transfer decoding as the
        WARC layer takes it (it renames the Transfer-Encoding header). We send no
        TE, so a server ought to use none (RFC 9110 10.1.4); a few gzip anyway.
        The decoded body is held to body_bytes_max (beyond: truncated "length").
        One that cannot be undone (an unknown coding, chunked not last, corrupt
        data) is a protocol error: there is no honest body to give."""
        d = await self._decode(_join(x.chunks), ", ".join(x.codings), self._body_bytes_max)
        if d.error is FetchError.DECODE:
            x.error, x.detail = FetchError.PROTOCOL, f"cannot undo the transfer coding ({d.detail})"
            return
        x.chunks = [d.content]
        if d.error is not None:  # decode_bomb: cut at the limit
            x.truncated, x.detail = Truncation.LENGTH, f"transfer-decoded body: {d.detail}"

    async def _run(self, f: "_Fetch", url: str, ip: str | None, headers: dict[str, str] | None) -> None:
        scheme, host, port, host_header, target = _split_url(url)
        head = self._request_head(target, host_header, headers)
        if ip is None or _is_literal(host):
            # an IP literal in the URL is what we connect to, so it is what we check
            known = self.resolver.cached(host)
            ip = known[0] if known is not None else (await self.resolver.resolve(host))[0]
        else:
            ip = normalise_host(ip)
            if not self._policy.permits(ip):   # remembered per address by the policy itself
                raise _Failed(FetchError.NON_PUBLIC, f"{ip} is not permitted by the network policy")
        f.ip = ip
        key = (scheme, host, ip, port)
        pool = self._pool
        fresh = False
        while True:
            conn = f.conn = await pool.acquire(key, reuse=not fresh)
            reused = conn.transport is not None
            if f.gate is not None and not f.gate():
                f.conn = None
                pool.release(conn, reused)
                raise _Failed(FetchError.NOT_SENT, "send gate closed before the request was sent")
            if not reused:
                await self._connect(conn, scheme, host, ip, port)
            f.ip = conn.peer_ip
            f.request_head = head
            x = f.exchange = Exchange(asyncio.get_running_loop(), self._body_bytes_max, self._header_bytes_max,
                                      HEADERS_COUNT_MAX)
            conn.send(head, x)
            await x.done
            if reused and x.error == "reset" and not x.received and not fresh:
                fresh = True  # the server closed a kept-alive connection: one retry, new connection
                f.conn = None
                pool.release(conn, False)
                continue
            f.conn = None
            pool.release(conn, x.reusable())
            return

    async def _connect(self, conn: Connection, scheme: str, host: str, ip: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        tls = None
        if scheme == "https":
            tls = self._ssl if self._ssl is not None else _default_context()
        try:
            async with asyncio.timeout(self._connect_s):
                await loop.create_connection(
                    lambda: conn, ip, port, ssl=tls, server_hostname=host if tls is not None else None,
                    ssl_handshake_timeout=self._connect_s if tls is not None else None, local_addr=self._local_addr,
                )
        except TimeoutError:
            raise _Failed(FetchError.TIMEOUT, f"connect to {ip}:{port} took over connect_s={self._connect_s}") from None
        except ssl.SSLError as exc:
            raise _Failed(FetchError.TLS, _describe(exc)) from None
        except OSError as exc:
            raise _Failed(FetchError.CONNECT, f"cannot connect to {ip}:{port}: {_describe(exc)}") from None

    def _request_head(self, target: str, host_header: str, headers: dict[str, str] | None) -> bytes:
        start = f"GET {target} HTTP/1.1\r\nHost: {host_header}\r\n".encode("ascii")
        if not headers:
            return start + self._base_bytes + b"\r\n"
        for name, value in headers.items():
            if not _header_ok(name, value):
                raise _Failed(FetchError.INVALID_REQUEST, f"invalid header {name!r}: {value!r}")
        names = {name.lower() for name in headers}
        base = self._base_bytes
        if not names.isdisjoint(_BASE_NAMES):
            base = _encode_headers({k: v for k, v in self._base.items() if k.lower() not in names})
        if "host" in names:
            start = f"GET {target} HTTP/1.1\r\n".encode("ascii")
        return start + base + _encode_headers(headers) + b"\r\n"


class _Fetch:
    """Mutable state of one fetch, so a timeout keeps what was gathered."""

    __slots__ = ("ip", "gate", "request_head", "exchange", "conn", "error", "detail")

    def __init__(self, ip: str, gate: Callable[[], bool] | None) -> None:
        self.ip = ip
        self.gate = gate
        self.request_head = b""
        self.exchange: Exchange | None = None
        self.conn: Connection | None = None
        self.error: FetchError | None = None
        self.detail = ""

    def fail(self, kind: FetchError, detail: str) -> None:
        self.error = kind
        self.detail = detail
        self.exchange = None


_CONTEXT: list[ssl.SSLContext] = []


def _default_context() -> ssl.SSLContext:
    if not _CONTEXT:
        _CONTEXT.append(ssl.create_default_context())
    return _CONTEXT[0]


def _split_url(url: str) -> tuple[str, str, int, str, str]:
    """(scheme, normalised host, port, Host header value, request target)."""
    m = common_match(url)
    if m is not None and m.group(6) is None:
        # The common spelling (`courtly.core.urlfast`), which every URL the
        # crawler queues is in: a lowercase DNS name that is no A-label (or a
        # dotted quad), a decimal port, a path and query of safe ASCII. Read
        # off the match: cheaper than `_split_url_parsed` (docs/performance.md)
        # and the same answer, by
        # test_fetcher_split.py::test_split_url_reads_the_corpus_as_yarl_does and
        # test_fetcher_split.py::test_split_url_reads_generated_urls_as_yarl_does.
        scheme, host, port_text, path, query, _ = m.groups()
        default = _DEFAULT_PORT[scheme]
        port = default if port_text is None else int(port_text)
        target = path or "/"
        if query:
            target = f"{target}?{query}"
        return scheme, host, port, host if port == default else f"{host}:{port}", target
    return _split_url_parsed(url)


def _split_url_parsed(url: str) -> tuple[str, str, int, str, str]:
    """`_split_url` of any URL, by yarl."""
    try:
        u = URL(url, encoded=True) if url.isascii() and " " not in url else URL(url)
        scheme, raw_host, port = u.scheme, u.raw_host, u.port
        host_header = u.host_port_subcomponent if u.explicit_port not in (None, _DEFAULT_PORT.get(scheme)) \
            else (f"[{raw_host}]" if raw_host and ":" in raw_host else raw_host)
        target = u.raw_path_qs or "/"
    except (ValueError, TypeError, UnicodeError, IndexError) as exc:   # IndexError: yarl on "http://[::1]@"
        raise _Failed(FetchError.INVALID_URL, _describe(exc)) from None
    if scheme not in _DEFAULT_PORT or not raw_host or port is None or host_header is None:
        raise _Failed(FetchError.INVALID_URL, f"not an absolute http(s) URL: {url!r}")
    if not target.startswith("/") or not target.isascii() or any(c in target for c in " \r\n"):
        raise _Failed(FetchError.INVALID_URL, f"cannot send the target of {url!r}")
    return scheme, normalise_host(raw_host), port, host_header, target


def _header_ok(name: str, value: str) -> bool:
    raw = name.encode("latin-1", "replace")
    return bool(raw) and all(c in _TOKEN for c in raw) and not any(c in value for c in "\r\n\0")


def _encode_headers(headers: Mapping[str, str]) -> bytes:
    # surrogateescape: a validator a server sent as raw octets (an ETag not in UTF-8) goes back as those octets
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("utf-8", "surrogateescape")


def _is_literal(host: str) -> bool:
    return bool(host) and (host[0].isdigit() or ":" in host) and parse_ip(host) is not None


def _join(chunks: list[bytes | bytearray]) -> bytes:
    if len(chunks) == 1 and type(chunks[0]) is bytes:
        return chunks[0]
    return b"".join(chunks)  # also bytes of a bytearray (`Exchange._compact`)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
