"""WARC files read back: the CDXJ index, crash repair and record reading.

Owns everything that reads the gzip-per-record WARC 1.1 files the writer
(``courtly.shell.warc``) makes: their CDXJ index, the repair of files a crash
left open, and reading their records back.

Theory of operation
-------------------
* The CDXJ lines are those ``cdxj-indexer`` writes by default (response,
  revisit and resource records; not request, warcinfo or
  ``application/warc-fields`` metadata), sorted, so pywb can use them as is.
  The writer collects an `IndexEntry` per indexed record while it writes and
  hands them to ``write_cdxj`` when it finishes a file; ``index_warc``
  rebuilds the same lines from the file alone.
* ``repair()`` scans the gzip members of an ``.open`` file, keeps the prefix
  of members that each hold one complete WARC record, truncates the rest,
  indexes what is left and renames the file. Running it twice is harmless.
* ``iter_records`` reads with warcio and checks both digests.

Rules: no reads of the clock; an index is written to a temporary file and
renamed, so a ``.cdxj`` file is always whole; ``status_and_mime`` derives
status and media type as cdxj-indexer does, so our index and its index agree.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

import surt as _surt

__all__ = [
    "CDXJ_SUFFIX",
    "OPEN_SUFFIX",
    "WARC_SUFFIX",
    "IndexEntry",
    "StoredRecord",
    "cdxj_path",
    "fsync_dir",
    "index_warc",
    "intact_end",
    "iter_records",
    "read_record",
    "repair",
    "status_and_mime",
    "write_cdxj",
]

OPEN_SUFFIX = ".open"
WARC_SUFFIX = ".warc.gz"
CDXJ_SUFFIX = ".cdxj"

_HEAD_END = b"\r\n\r\n"
_RECORD_END = b"\r\n\r\n"
_SCAN_CHUNK_BYTES = 1 << 20
_CONTENT_TYPE = re.compile(rb"(?im)^content-type[ \t]*:[ \t]*([^\r\n]*)")
_MIME_SPLIT = re.compile(r"[;\s]")
_INDEXED_TYPES = frozenset({"response", "revisit", "resource"})


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record read back by ``iter_records`` (payload = stored bytes after
    the HTTP head, not content-decoded)."""

    rec_type: str
    offset: int
    length: int
    warc_headers: dict[str, str]
    http_status: str | None
    http_headers: list[tuple[str, str]]
    payload: bytes


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One CDXJ line before formatting: the record's URL, 14-digit
    timestamp, media type, HTTP status, payload digest and member location."""

    url: str
    timestamp: str
    mime: str | None
    status: str | None
    digest: str | None
    offset: int
    length: int


# ---------------------------------------------------------------- the index


def cdxj_path(warc_path: Path) -> Path:
    """The CDXJ file beside a WARC file: ``<name>.warc.gz.cdxj``."""
    warc_path = Path(warc_path)
    name = warc_path.name.removesuffix(OPEN_SUFFIX)
    return warc_path.with_name(name + CDXJ_SUFFIX)


def index_warc(path: Path, *, filename: str | None = None) -> list[str]:
    """CDXJ lines (sorted, no newlines) for a gzip-per-record WARC file we
    wrote; ``filename`` defaults to the file's name without ``.open``."""
    path = Path(path)
    name = filename or path.name.removesuffix(OPEN_SUFFIX)
    with open(path, "rb") as fh:
        entries = [
            entry
            for offset, length, data in _scan_members(fh)
            if (entry := _entry_from_member(data, offset, length)) is not None
        ]
    return _cdxj_lines(entries, name)


def _cdxj_lines(entries: list[IndexEntry], filename: str) -> list[str]:
    """The CDXJ lines of `entries`, sorted. The JSON block is what
    `json.dumps` makes of the fields (same order, separators and ASCII
    escapes, by its own string encoder), formatted here at a third of the cost."""
    quote = _json_string
    name = quote(filename)
    lines = []
    for e in entries:
        line = f"{_surt_key(e.url)} {e.timestamp} {{\"url\": {quote(e.url)}"
        if e.mime is not None:
            line += f", \"mime\": {quote(e.mime)}"
        if e.status is not None:
            line += f", \"status\": {quote(e.status)}"
        if e.digest is not None:
            line += f", \"digest\": {quote(e.digest)}"
        lines.append(f"{line}, \"length\": \"{e.length}\", \"offset\": \"{e.offset}\", \"filename\": {name}}}")
    lines.sort()
    return lines


