"""WARC 1.1 files: the writer.

Owns the durable copy of every fetch (DESIGN: raw bytes are the asset).
Reading, the CDXJ index and crash repair live in ``courtly.shell.warc_index``;
their public names are re-exported here, so callers import from one place.

Theory of operation
-------------------
* One writer writes one file at a time. A file is created lazily by the first
  ``write_exchange`` and named after that exchange's ``fetched_at`` (this
  module never reads the clock), a per-writer serial and the writer's
  random tag::

      {prefix}-{yyyymmddHHMMSS UTC}-{serial:05d}-{8 hex}.warc.gz

  While it is being written it is called ``<name>.open``. On rotation or
  ``close()`` the writer fsyncs it, writes ``<name>.cdxj`` (via a temporary
  file and a rename), and only then renames ``<name>.open`` to ``<name>``: a
  ``.warc.gz`` file always has its index beside it, and anything a crash
  leaves behind is an ``.open`` file that ``repair()`` finishes. A live
  writer holds a lock (``.writer-<prefix>-<tag>``, an `flock` that dies with
  its process) that ``repair()`` respects, so writers of several processes
  (distributed workers) may share a folder and each repair it at start-up.
* Every file starts with a ``warcinfo`` record. Each exchange is a ``request``,
  a ``response`` and (if provenance fields are given) a ``metadata`` record,
  each in its own gzip member, so any record can be read from its offset
  alone. A fetch whose payload was stored before is a ``request`` plus a
  ``revisit`` record (``write_revisit``, WARC 1.1 section 6.7): profile
  identical-payload-digest (same body as an earlier capture; the runtime
  compares ``payload_digest_of(body)`` with its exact-duplicate index) or
  server-not-modified (a 304 to a conditional request). Its block is the HTTP
  response head only (``WARC-Truncated: length`` on identical-payload-digest
  revisits, as section 6.7.2 asks of a block cut short); WARC-Refers-To-Target-URI and WARC-Refers-To-Date name
  the earlier capture (and WARC-Refers-To its record id when known), which is
  what pywb uses to replay the revisit from the original record. The framing is written here (it is a few header lines); warcio is
  used only to read and verify. Compression is the main cost: members come
  from one long-lived raw deflate stream per thread (a full flush per member)
  instead of a fresh compressor per record, at level 1 by default, with
  ISA-L (``isal``) when it is installed and zlib otherwise. With ISA-L at
  level 1, small records (request, metadata, revisit, warcinfo, responses
  with a body under 2 KB) come from a second stream at level 0: its static
  Huffman tables save the time level 1 spends building tables for every
  member, for somewhat larger small members (docs/performance.md). A
  payload compressed already (a content coding, JPEG, video...) goes into
  stored blocks. Each record is framed as one bytes object (one f-string,
  one encode) and the body goes to the compressor and the digests as it is.
* Digests are SHA-1 in base32 (``sha1:...``): what warcio writes and checks,
  what pywb and cdxj-indexer put in indexes, and what deduplication by
  payload digest across the WARC ecosystem compares. ``warcio check``
  verifies both ``WARC-Block-Digest`` and ``WARC-Payload-Digest``.
* The payload is the body after transfer decoding and before content
  decoding. A ``Transfer-Encoding`` header in the stored response head would
  therefore lie about the body: it is renamed ``X-Crawler-Transfer-Encoding``
  so readers and replay see a plain, end-of-record-delimited body.
* The writer keeps an index entry per response and revisit record it
  writes; the CDXJ lines made from them (``warc_index.write_cdxj``) are the
  lines ``index_warc`` makes from the file alone.

Rules: no reads of the clock; one lock per writer (callers may come from the
event loop thread or a worker thread); ``flush()`` is the durability point the
runtime acknowledges fetches after; every header value is checked for
characters that would break the framing.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType, TracebackType
from typing import BinaryIO

from courtly import __version__
from courtly.shell.warc_index import (
    CDXJ_SUFFIX,
    OPEN_SUFFIX,
    WARC_SUFFIX,
    IndexEntry,
    StoredRecord,
    cdxj_path,
    fsync_dir,
    hold_writer_lock,
    index_warc,
    iter_records,
    release_writer_lock,
    repair,
    status_and_mime,
    write_cdxj,
)
from courtly.shell.warc_record import (
    RECORD_END,
    cdx_timestamp,
    check_uri,
    check_value,
    compressed_payload,
    gzip_member,
    metadata_record,
    payload_digest_of,
    record_id,
    record_ids,
    request_record,
    sha1_b32,
    warc_date,
    warc_fields,
)

_deflate_lib: ModuleType
try:  # ISA-L deflate: same format, faster than zlib at level 1 (optional; docs/performance.md)
    from isal import isal_zlib as _deflate_lib

    DEFLATE_BACKEND = "isal"
    _LEVEL_MAX = 3
except ImportError:  # pragma: no cover - depends on the environment
    _deflate_lib = zlib
    DEFLATE_BACKEND = "zlib"
    _LEVEL_MAX = 9

# Small records (request, metadata, revisit, warcinfo, and responses with a
# body under _SMALL_BODY_BYTES: a few hundred bytes each) are deflated at
# ISA-L level 0, whose static Huffman tables cost nothing per member; level 1
# builds tables for each member, a sizeable share of the writer's CPU per
# exchange over two small records. Those members are larger, the file barely
# (docs/performance.md, "Figures moved out of the code"). Only at the default
# `gzip_level` 1 (fast); a writer asked for more compression uses its level
# for every record.
_SMALL_RECORD_LEVEL = 0
_SMALL_BODY_BYTES = 2048
_IDS_PER_READ = 32

_forks = [0]   # bumped in a forked child: its pools of record IDs are its parent's copies
os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))

__all__ = [  # reading, index and repair re-exported from warc_index
    "CDXJ_SUFFIX",
    "DEFLATE_BACKEND",
    "OPEN_SUFFIX",
    "SOFTWARE",
    "TRUNCATED_REASONS",
    "StoredRecord",
    "WarcRef",
    "WarcWriter",
    "REVISIT_PROFILES",
    "cdxj_path",
    "index_warc",
    "iter_records",
    "payload_digest_of",
    "repair",
    "WARC_SUFFIX",
]

SOFTWARE = f"courtly/{__version__}"
TRUNCATED_REASONS = frozenset({"length", "time", "disconnect", "unspecified"})

_HEAD_END = b"\r\n\r\n"
_WRITE_BUFFER_BYTES = 1 << 20
_BAD_URI_CHARS = re.compile(r"[\x00-\x20\x7f]")
_TRANSFER_ENCODING = re.compile(rb"(?im)^transfer-encoding([ \t]*:)")
REVISIT_PROFILES = {
    "identical-payload-digest": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
    "server-not-modified": "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
}


@dataclass(frozen=True, slots=True)
class WarcRef:
    """Where a record lives: file name (final ``.warc.gz`` name), gzip member
    offset and length in bytes, and its WARC-Record-ID."""

    filename: str
    offset: int
    length: int
    record_id: str


@dataclass(slots=True)
class _OpenFile:
    path: Path  # the .open path
    name: str  # the final file name
    handle: BinaryIO
    offset: int = 0
    exchanges: int = 0
    dir_synced: bool = False  # the new file's directory entry is on disk
    entries: list[IndexEntry] = field(default_factory=list)


# ---------------------------------------------------------------- the writer


class WarcWriter:
    """Writes exchanges into rotating, gzip-per-record WARC 1.1 files."""

    def __init__(
        self,
        folder: Path,
        *,
        prefix: str = "courtly",
        file_bytes_max: int = 1_000_000_000,
        warcinfo: dict[str, str] | None = None,
        fsync: bool = True,
        gzip_level: int = 1,
        record_fields: dict[str, str] | None = None,
    ) -> None:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
            raise ValueError(f"prefix must be [A-Za-z0-9._-]+: {prefix!r}")
        if file_bytes_max < 1:
            raise ValueError("file_bytes_max must be positive")
        if not 0 <= gzip_level <= 9:
            raise ValueError("gzip_level must be 0..9")
        # named fields in every record's header (a region's residency tag: `Courtly-Region: eu`)
        for name, value in (record_fields or {}).items():
            if not re.fullmatch(r"[A-Za-z0-9-]+", name) or not re.fullmatch(r"[!-~]+", value):
                raise ValueError(f"bad record field {name!r}: {value!r}")
        self._fields = "".join(f"{k}: {v}\r\n" for k, v in (record_fields or {}).items())
        self.folder = Path(folder)
        self.prefix = prefix
        self.file_bytes_max = file_bytes_max
        self.fsync = fsync
        self.gzip_level = gzip_level
        self._warcinfo_fields = warc_fields(
            {
                "software": SOFTWARE,
                "format": "WARC File Format 1.1",
                "conformsTo": "https://iipc.github.io/warc-specifications/"
                "specifications/warc-format/warc-1.1/",
                **(warcinfo or {}),
            }
        )
        self._lock = threading.Lock()
        self._local = threading.local()  # one deflate stream per thread
        self._file: _OpenFile | None = None
        self._serial = 0
        self._named_at = float("-inf")  # latest time used in a file name
        self._finished: list[Path] = []
        self._closed = False
        self.folder.mkdir(parents=True, exist_ok=True)
        # Held until close(): `repair` in another process leaves this writer's
        # .open files alone while it lives (its lock goes with the process).
        self._tag = os.urandom(4).hex()   # in every file name of this writer
        self._live = hold_writer_lock(self.folder, f"{prefix}-{self._tag}")

    # -- public

    @property
    def finished_paths(self) -> tuple[Path, ...]:
        """Closed ``.warc.gz`` files in the order they were finished."""
        return tuple(self._finished)

    @property
    def open_path(self) -> Path | None:
        """The ``.warc.gz.open`` file being written, if any."""
        current = self._file
        return current.path if current else None

    def write_exchange(
        self,
        *,
        url: str,
        ip: str,
        request_head: bytes,
        response_head: bytes,
        body: bytes,
        fetched_at: float,
        truncated: str | None = None,
        metadata: dict[str, str] | None = None,
        payload_digest: str | None = None,
    ) -> WarcRef:
        """Write request, response and metadata records; return the response's
        location. Bytes reach the disk for sure only after ``flush()``.
        ``payload_digest``: ``payload_digest_of(body)`` when the caller has
        computed it already (to look the payload up for a revisit), else
        computed here."""
        check_uri(url)
        check_value("ip", ip)
        if truncated is not None and truncated not in TRUNCATED_REASONS:
            raise ValueError(f"truncated must be one of {sorted(TRUNCATED_REASONS)}")
        if not request_head.endswith(_HEAD_END) or not response_head.endswith(_HEAD_END):
            raise ValueError("request_head and response_head must end with CRLFCRLF")
        date = warc_date(fetched_at)
        lowered = response_head.lower()
        if b"transfer-" in lowered:
            response_head = _TRANSFER_ENCODING.sub(rb"X-Crawler-Transfer-Encoding\1", response_head)
        req_id, resp_id, meta_id = self._ids()
        common = f"WARC-Target-URI: {url}\r\nWARC-Date: {date}\r\n{self._fields}"
        addressed = f"{common}WARC-IP-Address: {ip}\r\n" if ip else common
        meta = metadata_record(metadata, common, resp_id, meta_id) if metadata else None   # checks it
        if payload_digest is None:
            payload_digest = payload_digest_of(body)
        block = hashlib.sha1(response_head)
        block.update(body)
        response = (
            f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: {resp_id}\r\n{addressed}"
            f"WARC-Payload-Digest: {payload_digest}\r\nWARC-Block-Digest: {sha1_b32(block)}\r\n"
            + (f"WARC-Truncated: {truncated}\r\n" if truncated else "")
            + "Content-Type: application/http;msgtype=response\r\n"
            f"Content-Length: {len(response_head) + len(body)}\r\n\r\n"
        ).encode("utf-8") + response_head
        status, mime = status_and_mime(response_head)
        members = [self._member(request_record(req_id, addressed, resp_id, request_head)),
                   self._member(response, body, store=compressed_payload(lowered, mime))]
        if meta is not None:
            members.append(self._member(meta))
        return self._append(members, (url, cdx_timestamp(date), mime, status, payload_digest), fetched_at, resp_id)

    def write_revisit(
        self,
        *,
        url: str,
        ip: str,
        request_head: bytes,
        response_head: bytes,
        fetched_at: float,
        refers_to_uri: str,
        refers_to_date: float,
        payload_digest: str | None,
        profile: str,
        refers_to_record_id: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> WarcRef:
        """Write request, revisit and metadata records for a fetch whose
        payload need not be stored again; return the revisit's location.

        ``profile``: "identical-payload-digest" (``payload_digest`` is the
        ``sha1:`` form from ``payload_digest_of``, required) or
        "server-not-modified" (a 304; ``payload_digest`` of the earlier
        capture if known, else None). ``refers_to_*`` name the earlier
        capture: its URI, its ``fetched_at``, its WARC-Record-ID if known.
        The block is ``response_head`` alone (WARC 1.1 section 6.7); an
        identical-payload-digest revisit says so with WARC-Truncated: length
        (the payload was cut off, section 6.7.2), a 304 has nothing to cut."""
        if profile not in REVISIT_PROFILES:
            raise ValueError(f"profile must be one of {sorted(REVISIT_PROFILES)}")
        if profile == "identical-payload-digest" and not payload_digest:
            raise ValueError("identical-payload-digest needs the payload digest")
        check_uri(url)
        check_uri(refers_to_uri)
        check_value("ip", ip)
        for name, value in (("payload_digest", payload_digest or ""),
                            ("refers_to_record_id", refers_to_record_id or "")):
            if _BAD_URI_CHARS.search(value):
                raise ValueError(f"{name} has whitespace or control characters: {value!r}")
        if not request_head.endswith(_HEAD_END) or not response_head.endswith(_HEAD_END):
            raise ValueError("request_head and response_head must end with CRLFCRLF")
        if b"transfer-" in response_head.lower():
            response_head = _TRANSFER_ENCODING.sub(rb"X-Crawler-Transfer-Encoding\1", response_head)
        date = warc_date(fetched_at)
        refers_date = warc_date(refers_to_date)
        req_id, rev_id, meta_id = self._ids()
        common = f"WARC-Target-URI: {url}\r\nWARC-Date: {date}\r\n{self._fields}"
        addressed = f"{common}WARC-IP-Address: {ip}\r\n" if ip else common
        revisit = (
            f"WARC/1.1\r\nWARC-Type: revisit\r\nWARC-Record-ID: {rev_id}\r\n{addressed}"
            f"WARC-Profile: {REVISIT_PROFILES[profile]}\r\n"
            + (f"WARC-Refers-To: {refers_to_record_id}\r\n" if refers_to_record_id else "")
            + f"WARC-Refers-To-Target-URI: {refers_to_uri}\r\n"
            f"WARC-Refers-To-Date: {refers_date}\r\n"
            + (f"WARC-Payload-Digest: {payload_digest}\r\n" if payload_digest else "")
            + f"WARC-Block-Digest: {sha1_b32(hashlib.sha1(response_head))}\r\n"
            + ("WARC-Truncated: length\r\n" if profile == "identical-payload-digest" else "")
            + "Content-Type: application/http;msgtype=response\r\n"
            f"Content-Length: {len(response_head)}\r\n\r\n"
        ).encode("utf-8") + response_head + RECORD_END
        members = [self._member(request_record(req_id, addressed, rev_id, request_head)),
                   self._member(revisit)]
        if metadata:
            members.append(self._member(metadata_record(metadata, common, rev_id, meta_id)))
        status, _ = status_and_mime(response_head)
        return self._append(members, (url, cdx_timestamp(date), "warc/revisit", status, payload_digest),
                            fetched_at, rev_id)

    def write_conversion(
        self,
        *,
        url: str,
        fetched_at: float,
        body: bytes,
        content_type: str,
        refers_to_record_id: str,
        refers_to_uri: str,
        refers_to_date: float,
        metadata: dict[str, str] | None = None,
    ) -> WarcRef:
        """Write a ``conversion`` record (WARC 1.1 section 6.8: content made from
        another record, e.g. the DOM a browser built from a response) and its
        metadata; return its location. WARC-Refers-To names the record it was
        made from, WARC-Refers-To-Target-URI and -Date that record's capture.
        Not indexed: replay serves the response it refers to."""
        check_uri(url)
        check_uri(refers_to_uri)
        for name, value in (("content_type", content_type), ("refers_to_record_id", refers_to_record_id)):
            if not value or _BAD_URI_CHARS.search(value.replace(" ", "")):
                raise ValueError(f"{name} is empty or has control characters: {value!r}")
        date = warc_date(fetched_at)
        conv_id, meta_id, _ = self._ids()
        common = f"WARC-Target-URI: {url}\r\nWARC-Date: {date}\r\n{self._fields}"
        digest = payload_digest_of(body)
        record = (
            f"WARC/1.1\r\nWARC-Type: conversion\r\nWARC-Record-ID: {conv_id}\r\n{common}"
            f"WARC-Refers-To: {refers_to_record_id}\r\nWARC-Refers-To-Target-URI: {refers_to_uri}\r\n"
            f"WARC-Refers-To-Date: {warc_date(refers_to_date)}\r\n"
            f"WARC-Payload-Digest: {digest}\r\nWARC-Block-Digest: {digest}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("utf-8")
        members = [self._member(record, body)]
        if metadata:
            members.append(self._member(metadata_record(metadata, common, conv_id, meta_id)))
        return self._append(members, None, fetched_at, conv_id)

    def flush(self) -> None:
        """Push buffered records to the OS and, if ``fsync``, to the disk."""
        with self._lock:
            if self._file is not None:
                self._sync(self._file)

    def close(self) -> None:
        """Finish the current file (index + rename). Idempotent."""
        with self._lock:
            try:
                if self._file is not None:
                    self._finish(self._file)
                    self._file = None
            finally:   # a file that cannot be finished (a full disk) is repaired by the next run
                if not self._closed:
                    release_writer_lock(self._live)
                self._closed = True

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals (_member runs outside the lock: its deflate stream is per thread)

    def _append(self, members: list[bytes], entry: tuple[str, str, str | None, str | None, str | None] | None,
                fetched_at: float, record_id: str) -> WarcRef:
        """Write one exchange's members (request first, the indexed record
        second) into the current file; index the second (`entry`: the
        `IndexEntry` fields before its offset and length). `entry` None: a
        record that is not indexed, first (its location is returned)."""
        total = sum(map(len, members))
        at = 0 if entry is None else 1
        with self._lock:
            current = self._file_for(total, fetched_at)
            offset = current.offset + (len(members[0]) if at else 0)
            for member in members:
                current.handle.write(member)
            current.offset += total
            current.exchanges += 1
            if entry is not None:
                current.entries.append(IndexEntry(*entry, offset, len(members[1])))
            return WarcRef(current.name, offset, len(members[at]), record_id)

    def _ids(self) -> tuple[str, str, str]:
        """Three record IDs from this thread's pool, refilled by one read of
        the OS's randomness per 32 exchanges (a `getrandom` call per exchange
        was ~1 % of the writer); a forked child never reuses its parent's."""
        local = self._local
        pool = getattr(local, "ids", None)
        if pool is None or not pool[1] or pool[0] != _forks[0]:
            pool = local.ids = (_forks[0], record_ids(3 * _IDS_PER_READ))
        ids = pool[1]
        return ids.pop(), ids.pop(), ids.pop()

    def _member(self, record: bytes, body: bytes | None = None, *, store: bool = False) -> bytes:
        """The gzip member of one record: `record` is the record whole, or,
        with `body`, its start (WARC head and any block part before `body`),
        the record end following `body`; `store`: `body` is compressed already."""
        local = self._local
        streams = getattr(local, "streams", None)
        if streams is None:
            level = min(self.gzip_level, _LEVEL_MAX)
            small = level if _deflate_lib is zlib or level > 1 else _SMALL_RECORD_LEVEL   # zlib's 0 stores
            streams = local.streams = (_deflate_lib.compressobj(level, _deflate_lib.DEFLATED, -15),
                                       _deflate_lib.compressobj(min(level, small), _deflate_lib.DEFLATED, -15))
        try:
            small = body is None or len(body) < _SMALL_BODY_BYTES
            return gzip_member(streams[1] if small else streams[0], record, body, store=store and not small)
        except BaseException:
            local.streams = None  # their state is unknown now
            raise

    def _file_for(self, incoming: int, fetched_at: float) -> _OpenFile:
        if self._closed:
            raise ValueError("WarcWriter is closed")
        current = self._file
        if (
            current is not None
            and current.exchanges
            and current.offset + incoming > self.file_bytes_max
        ):
            self._finish(current)
            current = self._file = None
        if current is None:
            current = self._file = self._open(fetched_at)
        return current

    def _open(self, fetched_at: float) -> _OpenFile:
        self._named_at = max(self._named_at, fetched_at)  # names sort in write order
        stamp = datetime.fromtimestamp(self._named_at, UTC)
        name = (
            f"{self.prefix}-{stamp.strftime('%Y%m%d%H%M%S')}-"
            f"{self._serial:05d}-{self._tag}{WARC_SUFFIX}"
        )
        self._serial += 1
        path = self.folder / (name + OPEN_SUFFIX)
        handle = open(path, "xb", buffering=_WRITE_BUFFER_BYTES)  # noqa: SIM115
        opened = _OpenFile(path=path, name=name, handle=handle)
        block = self._warcinfo_fields
        date = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        member = self._member((
            f"WARC/1.1\r\nWARC-Type: warcinfo\r\nWARC-Record-ID: {record_id()}\r\n"
            f"WARC-Date: {date}\r\nWARC-Filename: {name}\r\n"
            f"WARC-Block-Digest: {sha1_b32(hashlib.sha1(block))}\r\n"
            "Content-Type: application/warc-fields\r\n"
            f"Content-Length: {len(block)}\r\n\r\n"
        ).encode("utf-8") + block + RECORD_END)
        handle.write(member)
        opened.offset = len(member)
        return opened

    def _sync(self, current: _OpenFile) -> None:
        current.handle.flush()
        if self.fsync:
            os.fsync(current.handle.fileno())
            if not current.dir_synced:
                fsync_dir(current.path.parent)
                current.dir_synced = True

    def _finish(self, current: _OpenFile) -> None:
        self._sync(current)
        current.handle.close()
        final = current.path.with_name(current.name)
        write_cdxj(final, current.entries, fsync=self.fsync)
        os.replace(current.path, final)
        if self.fsync:
            fsync_dir(final.parent)
        self._finished.append(final)
