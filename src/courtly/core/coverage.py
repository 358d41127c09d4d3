"""The coverage sample: a fixed, deterministic sample of the URLs a crawl means to fetch.

What it owns: which URLs are in the sample and, for each, when it was first
known (queued), last fetched and last parsed (links extracted). From that come the seeds' outcome metric
`coverage_sample_hit_ratio` (the share of sampled URLs fetched) and the age of
each stage (the seeds' E.4): how long unfetched sample URLs have waited
since they were known, how old the last fetch of fetched ones is, and how
old the last parse of parsed ones.

How it works: two ways to choose the sample.

* **By hash** (`size` URLs, bottom-k sampling): each normalised URL gets a
  64-bit blake2b hash; the sample is the `size` known URLs with the smallest
  hashes. A URL with a smaller hash than the current largest pushes that one
  out. The result depends only on the set of URLs known, never on the order
  they arrived in, so two runs (or a resume) sample the same URLs.
* **Canaries** (`canaries`, e.g. the seeds' 10K known-volatile pages): the
  sample is exactly that list, known from the start whether or not the crawl
  has found them yet.

Rules: pure (no clock: `now` is an argument; no global random); bounded
(at most `size` or len(canaries) entries); an unknown URL reported fetched is
ignored, a sampled URL fetched again just moves its last-fetch time.
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass
from typing import Iterable

__all__ = ["CoverageSample", "CoverageFigures", "url_hash"]


def url_hash(url: str) -> int:
    """A stable 64-bit hash of a normalised URL (never Python's `hash()`)."""
    return int.from_bytes(hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


@dataclass(frozen=True, slots=True)
class CoverageFigures:
    sampled: int                       # URLs in the sample
    fetched: int                       # of which fetched at least once
    waiting_ages_s: tuple[float, ...]  # unfetched: time since first known, ascending
    fetch_ages_s: tuple[float, ...]    # fetched: time since the last fetch, ascending
    parse_ages_s: tuple[float, ...] = ()  # parsed: time since the last parse, ascending

    @property
    def hit_ratio(self) -> float:
        return self.fetched / self.sampled if self.sampled else 0.0


class CoverageSample:
    def __init__(self, size: int, canaries: Iterable[str] = ()) -> None:
        fixed = list(dict.fromkeys(canaries))
        if size < 0:
            raise ValueError("size must be >= 0")
        self.fixed = bool(fixed)
        self.size = len(fixed) if fixed else size
        self._known_at: dict[str, float | None] = {u: None for u in fixed}
        self._fetched_at: dict[str, float] = {}
        self._parsed_at: dict[str, float] = {}
        self._heap: list[tuple[int, str]] = []    # (-hash, url): the largest hash on top

    def __len__(self) -> int:
        return len(self._known_at)

    def __contains__(self, url: str) -> bool:
        return url in self._known_at

    def note_known(self, url: str, now: float) -> None:
        """`url` (normalised) is queued: it may enter the sample."""
        known = self._known_at
        if url in known:
            if known[url] is None:
                known[url] = now
            return
        if self.fixed or self.size == 0:
            return
        h = url_hash(url)
        if len(self._heap) < self.size:
            heapq.heappush(self._heap, (-h, url))
        elif h < -self._heap[0][0]:
            _, out = heapq.heapreplace(self._heap, (-h, url))
            del known[out]
            self._fetched_at.pop(out, None)
            self._parsed_at.pop(out, None)
        else:
            return
        known[url] = now

    def note_fetched(self, url: str, now: float) -> None:
        """`url` got an HTTP response (any status): the crawl has its current state."""
        if url in self._known_at:
            self._fetched_at[url] = now
            if self._known_at[url] is None:
                self._known_at[url] = now

    def note_parsed(self, url: str, now: float) -> None:
        """`url`'s page was parsed (its links and text extracted)."""
        if url in self._fetched_at:
            self._parsed_at[url] = now

    def figures(self, now: float) -> CoverageFigures:
        fetched = self._fetched_at
        waiting = sorted(now - at for u, at in self._known_at.items() if u not in fetched and at is not None)
        ages = sorted(now - at for at in fetched.values())
        parsed = sorted(now - at for at in self._parsed_at.values())
        return CoverageFigures(len(self._known_at), len(fetched), tuple(waiting), tuple(ages), tuple(parsed))
