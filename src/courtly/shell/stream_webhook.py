"""A consumer's result stream delivered to its webhook (issue 21: "a webhook
or a folder").

What it owns: `StreamForwarder`, which POSTs the lines of one consumer's
`results.jsonl` to the consumer's `sink` URL, in order, at least once. The
stream file stays the durable record (runtime/consumers writes it at every
commit, after the WARC flush); the forwarder only follows it.

How it works: it reads the complete lines after its offset (at most
`lines_max` per POST) and sends them as one JSON object
`{"consumer": NAME, "lines": [...]}`. A 2xx answer delivers them: the offset
moves past them and is saved (`DIR/webhook.offset`, written atomically), so
a restart resumes after the last delivered line and never skips one; a
delivery interrupted before its answer is sent again (a receiver dedupes by
url + fetched_at if it must). Anything else (another status, a refused
connection, a timeout) is retried after `backoff_s` x 2^(failures-1), at
most `backoff_s_max`, for as long as it takes: nothing is dropped, the
stream keeps every line. With no new line it looks again every `poll_s`.
Every wait is on the injected clock. With a `secret`, each POST carries
`X-Courtly-Signature: sha256=<hex HMAC-SHA256 of the body>` (shell/webhook).

Rules: one POST in flight per consumer; each POST bounded by `timeout_s`
and `lines_max`; `stop()` tries what is left for at most `drain_s`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Awaitable, Callable

from courtly.shell.webhook import SIGNATURE_HEADER, aiohttp_post, signature

__all__ = ["StreamForwarder", "is_webhook"]

log = logging.getLogger("courtly")

Post = Callable[[str, bytes, float, dict[str, str]], Awaitable[tuple[int, str]]]


def is_webhook(sink: str) -> bool:
    """A consumer sink that is a URL (the rest are folders)."""
    return sink.startswith(("http://", "https://"))


class StreamForwarder:
    def __init__(self, clock, name: str, stream: Path, url: str, *, lines_max: int = 500, poll_s: float = 0.5,
                 backoff_s: float = 1.0, backoff_s_max: float = 300.0, timeout_s: float = 10.0,
                 post: Post = aiohttp_post, secret: str = "") -> None:
        if lines_max < 1 or poll_s <= 0 or backoff_s <= 0 or timeout_s <= 0:
            raise ValueError("lines_max, poll_s, backoff_s and timeout_s must be positive")
        self.clock = clock
        self.name = name
        self.stream = stream
        self.url = url
        self.state = stream.parent / "webhook.offset"
        self.lines_max = lines_max
        self.poll_s = poll_s
        self.backoff_s = backoff_s
        self.backoff_s_max = backoff_s_max
        self.timeout_s = timeout_s
        self.post = post
        self.secret = secret
        self.offset = int(self.state.read_text()) if self.state.exists() else 0
        self.failures = 0            # in a row (the back-off)
        self.delivered = 0           # lines
        self.attempts = 0
        self.last_error = ""

    def _pending(self) -> tuple[list[bytes], int]:
        """Up to `lines_max` complete lines after the offset, and their size."""
        if not self.stream.exists():
            return [], 0
        with self.stream.open("rb") as fh:
            fh.seek(self.offset)
            lines, size = [], 0
            for line in fh:
                if not line.endswith(b"\n"):
                    break           # being written: the next look takes it whole
                lines.append(line)
                size += len(line)
                if len(lines) >= self.lines_max:
                    break
        return lines, size

    async def send_once(self) -> int:
        """One POST of the pending lines, if any: lines delivered (0 when none
        was pending or the POST failed)."""
        lines, size = self._pending()
        if not lines:
            return 0
        body = json.dumps({"consumer": self.name, "lines": [json.loads(x) for x in lines]},
                          separators=(",", ":")).encode()
        headers = {SIGNATURE_HEADER: signature(self.secret, body)} if self.secret else {}
        self.attempts += 1
        status, error = await self.post(self.url, body, self.timeout_s, headers)
        if not 200 <= status < 300:
            self.failures += 1
            self.last_error = error or f"status {status}"
            if self.failures == 1:
                log.warning("consumer %s: webhook %s failed (%s); retrying with back-off", self.name, self.url,
                            self.last_error, extra={"event": "stream_webhook_failed", "consumer": self.name})
            return 0
        self.failures = 0
        self.offset += size
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(str(self.offset))
        os.replace(tmp, self.state)
        self.delivered += len(lines)
        return len(lines)

    def _wait_s(self) -> float:
        if self.failures:
            return min(self.backoff_s_max, self.backoff_s * 2 ** (self.failures - 1))
        return self.poll_s

    async def run(self) -> None:
        """Follow the stream until cancelled."""
        while True:
            if not await self.send_once():
                await self.clock.sleep_until(self.clock.now() + self._wait_s())

    async def stop(self, drain_s: float = 10.0) -> None:
        """Deliver what is left, for at most `drain_s` and 3 failures (a crawl
        that stops; the rest goes at the next start, from the saved offset)."""
        deadline = self.clock.now() + drain_s
        while self.clock.now() < deadline and self._pending()[0]:
            if not await self.send_once():
                if self.failures >= 3:
                    return
                await self.clock.sleep_until(min(deadline, self.clock.now() + self._wait_s()))
