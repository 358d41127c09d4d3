"""Seed URLs from the command line and a seeds file.

Validated up front, so a bad seed is a usage error naming its line before
anything starts; read lazily, so a file of ten million seeds is never held in
memory: `feed_seeds` admits them as it reads, committing as it goes.
"""

from __future__ import annotations

import asyncio
import logging
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from courtly.core.urls import UrlError, normalize_url
from courtly.runtime.exits import UsageError

if TYPE_CHECKING:
    from courtly.runtime.roles import SeedsHost

__all__ = ["SeedList", "feed_seeds", "SEED_COMMIT_EVERY"]

log = logging.getLogger("courtly")

SEED_COMMIT_EVERY = 50_000   # seeds admitted between two commits while seeding


class SeedList:
    def __init__(self, urls: Sequence[str] = (), path: str | Path | None = None) -> None:
        self.urls = list(urls)
        self.path = Path(path) if path else None
        self._count: int | None = None

    def _lines(self) -> Iterator[tuple[str, str]]:
        """(seed, where it came from) in order."""
        for u in self.urls:
            yield u, f"argument {u!r}"
        if self.path is None:
            return
        try:
            with self.path.open("rb") as f:
                for n, raw in enumerate(f, 1):
                    try:   # a byte order mark (Notepad) is not part of the first URL's scheme
                        line = raw.decode("utf-8-sig" if n == 1 else "utf-8").strip()
                    except UnicodeDecodeError as e:
                        raise UsageError(f"seeds file {self.path}:{n} is not UTF-8 text "
                                         "(one URL per line expected)") from e
                    if line and not line.startswith("#"):
                        yield line, f"{self.path}:{n}"
        except OSError as e:
            raise UsageError(f"cannot read seeds file {self.path}: {e.strerror or e}") from e

    def validate(self) -> "SeedList":
        """Check every seed once (one pass over the file). Raises UsageError."""
        n = 0
        for url, where in self._lines():
            if any(c.isspace() for c in url):
                raise UsageError(f"bad seed URL at {where}: {url[:200]!r} is not one URL (it holds white space; "
                                 "one URL per line, a space inside a URL written %20)")
            try:
                normalize_url(url)
            except UrlError as e:
                raise UsageError(f"bad seed URL at {where}: {e}") from e
            n += 1
        self._count = n
        return self

    def __iter__(self) -> Iterator[str]:
        for url, _ in self._lines():
            yield url

    def __len__(self) -> int:
        if self._count is None:
            self._count = sum(1 for _ in self._lines())
        return self._count


async def feed_seeds(crawler: "SeedsHost", seeds: Iterable[str]) -> int:
    """Admit seeds from an iterable of any length in chunks: committed every
    SEED_COMMIT_EVERY, so the batch and the frontier's memory stay bounded
    (runtime/overflow), and the event loop runs between chunks, so Ctrl-C
    stops seeding too. Seeds committed before a stop stay queued; the same
    command again admits the rest. Returns how many were queued."""
    it = iter(seeds)
    added = n = 0
    while not crawler.stopping:
        chunk = list(islice(it, SEED_COMMIT_EVERY))
        if not chunk:
            break
        added += crawler.add_seeds(chunk)
        n += len(chunk)
        if len(chunk) == SEED_COMMIT_EVERY:
            crawler.commit()
            if n % (SEED_COMMIT_EVERY * 20) == 0:
                log.info("[%s] seeds: %d read, %d queued", crawler.crawl_id, n, added)
        await asyncio.sleep(0)
    if crawler.stopping:
        log.warning("[%s] seeding stopped after %d seeds (run the same command again to admit the rest)",
                    crawler.crawl_id, n)
    elif n:
        log.info("[%s] seeds: %d read, %d queued", crawler.crawl_id, n, added)
    return added
