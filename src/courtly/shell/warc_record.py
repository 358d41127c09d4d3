"""WARC 1.1 records: the parts the writer (``courtly.shell.warc``) frames
them with.

What it owns: the bytes of one record (``request_record``,
``metadata_record``; the writer frames response, revisit and warcinfo the
same way), its gzip member (``gzip_member``), and the small values in its
headers: SHA-1 digests in base32, record IDs, WARC-Date, warc-fields blocks,
and the checks that keep a header value from breaking the framing.

How it works: a record is built as one bytes object (one f-string, one
encode, the block appended) and handed to a long-lived raw deflate stream
with the body, if any, passed as it is: the body is never copied or joined,
and each byte of it is touched once by each digest, once by CRC-32 and once
by the compressor.

Rules: pure functions but for ``record_ids`` (the OS's randomness); values
are checked before they are framed; the digests are what warcio checks.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import struct
import zlib
from datetime import UTC, datetime
from typing import Any

from courtly.core.fingerprint import sha1_b32, warc_payload_digest

try:  # ISA-L's CRC-32: the same value as zlib's, faster (optional; docs/performance.md)
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - depends on the environment
    _crc32 = zlib.crc32

__all__ = [
    "RECORD_END",
    "cdx_timestamp",
    "check_uri",
    "check_value",
    "compressed_payload",
    "gzip_member",
    "metadata_record",
    "payload_digest_of",
    "record_id",
    "record_ids",
    "request_record",
    "sha1_b32",
    "warc_date",
    "warc_fields",
]

RECORD_END = b"\r\n\r\n"
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no mtime, OS unknown
_DEFLATE_FINAL_EMPTY_BLOCK = b"\x03\x00"  # BFINAL=1, fixed Huffman, end-of-block
_FINAL_STORED_RECORD_END = b"\x01\x04\x00\xfb\xff" + RECORD_END   # BFINAL=1 stored block: LEN 4, NLEN, data
_STORED_BLOCK_BYTES = 0xFFFF
_pack_stored_head = struct.Struct("<BHH").pack
_FULL_FLUSH = zlib.Z_FULL_FLUSH   # the same value in isal_zlib
_pack_trailer = struct.Struct("<II").pack  # gzip trailer: CRC-32 and size mod 2**32
_sha1 = hashlib.sha1
_BAD_HEADER_CHARS = re.compile(r"[\x00-\x1f\x7f]")
_BAD_URI_CHARS = re.compile(r"[\x00-\x20\x7f]")
_FIELD_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def gzip_member(deflate: Any, record: bytes, body: bytes | None = None, *, store: bool = False) -> bytes:
    """One complete gzip member holding `record` (and, if given, `body` and
    the record end after it), made with a long-lived raw deflate stream: a
    full flush ends the member's data (and resets the history, so members
    stay independent) and an empty final block closes it. Reusing the stream
    saves allocating and faulting in ~270 KB of deflate state per record,
    which cost as much as compressing a 30 KB page.

    `store`: the body (already compressed: gzip or brotli content coding,
    JPEG, video...) goes into stored deflate blocks after the record head's
    full flush instead of through the compressor, which would spend as long
    on it as on a page of text to save nothing."""
    if body is None:
        return b"".join((_GZIP_HEADER, deflate.compress(record), deflate.flush(_FULL_FLUSH),
                         _DEFLATE_FINAL_EMPTY_BLOCK, _pack_trailer(_crc32(record), len(record) & 0xFFFFFFFF)))
    crc = _crc32(RECORD_END, _crc32(body, _crc32(record)))
    size = (len(record) + len(body) + 4) & 0xFFFFFFFF
    if store:
        return b"".join((_GZIP_HEADER, deflate.compress(record), deflate.flush(_FULL_FLUSH),
                         *_stored_blocks(body), _FINAL_STORED_RECORD_END, _pack_trailer(crc, size)))
    return b"".join((_GZIP_HEADER, deflate.compress(record), deflate.compress(body), deflate.compress(RECORD_END),
                     deflate.flush(_FULL_FLUSH), _DEFLATE_FINAL_EMPTY_BLOCK, _pack_trailer(crc, size)))


def compressed_payload(head_lower: bytes, mime: str | None) -> bool:
    """Whether the payload of a response is compressed already, by its
    lowercased HTTP head and its bare media type: a content coding other
    than identity, or a compressed image, audio, video, archive or font
    format (not SVG, BMP, WAV...: those are worth deflating)."""
    if b"content-encoding" in head_lower and _CONTENT_CODED.search(head_lower):
        return True
    if mime is None:
        return False
    mime = mime.lower()
    return mime in _COMPRESSED_TYPES or mime.startswith("video/")


_CONTENT_CODED = re.compile(rb"(?m)^content-encoding[ \t]*:[ \t]*(?!identity[ \t]*\r?$)\S")
_COMPRESSED_TYPES = frozenset({
    "image/jpeg", "image/png", "image/gif", "image/webp", "image/avif", "image/heic", "image/jxl",
    "audio/mpeg", "audio/mp4", "audio/aac", "audio/ogg", "audio/opus", "audio/webm", "audio/flac",
    "application/zip", "application/gzip", "application/x-gzip", "application/zstd", "application/x-xz",
    "application/x-bzip2", "application/x-7z-compressed", "application/vnd.rar", "application/x-rar-compressed",
    "application/x-brotli", "font/woff", "font/woff2", "application/font-woff",
})


def _stored_blocks(data: bytes) -> list[bytes | memoryview]:
    """`data` as non-final stored deflate blocks (RFC 1951 3.2.4: a header
    byte, LEN and its complement, the bytes as they are; at most 65,535 bytes
    each), starting on a byte boundary, as a full flush leaves the stream."""
    view = memoryview(data)
    parts: list[bytes | memoryview] = []
    for start in range(0, len(data), _STORED_BLOCK_BYTES):
        chunk = view[start:start + _STORED_BLOCK_BYTES]
        parts += (_pack_stored_head(0, len(chunk), len(chunk) ^ 0xFFFF), chunk)
    return parts


# The ``WARC-Payload-Digest`` the writer records for a body (SHA-1, base32,
# ``sha1:`` prefix): compare it before writing to decide between
# ``write_exchange`` and ``write_revisit``. The body is the payload as given to
# ``write_exchange`` (transfer-decoded, not content-decoded). One definition,
# in the core: the crawler keys its exact-duplicate index by it too.
payload_digest_of = warc_payload_digest


def request_record(record_id: str, addressed: str, concurrent_to: str, request_head: bytes) -> bytes:
    return (
        f"WARC/1.1\r\nWARC-Type: request\r\nWARC-Record-ID: {record_id}\r\n{addressed}"
        f"WARC-Concurrent-To: {concurrent_to}\r\n"
        f"WARC-Block-Digest: {sha1_b32(_sha1(request_head))}\r\n"
        "Content-Type: application/http;msgtype=request\r\n"
        f"Content-Length: {len(request_head)}\r\n\r\n"
    ).encode("utf-8") + request_head + RECORD_END


def metadata_record(metadata: dict[str, str], common: str, about_id: str, record_id: str) -> bytes:
    block = warc_fields(metadata)
    return (
        f"WARC/1.1\r\nWARC-Type: metadata\r\nWARC-Record-ID: {record_id}\r\n{common}"
        f"WARC-Concurrent-To: {about_id}\r\nWARC-Refers-To: {about_id}\r\n"
        f"WARC-Block-Digest: {sha1_b32(_sha1(block))}\r\n"
        "Content-Type: application/warc-fields\r\n"
        f"Content-Length: {len(block)}\r\n\r\n"
    ).encode("utf-8") + block + RECORD_END


def record_id() -> str:
    return record_ids(1)[0]


def record_ids(n: int) -> list[str]:
    """`n` WARC-Record-IDs, random (version 4) UUID URNs from one read of
    the OS's randomness: `uuid.uuid4()` objects cost several times as much
    (docs/performance.md, "Figures moved out of the code"). The version
    digit replaces 4 random bits, the variant (`10` in the top bits) 2."""
    x = os.urandom(16 * n).hex()
    return [
        f"<urn:uuid:{x[i:i + 8]}-{x[i + 8:i + 12]}-4{x[i + 13:i + 16]}-"
        f"{_VARIANT_DIGIT[x[i + 16]]}{x[i + 17:i + 20]}-{x[i + 20:i + 32]}>"
        for i in range(0, 32 * n, 32)
    ]


_VARIANT_DIGIT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


_last_second: tuple[int, str] = (-1, "")   # (whole second, "YYYY-MM-DDTHH:MM:SS"), swapped whole


def warc_date(t: float) -> str:
    """WARC-Date of a POSIX time: UTC, microseconds (WARC 1.1 allows fractions);
    the same string as ``datetime.fromtimestamp(t, UTC)`` formats (its rounding:
    half to even on the microsecond), with the seconds part formatted once per second."""
    global _last_second
    sec = math.floor(t)
    us = round((t - sec) * 1e6)
    if us >= 1_000_000:
        sec += 1
        us -= 1_000_000
    last = _last_second
    if last[0] != sec:
        last = _last_second = (sec, datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{last[1]}.{us:06d}Z"


def cdx_timestamp(date: str) -> str:
    """The 14-digit CDXJ timestamp of a `warc_date` string."""
    return date[0:4] + date[5:7] + date[8:10] + date[11:13] + date[14:16] + date[17:19]


def check_uri(url: str) -> None:
    if not url or (not (url.isprintable() and " " not in url) and _BAD_URI_CHARS.search(url)):
        raise ValueError(f"URL has whitespace or control characters: {url!r}")


def check_value(name: str, value: str) -> None:
    if not value.isprintable() and _BAD_HEADER_CHARS.search(value):
        raise ValueError(f"{name} has control characters: {value!r}")


def warc_fields(fields: dict[str, str]) -> bytes:
    """``application/warc-fields``: one ``name: value`` line per field."""
    for name in fields:
        if name not in _GOOD_FIELD_NAMES:
            if not _FIELD_NAME.fullmatch(name):
                raise ValueError(f"bad warc-fields name: {name!r}")
            if len(_GOOD_FIELD_NAMES) < 1024:  # a bounded cache of names already checked
                _GOOD_FIELD_NAMES.add(name)
    if not "".join(fields.values()).isprintable():  # a control character, or another unprintable one
        for name, value in fields.items():
            check_value(name, value)
    return "".join([f"{name}: {value}\r\n" for name, value in fields.items()]).encode("utf-8")


_GOOD_FIELD_NAMES: set[str] = set()
