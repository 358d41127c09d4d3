"""A minimal HTTP/1.1 client connection and its keep-alive pool (llhttp via httptools).

Theory of operation: a `Connection` is an asyncio `Protocol` on one socket
(plain or TLS) opened to an address the caller already checked. The caller
writes one pre-encoded request head with `Connection.send` and awaits the
returned `Exchange`'s `done` future; bytes received feed the exchange, which
keeps the raw response head (everything up to the first CRLFCRLF of the final
response, interim 1xx heads skipped), the parsed headers and the body after
de-chunking (any other transfer coding is left on it, named in `codings`), up
to the caps it was given. An exchange ends exactly once:
complete, truncated ("length" or "disconnect") or failed (an error kind); a
deadline is the caller's business (it reads what the exchange gathered).

`Pool` counts every open (or opening) connection against `connections_max`
in total and `per_host_max` per key (scheme, host, ip, port), hands out idle
connections last-in first-out, makes callers wait when full (the caller's
deadline bounds the wait), evicts another key's idle connection when only the
total is full, and closes connections idle for longer than `idle_s`.

Rules: nothing here resolves names or checks addresses (the fetcher does,
before `Pool.acquire`); a connection is reused only when the response was
complete, the peer allowed keep-alive, nothing arrived beyond it, and its
framing was unambiguous (not Transfer-Encoding with Content-Length or in HTTP/1.0).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque

import httptools
from multidict import CIMultiDict

from courtly.ports import FetchError, Truncation

__all__ = ["Connection", "Exchange", "Pool", "PoolClosed", "PoolKey"]

PoolKey = tuple[str, str, str, int]  # scheme, host, ip, port

_PARSER_ERRORS = (httptools.HttpParserError, httptools.HttpParserUpgrade)
_NO_BODY = frozenset((204, 304))
_CHUNKED = ["chunked"]
# llhttp's refusals of heads that `Exchange._mend` can remedy
_MENDABLE = frozenset(("Unexpected whitespace after header value", "Invalid header value char",
                       "Duplicate Content-Length", "Invalid character in Content-Length"))
_OBS_FOLD = re.compile(rb"\r\n[ \t]+")
_CONTENT_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*([^\r\n]*)\r\n")
_INTERIM_MAX = 32  # 1xx heads before the final one (a few in practice: 100, 102s, 103s)
_PIECES_MAX = 256  # body pieces kept apart; beyond, `Exchange._compact` folds them


class Exchange:
    """One request's response as it arrives. `done` resolves when it ends;
    then `error` (None or a kind), `status`, `head`, `headers`, `chunks` and
    `truncated` say what was received."""

    __slots__ = ("parser", "done", "head_buf", "head", "status", "headers", "chunks", "left",
                 "head_cap", "count_cap", "count", "received", "head_done", "interim", "complete",
                 "ended", "dirty", "keep_alive", "until_close", "codings", "framing", "mending", "interims",
                 "truncated", "error", "detail")

    def __init__(self, loop: asyncio.AbstractEventLoop, body_bytes_max: int, head_bytes_max: int,
                 headers_count_max: int) -> None:
        self.parser = _parser(self)
        self.done: asyncio.Future[None] = loop.create_future()
        self.head_buf = bytearray()
        self.head = b""
        self.status = 0
        self.headers: CIMultiDict[str] = CIMultiDict()
        self.chunks: list[bytes | bytearray] = []
        self.left = body_bytes_max
        self.head_cap = head_bytes_max
        self.count_cap = headers_count_max
        self.count = 0
        self.received = False    # any byte of a response arrived
        self.head_done = False   # the final (non-1xx) head was parsed
        self.interim = False     # the head being parsed is a 1xx
        self.complete = False    # the message ended as framed
        self.ended = False       # nothing more is taken in
        self.dirty = False       # bytes beyond the message: the connection cannot be reused
        self.keep_alive = False
        self.until_close = False  # body delimited by the connection closing
        self.codings: tuple[str, ...] = ()  # transfer codings still on the body (all but a final chunked)
        self.framing = 0         # bytes read in a row after the head without a byte of body
        self.mending = False     # the parser refused the head for a fault `_mend` remedies
        self.interims = 0        # 1xx heads skipped
        self.truncated: Truncation | None = None
        self.error: FetchError | None = None
        self.detail = ""

    # -- input from the connection -------------------------------------------

    def feed(self, data: bytes) -> None:
        self.received = True
        if self.ended:
            self.dirty = True  # bytes after the end: never reuse this connection
            return
        while data and not self.ended:
            if self.head_done:
                left = self.left
                self._parse(data)
                if left == self.left and not self.ended:
                    self._framing_only(len(data))
                elif self.framing:
                    self.framing = 0
                if len(self.chunks) > _PIECES_MAX:
                    self._compact()
                return
            buf = self.head_buf
            if buf:   # the head began in an earlier chunk
                start = len(buf) - 3 if len(buf) > 3 else 0
                buf += data
                whole: bytes | bytearray = buf
                end = buf.find(b"\r\n\r\n", start)
            else:     # most heads come whole in one chunk: not copied into head_buf
                if data[0] in b"\r\n":  # empty lines before the status line: llhttp skips them,
                    data = data.lstrip(b"\r\n")  # so must the head (RFC 9112 2.2)
                    if not data:
                        return
                whole = data
                end = data.find(b"\r\n\r\n")
                if end < 0:
                    buf += data
            if end < 0:
                if len(buf) > self.head_cap:
                    self.fail(FetchError.TOO_LARGE_HEADERS, f"response head over {self.head_cap} bytes")
                    return
                if not self.mending:
                    self._parse(data)
                return
            end += 4
            if end > self.head_cap:
                self.fail(FetchError.TOO_LARGE_HEADERS, f"response head is {end} bytes, over {self.head_cap}")
                return
            if not whole.startswith(b"HTTP/"):  # llhttp takes RTSP/ and ICE/ too (RFC 9112 2.3)
                self.fail(FetchError.PROTOCOL, f"not an HTTP status line: {bytes(whole[:40])!r}")
                return
            k = end - (len(whole) - len(data))  # where the head ends in `data`
            if not self.mending:
                self._parse(data[:k])  # may end the message too (no body)
            if self.mending:
                self._mend(bytes(whole[:end]))
            if self.error is not None:
                return
            if self.interim:  # a 1xx head: skip it, the final head follows
                self.interim = False
                self.interims += 1
                if self.interims > _INTERIM_MAX:  # each costs a copy of the rest of the read
                    self.fail(FetchError.PROTOCOL, f"more than {_INTERIM_MAX} interim (1xx) responses")
                    return
                # llhttp frames a body after 1xx heads but 100, 102 and 103; there is none
                # (RFC 9110 15.2): a new parser for the next head
                self.parser = _parser(self)
            elif not self.status:  # the parser did not end the head where we did
                self.fail(FetchError.PROTOCOL, "response head not understood")
                return
            else:
                self.head = bytes(whole[:end])
                self.head_done = True
            if buf:
                self.head_buf = bytearray()
            data = data[k:]
            if data and self.ended:  # bytes beyond a message without body
                self.dirty = True
                return

    def _mend(self, head: bytes) -> None:
        """Parse the whole `head` again, which llhttp refused for a fault with a
        remedy: obs-fold, which a user agent MUST replace with SP (RFC 9112
        5.2), and Content-Length lines or lists of one same value, which a
        recipient MAY take as one (RFC 9110 8.6). The head kept is as received."""
        fixed = _OBS_FOLD.sub(b" ", head)
        values = {v.strip(b" \t") for line in _CONTENT_LENGTH.findall(fixed) for v in line.split(b",")}
        if len(values) == 1:
            fixed = _CONTENT_LENGTH.sub(b"", fixed)[:-2] + b"Content-Length: " + values.pop() + b"\r\n\r\n"
        self.headers = CIMultiDict()
        self.count = 0
        self.parser = _parser(self)
        self._parse(fixed)  # refused again: a protocol error (`mending` still holds)
        self.mending = False

    def _framing_only(self, n: int) -> None:
        """A read of `n` bytes without a byte of body: chunk framing or the
        trailer section, whose fields httptools buffers whole (and re-copies as
        they grow). Held to head_cap in a row, as the head is, or a peer could
        grow one trailer field without bound within total_s."""
        self.framing += n
        if self.framing > self.head_cap:
            self.fail(FetchError.TOO_LARGE_HEADERS, f"over {self.head_cap} bytes of chunk framing or trailer fields")

    def _compact(self) -> None:
        """Fold the pieces into one buffer: a body sent in tiny chunks is one
        piece per chunk, each costing some 50 bytes of memory, so body_bytes_max
        would bound the payload but not the memory (a 2-byte chunk takes 7 wire
        bytes and ~25 times its size)."""
        chunks = self.chunks
        first = chunks[0]
        acc = first if type(first) is bytearray else bytearray(first)
        acc += b"".join(chunks[1:])
        self.chunks = [acc]

    def lost(self, exc: BaseException | None) -> None:
        """The connection closed (`exc` says why, None for a clean EOF)."""
        if self.ended:
            return
        if self.head_done:
            if self.until_close and exc is None:
                self.complete = True
                self.keep_alive = False
            else:
                self.truncated = Truncation.DISCONNECT
                self.detail = f"connection closed mid-body: {_describe(exc)}" if exc else "connection closed mid-body"
            self._end()
        else:
            why = _describe(exc) if exc else "peer closed the connection"
            self.fail(FetchError.RESET, f"no complete response head: {why}")

    def fail(self, kind: FetchError, detail: str) -> None:
        if self.ended:
            return
        self.error = kind
        self.detail = detail
        self._end()

    def _end(self) -> None:
        self.ended = True
        if not self.done.done():
            self.done.set_result(None)

    def _parse(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except _PARSER_ERRORS as exc:
            if self.complete or self.ended:
                self.dirty = True
            elif self.error is None:
                if not self.head_done and not self.mending and str(exc) in _MENDABLE:
                    self.mending = True  # once the head is whole: see _mend
                    return
                self.fail(FetchError.PROTOCOL, f"{type(exc).__name__}: {exc}")

    # -- httptools callbacks -------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:  # a second message in the same read: stop llhttp before its
            self.dirty = True  # head overwrites this one's status and headers
            raise ValueError("bytes beyond the message")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head_done:  # chunked trailers: not part of the head
            return
        self.count += 1
        if self.count > self.count_cap:
            self.fail(FetchError.TOO_LARGE_HEADERS, f"more than {self.count_cap} header lines")
            raise ValueError("too many header lines")
        self.headers.add(name.decode("latin-1"), value.decode("utf-8", "surrogateescape"))

    def on_headers_complete(self) -> None:
        p = self.parser
        status = p.get_status_code()
        if status < 200:
            if status < 100:  # RFC 9110 15: codes run from 100; no way to frame this
                self.fail(FetchError.PROTOCOL, f"status code {status:03d}")
                raise ValueError("status code under 100")
            self.interim = True
            self.headers = CIMultiDict()
            self.count = 0
            return
        self.status = status
        self.keep_alive = p.should_keep_alive()
        h = self.headers
        te = h.getall("Transfer-Encoding", None)
        if te is None:
            self.until_close = status not in _NO_BODY and "Content-Length" not in h
            return
        if te != _CHUNKED:  # the usual one "chunked" line says it all
            self._transfer_codings(te)
        if self.keep_alive and ("Content-Length" in h or p.get_http_version() != "1.1"):
            # RFC 9112 6.3 item 3 and 6.1: Transfer-Encoding wins over Content-Length and
            # in HTTP/1.0 is faulty framing; either may be a smuggling attempt: close after
            self.keep_alive = False

    def _transfer_codings(self, values: list[str]) -> None:
        """Framing by Transfer-Encoding (RFC 9112 6.3 items 3-4): chunked when
        chunked is the final coding, else delimited by the close; read here as
        llhttp reads it (the last token of the last line; it skips spaces, not
        tabs, after it), so `lost` judges the close as the parser framed the
        body. `codings` keeps the other codings, which stay on the body; a
        repeated final chunked is one header line sent twice, not a body
        chunked twice (RFC 9112 6.1 forbids that), so llhttp's one pass is it."""
        last = values[-1].rsplit(",", 1)[-1].lstrip(" \t").rstrip(" ").lower()
        chunked = last == "chunked"
        self.until_close = not chunked
        codings = [c for v in values for t in v.split(",") if (c := t.strip(" \t").lower()) and c != "identity"]
        while chunked and codings and codings[-1] == "chunked":
            codings.pop()
        self.codings = tuple(codings)

    def on_body(self, body: bytes) -> None:
        if self.ended:
            return
        n = len(body)
        if n > self.left:
            self.chunks.append(body[: self.left])
            self.left = 0
            self.truncated = Truncation.LENGTH
            self._end()
            return
        self.chunks.append(body)
        self.left -= n

    def on_message_complete(self) -> None:
        if self.interim or self.ended:
            return
        self.complete = True
        self._end()

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.dirty and self.truncated is None


