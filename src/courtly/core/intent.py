"""The crawl's intent, resolved once into a profile of flags.

`crawl.intent` names what the crawl is for:

    archive   fetch every page once (discovery only): the WARC is the product
    search    keep an index fresh: discovery, then recrawl by change rate,
              with sitemap hints (a conventional /sitemap.xml is tried when
              robots.txt names none)
    monitor   watch a list of pages for changes: recrawl only, no discovery
              (links, sitemaps and feeds of a watched page queue nothing)

`profile_of(intent)` answers, as flags, the questions the runtime used to ask
by comparing the intent's string in several places, so that each is decided
in one table here.

Rules: pure; a frozen value per intent; an unknown intent is a ValueError
naming the known ones (the config rejects it earlier with the same list).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Intent", "IntentProfile", "PROFILES", "profile_of"]


class Intent(StrEnum):
    ARCHIVE = "archive"
    SEARCH = "search"
    MONITOR = "monitor"


@dataclass(frozen=True, slots=True)
class IntentProfile:
    intent: Intent
    recrawls: bool          # the recrawl scheduler runs (revisits by change rate)
    discovers: bool         # links, sitemap lines and feed entries of a fetched page are queued
    guesses_sitemap: bool   # /sitemap.xml is tried for an origin whose robots.txt names no sitemap
    watch_list: bool        # the crawl is a watch list (courtly watch): the monitor runs, no seeds needed


PROFILES: dict[Intent, IntentProfile] = {
    Intent.ARCHIVE: IntentProfile(Intent.ARCHIVE, recrawls=False, discovers=True, guesses_sitemap=False,
                                  watch_list=False),
    Intent.SEARCH: IntentProfile(Intent.SEARCH, recrawls=True, discovers=True, guesses_sitemap=True,
                                 watch_list=False),
    Intent.MONITOR: IntentProfile(Intent.MONITOR, recrawls=True, discovers=False, guesses_sitemap=False,
                                  watch_list=True),
}


def profile_of(intent: str) -> IntentProfile:
    """The profile of `intent` (a string from the config, or an Intent)."""
    try:
        return PROFILES[Intent(intent)]
    except ValueError:
        raise ValueError(f"unknown intent {intent!r} (known: {', '.join(Intent)})") from None
