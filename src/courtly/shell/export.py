"""Exports that honour takedowns: WARC, CDXJ and main text without purged content.

What it owns: reading a crawl's closed WARC files back (with the project's
reader, ``warc_index.iter_records``, digests checked) and writing what may
still be published:

* ``export_warc``: a new WARC file set (same file names, one ``.cdxj`` beside
  each) holding every record except the purged ones;
* ``export_cdxj``: one merged, sorted CDXJ index of the records kept, naming
  the crawl's own files (for replay from the crawl folder);
* ``export_text``: JSON lines ``{url, fetched_at, title?, text}``, the main
  text (``core.maintext``) of every kept 2xx HTML or plain-text page, except
  pages that ask not to be indexed (``<meta name=robots content=noindex>``
  or ``X-Robots-Tag: noindex``, for all agents or our token) unless
  ``include_noindex`` (then their rows carry ``"noindex": true``). Such pages
  stay in the WARC exports: an archive keeps them, a text index does not;
* ``rewrite_originals``: the crawl's own files rewritten without purged
  records (``[warc] keep_purged_originals = false``), re-indexed, with a map of
  the moved records for the fetch log.

Which records go (``plan_file``): a record whose WARC-Target-URI a purge
covers (request, response, revisit, metadata: the whole exchange, robots.txt
and probes included); a revisit whose WARC-Refers-To-Target-URI is covered
(its payload lives only in the purged record); and the request and metadata
companions of a dropped revisit (WARC-Concurrent-To / WARC-Refers-To). The
``warcinfo`` record stays. Records are copied byte for byte, gzip member by
gzip member, so digests and framing stay exactly as written.

Damaged files: a closed file cut short (a copy that stopped, a full disk) or
corrupt is read up to its last whole record; the export keeps what was read
and names the file in ``ExportReport.damaged`` (how many records were read,
where the damage starts), so the caller can warn and exit non-zero instead
of leaving pages out silently. A record that is cut itself is never exported.

Rules: ``.open`` files (a crawl is writing them) are never read or touched;
every output is written to a temporary name and renamed; an output file that
would hold nothing but its ``warcinfo`` is not written (and one an earlier
export left under that name is removed).
"""

from __future__ import annotations

import heapq
import json
import os
import shutil
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from courtly.core.purge import PurgeList
from courtly.shell.warc_index import (OPEN_SUFFIX, WARC_SUFFIX, cdxj_path, fsync_dir, index_warc, intact_end,
                                      iter_records)

__all__ = ["Damage", "ExportReport", "RecordPlan", "plan_file", "export_warc", "export_cdxj", "export_text",
           "rewrite_originals", "warc_files"]

_COPY_CHUNK_BYTES = 1 << 20
_TEXT_KINDS = ("robots", "soft404-probe", "render-subrequest")   # fetches that are not pages
_INDEXED_TYPES = ("response", "revisit", "resource")   # the records a CDXJ index lists


@dataclass(frozen=True, slots=True)
class RecordPlan:
    """One record of a file: where it is, what it is, whether it is kept."""

    offset: int
    length: int
    rec_type: str
    url: str
    date: str
    keep: bool
    fetch_kind: str = ""


@dataclass(frozen=True, slots=True)
class Damage:
    """A WARC file that could be read only in part."""

    file: str
    records_read: int      # whole records read (and exported unless purged)
    intact_bytes: int      # where the damage starts
    size: int
    detail: str
    captures_read: int = 0             # response, revisit and resource records among them
    captures_indexed: int | None = None  # what the file's .cdxj (written when it was closed) lists

    def message(self) -> str:
        index = (f", {self.captures_read} of the {self.captures_indexed} captures its index lists"
                 if self.captures_indexed is not None else "")
        return (f"{self.file} is damaged (truncated or corrupt at byte {self.intact_bytes:,} of {self.size:,}: "
                f"{self.detail}); {self.records_read} record(s) read{index}, the rest is missing from the export")


def _read_errors() -> tuple[type[BaseException], ...]:
    from warcio.exceptions import ArchiveLoadFailed

    # ValueError: a digest mismatch (iter_records) or a malformed header
    return (ArchiveLoadFailed, zlib.error, EOFError, ValueError)


