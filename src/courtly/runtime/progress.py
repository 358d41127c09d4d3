"""Live progress: fetched, rate, queued, hosts ready/waiting, errors.

On a terminal it is a rich live line refreshed twice a second; otherwise
(CI logs, pipes) a plain line every 10 s. Reads the crawler's counters only.
"""

from __future__ import annotations

import asyncio
import sys
import time

__all__ = ["Progress", "progress_line"]


def progress_line(crawler) -> str:
    s = crawler.stats
    now = crawler.clock.now()
    elapsed = max(1e-9, now - s.started_at) if s.started_at else 1e-9
    ready, waiting, leased = crawler.frontier.counts(now)
    return (
        f"fetched {s.fetched} ({s.fetched / elapsed:.1f}/s)  queued {len(crawler.frontier) + len(crawler.overflow)}"
        f"  hosts ready {ready} waiting {waiting} active {leased}"
        f"  in-flight {s.in_flight}  errors {s.errors}  skipped {s.decisions}"
        f"  {s.bytes / 2**20:.1f} MiB"
    )


class Progress:
    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._task: asyncio.Task | None = None
        self._live = None

    def attach(self, crawler) -> None:
        if not self.enabled:
            return
        self._task = asyncio.get_running_loop().create_task(self._run(crawler))

    async def _run(self, crawler) -> None:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            with Live(console=Console(stderr=True), refresh_per_second=4, transient=True) as live:
                self._live = live
                while True:
                    live.update(progress_line(crawler))
                    await asyncio.sleep(0.5)
        else:
            last = time.monotonic()
            while True:
                await asyncio.sleep(1.0)
                if time.monotonic() - last >= 10:
                    last = time.monotonic()
                    print("courtly: " + progress_line(crawler), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
