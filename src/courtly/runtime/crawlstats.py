"""The counters of one crawl run (`CrawlStats`): a plain mutable record.

What it owns: the figures the engine and its collaborators count as they go
(pages, errors, bytes, decisions, retries, by reason, by failure kind), read
by the summary line, the status page and /metrics (runtime/observe.py).
Rules: counters only, no behaviour; re-exported by runtime/crawler.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CrawlStats"]


@dataclass(slots=True)
class CrawlStats:
    started_at: float = 0.0
    fetched: int = 0             # pages with a response (any status)
    robots_fetched: int = 0
    probes_fetched: int = 0      # soft-404 probes with a response or a network error
    errors: int = 0              # network errors and failures
    bytes: int = 0
    decisions: int = 0
    duplicates: int = 0          # links to already-seen URLs
    retries: int = 0
    extract_failed: int = 0
    in_flight: int = 0
    status: dict[int, int] = field(default_factory=dict)
    by_reason: dict[str, int] = field(default_factory=dict)   # discovery | recrawl | feed
    stopped_by: str = ""         # the signal that stopped the run ("SIGINT", "SIGTERM"), if one did
    seeds_refused: int = 0       # seed-stage decisions of this run (runtime/refusal)
    host_failures: dict[str, int] = field(default_factory=dict)   # by core.health.FailureKind
