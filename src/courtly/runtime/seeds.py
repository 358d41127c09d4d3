"""Seed URLs from the command line and a seeds file.

Validated up front, so a bad seed is a usage error naming its line before
anything starts; read lazily, so a file of ten million seeds is never held in
memory (the crawler admits them as it reads, committing as it goes: see
`Crawler.add_seeds`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

from courtly.core.urls import UrlError, normalize_url
from courtly.runtime.wiring import UsageError

__all__ = ["SeedList"]


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
            with self.path.open(encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    line = line.strip()
                    if line and not line.startswith("#"):
                        yield line, f"{self.path}:{n}"
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read seeds file {self.path}: {e}") from e

    def validate(self) -> "SeedList":
        """Check every seed once (one pass over the file). Raises UsageError."""
        n = 0
        for url, where in self._lines():
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
