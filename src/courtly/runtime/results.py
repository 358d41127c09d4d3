"""Result handling: what the crawler does with an answer once it has one.

What it owns: writing the exchange to WARC (a revisit record when the payload
was stored before, or when the server said 304), retries and final errors,
redirects as new URLs, sitemaps and feeds as change hints and discovery, link
extraction in the sandboxed pool, and feeding the budget defence and the
recrawl scheduler. A page counts as fetched in the store only together with
what was learned from it (its links, its hints).

It is a collaborator of the `Crawler` (like `Admission` and `BudgetDefence`)
and works on the crawler's own state; the crawler calls `handle(item, result)`.
"""

from __future__ import annotations

import asyncio
import datetime
from collections import deque
from typing import TYPE_CHECKING

from courtly import __version__
from courtly.core.fingerprint import FirstCapture, payload_digest, warc_payload_digest
from courtly.core.health import Health, failure_kind
from courtly.core.hints import named_like_hints
from courtly.core.links import link_fields
from courtly.core.types import ItemKind, Reason, UrlItem
from courtly.core.urls import host_of_normalized, origin_text_of_normalized
from courtly.runtime.recrawl import XML_TYPES

if TYPE_CHECKING:
    from courtly.runtime.roles import ResultsHost

__all__ = ["Results", "is_xml", "host_down_detail"]

# Network failures worth another try; the rest (oversized headers, protocol
# errors, a refused address) would fail the same way again.
TRANSIENT_ERRORS = frozenset({"timeout", "connect", "reset"})


