"""Takedowns and abuse complaints of a distributed crawl: `courtly purge` and
`courtly abuse` with `--db DSN` instead of `--out DIR`.

Each command is what it is on a crawl folder (runtime/report.py `purge`,
runtime/abuse.py), on the cluster's PostgresStore: a purge is recorded and
the URL records in its scope marked in one transaction, and every worker
takes it up at its next commit (it polls `purges` like a single crawl); a
complaint is one statement, and the workers slow its key at their next
commit. Output, text and `--json`, is the same as for a folder.

What cannot be done from here: `warc.keep_purged_originals = false` is a
setting of each worker's WARC output, which may be on another machine or in
an object store, so closed WARC files are not rewritten by this command
(the text output says so). The key of a complaint's host is
computed with the crawl's own `politeness_key` (fixed by `courtly submit`).

Rules: a command module (it opens the store itself, like runtime/report);
bad input is a ValueError naming it, a database problem a one-line
ClusterError; `now` may be given (tests), else the wall clock.
"""

from __future__ import annotations

import time

from courtly.core.purge import purge_of
from courtly.core.sitekey import politeness_key
from courtly.runtime.abuse import NOTE_CHARS_MAX, complaint_host, listing_text, recorded_text, resolved_text
from courtly.runtime.cluster import open_store
from courtly.runtime.report import purge_report, purges_report

__all__ = ["purge", "purges", "record", "resolve", "listing", "NOT_REWRITTEN"]

NOT_REWRITTEN = ("the workers' WARC files are not rewritten from here (warc.keep_purged_originals is "
                 "each worker's setting)")


async def purge(dsn: str, scope: str, value: str, reason: str = "", *, now: float | None = None,
                as_json: bool = False) -> str:
    wanted = purge_of(scope, value, reason=reason)   # PurgeError (a ValueError) names the problem
    store = await open_store(dsn)
    try:
        at = time.time() if now is None else now
        stored, counts = await store.add_purge(wanted, at)
        crawl_id = await store.get_meta("crawl_id") or ""
    finally:
        await store.close()
    text = purge_report(stored, counts, at, crawl_id, "", "--db DSN", as_json=as_json)
    return text if as_json else f"{text}\n  {NOT_REWRITTEN}"


async def purges(dsn: str, *, as_json: bool = False) -> str:
    store = await open_store(dsn)
    try:
        rows = await store.purges(0)
    finally:
        await store.close()
    return purges_report(rows, as_json=as_json)


async def record(dsn: str, host: str, contact: str, note: str, *, now: float | None = None,
                 as_json: bool = False) -> str:
    h = complaint_host(host, contact, note)
    store = await open_store(dsn)
    try:
        key = politeness_key(h, await store.get_meta("politeness_key") or "domain")
        at = time.time() if now is None else now
        row = (h, key, contact.strip(), note.strip()[:NOTE_CHARS_MAX], at)
        cid = await store.add_complaint(*row)
    finally:
        await store.close()
    return recorded_text((cid, *row, None), "--db DSN", as_json=as_json)


async def resolve(dsn: str, complaint_id: int, *, now: float | None = None, as_json: bool = False) -> str:
    store = await open_store(dsn)
    try:
        done = await store.resolve_complaint(complaint_id, time.time() if now is None else now)
        rows = await store.complaints()
    finally:
        await store.close()
    return resolved_text(complaint_id, done, rows, as_json=as_json)


async def listing(dsn: str, *, as_json: bool = False) -> str:
    store = await open_store(dsn)
    try:
        rows = await store.complaints()
    finally:
        await store.close()
    return listing_text(rows, as_json=as_json)