@dataclass(slots=True)
class ExportReport:
    files_in: int = 0
    files_out: int = 0
    records_kept: int = 0
    records_dropped: int = 0
    lines: int = 0
    open_files_skipped: int = 0
    noindex_left_out: int = 0
    outputs: list[str] = field(default_factory=list)
    damaged: list[Damage] = field(default_factory=list)

    def render(self, what: str) -> str:
        parts = [f"{what}: {self.files_in} WARC file(s) read, {self.records_dropped} purged record(s) left out"]
        if self.files_out:
            parts.append(f"{self.files_out} file(s) written")
        if self.lines:
            parts.append(f"{self.lines} line(s) written")
        if self.noindex_left_out:
            parts.append(f"{self.noindex_left_out} noindex page(s) left out (--include-noindex keeps them)")
        if self.open_files_skipped:
            parts.append(f"{self.open_files_skipped} file(s) still being written skipped")
        if self.damaged:
            parts.append(f"{len(self.damaged)} damaged file(s) read in part")
        return ", ".join(parts)


def warc_files(warc_dir: Path) -> tuple[list[Path], int]:
    """Closed WARC files in name (= write) order, and how many are still open."""
    warc_dir = Path(warc_dir)
    if not warc_dir.is_dir():
        return [], 0
    closed = sorted(warc_dir.glob(f"*{WARC_SUFFIX}"))
    return closed, len(list(warc_dir.glob(f"*{WARC_SUFFIX}{OPEN_SUFFIX}")))


def region_tags(warc_dir: Path) -> dict[str, list[str]]:
    """Residency tag (`Courtly-Region`, written by a cluster worker of a
    region into every record after the warcinfo) -> the closed WARC files
    carrying it; files without a tag (a single machine, or one region) are
    under "". Reads the first records of each file only."""
    from warcio.archiveiterator import ArchiveIterator

    out: dict[str, list[str]] = {}
    for path in warc_files(warc_dir)[0]:
        tag = ""
        try:
            with open(path, "rb") as fh:
                for n, record in enumerate(ArchiveIterator(fh, check_digests=False)):
                    tag = record.rec_headers.get_header("Courtly-Region") or ""
                    if tag or n >= 2:    # warcinfo carries it in its payload, the next records in the header
                        break
        except Exception:   # a damaged file: the export itself reports it
            pass
        out.setdefault(tag, []).append(path.name)
    return out


def plan_file(path: Path, purges: PurgeList, damaged: list[Damage] | None = None) -> list[RecordPlan]:
    """Every record of `path`, each marked kept or dropped (see module doc).
    With `damaged`, a file read only in part is appended to it and its whole
    records are planned; without, reading errors propagate."""
    rows = []
    dropped_ids: set[str] = set()
    detail = ""
    try:
        for rec in iter_records(path):
            h = rec.warc_headers
            url = h.get("WARC-Target-URI", "")
            drop = bool(url) and purges.match(url) is not None
            if rec.rec_type == "revisit" and not drop:
                drop = purges.match(h.get("WARC-Refers-To-Target-URI", "")) is not None
            if drop:
                dropped_ids.add(h.get("WARC-Record-ID", ""))
            kind = _fetch_kind(rec.payload) if rec.rec_type == "metadata" else ""
            rows.append((rec, h, drop, kind))
    except _read_errors() as e:
        if damaged is None:
            raise
        detail = f"{type(e).__name__}: {e}"[:200]
    if damaged is not None:
        rows = _whole_rows(path, rows, detail, damaged)
    kinds = {h.get("WARC-Refers-To", ""): kind for rec, h, _d, kind in rows if kind}
    plans = []
    for rec, h, drop, _kind in rows:
        if not drop and rec.rec_type in ("request", "metadata"):
            drop = bool({h.get("WARC-Concurrent-To"), h.get("WARC-Refers-To")} & dropped_ids)
        plans.append(RecordPlan(rec.offset, rec.length, rec.rec_type, h.get("WARC-Target-URI", ""),
                                h.get("WARC-Date", ""), not drop, kinds.get(h.get("WARC-Record-ID", ""), "")))
    return plans


def _whole_rows(path: Path, rows: list, detail: str, damaged: list[Damage]) -> list:
    """`rows` without a last record that the file cuts short; a damaged file
    is appended to `damaged`. Only the last record read is checked against
    the gzip framing: warcio reads a member cut at the end without an error."""
    size = path.stat().st_size
    start = rows[-1][0].offset if rows else 0
    end = intact_end(path, start)
    whole = [r for r in rows if r[0].offset + r[0].length <= end]
    if end < size or detail:
        index = cdxj_path(path)
        indexed = sum(1 for line in index.read_text(encoding="utf-8").splitlines() if line.strip()) \
            if index.exists() else None
        captures = sum(r[0].rec_type in _INDEXED_TYPES for r in whole)
        damaged.append(Damage(path.name, len(whole), end, size, detail or "the last record is cut short",
                              captures, indexed))
    return whole


