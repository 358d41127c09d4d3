"""Open abuse complaints slowing a running crawl (`courtly abuse`, runtime/abuse.py).

At every commit (`store.commit_interval_s`, beside the purge poll) the crawl
reads the open complaints (one query on a small table), computes each host's
politeness key with its own `crawl.politeness_key`, and slows every key with
an open complaint to max(`abuse.delay_factor` x its floor,
`abuse.delay_s_min`) at once (`Politeness.slow_down`); a key whose last
complaint was resolved gets its ordinary delay back. Both are logged
(`abuse_slowdown`, `abuse_lifted`) and the key's state is written with that
commit's batch, so the slowed delay is in the store's `hosts` table.

Rules: no shell imports (the store is the crawler's port; a distributed
worker reads the complaints from its async store and hands them to
`take_up`); `now` from the crawler's clock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from courtly.core.sitekey import politeness_key

if TYPE_CHECKING:
    from courtly.runtime.roles import SlowdownHost

__all__ = ["Complaints"]

log = logging.getLogger("courtly")


class Complaints:
    """The running crawl's side: open complaints -> slowed politeness keys."""

    def __init__(self, crawler: "SlowdownHost") -> None:
        self.c = crawler
        self.slowed: dict[str, tuple[int, ...]] = {}   # key -> ids of the open complaints on it

    def poll(self, now: float) -> None:
        """Slow the keys of complaints opened since the last poll, lift those
        whose last complaint was resolved (one query on a small table)."""
        reader = getattr(self.c.store, "complaints", None)
        if reader is None:   # a store without complaints (a worker reads them itself: runtime/worker)
            return
        self.take_up(reader(open_only=True), now)

    def take_up(self, rows, now: float) -> None:
        """The open complaints now, (id, host, ...) rows: slow the keys new to
        the list, lift those no longer on it."""
        mode = self.c.cfg.crawl.politeness_key
        wanted: dict[str, list[int]] = {}
        for cid, host, *_rest in rows:
            wanted.setdefault(politeness_key(host, mode), []).append(cid)
        pol, a = self.c.politeness, self.c.cfg.abuse
        for key, ids in wanted.items():
            if key in self.slowed:
                continue
            pol.slow_down(key, a.delay_factor, a.delay_s_min, now)
            self.c.batch.hosts[key] = pol.key(key).snapshot()
            log.warning("[%s] abuse complaint #%s: %s slowed to %.1f s between requests until resolved",
                        self.c.crawl_id, ", #".join(map(str, ids)), key, pol.key(key).delay_s,
                        extra={"event": "abuse_slowdown", "crawl_id": self.c.crawl_id, "key": key,
                               "complaint_ids": ids, "delay_s": pol.key(key).delay_s})
        for key in [k for k in self.slowed if k not in wanted]:
            pol.lift_slow_down(key, now)
            self.c.batch.hosts[key] = pol.key(key).snapshot()
            log.info("[%s] abuse complaints on %s resolved: its ordinary delay applies again",
                     self.c.crawl_id, key, extra={"event": "abuse_lifted", "crawl_id": self.c.crawl_id, "key": key})
        self.slowed = {k: tuple(v) for k, v in wanted.items()}