class Connection(asyncio.Protocol):
    """One client socket; carries one exchange at a time."""

    def __init__(self, pool: "Pool", key: PoolKey) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.peer_ip = key[2]
        self.lost = False
        self.forgotten = False  # no longer counted by the pool
        self.idle_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer_ip = peer[0]

    def data_received(self, data: bytes) -> None:
        x = self.exchange
        if x is None:  # unsolicited bytes on an idle connection
            self.close()
            return
        x.feed(data)
        if x.ended and not x.reusable():
            self.close()

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        x = self.exchange
        if x is not None:
            x.lost(exc)
        self.pool.forget(self)

    def send(self, head: bytes, exchange: Exchange) -> None:
        self.exchange = exchange
        self.transport.write(head)  # type: ignore[union-attr]

    def usable(self) -> bool:
        return not self.lost and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        else:
            self.pool.forget(self)


class PoolClosed(Exception):
    """The pool was closed while a request waited for a connection."""


class Pool:
    """Keep-alive connections by key, within a total and a per-key limit."""

    def __init__(self, connections_max: int, per_host_max: int, idle_s: float) -> None:
        self._max = connections_max
        self._per_host_max = per_host_max
        self._idle_s = idle_s
        self._idle: dict[PoolKey, list[Connection]] = {}  # per key, most recent last
        self._lru: dict[Connection, None] = {}             # every idle connection, oldest first
        self._count: dict[PoolKey, int] = {}
        self._total = 0
        self._all: set[Connection] = set()
        self._waiters: deque[tuple[PoolKey, asyncio.Future[None]]] = deque()
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def open_count(self) -> int:
        return self._total

    async def acquire(self, key: PoolKey, *, reuse: bool = True) -> Connection:
        """An idle usable connection of `key` (its `transport` set), or a new
        one not yet connected (`transport` None) holding a counted slot. Waits
        while both limits are reached; the caller's deadline bounds the wait."""
        while True:
            if self._closed:
                raise PoolClosed("the fetcher was closed")
            idle = self._idle.get(key)
            if reuse:
                while idle:
                    conn = idle.pop()
                    del self._lru[conn]
                    if conn.usable():
                        return conn
                    conn.close()
            count = self._count.get(key, 0)
            if count < self._per_host_max:
                if self._total >= self._max and self._lru:
                    self._evict_oldest()
                if self._total < self._max:
                    conn = Connection(self, key)
                    self._count[key] = count + 1
                    self._total += 1
                    self._all.add(conn)
                    return conn
            waiter = asyncio.get_running_loop().create_future()
            entry = (key, waiter)
            self._waiters.append(entry)
            try:
                await waiter
            except BaseException:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                elif waiter.done() and not waiter.cancelled():
                    self._wake(key)  # pass the wake-up on
                raise

    def release(self, conn: Connection, reusable: bool) -> None:
        """Give `conn` back after an exchange (or an unused slot)."""
        conn.exchange = None
        if not reusable or not conn.usable() or self._closed:
            conn.close()
            return
        loop = asyncio.get_running_loop()
        conn.idle_at = loop.time()
        self._idle.setdefault(conn.key, []).append(conn)
        self._lru[conn] = None
        if self._sweep is None:
            self._sweep = loop.call_later(self._idle_s, self._sweep_idle)
        self._wake(conn.key)

    def forget(self, conn: Connection) -> None:
        """`conn` closed (or never opened): free its slot."""
        if conn.forgotten:
            return
        conn.forgotten = True
        self._all.discard(conn)
        if self._lru.pop(conn, 0) is None:
            self._idle[conn.key].remove(conn)
        count = self._count[conn.key] - 1
        if count:
            self._count[conn.key] = count
        else:
            del self._count[conn.key]
            self._idle.pop(conn.key, None)
        self._total -= 1
        self._wake(None)

    def close(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in list(self._all):
            conn.close()
        for _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def _wake(self, key: PoolKey | None) -> None:
        """Wake the first waiter that can now proceed: one of `key` (an idle
        connection appeared) or one whose key is under the per-host limit."""
        for entry in self._waiters:
            wkey, waiter = entry
            if wkey == key or self._count.get(wkey, 0) < self._per_host_max:
                self._waiters.remove(entry)
                if not waiter.done():
                    waiter.set_result(None)
                return

    def _evict_oldest(self) -> None:
        conn = next(iter(self._lru))
        conn.close()
        self.forget(conn)  # free the slot now; connection_lost finds it forgotten

    def _sweep_idle(self) -> None:
        self._sweep = None
        loop = asyncio.get_running_loop()
        expired_at = loop.time() - self._idle_s
        for conn in list(self._lru):
            if conn.idle_at > expired_at:  # oldest first: the rest are younger
                self._sweep = loop.call_later(conn.idle_at - expired_at, self._sweep_idle)
                return
            conn.close()
            self.forget(conn)


def _parser(exchange: Exchange) -> httptools.HttpResponseParser:
    p = httptools.HttpResponseParser(exchange)
    # Content-Length with Transfer-Encoding: TE frames the body (RFC 9112 6.3 item 3)
    # rather than the error llhttp makes of it; the connection is not reused
    p.set_dangerous_leniencies(lenient_chunked_length=True)
    return p


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