def _fetch_kind(block: bytes) -> str:
    for line in block.decode("utf-8", "replace").split("\r\n"):
        name, sep, value = line.partition(":")
        if sep and name.strip().lower() == "fetch-kind":
            return value.strip()
    return ""


# ---------------------------------------------------------------- WARC


def _copy_members(src: Path, dst: Path, plans: list[RecordPlan]) -> dict[int, int | None]:
    """Write the kept members of `src` to `dst` (temporary name, fsync, rename);
    return old offset -> new offset (None: left out)."""
    moved: dict[int, int | None] = {}
    tmp = dst.with_name(dst.name + ".tmp")
    at = 0
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        for p in plans:
            if not p.keep:
                moved[p.offset] = None
                continue
            fin.seek(p.offset)
            left = p.length
            while left:
                chunk = fin.read(min(left, _COPY_CHUNK_BYTES))
                if not chunk:
                    raise ValueError(f"{src}: record at {p.offset} is cut short")
                fout.write(chunk)
                left -= len(chunk)
            moved[p.offset] = at
            at += p.length
        fout.flush()
        os.fsync(fout.fileno())
    os.replace(tmp, dst)
    return moved


def _write_index(warc: Path) -> None:
    target = cdxj_path(warc)
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as out:
        out.writelines(line + "\n" for line in index_warc(warc))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)


def export_warc(warc_dir: Path, purges: PurgeList, to_dir: Path) -> ExportReport:
    """A new WARC file set in `to_dir` without purged records, indexed."""
    to_dir = Path(to_dir)
    if to_dir.resolve() == Path(warc_dir).resolve():
        raise ValueError("export into the crawl's own WARC folder: choose another --to")
    if to_dir.exists() and not to_dir.is_dir():
        raise ValueError(f"--to {to_dir} is a file; a WARC export writes a folder")
    to_dir.mkdir(parents=True, exist_ok=True)
    files, still_open = warc_files(warc_dir)
    report = ExportReport(files_in=len(files), open_files_skipped=still_open)
    for src in files:
        damaged_before = len(report.damaged)
        plans = plan_file(src, purges, report.damaged)
        whole = len(report.damaged) == damaged_before
        kept = sum(p.keep for p in plans)
        report.records_kept += kept
        report.records_dropped += len(plans) - kept
        dst = to_dir / src.name
        if not any(p.keep and p.rec_type != "warcinfo" for p in plans):
            for stale in (dst, cdxj_path(dst)):   # an earlier export of it must not outlive the purge
                stale.unlink(missing_ok=True)
            continue
        if kept == len(plans) and whole:
            tmp = dst.with_name(dst.name + ".tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        else:
            _copy_members(src, dst, plans)
        _write_index(dst)
        report.files_out += 1
        report.outputs.append(str(dst))
    fsync_dir(to_dir)
    return report


def rewrite_originals(warc_dir: Path, purges: PurgeList,
                      on_moved: Callable[[str, dict[int, int | None]], None],
                      checked: dict[str, int] | None = None) -> ExportReport:
    """Rewrite the crawl's closed WARC files that hold purged records, without
    them; `on_moved(filename, old offset -> new offset or None)` updates the
    fetch log. The index is removed before the file is replaced and written
    after, so a crash leaves a file without index, which `repair` rebuilds.
    `checked` (file name -> last purge id it was checked against) is read and
    updated, so each file is read once per new purge, not at every call."""
    files, still_open = warc_files(warc_dir)
    report = ExportReport(files_in=len(files), open_files_skipped=still_open)
    checked = {} if checked is None else checked
    for name in [n for n in checked if not (Path(warc_dir) / n).exists()]:
        del checked[name]
    for src in files:
        if checked.get(src.name, 0) >= purges.last_id:
            continue
        checked[src.name] = purges.last_id
        plans = plan_file(src, purges)
        dropped = sum(not p.keep for p in plans)
        report.records_kept += len(plans) - dropped
        if not dropped:
            continue
        report.records_dropped += dropped
        index = cdxj_path(src)
        if index.exists():
            index.unlink()
        moved = _copy_members(src, src, plans)
        _write_index(src)
        fsync_dir(src.parent)
        on_moved(src.name, moved)
        report.files_out += 1
        report.outputs.append(str(src))
    return report


# ---------------------------------------------------------------- CDXJ


def export_cdxj(warc_dir: Path, purges: PurgeList, to_file: Path) -> ExportReport:
    """One merged, sorted CDXJ index of the kept records of every closed file."""
    files, still_open = warc_files(warc_dir)
    report = ExportReport(files_in=len(files), open_files_skipped=still_open)
    per_file = []
    for src in files:
        plans = plan_file(src, purges, report.damaged)
        kept_offsets = {p.offset for p in plans if p.keep}
        report.records_kept += len(kept_offsets)
        report.records_dropped += len(plans) - len(kept_offsets)
        index = cdxj_path(src)
        lines = index.read_text(encoding="utf-8").splitlines() if index.exists() else index_warc(src)
        per_file.append([l for l in lines if l.strip() and _offset(l) in kept_offsets])
    tmp = _output_file(to_file)
    with open(tmp, "w", encoding="utf-8", newline="\n") as out:
        for line in heapq.merge(*[sorted(lines) for lines in per_file]):
            out.write(line + "\n")
            report.lines += 1
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, to_file)
    report.outputs.append(str(to_file))
    return report