# An http(s) URL with a plain name (last label starts with a letter: never an
# IP literal), no default port, no query, no escape, no dot or empty path segment.
_PLAIN_URL = re.compile(r"https?://((?:[a-z0-9-]+\.)*[a-z][a-z0-9-]*)(:[1-9][0-9]{0,4})?(/[A-Za-z0-9_~/.-]*)?")
_WWW = re.compile(r"www\d*\.")


def _surt_key(url: str) -> str:
    """The SURT form `surt.surt` gives (what cdxj-indexer writes). The plain
    URLs a crawl mostly stores take a shortcut with the same result
    (test_warc_index.py::test_surt_keys_equal_the_surt_librarys):
    the library's canonicalisers are paid for every record when a WARC file is
    finished (docs/performance.md, "Figures moved out of the code")."""
    m = _PLAIN_URL.fullmatch(url)
    if m is not None:
        port = m.group(2) or ""
        path = m.group(3) or "/"
        if "//" not in path and "/." not in path and port not in (":80", ":443") \
                and (not port or int(port[1:]) <= 65535):
            host = m.group(1)
            www = _WWW.match(host)
            if www is not None:
                host = host[www.end():]
            if len(path) > 1 and path.endswith("/"):
                path = path[:-1]
            return ",".join(reversed(host.split("."))) + port + ")" + path.lower()
    try:
        return _surt.surt(url)
    except Exception:  # noqa: BLE001 - same fallback as cdxj-indexer
        return url


def write_cdxj(warc_final: Path, entries: list[IndexEntry], *, fsync: bool) -> Path:
    lines = _cdxj_lines(entries, warc_final.name)
    return _write_lines(cdxj_path(warc_final), lines, fsync=fsync)


def _write_lines(target: Path, lines: list[str], *, fsync: bool) -> Path:
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as out:
        out.writelines(line + "\n" for line in lines)
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    os.replace(tmp, target)
    return target


def _entry_from_member(data: bytes, offset: int, length: int) -> IndexEntry | None:
    parsed = _parse_record(data)
    if parsed is None:
        return None
    headers, block = parsed
    rec_type = headers.get("warc-type", "")
    if rec_type not in _INDEXED_TYPES:
        return None
    content_type = headers.get("content-type", "")
    if rec_type == "resource" and content_type == "application/warc-fields":
        return None
    url = headers.get("warc-target-uri", "")
    date = headers.get("warc-date", "")
    timestamp = re.sub(r"\D", "", date)[:14]
    status = mime = None
    if rec_type == "revisit":
        mime = "warc/revisit"
    if content_type.startswith("application/http"):
        head_end = block.find(_HEAD_END)
        head = block if head_end < 0 else block[: head_end + 4]
        status, http_mime = status_and_mime(head)
        mime = mime or http_mime
    elif rec_type == "resource":
        mime = _MIME_SPLIT.split(content_type.strip(), 1)[0].strip()
    return IndexEntry(
        url=url,
        timestamp=timestamp,
        mime=mime,
        status=status,
        digest=headers.get("warc-payload-digest"),
        offset=offset,
        length=length,
    )


# ---------------------------------------------------------------- repair


LOCK_PREFIX = ".writer-"   # + "<prefix>-<tag>" of a live writer's file names


