"""Change hints: sitemaps (urlset, sitemapindex), RSS 2.0 and Atom feeds.

Theory of operation
-------------------
A site may say what changed: `<lastmod>` in a sitemap (W3C datetime), an RSS
item's `<pubDate>` (RFC 822 date) or an Atom entry's `<updated>` (RFC 3339).
`parse_sitemap` and `parse_feed` turn a body into frozen values; `hints_from`
flattens either into `Hint(url, lastmod_at)`; `raise_priority` hands a hint to
the recrawl scheduler, which makes the URL due as soon as its minimum interval
allows when the hint is newer than the last fetch (and stops trusting a host
whose hints rarely meant a change). Sitemap locations from robots.txt are
collected by the robots parser; `sitemap_locations` only cleans that list.

Hostile input: a gzip body (detected by its magic bytes, not by a header or a
file name) is inflated with a cap on the output (`bytes_max`, 50 MiB like
the sitemap protocol); a document with a DOCTYPE or an ENTITY declaration is
refused before parsing, so no entity is ever expanded (billion laughs,
external entities); parsing is incremental and stops at `entries_max`
(50,000) entries (`truncated`); any XML error ends in a value with `error`
set, never an exception. Dates that do not parse become None.

Rules: pure (zlib and the expat parser are computation); no I/O.
"""

from __future__ import annotations

import datetime
import email.utils
import functools
import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator
from xml.etree.ElementTree import Element, XMLPullParser

if TYPE_CHECKING:  # types only: the scheduler's module does not import this one
    from courtly.core.changerate import ChangeHistory
    from courtly.core.recrawl import RecrawlScheduler

__all__ = [
    "HintError", "SitemapEntry", "Sitemap", "FeedEntry", "Feed", "Hint", "inflate", "parse_w3c_datetime",
    "parse_sitemap", "parse_feed", "hints_from", "sitemap_locations", "is_newer", "raise_priority",
    "named_like_hints", "BYTES_MAX", "ENTRIES_MAX",
]

BYTES_MAX = 50 * 1024 * 1024
ENTRIES_MAX = 50_000
URL_LENGTH_MAX = 2048
_CHUNK = 64 * 1024
_DECL = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)
_ROOT = re.compile(rb"<[A-Za-z_]")               # the root element: a DTD must come before it
_W3C = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"\s*(Z|z|[+-]\d{2}(?::?\d{2})?)?)?)?)?", re.ASCII)


class HintError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    loc: str
    lastmod_at: float | None = None


@dataclass(frozen=True, slots=True)
class Sitemap:
    kind: str                                 # "urlset", "sitemapindex" or "invalid"
    urls: tuple[SitemapEntry, ...] = ()       # urlset: pages
    sitemaps: tuple[SitemapEntry, ...] = ()   # sitemapindex: child sitemaps to fetch
    truncated: bool = False
    error: str = ""


@dataclass(frozen=True, slots=True)
class FeedEntry:
    url: str
    updated_at: float | None = None


@dataclass(frozen=True, slots=True)
class Feed:
    kind: str                                 # "rss", "atom" or "invalid"
    entries: tuple[FeedEntry, ...] = ()
    truncated: bool = False
    error: str = ""


@dataclass(frozen=True, slots=True)
class Hint:
    url: str
    lastmod_at: float
    source: str = ""                          # "sitemap", "rss", "atom"


# ---- bytes and dates ---------------------------------------------------------------

def inflate(body: bytes, bytes_max: int = BYTES_MAX) -> bytes:
    """The body, gunzipped when it starts with the gzip magic; HintError past `bytes_max`."""
    if not body.startswith(b"\x1f\x8b"):
        if len(body) > bytes_max:
            raise HintError(f"body larger than {bytes_max} bytes")
        return body
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, bytes_max + 1)
    except zlib.error as exc:
        raise HintError(f"bad gzip: {exc}") from None
    if len(out) > bytes_max or d.unconsumed_tail:
        raise HintError(f"inflates past {bytes_max} bytes")
    return out