class Results:
    def __init__(self, crawler: "ResultsHost") -> None:
        self.c = crawler
        self.extracting: set[str] = set()   # URLs whose page is being extracted
        self.backlog_max = crawler.cfg.extract.backlog_max
        # Fetch tasks waiting for room, first come first served. A freed slot
        # wakes one of them: an Event woke every waiter on each extracted page
        # (up to `fetch_tasks` of them), 4 % of the crawler's CPU in a profile.
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._woken = 0   # woken for a slot, not yet running

    def archive(self, url: str, result, *, kind: str, meta: dict[str, str], first=None,
                 profile: str = "identical-payload-digest", digest: str | None = None) -> str:
        """Write the exchange to WARC (a revisit record when `first` holds the
        earlier capture of the same payload) and log the fetch. `digest`:
        the body's WARC-Payload-Digest when the caller has it already.
        Returns the WARC-Record-ID of the response (or revisit), "" if none."""
        c = self.c
        ref = record_id = ""
        if result.status:
            provenance = {"software": f"courtly/{__version__}", "fetch-kind": kind, **meta}
            if first is not None:
                provenance["duplicate-of"] = first.url
                w = c.warc.write_revisit(
                    url=url, ip=result.ip or "", request_head=result.request_head,
                    response_head=result.response_head, fetched_at=result.started_at,
                    refers_to_uri=first.url, refers_to_date=first.date,
                    payload_digest=((digest or warc_payload_digest(result.body))
                                    if profile == "identical-payload-digest" else None),
                    profile=profile, metadata=provenance,
                )
            else:
                w = c.warc.write_exchange(
                    url=url, ip=result.ip or "", request_head=result.request_head,
                    response_head=result.response_head, body=result.body, fetched_at=result.started_at,
                    truncated=result.truncated, metadata=provenance, payload_digest=digest,
                )
            ref = f"{w.filename}:{w.offset}"
            record_id = w.record_id
            c.stats.bytes += len(result.body)
        c.batch.fetches.append((
            url, kind, result.started_at, result.status, len(result.body or b""), result.elapsed_s,
            result.ip or "", ref, result.error or "",
        ))
        return record_id

    async def handle(self, item: UrlItem, result) -> str:
        c = self.c
        now = c.clock.now()
        status = result.status
        xml = bool(status) and is_xml(result, item.url)
        why = "feed" if xml else item.kind
        c.stats.by_reason[why] = c.stats.by_reason.get(why, 0) + 1
        health = c.politeness.health(item.key)
        if health is Health.PAUSED or (health is Health.DOWN and c.bans.paused_on(item.key)):
            # a ban or challenge answer (core/ban.py): logged, never taken for the page
            self.archive(item.url, result, kind="page", meta={"ban": c.bans.paused_on(item.key)})
            if health is Health.DOWN:
                self.give_up(item, now)
                return "done"
            return "retry-later"     # stays queued, attempts untouched; the key waits its probe
        if status == 0 or status >= 500 or status == 429:
            if status:
                self._count(status)
            else:
                c.stats.errors += 1
            self.archive(item.url, result, kind="page", meta={})   # status 0: the fetch log only
            held = self.host_failing(item, result, now)
            if held is not None:
                return held
            attempts = c.attempts.get(item.url, 0) + 1
            transient = status != 0 or result.error in TRANSIENT_ERRORS
            if transient and attempts <= c.cfg.crawl.retries_max:
                c.attempts[item.url] = attempts
                c.stats.retries += 1
                c.batch.requeued.append((attempts, item.url))
                if status in (429, 503):
                    return "retry-later"   # stays first in the batch, which goes back whole
                c.queue(item, now, stored=True)
                return "done"
            c.attempts.pop(item.url, None)
            detail = f"status {status}" if status else f"{result.error}: {result.error_detail}"
            c.decide(item.url, item.key, item.via, Reason.ERROR,
                        f"{detail} after {attempts} attempts", now, item.depth, state="failed")
            return "done"
        self._count(status)
        c.attempts.pop(item.url, None)
        kind = "recrawl" if item.kind == ItemKind.RECRAWL else "page"
        meta = {"via": item.via, "depth": str(item.depth), "fetch-reason": item.kind}
        if status == 304:
            # unchanged since the capture our validators came from: a server-not-modified revisit of it
            last = c.recrawl.last_capture(item.url)
            ref = FirstCapture(*last) if last is not None else None
            self.archive(item.url, result, kind=kind, meta=meta, first=ref, profile="server-not-modified")
            self.record_change(item, result, now, content_hash=None)
            c.monitor.not_modified(item.url, now)
            c.batch.fetched.append((now, status, item.url))
            return "done"
        first = digest = None
        if status == 200 and not result.truncated and result.body:
            # one SHA-1 pass: the exact-duplicate key is the record's WARC-Payload-Digest
            digest = warc_payload_digest(result.body)
            if c.payloads is not None:   # a cluster: another worker may have stored it first
                await c.payloads.recall(digest, c.budget)
            first = c.budget.first_capture(item.url, digest, result.started_at, c.batch,
                                           key=None if item.kind == ItemKind.RECRAWL else item.key)
            if first is not None and c.takedowns.match(first.url):
                first = None   # the earlier copy is purged: exports drop it, so store this one whole
            elif first is not None and first.url == item.url and item.kind != ItemKind.RECRAWL:
                # its own capture by a run that stopped (kill -9, a full disk) after the
                # digest was committed but before the page was: its links were never queued
                first = None
        record_id = self.archive(item.url, result, kind=kind, meta=meta, first=first, digest=digest)
        self.record_change(item, result, now, first=first)
        if first is not None and first.url != item.url and c.recrawl.enabled:
            c.recrawl.judged(item.url, first.url)   # the same bytes as another page: a copy
        if c.monitor.owns(item.url):
            ctype = result.headers.get("content-type", "") if result.headers else ""
            c.monitor.fetched(item.url, status, result.content or b"", ctype, now, result.started_at)
        if first is not None:   # the same bytes as an earlier page: its links are queued already
            c.batch.fetched.append((now, status, item.url))
            return "done"
        if 300 <= status < 400:
            loc = result.headers.get("location")
            if loc:
                c.admission.admit_redirect(loc, item, now)
            c.batch.fetched.append((now, status, item.url))
            return "done"
        if 200 <= status < 300 and result.content and not result.error:
            if xml:
                self.read_hints(item, result.content, now)
                c.batch.fetched.append((now, status, item.url))
                return "done"
            while len(self.extracting) >= self.backlog_max:   # back-pressure on the fetch task
                await self._wait_for_room()
            self.extracting.add(item.url)   # still a queued record until its batch commits
            t = asyncio.create_task(self.extract(item, result, record_id))
            c.track(t)
            return "done"
        if status in (404, 410):   # a real "not found": the host's soft-404 question is settled
            c.budget.note_not_found(origin_text_of_normalized(item.url), now)
        c.batch.fetched.append((now, status, item.url))
        return "done"

    def host_failing(self, item: UrlItem, result, now: float) -> str | None:
        """A failure of the host rather than of the URL (core/health.py): when
        it is not the first in a row, the URL stays queued with its attempt
        count untouched and the key waits out its back-off or probe; a key down
        past the horizon gives the URL up. None: count it against the URL."""
        c = self.c
        if failure_kind(result.status, result.error) is None:
            return None
        st = c.politeness.key(item.key)
        if st.health is Health.DOWN:
            self.give_up(item, now)
            return "done"
        if st.failures > 1 or st.health is Health.PARKED:
            return "retry-later"
        return None

    def give_up(self, item: UrlItem, now: float) -> None:
        """The key is down past the horizon (core/health.py): the URL is given
        up as host_down, or banned when the key's answers were a ban."""
        c = self.c
        st = c.politeness.key(item.key)
        reason = Reason.BANNED if st.failure_kind.startswith("ban") else Reason.HOST_DOWN
        c.decide(item.url, item.key, item.via, reason, host_down_detail(st), now, item.depth, state="failed")

    async def _wait_for_room(self) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._woken -= 1
                self._wake_one()   # it was this task's turn: pass it on
            raise
        self._woken -= 1

    def _wake_one(self) -> None:
        """Give each free backlog slot to the longest-waiting fetch task."""
        free = self.backlog_max - len(self.extracting) - self._woken
        waiting = self._waiting
        while free > 0 and waiting:
            fut = waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                self._woken += 1
                free -= 1

    def _count(self, status: int) -> None:
        stats = self.c.stats
        stats.fetched += 1
        stats.status[status] = stats.status.get(status, 0) + 1

    def record_change(self, item: UrlItem, result, now: float, *, content_hash: str | None = "",
                      first: FirstCapture | None = None) -> None:
        """Feed the answer to the recrawl scheduler (search and monitor intents);
        `first`: the earlier capture it was archived as a revisit of, if any."""
        c = self.c
        if not c.recrawl.enabled:
            return
        if content_hash == "":
            content_hash = payload_digest(result.content or result.body or b"")
        headers = result.headers or {}
        # the record holding the payload (a 304 keeps the one before): this answer's, or its original
        capture = (first.url, first.date) if first is not None else (item.url, result.started_at)
        c.recrawl.fetched(item.url, host_of_normalized(item.url), item.depth, now, status=result.status,
                             content_hash=content_hash, etag=headers.get("etag"),
                             last_modified=headers.get("last-modified"), batch=c.batch, capture=capture)

    def read_hints(self, item: UrlItem, content: bytes, now: float) -> None:
        """A sitemap or feed: its dated entries are change hints, the rest discovery."""
        c = self.c
        unknown, _taken = c.recrawl.hints(content, now)
        if not c.profile.discovers:
            return   # a watch list
        c.admission.admit_many(unknown, via=item.url, band=3, depth=item.depth + 1, now=now)

    async def extract(self, item: UrlItem, result, record_id: str = "") -> None:
        """Extract the page's links (the key's work until then: it writes later)."""
        c = self.c
        c.tenancy.begin(item.key)
        try:
            await self._extract(item, result, record_id)
        finally:
            c.tenancy.end(item.key)

    async def _extract(self, item: UrlItem, result, record_id: str = "") -> None:
        c = self.c
        ctype = result.headers.get("content-type", "") if result.headers else ""
        xrt = result.headers.get("x-robots-tag", "") if result.headers else ""
        origin = origin_text_of_normalized(item.url)   # queued URLs are normalised
        try:
            page = await c.extractor.submit(result.content, item.url, ctype, xrt,
                                            error_print=c.budget.wants_error_print(origin))
        finally:
            self.extracting.discard(item.url)
            self._wake_one()
        now = c.clock.now()
        if not hasattr(page, "links"):
            c.stats.extract_failed += 1
            c.batch.dead_letters.append((item.url, now, getattr(page, "reason", "extract failed")))
        else:
            judged = c.budget.page(
                url=item.url, key=item.key, host=host_of_normalized(item.url), origin=origin, content=result.content,
                content_type=ctype, canonical=page.canonical, now=now, batch=c.batch, prints=page.prints,
                refetch=item.kind == "recrawl")
            if page.noindex:   # marked in the fetch log's flags: text exports leave it out
                c.batch.flags.append((item.url, now, "noindex", _noindex_source(xrt, item.url, c.token)))
            if c.profile.discovers:   # a watch list discovers nothing
                c.admission.admit_links(page, item, now, low_value=judged.low_value)
            if c.recrawl.enabled:
                c.recrawl.judged(item.url, judged.near_dup_of)
                c.recrawl.links(item.url, c.admission.normalized(l.url for l in page.links))
            for o in c.observers:
                o.on_parsed(item.url, now)
            if c.renders is not None:   # a script shell: its links after rendering (runtime/render)
                await c.renders.after_extract(item, result, ctype, page, record_id)
                now = c.clock.now()
        c.batch.fetched.append((now, result.status, item.url))


def _noindex_source(x_robots_tag: str, url: str, token: str) -> str:
    """Which directive made a page noindex: the header (read alone) or the page's meta tag."""
    header_says = link_fields(b"", url, content_type="application/octet-stream", x_robots_tag=x_robots_tag,
                              user_agent_token=token)[2]
    return "X-Robots-Tag" if header_says else "meta robots"


def is_xml(result, url: str) -> bool:
    """A sitemap or feed, by content type or by the URL's extension."""
    ctype = (result.headers.get("content-type", "") if result.headers else "").split(";")[0].strip().lower()
    if ctype in XML_TYPES:
        return True
    return named_like_hints(url) and "html" not in ctype


def host_down_detail(st) -> str:
    """Why a key's URL was given up: since when it is down (or banning us), its last failure."""
    def at(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    what = "banning us" if st.failure_kind.startswith("ban") else "down"
    return (f"{what} since {at(st.first_failure_at)}, last failure {at(st.last_failure_at)} "
            f"({st.failure_kind}, {st.failures} in a row)")
