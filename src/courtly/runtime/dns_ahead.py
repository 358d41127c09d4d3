"""DNS ahead: a host is resolved when its politeness key enters the frontier,
not when its first request is due, so a slow or failing lookup is over (and
cached, with its TTL, or served stale: shell/resolver.py) by the key's turn.

It owns a bounded set of lookup tasks; the resolver owns the cache, its TTLs
and the sharing of concurrent lookups. A lookup's failure is only cached
here: the URL's own resolve at its turn records the decision (Reason.DNS or
NON_PUBLIC), so nothing is decided twice.

Rules: at most `tasks_max` lookups ahead at once (more are skipped and
counted: the URL's turn resolves it as before); only inside a running event
loop (a resume's load is not); `close()` cancels what is left.
"""

from __future__ import annotations

import asyncio

from courtly.core.urls import host_of_normalized

__all__ = ["DnsAhead", "TASKS_MAX"]

TASKS_MAX = 64


class DnsAhead:
    def __init__(self, resolver, tasks_max: int = TASKS_MAX) -> None:
        self.resolver = resolver
        self.tasks_max = tasks_max
        self.started = 0
        self.skipped = 0
        self._tasks: set[asyncio.Task] = set()

    def ahead(self, url: str) -> None:
        """Start resolving the host of `url` (a normalised URL) unless its
        answer is cached already or too many lookups are under way."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        host = host_of_normalized(url)
        cached = getattr(self.resolver, "cached", None)
        if cached is not None:
            try:
                if cached(host) is not None:
                    return
            except Exception:   # a cached failure: the URL's turn reports it
                return
        if len(self._tasks) >= self.tasks_max:
            self.skipped += 1
            return
        self.started += 1
        t = loop.create_task(self._resolve(host))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _resolve(self, host: str) -> None:
        try:
            await self.resolver.resolve(host)
        except Exception:   # cached by the resolver; decided at the URL's turn, with the URL
            pass

    def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
