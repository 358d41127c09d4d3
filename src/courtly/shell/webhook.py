"""Where change events go: the change log file and the webhooks.

What it owns: `ChangeLog`, the append-only `DIR/changes.jsonl` (one JSON
object per change: url, watch, detected_at, previous_capture, capture,
diff), and `WebhookSender`, which POSTs each event of a watch with a webhook
as JSON and records the outcome in the watch store (`delivered`, or `dead`
after its attempts: the dead-letter list).

How it works: events wait in a heap keyed on their next attempt. One
delivery is made at a time (a receiver sees its events in order); a 2xx
answer delivers; anything else (another status, a refused connection, a
timeout) is retried after `backoff_s` x 2^(attempt-1), at most
`backoff_s_max`, times a seeded jitter in [1, 1 + jitter) (`Retries`), until
`attempts_max` attempts; then the event is a dead letter with its last
error. Every wait is on the injected clock. Pending deliveries are in the
store, so a restart resumes them (`load_pending`).

With `monitor.webhook_secret` set, each POST carries `X-Courtly-Signature:
sha256=<hex HMAC-SHA256 of the body>`, so a receiver can tell courtly's
events from anyone else's.

Rules: the queue holds at most `queue_max` events (one more is a dead letter
at once, "queue full", never dropped); each attempt has a `timeout_s`;
webhook URLs are the operator's own and may be on loopback or a private
network (the crawl's SSRF policy is for the pages it is sent to).
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import hmac
import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, NamedTuple

from courtly import __version__
from courtly.shell.store.watch_sqlite import Delivery

__all__ = ["ChangeLog", "WebhookSender", "aiohttp_post", "signature", "SIGNATURE_HEADER", "Retries", "Verdict",
           "event_body", "attempt_post", "change_line"]

log = logging.getLogger("courtly")

Post = Callable[[str, bytes, float, dict[str, str]], Awaitable[tuple[int, str]]]
SIGNATURE_HEADER = "X-Courtly-Signature"


def signature(secret: str, body: bytes) -> str:
    """The value of SIGNATURE_HEADER: "sha256=" + HMAC-SHA256 of the body with the shared secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Verdict(NamedTuple):
    """What one attempt's answer means: the delivery state, the error kept, and
    (pending) how long before the next attempt."""

    delivery: Delivery
    error: str
    retry_in_s: float


@dataclass(frozen=True, slots=True)
class Retries:
    """The delivery rule of every webhook, one machine's or a cluster's
    (shell/webhook_cluster): a 2xx answer delivers; anything else is retried
    after backoff_s x 2^(attempt-1), at most backoff_s_max, times a jitter
    drawn in [1, 1 + jitter) from the seeded `rng` (so the retries of many
    events, or of many workers, to one receiver do not come in step), until
    attempts_max attempts; then the event is a dead letter."""

    attempts_max: int = 5
    backoff_s: float = 1.0
    backoff_s_max: float = 300.0
    jitter: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(0), compare=False)

    def judge(self, status: int, error: str, attempt: int) -> Verdict:
        if 200 <= status < 300:
            return Verdict(Delivery.DELIVERED, "", 0.0)
        error = error or f"status {status}"
        if attempt >= self.attempts_max:
            return Verdict(Delivery.DEAD, error, 0.0)
        wait = min(self.backoff_s_max, self.backoff_s * 2 ** (attempt - 1))
        return Verdict(Delivery.PENDING, error, wait * (1 + self.jitter * self.rng.random()) if self.jitter else wait)


def event_body(seq: int, event: dict) -> bytes:
    """The JSON a webhook receives: the event (ChangeEvent.to_json()) with its sequence number."""
    return json.dumps({"seq": seq, **event}, ensure_ascii=False).encode()


def change_line(event: dict) -> str:
    """One line of `changes.jsonl` (without its newline)."""
    return json.dumps(event, ensure_ascii=False)


async def attempt_post(post: Post, url: str, body: bytes, timeout_s: float, secret: str) -> tuple[int, str]:
    """One POST of `body`, signed when there is a secret: (status, "") or (0, why it failed)."""
    headers = {SIGNATURE_HEADER: signature(secret, body)} if secret else {}
    return await post(url, body, timeout_s, headers)


def dead_letter_logged(url: str, seq: int, attempt: int, error: str) -> None:
    log.warning("webhook %s: change %d is a dead letter after %d attempts (%s)", url, seq, attempt, error,
                extra={"event": "webhook_dead", "seq": seq, "webhook": url})