def hold_writer_lock(folder: Path, writer: str):
    """Lock ``folder/.writer-<writer>`` for a live writer whose files are
    named ``<writer prefix>-<stamp>-<serial>-<tag>``, `writer` being
    ``<prefix>-<tag>`` (an exclusive `flock`, released by
    `release_writer_lock` or when the process dies). The writer takes it
    before it creates any ``.open`` file. Returns the open lock file (None
    where `flock` does not exist)."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return None
    fh = open(Path(folder) / f"{LOCK_PREFIX}{writer}", "a+b")  # noqa: SIM115
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)   # its own, fresh name: never waits
    fh.write(str(os.getpid()).encode())       # written under the lock: see remove_stale_writer_locks
    fh.flush()
    return fh


STALE_LOCK_AGE_S = 60.0   # an empty lock file no one holds is this old before it is removed


def remove_stale_writer_locks(folder: Path, now: float | None) -> int:
    """Remove the ``.writer-*`` lock files no live writer holds (left by a
    writer that was killed). A file is stale when its lock is free and it
    holds a pid (written only under the lock, so its writer has let go) or
    it is empty and older than STALE_LOCK_AGE_S at `now` (an empty one may
    belong to a writer between its open and its flock; None: empty ones
    stay). Returns how many."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return 0
    removed = 0
    for path in sorted(Path(folder).glob(f"{LOCK_PREFIX}*")):
        try:
            fh = open(path, "rb")  # noqa: SIM115
        except OSError:
            continue
        with fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue   # held: a live writer
            try:
                if fh.read(32) or (now is not None and os.fstat(fh.fileno()).st_mtime < now - STALE_LOCK_AGE_S):
                    path.unlink()
                    removed += 1
            except OSError:
                pass
    return removed


def release_writer_lock(fh) -> None:
    if fh is not None:
        try:
            os.unlink(fh.name)
        except OSError:
            pass
        fh.close()


def _writer_alive(folder: Path, open_name: str) -> bool:
    """Does a live writer hold the lock of ``open_name``?"""
    if fcntl is None:  # pragma: no cover - not POSIX
        return False
    parts = open_name.removesuffix(WARC_SUFFIX + OPEN_SUFFIX).rsplit("-", 3)
    if len(parts) != 4:
        return False
    try:
        fh = open(folder / f"{LOCK_PREFIX}{parts[0]}-{parts[3]}", "rb")  # noqa: SIM115
    except OSError:
        return False   # no lock file: its writer is gone (or predates the locks)
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        return False


