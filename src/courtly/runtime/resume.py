"""The first requests of a resumed crawl: how long each key and IP waits.

After a clean stop every key's state is in the store (its next fetch instant
and back-off included), so only the IP rate window is waited out. After a
crash (or an abort, which cancels requests on the wire) the last requests, up
to one commit interval, are not in the store: each known key first waits out
its own delay (capped as a Crawl-delay is), a key not in the store the default
one, plus that interval. One key's long delay never holds the others (it froze
every host for up to `crawl_delay_s_max`, issue 23 item 3).

The final commit of a run that stopped with nothing on the wire sets the store
meta `CLEAN_STOP_META`; the next load clears it before any request, so a crash
from then on is not taken for a clean stop.

`resume_from_store(crawler)` is a single machine's start (`Crawler.load`):
the crawl id, takedowns, seen filter, budget defence, recrawl and monitor
state, host and robots state (then the holds above), complaints, and the
queued URLs back into the frontier (those a purge covers are decided
instead). A distributed worker reads the same per partition as it adopts
them (runtime/worker.py).
"""

from __future__ import annotations

import logging
import uuid

from courtly.config import Config
from courtly.core.politeness import Politeness
from courtly.core.types import UrlItem
from courtly.ports import Batch

__all__ = ["CLEAN_STOP_META", "hold_after_stop", "resume_from_store"]

log = logging.getLogger("courtly")

CLEAN_STOP_META = "clean_stop"


def hold_after_stop(store, politeness: Politeness, cfg: Config, saved: dict[str, dict], now: float) -> None:
    """Hold keys and IPs as the way the last run stopped requires (`saved`:
    the store's host states, as just restored into `politeness`)."""
    marker = store.get_meta(CLEAN_STOP_META)
    clean = marker == "1"
    if marker:
        store.apply(Batch(meta={CLEAN_STOP_META: ""}))
    if not saved and store.get_meta("started") is None:
        return  # a fresh crawl folder
    p = cfg.politeness
    commit_s = cfg.store.commit_interval_s
    ip_window_s = 1.0 + politeness.config.ip_margin_s
    if clean:
        politeness.hold_all_until(now + ip_window_s)
        log.debug("resuming after a clean stop: each key keeps its saved next fetch time",
                  extra={"event": "resume", "clean": True, "keys": len(saved)})
        return
    cap = max(p.delay_s, p.crawl_delay_s_max)
    politeness.hold_all_until(now + max(p.delay_s, ip_window_s) + commit_s)
    longest = 0.0
    for key, snap in saved.items():
        own = min(float(snap.get("delay_s", p.delay_s)), cap)
        longest = max(longest, own)
        politeness.hold_key_until(key, now + own + commit_s)
    log.info("resuming after an unclean stop: each key first waits out its own delay"
             " (%.1f s at most) plus one commit interval", max(longest, p.delay_s) + commit_s,
             extra={"event": "resume", "clean": False, "keys": len(saved)})


def resume_from_store(c) -> int:
    """Load crawler `c` from its store; returns how many URLs were queued."""
    now = c.clock.now()
    c.name_crawl(_crawl_id(c.store))
    c.takedowns.load(now)
    c.seen.update(c.store.iter_urls())
    c.budget.load(c.store)
    c.recrawl.load(c.store, now)
    c.monitor.load(now)
    saved = c.store.hosts()
    for key, snap in saved.items():
        c.politeness.restore(key, snap)
    c.key_memory.load_robots(c.robots)   # the rest are read back as their origins return
    hold_after_stop(c.store, c.politeness, c.cfg, saved, now)
    c.complaints.poll(now)
    n = 0
    for url, key, band, depth, redirects, via, attempts in c.store.iter_queued():
        purge = c.takedowns.match(url)
        if purge is not None:
            c.takedowns.decide(url, key, via, purge, now, depth)
            continue
        item = UrlItem(url=url, key=key, band=band, depth=depth, via=via, redirects=redirects)
        if attempts:
            c.attempts[url] = attempts
        c.queue(item, now, stored=True)
        n += 1
    c.consumers.poll(now)
    return n


def _crawl_id(store) -> str:
    """The crawl folder's id (made once, kept in the store's meta)."""
    crawl_id = store.get_meta("crawl_id")
    if not crawl_id:
        crawl_id = uuid.uuid4().hex[:12]
        store.apply(Batch(meta={"crawl_id": crawl_id}))
    return crawl_id
