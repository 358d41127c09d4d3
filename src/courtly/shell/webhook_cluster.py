"""The webhooks of a cluster's monitor: each event delivered by the worker holding its watch.

What it owns: `ClusterWebhookSender`, a worker's delivery loop over the
`changes` table in PostgreSQL (shell/store/watch_postgres), with exactly the
single machine's semantics (shell/webhook: the same body, signature, timeout
and `Retries` rule: in order per watch, at least once, back-off after a
failure, a dead letter after `attempts_max` attempts).

How it works: every `poll_s` (or at once after a round that filled its
claim) the loop claims, from the store, the due oldest pending event of each
watch whose partition this worker holds at the epoch it holds it
(`tenure()`, runtime/cluster_monitor). Claimed events are POSTed one at a
time, oldest first, and each outcome is written with `finish_delivery`:
delivered, dead, or pending again with its next attempt `retry_in_s` later
on the database clock. The queue is the table, so the position delivered
survives a restart and a take-over; a later event of a watch is not claimed
while an earlier one is pending, so a receiver sees a watch's events in
order. A claim lasts `timeout_s + CLAIM_MARGIN_S`: a worker that dies
mid-delivery leaves the event to the next claim (at least once).

Rules: one claim is at most `claim_max` events (the bound on memory); every
wait is on the injected clock; the store being away is counted and tried
again at the next poll, never fatal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from courtly.shell.store.watch_sqlite import Delivery
from courtly.shell.webhook import Post, Retries, aiohttp_post, attempt_post, dead_letter_logged, event_body

__all__ = ["ClusterWebhookSender", "CLAIM_MARGIN_S", "POLL_S"]

log = logging.getLogger("courtly")

CLAIM_MARGIN_S = 30.0   # a claim outlives one attempt's timeout by this much
POLL_S = 1.0            # how often a worker looks for due deliveries (the first retry waits 1 s)


class ClusterWebhookSender:
    def __init__(self, clock, store, worker_id: str, tenure: Callable[[], Mapping[int, tuple[int, int]]], *,  # type: ignore[no-untyped-def]
                 retries: Retries | None = None, timeout_s: float = 10.0, secret: str = "",
                 post: Post = aiohttp_post, poll_s: float = POLL_S, claim_max: int = 100) -> None:
        assert poll_s > 0 and claim_max >= 1 and timeout_s > 0
        self.clock = clock
        self.store = store
        self.worker_id = worker_id
        self.tenure = tenure            # watch id -> (partition, epoch) held here
        self.retries = retries or Retries()
        self.timeout_s = timeout_s
        self.secret = secret
        self.post = post
        self.poll_s = poll_s
        self.claim_max = claim_max
        self.delivered = 0
        self.dead = 0
        self.attempts = 0
        self.lost_claims = 0             # outcomes not written: the claim had moved on
        self.store_errors = 0

    # ---- the monitor's change sink (runtime/monitor.ChangeSink) -------------------------

    def change(self, seq: int, ev, webhook: str) -> None:  # type: ignore[no-untyped-def]
        """Events reach this sender through the store (delivered from the table)."""

    def counts(self) -> dict[str, int]:
        return {"delivered": self.delivered, "dead": self.dead}

    # ---- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Deliver until cancelled."""
        while True:
            got = await self.round()
            if got < self.claim_max:
                await self.clock.sleep_until(self.clock.now() + self.poll_s)

    async def round(self) -> int:
        """One claim and its deliveries; the number of events claimed."""
        tenure = dict(self.tenure())
        if not tenure:
            return 0
        try:
            rows = await self.store.claim_deliveries(self.worker_id, tenure, hold_s=self.timeout_s + CLAIM_MARGIN_S,
                                                     limit=self.claim_max)
            for r in rows:
                await self._attempt(r.seq, r.webhook, event_body(r.seq, r.event), r.attempts + 1)
        except Exception as e:
            # the store went away: a claim not finished expires and is sent again (at least once)
            if not (isinstance(e, (OSError, asyncio.TimeoutError)) or type(e).__module__.startswith("asyncpg")):
                raise
            return self._away(e)
        return len(rows)

    def _away(self, e: BaseException) -> int:
        self.store_errors += 1
        log.warning("webhooks: the store is away (%s); trying again in %g s", e, self.poll_s,
                    extra={"event": "webhook_store_away"})
        return 0

    async def _attempt(self, seq: int, url: str, body: bytes, attempt: int) -> None:
        self.attempts += 1
        status, error = await attempt_post(self.post, url, body, self.timeout_s, self.secret)
        v = self.retries.judge(status, error, attempt)
        if not await self.store.finish_delivery(seq, self.worker_id, v.delivery, attempt, v.error, v.retry_in_s):
            self.lost_claims += 1       # claimed again elsewhere meanwhile: its outcome is theirs
            return
        if v.delivery == Delivery.DELIVERED:
            self.delivered += 1
        elif v.delivery == Delivery.DEAD:
            self.dead += 1
            dead_letter_logged(url, seq, attempt, v.error)
