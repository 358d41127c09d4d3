"""Hostile response bodies: decompression bombs, bad encodings, deep nesting.

Static payloads are built once per process and cached (a 256 MiB gzip bomb
takes about a second to compress, so `bomb` runs in a worker thread).
Streaming behaviours (endless chunked body, one-byte drip, short body) are
not payloads: `server.py` plays them, bounded by the config's
`stream_bytes_max` and `stream_time_max_s`.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from dataclasses import dataclass

__all__ = ["HostilePlan", "plan", "bomb", "STREAMING"]

STREAMING = ("endless-chunked", "drip", "length-mismatch")
_CHUNK = bytes(1 << 20)
_bomb_cache: dict[tuple[str, int], bytes] = {}
_bomb_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class HostilePlan:
    """How to answer one hostile path: headers, body, and an optional stream kind."""

    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    stream: str | None = None  # endless-chunked | drip | length-mismatch
    bomb: str | None = None  # gzip | br | zstd: body is the cached bomb


def _compress_zeros(kind: str, total: int) -> bytes:
    chunks = max(1, total // len(_CHUNK))
    out: list[bytes] = []
    if kind == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        out = [c.compress(_CHUNK) for _ in range(chunks)]
        out.append(c.flush())
    elif kind == "br":
        import brotli

        b = brotli.Compressor(quality=5)
        out = [b.process(_CHUNK) for _ in range(chunks)]
        out.append(b.finish())
    elif kind == "zstd":
        import zstandard

        z = zstandard.ZstdCompressor(level=3).compressobj()
        out = [z.compress(_CHUNK) for _ in range(chunks)]
        out.append(z.flush())
    else:
        raise ValueError(kind)
    return b"".join(out)


def bomb_sync(kind: str, total: int) -> bytes:
    with _bomb_lock:
        data = _bomb_cache.get((kind, total))
        if data is None:
            data = _compress_zeros(kind, total)
            _bomb_cache[(kind, total)] = data
        return data


async def bomb(kind: str, total: int) -> bytes:
    """`total` bytes of zeros compressed with `kind`, cached per process."""
    data = _bomb_cache.get((kind, total))
    if data is not None:
        return data
    return await asyncio.to_thread(bomb_sync, kind, total)


_HTML = "text/html; charset=utf-8"
_DEEP = b"<!DOCTYPE html><html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000 + b"</body></html>"


def _accepts(accept_encoding: str | None, coding: str) -> bool:
    if accept_encoding is None:
        return True   # no header: any coding is acceptable (RFC 9110 12.5.3)
    return coding in {part.split(";")[0].strip().lower() for part in accept_encoding.split(",")}


def plan(name: str, accept_encoding: str | None = None) -> HostilePlan:
    """The plan for /hostile/<name> (names from webconfig.HOSTILE_BODIES).
    The br and zstd bombs negotiate like a real server: a client whose
    Accept-Encoding (when it sends one) does not name the coding gets the
    bomb gzip-coded."""
    if name == "gzip-bomb":
        return HostilePlan((("Content-Type", _HTML), ("Content-Encoding", "gzip")), bomb="gzip")
    if name in ("brotli-bomb", "zstd-bomb"):
        coding = "br" if name == "brotli-bomb" else "zstd"
        if not _accepts(accept_encoding, coding):
            coding = "gzip"
        return HostilePlan((("Content-Type", _HTML), ("Content-Encoding", coding)), bomb=coding)
    if name == "endless-chunked":
        return HostilePlan((("Content-Type", _HTML),), stream="endless-chunked")
    if name == "drip":
        body = b"<!DOCTYPE html><html><body><p>" + b"drip " * 400 + b"</p></body></html>"
        return HostilePlan((("Content-Type", _HTML),), body=body, stream="drip")
    if name == "length-mismatch":
        return HostilePlan((("Content-Type", _HTML),), body=b"<html><body>" + b"x" * 1000, stream="length-mismatch")
    if name == "huge-headers":
        headers = [("Content-Type", _HTML)]
        headers += [(f"X-Filler-{i:03d}", "f" * 1024) for i in range(200)]
        headers.append(("X-Huge", "h" * 65536))
        return HostilePlan(tuple(headers), body=b"<html><body>huge headers</body></html>")
    if name == "deep-nesting":
        return HostilePlan((("Content-Type", _HTML),), body=_DEEP)
    if name == "bad-utf8":
        body = (b"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>bad \xff\xfe utf8</title></head>"
                b"<body><p>overlong \xc0\xaf, lone continuation \x80\x80, truncated \xe2\x82, "
                b"surrogate \xed\xa0\x80, <a href=\"/caf\xe9.html\">caf\xe9</a></p></body></html>")
        return HostilePlan((("Content-Type", _HTML),), body=body)
    if name == "bad-charset":
        body = (b"<!DOCTYPE html><html><head><meta charset=\"shift_jis\"><title>charset</title></head>"
                b"<body><p>na\xefve r\xe9sum\xe9 \x82\xa0\x82\xa2</p></body></html>")
        return HostilePlan((("Content-Type", "text/html; charset=x-no-such-charset"),), body=body)
    if name == "bad-gzip":
        return HostilePlan((("Content-Type", _HTML), ("Content-Encoding", "gzip")),
                           body=b"<html><body>this is not gzip at all</body></html>")
    raise KeyError(name)
