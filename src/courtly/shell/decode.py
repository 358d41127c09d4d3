"""Content-Encoding decoding with caps: gzip, deflate, br, zstd, stacked.

The fetcher keeps the raw (content-encoded) body for the WARC record and asks
this module for the decoded `content` the parsers read. Decoding is the one
place where a few kilobytes from a hostile server can turn into gigabytes, so
every step is bounded:

- each decoder is a generator that yields at most `STEP_BYTES` per step and
  pulls its input lazily, so a stack such as ``Content-Encoding: gzip, br``
  never materialises an unbounded intermediate;
- the consumer stops at an output limit: ``decoded_bytes_max``, and, above
  `RATIO_FLOOR_BYTES`, ``decode_ratio_max`` times the raw size. Hitting the
  limit cuts the content and reports ``decode_bomb``;
- zstd windows are capped at 8 MiB (RFC 9659), brotli uses its default
  (16 MiB) window.

Rules: corrupt input reports ``decode`` and keeps what was decoded before the
fault; an input that simply stops early (a truncated body) is not an error;
unknown codings report ``decode`` with empty content. Pure and synchronous;
no I/O.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import brotli
import zstandard

from courtly.ports import FetchError

__all__ = [
    "Decoded",
    "parse_codings",
    "decode_body",
    "decode_limit",
    "STEP_BYTES",
    "RATIO_FLOOR_BYTES",
    "CODINGS_MAX",
]

STEP_BYTES = 256 * 1024          # most output one decoder step may produce
SLICE_BYTES = 64 * 1024          # raw input is fed in slices of this size
RATIO_FLOOR_BYTES = 1 << 20      # the ratio rule applies above this output size
CODINGS_MAX = 3                  # most stacked content-codings accepted
ZSTD_WINDOW_BYTES_MAX = 1 << 23  # RFC 9659: zstd content-coding window <= 8 MiB

_ALIASES = {"x-gzip": "gzip", "identity": ""}


@dataclass(frozen=True, slots=True)
class Decoded:
    """Decoded content and what went wrong: None, FetchError.DECODE or DECODE_BOMB."""

    content: bytes
    error: FetchError | None = None
    detail: str = ""


class _Corrupt(Exception):
    pass


def parse_codings(header: str | None) -> tuple[str, ...]:
    """Codings in the order they were applied, lower-cased, identity dropped."""
    if not header:
        return ()
    out = []
    for token in header.split(","):
        name = token.strip().lower()
        name = _ALIASES.get(name, name)
        if name:
            out.append(name)
    return tuple(out)


def decode_limit(raw_len: int, decoded_bytes_max: int, ratio_max: float) -> int:
    """Largest decoded size accepted for a raw body of `raw_len` bytes."""
    by_ratio = max(RATIO_FLOOR_BYTES, int(ratio_max * raw_len))
    return min(decoded_bytes_max, by_ratio)


def decode_body(
    body: bytes,
    content_encoding: str | None,
    *,
    decoded_bytes_max: int,
    ratio_max: float,
) -> Decoded:
    """Decode `body` per `content_encoding`, never producing more than the limit."""
    codings = parse_codings(content_encoding)
    if not codings:
        if len(body) <= decoded_bytes_max:
            return Decoded(body)
        return Decoded(body[:decoded_bytes_max], FetchError.DECODE_BOMB, "identity body over decoded_bytes_max")
    if len(codings) > CODINGS_MAX:
        return Decoded(b"", FetchError.DECODE, f"more than {CODINGS_MAX} content-codings: {content_encoding}")
    for name in codings:
        if name not in _STAGES:
            return Decoded(b"", FetchError.DECODE, f"unsupported content-coding {name!r}")
    if not body:
        return Decoded(b"")

    limit = decode_limit(len(body), decoded_bytes_max, ratio_max)
    stream: Iterable[bytes] = _slices(body)  # type: ignore[assignment]  # each stage reads memoryviews too
    for name in reversed(codings):
        stream = _STAGES[name](stream)

    pieces: list[bytes] = []
    total = 0
    try:
        for piece in stream:
            total += len(piece)
            if total > limit:
                keep = len(piece) - (total - limit)
                pieces.append(piece[:keep])
                why = "decoded_bytes_max" if limit == decoded_bytes_max else "decode_ratio_max"
                return Decoded(_join(pieces), FetchError.DECODE_BOMB, f"decoded output over {limit} bytes ({why})")
            pieces.append(piece)
    except (zlib.error, brotli.error, zstandard.ZstdError, _Corrupt) as exc:
        return Decoded(_join(pieces), FetchError.DECODE, f"{'+'.join(codings)}: {exc}")
    return Decoded(_join(pieces))


def _join(pieces: list[bytes]) -> bytes:
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _slices(body: bytes) -> Iterator[bytes | memoryview]:
    if len(body) <= SLICE_BYTES:
        yield body
        return
    view = memoryview(body)
    for start in range(0, len(body), SLICE_BYTES):
        yield view[start : start + SLICE_BYTES]


def _inflate(chunks: Iterable[bytes], wbits: int, members: bool) -> Iterator[bytes]:
    """zlib-family decoder; `members` restarts on a following gzip member."""
    d = zlib.decompressobj(wbits)
    for chunk in chunks:
        data = chunk
        while True:
            out = d.decompress(data, STEP_BYTES)
            if out:
                yield out
            if d.eof:
                rest = d.unused_data
                if members and rest[:2] == b"\x1f\x8b":
                    d = zlib.decompressobj(wbits)
                    data = rest
                    continue
                return  # trailing bytes after the stream are ignored
            data = d.unconsumed_tail
            if not data and len(out) < STEP_BYTES:
                break


def _gzip(chunks: Iterable[bytes]) -> Iterator[bytes]:
    return _inflate(chunks, 16 + zlib.MAX_WBITS, members=True)


def _deflate(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """RFC 9110 deflate is zlib-wrapped; many servers send raw deflate. Sniff."""
    it = iter(chunks)
    head = b""
    for chunk in it:
        head += bytes(chunk)
        if len(head) >= 2:
            break
    if not head:
        return
    zlib_wrapped = len(head) >= 2 and (head[0] & 0x0F) == 8 and ((head[0] << 8) | head[1]) % 31 == 0
    wbits = zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS
    if zlib_wrapped:  # a raw stream can pass the 2-byte header check by chance
        try:
            zlib.decompressobj(wbits).decompress(head, 1)
        except zlib.error:
            wbits = -zlib.MAX_WBITS

    def rest() -> Iterator[bytes]:
        yield head
        yield from it

    yield from _inflate(rest(), wbits, members=False)


def _brotli(chunks: Iterable[bytes]) -> Iterator[bytes]:
    d = brotli.Decompressor()
    for chunk in chunks:
        if d.is_finished():
            if any(bytes(chunk)):
                raise _Corrupt("data after the end of the brotli stream")
            continue
        out = d.process(chunk, output_buffer_limit=STEP_BYTES)
        if out:
            yield out
        while not d.can_accept_more_data():
            out = d.process(b"", output_buffer_limit=STEP_BYTES)
            if out:
                yield out


class _Pull:
    """File-like source for zstandard's stream_reader, pulling upstream chunks."""

    __slots__ = ("_it", "_buf")

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._it = iter(chunks)
        self._buf = b""

    def read(self, size: int = -1) -> bytes:
        if not self._buf:
            for chunk in self._it:
                if chunk:
                    self._buf = bytes(chunk)
                    break
            else:
                return b""
        if size < 0 or size >= len(self._buf):
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:size], self._buf[size:]
        return out


def _zstd(chunks: Iterable[bytes]) -> Iterator[bytes]:
    # a decompressor per call: instances must not be shared across threads
    d = zstandard.ZstdDecompressor(max_window_size=ZSTD_WINDOW_BYTES_MAX)
    reader = d.stream_reader(_Pull(chunks), read_across_frames=True)  # type: ignore[arg-type]  # has read()
    while True:
        out = reader.read(STEP_BYTES)
        if not out:
            return
        yield out


_STAGES: dict[str, Callable[[Iterable[bytes]], Iterator[bytes]]] = {
    "gzip": _gzip,
    "deflate": _deflate,
    "br": _brotli,
    "zstd": _zstd,
}