def repair(folder: Path, now: float | None = None) -> list[Path]:
    """Finish what a crash left: every ``*.warc.gz.open`` is cut after its
    last complete record, indexed and renamed; a ``.warc.gz`` without its
    ``.cdxj`` gets one; stale writer locks are removed
    (`remove_stale_writer_locks` at `now`). Returns the repaired ``.warc.gz`` paths. The
    ``.open`` files of writers still alive (in this or another process:
    their lock, `hold_writer_lock`) are left alone, so workers sharing a
    folder may each run it at start-up."""
    folder = Path(folder)
    repaired = []
    for path in sorted(folder.glob(f"*{WARC_SUFFIX}{OPEN_SUFFIX}")):
        if _writer_alive(folder, path.name):
            continue
        final = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
        good_end = _complete_prefix_bytes(path)
        with open(path, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
        _write_lines(cdxj_path(final), index_warc(path, filename=final.name), fsync=True)
        os.replace(path, final)
        repaired.append(final)
    for path in sorted(folder.glob(f"*{WARC_SUFFIX}")):
        if path not in repaired and not cdxj_path(path).exists():
            _write_lines(cdxj_path(path), index_warc(path), fsync=True)
            repaired.append(path)
    if repaired:
        fsync_dir(folder)
    remove_stale_writer_locks(folder, now)
    return sorted(repaired)


def intact_end(path: Path, start: int = 0) -> int:
    """Where the run of complete gzip members, each one whole WARC record,
    that starts at byte `start` ends (the file's size when nothing is cut)."""
    return _complete_prefix_bytes(path, start)


def _complete_prefix_bytes(path: Path, start: int = 0) -> int:
    end = start
    with open(path, "rb") as fh:
        fh.seek(start)
        for offset, length, data in _scan_members(fh, start):
            if offset != end or _parse_record(data) is None:
                break
            end = offset + length
    return end


def _scan_members(fh: BinaryIO, at: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """Yield (offset, length, decompressed bytes) per complete gzip member from
    `fh`'s position (file offset `at`); stop silently at the first truncated
    or corrupt member."""
    buf = b""  # bytes read from the file, not yet decompressed
    buf_at = at  # file offset of buf[0]
    while True:
        buf = buf or fh.read(_SCAN_CHUNK_BYTES)
        if not buf:
            return
        member_at = buf_at
        gz = zlib.decompressobj(31)
        out = []
        while True:
            try:
                out.append(gz.decompress(buf))
            except zlib.error:
                return
            if gz.eof:
                rest = gz.unused_data
                buf_at += len(buf) - len(rest)
                buf = rest
                break
            buf_at += len(buf)
            buf = fh.read(_SCAN_CHUNK_BYTES)
            if not buf:
                return
        yield member_at, buf_at - member_at, b"".join(out)


def _parse_record(data: bytes) -> tuple[dict[str, str], bytes] | None:
    """(lower-cased WARC headers, block) if ``data`` is exactly one complete
    WARC record, else None."""
    head_end = data.find(_HEAD_END)
    if not data.startswith(b"WARC/1.") or head_end < 0:
        return None
    headers: dict[str, str] = {}
    for line in data[:head_end].decode("utf-8", "replace").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.setdefault(name.strip().lower(), value.strip())
    try:
        length = int(headers.get("content-length", ""))
    except ValueError:
        return None
    block_start = head_end + 4
    if len(data) != block_start + length + 4 or not data.endswith(_RECORD_END):
        return None
    return headers, data[block_start : block_start + length]


# ---------------------------------------------------------------- reading


def iter_records(path: Path, *, check_digests: bool = True) -> Iterator[StoredRecord]:
    """Read every record of a WARC file with warcio (digests verified unless
    told otherwise; a mismatch raises ValueError)."""
    from warcio.archiveiterator import ArchiveIterator

    with open(path, "rb") as fh:
        it = ArchiveIterator(fh, check_digests=check_digests)
        for record in it:
            yield _stored(record, it, check_digests)


def read_record(path: Path, offset: int) -> StoredRecord | None:
    """The one record at `offset` of a WARC file (digests checked), or None
    when no record starts there."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    with open(path, "rb") as fh:
        fh.seek(offset)
        it = ArchiveIterator(fh, check_digests=True)
        try:
            for record in it:
                rec = _stored(record, it, True)
                return StoredRecord(rec.rec_type, offset, rec.length, rec.warc_headers, rec.http_status,
                                    rec.http_headers, rec.payload)
        except (ArchiveLoadFailed, OSError, EOFError, zlib.error):
            return None
    return None


def _stored(record, it, check_digests: bool) -> StoredRecord:
    payload = record.raw_stream.read()
    if check_digests and record.digest_checker.passed is False:
        raise ValueError(f"digest mismatch: {list(record.digest_checker.problems)}")
    http = record.http_headers
    return StoredRecord(
        rec_type=record.rec_type,
        offset=it.get_record_offset(),
        length=it.get_record_length() or 0,
        warc_headers=dict(record.rec_headers.headers),
        http_status=http.get_statuscode() if http and record.rec_type != "request" else None,
        http_headers=list(http.headers) if http else [],
        payload=payload,
    )


# ---------------------------------------------------------------- small parts


def status_and_mime(head: bytes) -> tuple[str | None, str | None]:
    """Status code and bare media type of an HTTP response head, the way
    cdxj-indexer derives them (so our index and its index agree)."""
    line_end = head.find(b"\n")
    status_line = head[: line_end if line_end >= 0 else len(head)].decode("latin-1").strip()
    parts = status_line.split(None, 2)
    status = parts[1] if len(parts) > 1 else None
    match = _CONTENT_TYPE.search(head, line_end + 1 if line_end >= 0 else len(head))
    mime = None
    if match:
        mime = _MIME_SPLIT.split(match.group(1).decode("latin-1").strip(), 1)[0].strip()
    return status, mime


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