class ChangeLog:
    """`DIR/changes.jsonl`: one line per change event, flushed as written."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._f = open(self.path, "a", encoding="utf-8")

    def change(self, seq: int, ev, webhook: str) -> None:  # type: ignore[no-untyped-def]
        self._f.write(change_line(ev.to_json()) + "\n")
        self._f.flush()

    def counts(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        self._f.close()


async def aiohttp_post(url: str, body: bytes, timeout_s: float, headers: dict[str, str]) -> tuple[int, str]:
    """POST `body` as JSON; (status, "") or (0, why it failed)."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as s:
            async with s.post(url, data=body, headers={"Content-Type": "application/json",
                                                       "User-Agent": f"courtly/{__version__} (webhook)",
                                                       **headers}) as r:
                await r.read()
                return r.status, ""
    except asyncio.TimeoutError:
        return 0, f"timeout after {timeout_s:g} s"
    except aiohttp.ClientError as e:
        return 0, f"{type(e).__name__}: {e}"[:300]


class WebhookSender:
    def __init__(self, clock, store, *, attempts_max: int = 5, backoff_s: float = 1.0,
                 backoff_s_max: float = 300.0, timeout_s: float = 10.0, queue_max: int = 10_000,
                 post: Post = aiohttp_post, secret: str = "", jitter: float = 0.0,
                 rng: random.Random | None = None) -> None:
        assert attempts_max >= 1 and backoff_s > 0 and queue_max >= 1
        self.clock = clock
        self.store = store
        self.retries = Retries(attempts_max, backoff_s, backoff_s_max, jitter, rng or random.Random(0))
        self.timeout_s = timeout_s
        self.queue_max = queue_max
        self.post = post
        self.secret = secret
        self._heap: list[tuple[float, int, str, bytes, int]] = []   # (not_before, seq, url, body, attempts)
        self._wake = asyncio.Event()
        self.delivered = 0
        self.dead = 0
        self.attempts = 0

    def __len__(self) -> int:
        return len(self._heap)

    def counts(self) -> dict[str, int]:
        return {"delivered": self.delivered, "dead": self.dead}

    def change(self, seq: int, ev, webhook: str) -> None:  # type: ignore[no-untyped-def]
        """A new event: queued when its watch has a webhook."""
        if not webhook:
            return
        body = event_body(seq, ev.to_json())
        self._push(self.clock.now(), seq, webhook, body, 0)

    def load_pending(self) -> int:
        """Deliveries a previous run left pending."""
        rows = self.store.pending(self.queue_max)
        now = self.clock.now()
        for r in rows:
            self._push(now, r.seq, r.webhook, event_body(r.seq, r.event), r.attempts)
        return len(rows)

    def _push(self, at: float, seq: int, url: str, body: bytes, attempts: int) -> None:
        if len(self._heap) >= self.queue_max:
            self.dead += 1
            self.store.set_delivery(seq, Delivery.DEAD, attempts, f"queue full ({self.queue_max} events waiting)")
            return
        heapq.heappush(self._heap, (at, seq, url, body, attempts))
        self._wake.set()

    async def run(self) -> None:
        """Deliver until cancelled."""
        while True:
            if not self._heap:
                self._wake.clear()
                await self._wake.wait()
                continue
            at = self._heap[0][0]
            if at > self.clock.now():
                self._wake.clear()
                sleep = asyncio.ensure_future(self.clock.sleep_until(at))
                woke = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait((sleep, woke), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleep.cancel()
                    woke.cancel()
                continue
            _, seq, url, body, attempts = heapq.heappop(self._heap)
            await self._attempt(seq, url, body, attempts + 1)

    async def _attempt(self, seq: int, url: str, body: bytes, attempt: int) -> None:
        self.attempts += 1
        status, error = await attempt_post(self.post, url, body, self.timeout_s, self.secret)
        v = self.retries.judge(status, error, attempt)
        if v.delivery == Delivery.DELIVERED:
            self.delivered += 1
        elif v.delivery == Delivery.DEAD:
            self.dead += 1
            dead_letter_logged(url, seq, attempt, v.error)
        self.store.set_delivery(seq, v.delivery, attempt, v.error)
        if v.delivery == Delivery.PENDING:
            self._push(self.clock.now() + v.retry_in_s, seq, url, body, attempt)
