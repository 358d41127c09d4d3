"""Abuse complaints: the `courtly abuse` command (runtime/slowdown.py is the
running crawl's side).

An operator who gets a complaint about a host records it:

    courtly abuse --out DIR --host H --contact C --note N   (open)
    courtly abuse --out DIR --resolve ID                    (closed)
    courtly abuse --out DIR --list

Each is one statement on the table `abuse_complaints` of `crawl.db` (id, host,
key, contact, note, recorded_at, resolved_at NULL while open). Like a purge it
takes no folder lock, so it works while a crawl runs.

While a complaint is open, the politeness key of its host waits
max(`abuse.delay_factor` x its delay floor, `abuse.delay_s_min`) between
requests (`Politeness.slow_down`). A running crawl (runtime/slowdown.py) reads the open complaints
at every commit (`store.commit_interval_s`, like purges) and slows their keys
at once: the next request to the key already waits the new delay, and the
key's delay in the store (`hosts`) shows it from that commit on. A resolved
complaint lifts the slow-down at the next commit. A crawl started later reads
them when it loads.

The key is computed by the crawl from the host with its own
`crawl.politeness_key`; the `key` column holds what the crawl folder's last
configuration gave when the complaint was recorded (for listings and metrics).

Rules: opens the store itself (a read/command module, like runtime/report);
bad input is a ValueError naming it; a complaint is never deleted, only
resolved.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from courtly.core.sitekey import politeness_key
from courtly.core.urls import UrlError, split_origin
from courtly.shell.store.sqlite import SqliteStore, StoreError

__all__ = ["record", "resolve", "listing", "open_complaints", "host_of", "complaint_host", "recorded_text",
           "resolved_text", "listing_text"]

_COLUMNS = ("id", "host", "key", "contact", "note", "recorded_at", "resolved_at")
NOTE_CHARS_MAX = 2000


def host_of(value: str) -> str:
    """A bare host name (or a URL, whose host is taken), normalised; ValueError if none."""
    raw = value.strip()
    try:
        host = split_origin(raw if "://" in raw else f"http://{raw.rstrip('.')}/").host
    except UrlError as e:
        raise ValueError(f"bad host {raw!r}: {e}") from None
    if not host:
        raise ValueError(f"bad host {raw!r}: give a name such as www.example.org")
    return host


def _open(out: Path) -> SqliteStore:
    if not (out / "crawl.db").exists():
        raise StoreError(f"{out} is not a crawl folder (no crawl.db)")
    return SqliteStore(out / "crawl.db")


def _key_mode(out: Path) -> str:
    """crawl.politeness_key of the folder's last run (config.json), else the default."""
    try:
        mode = json.loads((out / "config.json").read_text()).get("crawl", {}).get("politeness_key", "domain")
    except (OSError, ValueError, AttributeError):
        return "domain"
    return mode if mode in ("domain", "host") else "domain"


def _row(r: tuple) -> dict:
    return dict(zip(_COLUMNS, r))


def record(out: Path, host: str, contact: str, note: str, *, now: float | None = None,
           as_json: bool = False) -> str:
    """Record an open complaint about `host`; a running crawl slows its key at its next commit."""
    h = complaint_host(host, contact, note)
    key = politeness_key(h, _key_mode(out))
    at = time.time() if now is None else now
    store = _open(out)
    try:
        cid = store.add_complaint(h, key, contact.strip(), note.strip()[:NOTE_CHARS_MAX], at)
    finally:
        store.close()
    return recorded_text((cid, h, key, contact.strip(), note.strip()[:NOTE_CHARS_MAX], at, None),
                         f"--out {out}", as_json=as_json)


def complaint_host(host: str, contact: str, note: str) -> str:
    """The complaint's host, normalised; ValueError for bad input."""
    h = host_of(host)
    if any(ord(ch) < 32 for ch in contact + note):
        raise ValueError("--contact and --note must be one line of printable text")
    return h


def recorded_text(row: tuple, where: str, *, as_json: bool = False) -> str:
    """What `courtly abuse --host` prints (`where`: `--out DIR` or `--db DSN`)."""
    if as_json:
        return json.dumps(_row(row))
    cid, h, key = row[:3]
    return (f"complaint #{cid} recorded about {h}: its politeness key {key} is slowed until "
            f"courtly abuse {where} --resolve {cid}\n"
            f"  a running crawl takes it up at its next commit; a crawl started later, when it loads")


def resolve(out: Path, complaint_id: int, *, now: float | None = None, as_json: bool = False) -> str:
    at = time.time() if now is None else now
    store = _open(out)
    try:
        done = store.resolve_complaint(complaint_id, at)
        rows = store.complaints()
    finally:
        store.close()
    return resolved_text(complaint_id, done, rows, as_json=as_json)


def resolved_text(complaint_id: int, done: bool, rows: list[tuple], *, as_json: bool = False) -> str:
    """What `courtly abuse --resolve` prints, given whether it closed the
    complaint and the complaints after; ValueError when it did not."""
    known = {r[0]: r for r in rows}
    if not done:
        why = "already resolved" if complaint_id in known else "no such complaint"
        raise ValueError(f"cannot resolve complaint #{complaint_id}: {why} (courtly abuse --list)")
    row = known[complaint_id]
    if as_json:
        return json.dumps(_row(row))
    return (f"complaint #{complaint_id} on {row[1]} resolved; a running crawl lifts the slow-down of "
            f"{row[2]} at its next commit")


def open_complaints(store: SqliteStore) -> list[dict]:
    """The open complaints of a store, as dicts (for `courtly report`)."""
    reader = getattr(store, "complaints", None)
    return [_row(r) for r in reader(open_only=True)] if reader else []


def listing(out: Path, *, as_json: bool = False) -> str:
    store = _open(out)
    try:
        rows = store.complaints()
    finally:
        store.close()
    return listing_text(rows, as_json=as_json)


def listing_text(complaints: list[tuple], *, as_json: bool = False) -> str:
    """`courtly abuse --list` of the store's complaint rows."""
    rows = [_row(r) for r in complaints]
    if as_json:
        return json.dumps(rows, indent=2)
    if not rows:
        return "no abuse complaints"
    return "\n".join([f"{'#':>3} {'state':<8} {'host':<32} {'key':<24} {'recorded':<20} contact / note"]
                     + [line for r in rows for line in complaint_lines(r)])


def complaint_lines(r: dict) -> list[str]:
    state = "open" if r["resolved_at"] is None else "resolved"
    out = [f"{r['id']:>3} {state:<8} {r['host']:<32} {r['key']:<24} {_when(r['recorded_at']):<20} "
           f"{r['contact'] or '-'}: {r['note'] or '-'}"]
    if r["resolved_at"] is not None:
        out.append(f"{'':>13}resolved {_when(r['resolved_at'])}")
    return out


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(at))
