"""Admission: what happens to a discovered URL before it is queued.

In order: resolve against the page, normalise (rules versioned in
core/urls), depth cap, URL-seen (Bloom negative cache, then the exact
store), takedowns (purges in force: runtime/takedown), scope, politeness
key, then the frontier. Every URL refused here that is not a duplicate gets
a `Decision` in the store; duplicates are counted (their normalised form
already has a record of its own). A URL whose seen-test needs the store
while the store is down waits here and is admitted again at the next commit
(runtime/group_commit).

The pieces are the core's; this module only orders them and talks to the
store, so it lives in the runtime.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, Iterable

from courtly.core.types import Reason, UrlItem
from courtly.runtime.budget import LOW_BAND
from courtly.runtime.group_commit import UNAVAILABLE
from courtly.core.urls import (
    UrlError,
    escape_raw_octets,
    host_of_normalized,
    normalize_url,
    politeness_key,
    registered_domain,
    resolve_url,
    split_origin,
)

if TYPE_CHECKING:
    from courtly.runtime.roles import AdmissionHost

__all__ = ["Admission"]

_HINT_KINDS = frozenset({"canonical", "alternate", "next", "prev"})
RECENT_MAX = 200_000   # recently seen URLs kept in memory (about 30 MB at most)
NORMALIZED_MAX = 50_000   # raw link -> normalised form, for links that repeat (two of these: about 30 MB at most)


class Admission:
    def __init__(self, crawler: "AdmissionHost", *, routes: bool = False,
                 judges: Callable[[str, str], bool] | None = None) -> None:
        """`routes`: a distributed worker's; a new URL is not queued here but
        goes to the store (the batch's `new_urls`) and reaches the owner of its
        partition through the inbox. The exact seen test is then the store's
        primary key; the Bloom filter and the recent set skip repeats.
        `judges(url, via)`: the trap guard and budget here judge `url` found
        on `via` (None: always); otherwise its owner judges it when it claims
        it (`judge_claimed`), with its own counts of the key."""
        self.c = crawler
        self._routes = routes
        self._judges = judges if routes else None   # one machine judges every URL it finds
        self._pending: set[str] = set()     # admitted since the last commit
        # Recently confirmed-seen URLs (insertion-ordered, bounded): pages repeat
        # their navigation links, so most duplicates are recent ones and skip
        # the store lookup. Only ever holds URLs the store also has.
        # (An OrderedDict: evicting the oldest of a plain dict by next(iter())
        # rescans the deleted slots at its front each time, quadratic in a long crawl.)
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._recent_max = RECENT_MAX
        # Pages of a site repeat their navigation links: normalising each raw
        # form once saves most of `normalize_url` (pure, so a cache is exact).
        # Two generations: when the current one is full it becomes the old one
        # (the older dropped) and a hit there moves back. Cheaper than an LRU,
        # and a form in use survives the turnover (one dict emptied when full
        # missed about a fifth of the repeated links of bench/crawl.py).
        self._normalized: dict[str, str] = {}
        self._normalized_old: dict[str, str] = {}
        self._seed_hosts: set[str] = set()
        # links the store could not test while it was down (bounded: fetching pauses then, runtime/group_commit)
        self._waiting: list[tuple[str, str | None, int, int, int]] = []
        self._seed_domains: set[str] = set()

    def set_seeds(self, seeds: Iterable[str]) -> None:
        for s in seeds:
            try:
                host = split_origin(normalize_url(s, self.c.rules)).host
            except UrlError:
                continue
            self._seed_hosts.add(host)
            self._seed_domains.add(registered_domain(host))

    def committed(self) -> None:
        recent = self._recent
        for url in self._pending:
            recent[url] = None
        while len(recent) > self._recent_max:
            recent.popitem(last=False)
        self._pending.clear()

    def readmit(self, now: float) -> int:
        """Admit again the links whose seen-test waited for the store
        (runtime/group_commit); how many still wait (the store failed again)."""
        waiting, self._waiting = self._waiting, []
        for url, via, band, depth, redirects in waiting:
            self.admit(url, via=via, band=band, depth=depth, now=now, redirects=redirects)
        return len(self._waiting)

    def remember(self, url: str) -> None:
        """`url` is in the store already (claimed from a worker's inbox): seen."""
        self._recent[url] = None

    def _is_seen(self, url: str) -> bool:
        seen = self.c.seen
        if url not in seen:
            return False
        if url in self._pending or url in self._recent:
            return True
        if self._routes:
            return False    # the shared store's insert settles it (runtime/worker)
        if self.c.store.has_url(url):
            self._recent[url] = None
            return True
        seen.note_false_positive()
        return False

    def in_scope(self, host: str) -> bool:
        """`host` is within crawl.scope of the seeds given so far."""
        return self._in_scope(host)

    def _in_scope(self, host: str) -> bool:
        scope = self.c.cfg.crawl.scope
        if scope == "any" or not self._seed_hosts:
            return True
        if scope == "seed-hosts":
            return host in self._seed_hosts
        return registered_domain(host) in self._seed_domains

    def admit(self, raw: str, *, via: str | None, band: int, depth: int, now: float,
              redirects: int = 0) -> bool:
        """Queue `raw` (already absolute). True when it was queued."""
        c = self.c
        via_s = via or ""
        try:
            url = self.normalize(raw)
        except UrlError as e:
            # Record under the raw form: it has no normalised one.
            if raw not in c.seen:
                c.seen.add(raw)
                self._pending.add(raw)
                c.decide(raw[:4096], "", via_s, e.reason, str(e), now, depth)
            return False
        try:
            seen = self._is_seen(url)
        except UNAVAILABLE:   # the store cannot say now: ask again after its next good commit
            self._waiting.append((url, via, band, depth, redirects))
            return False
        if seen:
            c.stats.duplicates += 1
            return False
        c.seen.add(url)
        self._pending.add(url)
        host = host_of_normalized(url)
        key = politeness_key(host, c.cfg.crawl.politeness_key)
        purge = c.takedowns.match(url)
        if purge is not None:     # a takedown: never queued again
            c.takedowns.decide(url, key, via_s, purge, now, depth)
            return False
        if not self._in_scope(host):
            c.decide(url, key, via_s, Reason.SCOPE, f"scope {c.cfg.crawl.scope}", now, depth)
            return False
        if self._judges is None or self._judges(url, via_s):
            judged = self._judge(url, key, via_s, band, depth, now, seed=via is None)
            if judged is None:
                return False
            band = judged
        item = UrlItem(url=url, key=key, band=band, depth=depth, via=via_s, redirects=redirects)
        c.batch.new_urls.append((url, key, band, depth, redirects, via_s, now))
        for o in c.observers:
            o.on_admitted(key, now)
        return self.enqueue(item, now)

    def _judge(self, url: str, key: str, via: str, band: int, depth: int, now: float, *,
               seed: bool) -> int | None:
        """The trap guard and budget on a new URL: its band (a trap suspect's
        goes to the lowest), or None when refused (with its decision)."""
        verdict = self.c.budget.admit(key, url, depth, now, seed=seed)
        if not verdict.allowed:
            detail = f"{verdict.rule}: {verdict.detail}" if verdict.detail else verdict.rule
            self.c.decide(url, key, via, verdict.reason, detail, now, depth)
            return None
        return band if verdict.band is None else max(band, verdict.band)

    def judge_claimed(self, item: UrlItem, now: float) -> UrlItem | None:
        """A URL claimed from this worker's inbox, never judged by the trap
        guard (routed in from a page of another partition, or a seed): the
        owner's trap guard and budget judge it now. None when refused: its
        decision is in the batch, so the store records why it was not fetched."""
        if self._judges is None or (item.via and self._judges(item.url, item.via)):
            return item     # its discoverer held its partition and judged it
        band = self._judge(item.url, item.key, item.via, item.band, item.depth, now, seed=not item.via)
        if band is None:
            return None
        return item if band == item.band else dataclasses.replace(item, band=band)

    def admit_many(self, urls: Iterable[str], *, via: str, band: int, depth: int, now: float) -> int:
        """`admit` of each of `urls` (a sitemap's, a feed's), with the duplicate
        fast path of `admit_links`. How many were queued."""
        repeat, stats = self._repeat, self.c.stats
        queued = 0
        for raw in urls:
            if repeat(raw):
                stats.duplicates += 1
                continue
            queued += self.admit(raw, via=via, band=band, depth=depth, now=now)
        return queued

    def _repeat(self, raw: str) -> bool:
        """`raw` normalises (by the cache) to a URL admitted or seen a moment
        ago: what `admit` would settle as a duplicate, without its calls. Both
        sets hold only URLs the seen filter has, so `_is_seen` would say yes."""
        url = self._normalized.get(raw) or self._normalized_old.get(raw)
        return url is not None and (url in self._recent or url in self._pending)

    def enqueue(self, item: UrlItem, now: float) -> bool:
        """Queue a newly admitted URL (a distributed worker routes it instead);
        it is in the batch as a queued record, so it may wait in the store."""
        if self._routes:
            return True
        return self.c.queue(item, now, stored=True)

    def normalize(self, raw: str) -> str:
        """`normalize_url(raw)` under the crawl's rules, remembered; raises UrlError."""
        url = self._normalized.get(raw)
        if url is None:
            url = self._normalized_old.get(raw)
            if url is None:
                url = normalize_url(raw, self.c.rules)
            if len(self._normalized) >= NORMALIZED_MAX:
                self._normalized_old, self._normalized = self._normalized, {}
            self._normalized[raw] = url
        return url

    def normalized(self, urls) -> list[str]:
        """The crawlable normalised forms of `urls` (the others dropped)."""
        out = []
        for raw in urls:
            try:
                out.append(self.normalize(raw))
            except UrlError:
                pass
        return out

    def admit_redirect(self, location: str, item: UrlItem, now: float) -> None:
        c = self.c
        location = escape_raw_octets(location)   # a Location that is not UTF-8: its octets as %XX
        try:
            target = resolve_url(item.url, location)
        except (UrlError, ValueError):
            c.decide(location[:4096], "", item.url, Reason.MALFORMED, "bad Location", now, item.depth)
            return
        hops = item.redirects + 1
        if hops > c.cfg.fetch.redirects_max:
            try:
                url = normalize_url(target, c.rules)
            except UrlError:
                url = target
            if not self._is_seen(url):
                c.seen.add(url)
                self._pending.add(url)
                c.decide(url, "", item.url, Reason.REDIRECTS,
                         f"{hops} redirect hops > {c.cfg.fetch.redirects_max}", now, item.depth)
            return
        self.admit(target, via=item.url, band=item.band, depth=item.depth, now=now, redirects=hops)

    def admit_links(self, page, item: UrlItem, now: float, *, low_value: bool = False) -> None:
        """Queue a page's links; `low_value` pages (near-duplicates, soft-404s) give
        their links the lowest band but one."""
        depth = item.depth + 1
        # Most links repeat a URL seen a moment ago (~3 new of ~12 a page):
        # `_repeat` settles those as `admit` (or `_refuse_nofollow`) would.
        repeat, stats = self._repeat, self.c.stats
        for link in page.links:
            if repeat(link.url):
                if not (page.nofollow or link.nofollow):
                    stats.duplicates += 1
                continue
            self.admit_link(page, link, item, now, depth, low_value)

    def admit_link(self, page, link, item: UrlItem, now: float, depth: int, low_value: bool) -> None:
        """One link of `admit_links`, without its fast path."""
        if page.nofollow or link.nofollow:
            self._refuse_nofollow(link.url, item, now, depth, "page nofollow" if page.nofollow else "rel=nofollow")
            return
        band = LOW_BAND if low_value else item.band if link.kind == "refresh" else 5 if link.kind in _HINT_KINDS else 4
        self.admit(link.url, via=item.url, band=band, depth=depth, now=now)

    def _refuse_nofollow(self, raw: str, item: UrlItem, now: float, depth: int, why: str) -> None:
        c = self.c
        try:
            url = self.normalize(raw)
        except UrlError:
            return
        if self._is_seen(url):
            return
        # Not marked seen: another page may link to it without nofollow.
        c.decide(url, "", item.url, Reason.NOFOLLOW, why, now, depth)