def parse_w3c_datetime(text: str | None) -> float | None:
    """W3C datetime (YYYY, YYYY-MM, YYYY-MM-DD, with time and zone) -> epoch seconds."""
    if not text:
        return None
    return _w3c_cached(text) if len(text) <= 64 else _w3c_datetime(text)


# A sitemap repeats its dates, and parsing one is not free; only short texts are
# kept (a date is ~35 characters at most; an element's text can be megabytes).
@functools.lru_cache(maxsize=4096)
def _w3c_cached(text: str) -> float | None:
    return _w3c_datetime(text)


def _w3c_datetime(text: str) -> float | None:
    m = _W3C.fullmatch(text.strip())
    if m is None:
        return None
    y, mo, d, hh, mm, ss, frac, tz = m.groups()
    try:
        tzinfo = datetime.timezone.utc
        if tz and tz not in ("Z", "z"):
            sign = -1 if tz[0] == "-" else 1
            digits = tz[1:].replace(":", "")
            offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
            tzinfo = datetime.timezone(sign * offset)
        dt = datetime.datetime(int(y), int(mo or 1), int(d or 1), int(hh or 0), int(mm or 0),
                               int(ss or 0), int((frac or "0")[:6].ljust(6, "0")), tzinfo=tzinfo)
    except (ValueError, OverflowError):
        return None
    return dt.timestamp()


def _rfc822(text: str | None) -> float | None:
    if not text:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


def _any_date(text: str | None) -> float | None:
    return parse_w3c_datetime(text) if text and text.strip()[:1].isdigit() else _rfc822(text)


# ---- XML ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)   # a document repeats a few tags
def _local(tag: str) -> str:
    return tag[tag.rfind("}") + 1:]


def _url(text: str | None) -> str | None:
    if not text:
        return None
    u = text.strip()
    if not u or len(u) > URL_LENGTH_MAX or not u.lower().startswith(("http://", "https://")):
        return None
    return u


def _events(body: bytes, bytes_max: int) -> Iterator[Any]:  # (event, Element): only start and end asked
    """Yield (event, element) from a size-capped, DTD-free document (HintError otherwise)."""
    data = inflate(body, bytes_max)
    if b"\x00" in data[:1024]:  # UTF-16/32 would hide a DOCTYPE from the byte check
        raise HintError("only UTF-8 (ASCII-compatible) documents are parsed")
    root = _ROOT.search(data)
    if _DECL.search(data, 0, root.start() if root else len(data)):
        raise HintError("DOCTYPE/ENTITY declarations are refused")
    parser: XMLPullParser[Element] = XMLPullParser(events=("start", "end"))
    try:
        for at in range(0, len(data), _CHUNK):
            parser.feed(data[at:at + _CHUNK])
            yield from parser.read_events()
        parser.close()
        yield from parser.read_events()
    except SyntaxError as exc:  # ParseError
        raise HintError(f"XML: {exc}") from None
    except LookupError as exc:  # an encoding="..." that Python's codecs do not have as text
        raise HintError(f"XML: {exc}") from None


def parse_sitemap(body: bytes, *, bytes_max: int = BYTES_MAX, entries_max: int = ENTRIES_MAX) -> Sitemap:
    """A sitemap (urlset) or a sitemap index; never raises."""
    kind, found, truncated = "", [], False
    try:
        for ev, el in _events(body, bytes_max):
            if ev == "start":
                if not kind:
                    kind = _local(el.tag)
                    if kind not in ("urlset", "sitemapindex"):
                        return Sitemap("invalid", error=f"root element <{kind}> is not a sitemap")
                continue
            if _local(el.tag) in ("url", "sitemap"):
                kids = {_local(c.tag): (c.text or "") for c in el}
                loc = _url(kids.get("loc"))
                if loc is not None:
                    found.append(SitemapEntry(loc, parse_w3c_datetime(kids.get("lastmod"))))
                    if len(found) >= entries_max:
                        truncated = True
                        break
                el.clear()
    except HintError as exc:
        return Sitemap("invalid", error=str(exc))
    if not kind:
        return Sitemap("invalid", error="empty document")
    if kind == "urlset":
        return Sitemap(kind, urls=tuple(found), truncated=truncated)
    return Sitemap(kind, sitemaps=tuple(found), truncated=truncated)


