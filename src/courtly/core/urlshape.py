"""URL shapes: what a URL looks like to the trap rules, as plain values.

Owns the reading of one URL's path and query that
`courtly.core.traps` counts and judges: its template, its query shape,
repeated path segments, the years of the dates in it and its session ids.
Nothing here keeps state or knows about hosts.

Templates: a path segment that is a number, a date, a hex id (>= 12 hex
digits, one a digit) or a UUID becomes a placeholder, digit runs inside
other segments too (``story-12.html`` -> ``story-{n}.html``); a query
becomes its sorted parameter names (``?color=*&size=*``).

Dates: /YYYY/MM/ segments, YYYY-MM(-DD), YYYYMMDD, and year=/date= style
parameters. Session ids: a parameter name with "sess" (or sid, cfid,
cftoken, oscsid, zenid, xtcsid), s=<32+ hex>, a ;jsessionid= style path
parameter, an ASP.NET ``/(S(...))`` segment.

Rules: pure functions of their arguments, no state; no validation (the
guard sees URLs that were parsed and normalised before).
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "dates_out_of_range",
    "path_query",
    "path_template",
    "query_shape",
    "query_template",
    "repeated_run",
    "url_template",
    "without_session",
    "years",
]

_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.I)
_HEX_ID = re.compile(r"(?=[^/]*\d)[0-9a-f]{12,}", re.I)
_ISO_DATE = re.compile(r"(\d{4})-(\d{1,2})(?:-(\d{1,2}))?")
_COMPACT_DATE = re.compile(r"(?<!\d)(\d{4})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?!\d)")
_DIGITS = re.compile(r"\d+")
_ANY_DIGIT = re.compile(r"\d")
_FOUR_DIGITS = re.compile(r"\d{4}")
_YEAR_PARAM = re.compile(r"(?:^|&)[^=&]*(?:year|yr|date|day|month)[^=&]*=(\d{4})(?!\d)", re.I)
_SESSION_NAME = re.compile(r"sess|^sid$|sessid|^cfid$|^cftoken$|^oscsid$|^zenid$|^xtcsid$", re.I)
_HEX32 = re.compile(r"[0-9a-f]{32,}", re.I)
_PATH_SESSION = re.compile(r";(?:jsessionid|phpsessid|sid|sessionid)=[^/?;]*", re.I)
_ASPNET_SESSION = re.compile(r"/\([A-Z]\([^)/]{8,}\)\)", re.I)
_ID_CHARS = "0123456789abcdefABCDEF-"   # all an ASCII number, UUID, hex id or date is made of


def url_template(path: str, query: str = "") -> str:
    """The path's shape with ids replaced by placeholders, plus the sorted
    query parameter names: ``/news/2024/05/story-12.html?page=3`` ->
    ``/news/{n}/{n}/story-{n}.html?page=*``."""
    return path_template(path.split("/")) + query_template(query)


def path_template(segments: list[str]) -> str:
    """`url_template` of the path that splits on "/" into `segments`, without a query."""
    # Segments repeat (section names, slugs, file names): short ones are
    # remembered, at most 32k of at most 128 characters (~8 MB).
    return "/".join([_short_segment_template(s) if len(s) <= 128 else _shape(s) for s in segments])


def query_template(query: str) -> str:
    """The sorted parameter names, ``?a=*&b=*`` ("" without a query)."""
    if not query:
        return ""
    names = sorted({p.partition("=")[0] for p in query.split("&") if p})
    return "?" + "&".join(f"{n}=*" for n in names)


def _shape(segment: str) -> str:
    if _ANY_DIGIT.search(segment) is None:
        return segment if len(segment) <= 64 else "{long}"  # words stay (no id without a digit)
    if not segment.isascii() or not segment.strip(_ID_CHARS):   # else no number, id or date
        if segment.isdigit():
            return "{n}"
        if _UUID.fullmatch(segment):
            return "{uuid}"
        if _HEX_ID.fullmatch(segment):
            return "{hex}"
        if _ISO_DATE.fullmatch(segment) or _COMPACT_DATE.fullmatch(segment):
            return "{date}"
    if len(segment) > 64:
        return "{long}"
    return "{n}".join(_DIGITS.split(segment))   # _DIGITS.sub("{n}", segment), faster


_short_segment_template = functools.lru_cache(maxsize=1 << 15)(_shape)


def query_shape(query: str) -> str:
    """The parameter names as a sorted multiset, ``a&a&b``."""
    return "&".join(sorted(p.partition("=")[0] for p in query.split("&") if p))


def path_query(url: str) -> tuple[str, str]:
    """Path and query of an absolute URL (fragment dropped); no validation."""
    rest = url.split("#", 1)[0]
    scheme_end = rest.find("://")
    if scheme_end >= 0:
        slash = rest.find("/", scheme_end + 3)
        question = rest.find("?", scheme_end + 3)
        if slash < 0 or (0 <= question < slash):
            rest = "/" + (rest[question:] if question >= 0 else "")
        else:
            rest = rest[slash:]
    path, _, query = rest.partition("?")
    return path or "/", query


def repeated_run(segments: list[str], times: int) -> tuple[str, int] | None:
    """The first segment or pair of segments repeated `times` times in a row
    (a/a/a, a/b/a/b/a/b) and the index where the run starts; None if none."""
    n = len(segments)
    if n < times:
        return None
    for width in (1, 2):
        for i in range(n - width * times + 1):
            unit = segments[i : i + width]
            if width == 2 and unit[0] == unit[1]:
                continue
            if all(segments[i + r * width : i + (r + 1) * width] == unit for r in range(1, times)):
                return "/".join(unit), i
    return None


def years(path: str, query: str) -> list[int]:
    """Years of the dates in a path and query: /YYYY/MM/ segments,
    YYYY-MM(-DD), YYYYMMDD, and year=/date= style parameters."""
    years = []
    segments = path.split("/")
    for a, b in zip(segments, segments[1:]):
        if len(a) == 4 and a.isdigit() and b.isdigit() and len(b) <= 2 and 1 <= int(b) <= 12:
            years.append(int(a))
    for text in (path, query):
        for m in _ISO_DATE.finditer(text):
            if 1 <= int(m.group(2)) <= 12:
                years.append(int(m.group(1)))
        years.extend(int(m.group(1)) for m in _COMPACT_DATE.finditer(text))
    years.extend(int(m.group(1)) for m in _YEAR_PARAM.finditer(query))
    return years


def dates_out_of_range(path: str, query: str, year_min: int, year_max: int) -> bool:
    if _FOUR_DIGITS.search(path) is None and _FOUR_DIGITS.search(query) is None:
        return False
    return any(y < year_min or y > year_max for y in years(path, query))


def without_session(path: str, query: str) -> str | None:
    """path?query without its session ids, or None when it carries none."""
    found = False
    if ";" in path:
        stripped = _PATH_SESSION.sub("", path)
        found, path = found or stripped != path, stripped
    if "(" in path:
        stripped = _ASPNET_SESSION.sub("", path)
        found, path = found or stripped != path, stripped
    kept = []
    for pair in query.split("&") if query else ():
        name, _, value = pair.partition("=")
        if _SESSION_NAME.search(name) or (name.lower() == "s" and _HEX32.fullmatch(value)):
            found = True
        else:
            kept.append(pair)
    if not found:
        return None
    return path + ("?" + "&".join(kept) if kept else "")