def _output_file(to_file: Path) -> Path:
    """The temporary name to write `to_file` under (renamed when complete)."""
    to_file = Path(to_file)
    if to_file.is_dir():
        raise ValueError(f"--to {to_file} is a folder; this export writes one file")
    if to_file.exists() and not to_file.is_file():   # renamed over, a device or a pipe would be replaced
        raise ValueError(f"--to {to_file} is not a regular file (a device or a pipe); give a file path")
    to_file.parent.mkdir(parents=True, exist_ok=True)
    return to_file.with_name(to_file.name + ".tmp")


def _offset(line: str) -> int:
    return int(json.loads(line.split(" ", 2)[2])["offset"])


# ---------------------------------------------------------------- text


def export_text(warc_dir: Path, purges: PurgeList, to_file: Path, *, decoded_bytes_max: int,
                decode_ratio_max: float, include_noindex: bool = False, token: str = "courtly") -> ExportReport:
    """JSON lines {url, fetched_at, title?, noindex?, text}: the main text of
    every kept 2xx HTML or plain-text page (revisits, robots.txt and probes
    left out; noindex pages too unless `include_noindex`). `token` is the
    crawl's robots.token, which `X-Robots-Tag: token: noindex` names."""
    files, still_open = warc_files(warc_dir)
    report = ExportReport(files_in=len(files), open_files_skipped=still_open)
    tmp = _output_file(to_file)
    with open(tmp, "w", encoding="utf-8", newline="\n") as out:
        for src in files:
            plans = plan_file(src, purges, report.damaged)
            report.records_kept += sum(p.keep for p in plans)
            report.records_dropped += sum(not p.keep for p in plans)
            for row in _texts(src, plans, decoded_bytes_max, decode_ratio_max, token):
                if row.get("noindex") and not include_noindex:
                    report.noindex_left_out += 1
                    continue
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                report.lines += 1
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, to_file)
    report.outputs.append(str(to_file))
    return report


def _records_until_damage(src: Path) -> Iterator:
    """The records of `src` until the first reading error (plan_file has
    reported the damage already)."""
    try:
        yield from iter_records(src)
    except _read_errors():
        return


def _texts(src: Path, plans: list[RecordPlan], decoded_bytes_max: int, ratio_max: float,
           token: str) -> Iterator[dict]:
    from courtly.core.links import extract_links, is_html
    from courtly.core.maintext import main_text
    from courtly.shell.decode import decode_body

    pages = {p.offset: p for p in plans if p.keep and p.rec_type == "response" and p.fetch_kind not in _TEXT_KINDS}
    if not pages:
        return
    for rec in _records_until_damage(src):
        plan = pages.get(rec.offset)
        if plan is None or not (rec.http_status or "").startswith("2"):
            continue
        headers = {k.lower(): v for k, v in rec.http_headers}
        ctype = headers.get("content-type", "")
        media = ctype.split(";", 1)[0].strip().lower()
        # every Content-Encoding line, in order: one list (RFC 9110 5.3, 8.4), as the fetcher decoded it
        codings = ", ".join(v for k, v in rec.http_headers if k.lower() == "content-encoding")
        decoded = decode_body(rec.payload, codings or None,
                              decoded_bytes_max=decoded_bytes_max, ratio_max=ratio_max)
        if decoded.error:
            continue
        html = is_html(decoded.content, ctype)
        if not html and media != "text/plain":
            continue
        text = main_text(decoded.content, ctype)
        if not text:
            continue
        row: dict = {"url": plan.url, "fetched_at": plan.date}
        # the same reading of meta robots and X-Robots-Tag as the crawl's (core.links)
        page = extract_links(decoded.content, plan.url, content_type=ctype, links_max=0,
                             x_robots_tag="\n".join(v for k, v in rec.http_headers if k.lower() == "x-robots-tag"),
                             user_agent_token=token)
        if html and page.title:
            row["title"] = page.title
        if page.noindex:
            row["noindex"] = True
        row["text"] = text
        yield row