def _atom_link(el: Element) -> str | None:
    for c in el:
        if _local(c.tag) == "link" and c.get("rel", "alternate") == "alternate":
            return _url(c.get("href"))
    return None


def parse_feed(body: bytes, *, bytes_max: int = BYTES_MAX, entries_max: int = ENTRIES_MAX) -> Feed:
    """RSS 2.0 items (link, pubDate) or Atom entries (alternate link, updated); never raises."""
    kind, found, truncated = "", [], False
    try:
        for ev, el in _events(body, bytes_max):
            tag = _local(el.tag)
            if ev == "start":
                if not kind:
                    kind = {"rss": "rss", "feed": "atom"}.get(tag, "")
                    if not kind:
                        return Feed("invalid", error=f"root element <{tag}> is not RSS or Atom")
                continue
            if (kind, tag) not in (("rss", "item"), ("atom", "entry")):
                continue
            kids: dict[str, str] = {}
            for c in el:
                kids.setdefault(_local(c.tag), c.text or "")
            if kind == "rss":
                url = _url(kids.get("link")) or (_url(kids.get("guid")))
                when = _any_date(kids.get("updated") or kids.get("date") or kids.get("pubDate"))
            else:
                url = _atom_link(el)
                when = parse_w3c_datetime(kids.get("updated") or kids.get("published"))
            if url is not None:
                found.append(FeedEntry(url, when))
                if len(found) >= entries_max:
                    truncated = True
                    break
            el.clear()
    except HintError as exc:
        return Feed("invalid", error=str(exc))
    if not kind:
        return Feed("invalid", error="empty document")
    return Feed(kind, tuple(found), truncated)


# ---- using hints -----------------------------------------------------------------------

def hints_from(body: bytes, *, bytes_max: int = BYTES_MAX, entries_max: int = ENTRIES_MAX) -> list[Hint]:
    """Dated page hints from a urlset sitemap or a feed (an index yields none: fetch its children)."""
    sm = parse_sitemap(body, bytes_max=bytes_max, entries_max=entries_max)
    if sm.kind == "urlset":
        return [Hint(e.loc, e.lastmod_at, "sitemap") for e in sm.urls if e.lastmod_at is not None]
    if sm.kind == "sitemapindex":
        return []
    feed = parse_feed(body, bytes_max=bytes_max, entries_max=entries_max)
    return [Hint(e.url, e.updated_at, feed.kind) for e in feed.entries if e.updated_at is not None]


_HINT_SUFFIXES = (".xml", ".xml.gz", ".rss", ".atom")


def named_like_hints(url: str) -> bool:
    """The URL's path names a sitemap or feed (``.xml``, ``.xml.gz``, ``.rss``,
    ``.atom``, any case): what a crawler can tell before fetching it."""
    return url.split("?", 1)[0].split("#", 1)[0].lower().endswith(_HINT_SUFFIXES)


def sitemap_locations(lines: Iterable[str], limit: int = 100) -> list[str]:
    """robots.txt Sitemap values: absolute http(s) URLs, first occurrence, at most `limit`."""
    out: dict[str, None] = {}
    for line in lines:
        u = _url(line)
        if u is not None:
            out.setdefault(u)
            if len(out) >= limit:
                break
    return list(out)


def is_newer(history: ChangeHistory, lastmod_at: float | None) -> bool:
    """True when a hint's lastmod is after the last fetch (or the URL was never fetched)."""
    if lastmod_at is None:
        return False
    last = history.last_fetched_at
    return last is None or lastmod_at > last


def raise_priority(scheduler: RecrawlScheduler, hint: Hint, now: float, skew_s: float = 300.0) -> bool:
    """Give a hint to a `RecrawlScheduler`; lastmods in the future (beyond `skew_s`) are ignored."""
    if hint.url not in scheduler or hint.lastmod_at > now + skew_s:
        return False
    if not is_newer(scheduler.history(hint.url), hint.lastmod_at):
        return False
    return scheduler.hint(hint.url, min(hint.lastmod_at, now), now)
