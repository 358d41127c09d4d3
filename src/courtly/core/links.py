"""Links on an HTML page: what a fetched page points to, and what it allows.

`extract_links(body, url, ...)` turns raw bytes into a `PageLinks` value: the
outgoing links (absolute, resolved, *not* normalised: the caller normalises
and records a Decision for each one it drops), the canonical URL, the
page-level robots directives (meta robots and the X-Robots-Tag header) and
the title. Pure: no I/O, no clock, never raises on any input.

How it works

1. HTML only: Content-Type text/html or application/xhtml+xml, or, when the
   type is missing, ``<html`` / ``<!doctype html`` in the first 1 KiB.
2. Decode: a BOM wins, then the Content-Type charset, then ``<meta charset>``
   (or http-equiv) in the first 2 KiB, else UTF-8; undecodable bytes become
   U+FFFD; unknown, binary (base64, rot13) or dangerous (utf-7) labels are
   ignored. Labels map as browsers do (latin-1 and ascii read as cp1252).
3. Parse with selectolax's Lexbor engine (`LexborHTMLParser`, DOM mutation
   events off). The Modest engine (`selectolax.parser.HTMLParser`) is the
   fallback on old selectolax, which is where both were to be measured: with
   the installed selectolax 1.0.2 Modest is removed (importing it raises), so
   Lexbor is the only choice. Past the parse, most of the extraction's CPU
   is per-link Python (clean, resolve, de-duplicate); the figures are in
   docs/performance.md.
4. One CSS query in document order: ``a[href]``, ``area[href]``, ``link[href]``
   (rel canonical, alternate, next, prev), ``meta`` (robots, refresh),
   ``title`` and ``base[href]``. The first ``<base href>`` resolves every
   relative link, also those before it.
5. Links are de-duplicated by their resolved URL keeping the first occurrence
   (its position and kind); it is nofollow only if *every* occurrence is, so a
   nofollowed comment link cannot hide the same URL in the navigation. At most
   `links_max` distinct links are kept.

Hostile input

Lexbor's tree builder scans the stack of open elements on many tags, so deep
nesting costs time quadratic in the depth (20,000 nested ``<div>``: ~0.5-2 s;
100,000: ~15-50 s). A page with more than `TAGS_FAST_MAX` tags gets a cheap
estimate of its nesting depth first; past `DEPTH_MAX` only the link-bearing
tags (a, area, link, meta, base, title) are cut out with a linear regex and
parsed on their own, flat, and ``error`` says so. Memory is ~400 bytes of
parser tree per element (a 10 MB page of bare tags needs ~0.5 GB): the
sandboxed pool (shell/extract.py) bounds it.

Rules: ``Link.nofollow`` is the link's own rel (nofollow, ugc, sponsored);
page-level nofollow is ``PageLinks.nofollow`` and the caller applies both.
Skipped silently (they are not crawlable URLs): empty and fragment-only
hrefs, and javascript:, mailto:, tel:, data:. Any other scheme is returned so
the caller's scheme filter records a Decision. Kind ``redirect`` is never
produced here: it is for the fetcher's Location header.
"""

from __future__ import annotations

import codecs
import functools
import re
from dataclasses import dataclass
from itertools import starmap
from typing import Any, Callable

from courtly.core.href import Resolver as _Resolver
from courtly.core.href import clean_href as _clean_href
from courtly.core.href import refresh_target as _refresh_target

_count_over_native: Callable[[str, str, int], bool] | None
_link_anchors: Callable[..., int] | None
try:  # compiled helpers (src/courtly/core/_speedups.c); optional
    from courtly.core._speedups import count_over as _count_over_native
    from courtly.core._speedups import link_anchors as _link_anchors
except ImportError:  # pragma: no cover - built without a C compiler, or stale
    _count_over_native = _link_anchors = None

try:
    from selectolax.lexbor import LexborHTMLParser as _Parser
except ImportError:  # pragma: no cover - selectolax without Lexbor
    from selectolax.parser import HTMLParser as _Parser  # type: ignore[attr-defined,no-redef]

try:
    from selectolax.lexbor import LexborDocumentOptions as _Options

    _PARSE_OPTIONS: dict[str, Any] = {"options": int(_Options.WO_EVENTS)}
except (ImportError, AttributeError):  # pragma: no cover - older selectolax
    _PARSE_OPTIONS = {}

__all__ = [
    "Link",
    "PageLinks",
    "ExtractFailed",
    "ParsedHtml",
    "LINK_KINDS",
    "decode_html",
    "extract_links",
    "is_html",
    "link_fields",
    "nesting_depth",
    "parse_html",
]

LINK_KINDS = ("a", "area", "canonical", "alternate", "next", "prev", "refresh", "redirect")
SNIFF_BYTES = 1024           # look for <html / <!doctype html this far
CHARSET_SCAN_BYTES = 2048    # look for <meta charset> this far
TITLE_CHARS_MAX = 1024
TAGS_FAST_MAX = 8_192        # at most this many '<': nesting cannot cost much
DEPTH_MAX = 4_096            # deeper (estimated) than this: flat fallback parse


@dataclass(frozen=True, slots=True)
class Link:
    """One outgoing link: absolute and resolved, not normalised."""

    url: str
    kind: str        # one of LINK_KINDS
    nofollow: bool   # the link's own rel=nofollow|ugc|sponsored


@dataclass(frozen=True, slots=True)
class PageLinks:
    """What one page links to and what it allows (see module docstring)."""

    links: tuple[Link, ...] = ()
    canonical: str | None = None
    noindex: bool = False
    nofollow: bool = False      # page level: meta robots or X-Robots-Tag
    base: str | None = None     # the <base href> in effect, resolved
    title: str | None = None
    error: str | None = None    # why the result is empty or degraded
    # (SimHash of the main text, soft-404 fingerprint), when the extraction
    # worker computed them beside the links (see runtime/budget.py); the
    # soft-404 half is None when the caller said the host is not soft
    prints: tuple[int, int | None] | None = None


@dataclass(frozen=True, slots=True)
class ExtractFailed:
    """Extraction of `url` killed or hung its sandbox `attempts` times.

    Returned by the extract pool (shell/extract.py); the caller writes a
    dead-letter record. Lives here so the runtime need not import the shell.
    """

    url: str
    reason: str
    attempts: int


# -- content type and charset ------------------------------------------------

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_CHARSET_PARAM = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_.:+-]{1,40})""", re.I)
_META_CHARSET = re.compile(
    rb"""<meta\b[^<>]{0,512}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:+-]{1,40})""", re.I
)
_LABELS = {  # WHATWG Encoding Standard aliases where Python's codec differs
    "iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252",
    "latin-1": "cp1252", "l1": "cp1252", "ascii": "cp1252", "us-ascii": "cp1252",
    "iso-8859-9": "cp1254", "latin5": "cp1254", "tis-620": "cp874",
    "iso-8859-11": "cp874", "gb2312": "gb18030", "gbk": "gb18030",
    "x-gbk": "gb18030", "euc-kr": "cp949", "ks_c_5601-1987": "cp949",
    "shift_jis": "cp932", "sjis": "cp932", "x-sjis": "cp932",
    "windows-31j": "cp932", "big5": "big5hkscs", "x-user-defined": "cp1252",
}
_CODECS_REFUSED = frozenset({
    "utf-7", "unicode-escape", "raw-unicode-escape", "idna", "punycode",
    "undefined", "mbcs", "oem", "palmos",
})


def is_html(body: bytes, content_type: str) -> bool:
    """True when the page is HTML by its type, or by sniffing when untyped."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media:
        return media in _HTML_TYPES
    head = body[:SNIFF_BYTES].lower()
    return b"<html" in head or b"<!doctype html" in head


def _codec(label: str, *, from_meta: bool) -> str | None:
    label = label.strip().strip("\"'").lower()
    if not label:
        return None
    if from_meta and label.startswith(("utf-16", "utf16", "unicode")):
        return "utf-8"  # a page that can declare this in ASCII is not UTF-16
    label = _LABELS.get(label, label)
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError, TypeError):
        return None
    if not getattr(info, "_is_text_encoding", True):
        return None  # base64, rot13, zlib ...
    if info.name.replace("_", "-") in _CODECS_REFUSED:
        return None
    return info.name


def decode_html(body: bytes, content_type: str) -> str:
    """The page's text: BOM, then the Content-Type charset, then <meta
    charset> in the first `CHARSET_SCAN_BYTES`, else UTF-8 (module docstring,
    step 2); never raises, undecodable bytes become U+FFFD."""
    return _decode(body, content_type)[0]


def _decode(body: bytes, content_type: str) -> tuple[str, bool]:
    """`decode_html`, and whether `body` is the text's UTF-8, byte for byte
    (valid UTF-8 without a BOM, read as UTF-8)."""
    if body.startswith(b"\xef\xbb\xbf"):
        return body[3:].decode("utf-8", "replace"), False
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return body[2:].decode("utf-16-le" if body[0] == 0xFF else "utf-16-be", "replace"), False
    codec = _content_type_codec(content_type)
    if codec is None:
        match = _META_CHARSET.search(body[:CHARSET_SCAN_BYTES])
        if match:
            codec = _codec(match.group(1).decode("ascii", "replace"), from_meta=True)
    if codec in (None, "utf-8"):
        try:
            return body.decode("utf-8"), True
        except UnicodeDecodeError:
            return body.decode("utf-8", "replace"), False
    try:
        return body.decode(codec, "replace"), False
    except Exception:  # a codec that fails even with errors="replace"
        return body.decode("utf-8", "replace"), False


@functools.lru_cache(maxsize=256)
def _content_type_codec(content_type: str) -> str | None:
    """The codec of the Content-Type's charset, if any and usable (a crawl
    sees few distinct Content-Types: remembered)."""
    match = _CHARSET_PARAM.search(content_type)
    return _codec(match.group(1), from_meta=False) if match else None


# -- hostile nesting -----------------------------------------------------------

_TAG = re.compile(r"<(/?)([A-Za-z][^\s/<>]{0,31})")
_FLAT = frozenset(  # void or implicitly closed: they do not deepen the stack
    "area base br col embed hr img input link meta param source track wbr keygen "
    "p li dt dd option optgroup tr td th rb rt rp rtc tbody thead tfoot colgroup "
    "caption html head body frame image a nobr".split()
)
_LINK_TAGS = re.compile(
    r"<(?:a|area|link|meta|base)\b[^<>]{0,8192}>|<title\b[^<>]{0,1024}>[^<]{0,%d}"
    % TITLE_CHARS_MAX,
    re.I,
)


def nesting_depth(text: str) -> int:
    """Estimated peak depth of the open-element stack (a cheap model)."""
    open_count: dict[str, int] = {}
    depth = peak = 0
    for close, name in _TAG.findall(text):
        name = name.lower()
        if name in _FLAT:
            continue
        if close:
            count = open_count.get(name, 0)
            if count:
                open_count[name] = count - 1
                depth -= 1
        else:
            open_count[name] = open_count.get(name, 0) + 1
            depth += 1
            if depth > peak:
                peak = depth
    return peak


def _flatten(text: str) -> str:
    """Only the link-bearing tags of `text`, side by side (linear time)."""
    tags = _LINK_TAGS.findall(text)
    return "\n".join(t + "</title>" if t[:6].lower() == "<title" else t for t in tags)


# -- robots directives ---------------------------------------------------------

_TOKENS = re.compile(r"[\s,]+")
_UA_TOKEN = re.compile(r"[a-z0-9_.*-]{1,64}")
_DIRECTIVES_WITH_VALUE = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


def _directives(tokens: list[str]) -> tuple[bool, bool]:
    noindex = "noindex" in tokens or "none" in tokens
    nofollow = "nofollow" in tokens or "none" in tokens
    return noindex, nofollow


def _x_robots(header: str, ua: str) -> tuple[bool, bool]:
    """X-Robots-Tag: `noindex, nofollow` or `courtly: noindex`; other UAs ignored.

    A UA prefix scopes the directives after it up to the next prefix or line.
    """
    noindex = nofollow = False
    for line in header.lower().splitlines():
        scope: str | None = None
        for part in line.split(","):
            name, colon, rest = part.partition(":")
            name = name.strip()
            if colon:
                if name in _DIRECTIVES_WITH_VALUE or not _UA_TOKEN.fullmatch(name):
                    continue
                scope, name = name, rest.strip()
            if scope is not None and scope != ua:
                continue
            a, b = _directives([name])
            noindex, nofollow = noindex or a, nofollow or b
    return noindex, nofollow


# -- hrefs -----------------------------------------------------------------------

_LINK_RELS = ("canonical", "next", "prev", "alternate")  # priority when several
_NOFOLLOW_RELS = frozenset({"nofollow", "ugc", "sponsored"})


# -- extraction ------------------------------------------------------------------

_SELECTOR = "a[href], area[href], link[href], meta, title, base[href]"


class _Scan:
    """One pass over a page's link-bearing elements, in document order.

    Links are de-duplicated by URL keeping the first occurrence; a URL is
    nofollow only if every occurrence is. At most `links_max` are kept.
    """

    __slots__ = ("resolve", "ua", "links_max", "links", "index", "full",
                 "canonical", "noindex", "nofollow", "title")

    def __init__(self, resolve: _Resolver, ua: str, links_max: int, noindex: bool, nofollow: bool) -> None:
        self.resolve = resolve
        self.ua = ua
        self.links_max = links_max
        self.links: list[tuple[str, str, bool]] = []   # (url, kind, nofollow) of each Link
        self.index: dict[str, int] = {}
        self.full = links_max <= 0
        self.canonical: str | None = None
        self.noindex = noindex
        self.nofollow = nofollow
        self.title: str | None = None

    def add(self, url: str, kind: str, nofollow: bool) -> None:
        at = self.index.get(url)
        if at is None:
            if not self.full:
                self.index[url] = len(self.links)
                self.links.append((url, kind, nofollow))
                self.full = len(self.links) >= self.links_max
        elif not nofollow and self.links[at][2]:
            self.links[at] = (url, self.links[at][1], False)

    def anchor(self, tag: str, attrs: dict[str, str | None]) -> None:
        href = _clean_href(attrs.get("href"))
        target = self.resolve(href) if href else None
        if target:
            rels = (attrs.get("rel") or "").lower().split()
            self.add(target, tag, not _NOFOLLOW_RELS.isdisjoint(rels))

    def link(self, attrs: dict[str, str | None]) -> None:
        rels = (attrs.get("rel") or "").lower().split()
        kind = next((k for k in _LINK_RELS if k in rels), None)
        href = _clean_href(attrs.get("href")) if kind else None
        target = self.resolve(href) if href else None
        if kind and target:
            if kind == "canonical" and self.canonical is None:
                self.canonical = target
            self.add(target, kind, not _NOFOLLOW_RELS.isdisjoint(rels))

    def meta(self, attrs: dict[str, str | None]) -> None:
        name = (attrs.get("name") or "").strip().lower()
        if name == "robots" or (name and name == self.ua):
            noindex, nofollow = _directives(_TOKENS.split((attrs.get("content") or "").lower()))
            self.noindex = self.noindex or noindex
            self.nofollow = self.nofollow or nofollow
        elif (attrs.get("http-equiv") or "").strip().lower() == "refresh":
            href = _clean_href(_refresh_target(attrs.get("content")))
            target = self.resolve(href) if href else None
            if target:
                self.add(target, "refresh", False)


def extract_links(
    body: bytes,
    url: str,
    *,
    content_type: str = "",
    x_robots_tag: str = "",
    user_agent_token: str = "courtly",
    links_max: int = 5000,
    parsed: ParsedHtml | None = None,
) -> PageLinks:
    """Links, canonical, robots directives and title of one fetched page.

    Never raises on any input; a failure is reported in ``error`` with what
    was found before it. MemoryError alone propagates: it is the machine's
    state, not the page's, and the sandbox recycles its worker on it.
    `parsed` is ``parse_html(body, content_type)`` when the caller parsed
    the page already (to share the parse with `main_text`); it is only read.
    """
    links, *fields = link_fields(body, url, content_type=content_type, x_robots_tag=x_robots_tag,
                                 user_agent_token=user_agent_token, links_max=links_max, parsed=parsed)
    return PageLinks(tuple(starmap(Link, links)), *fields)


def link_fields(
    body: bytes,
    url: str,
    *,
    content_type: str = "",
    x_robots_tag: str = "",
    user_agent_token: str = "courtly",
    links_max: int = 5000,
    parsed: ParsedHtml | None = None,
) -> tuple[Any, ...]:
    """`extract_links` as plain values: the fields of its `PageLinks` in
    order, but `prints`, each link a ``(url, kind, nofollow)`` tuple. For the
    extract worker, which sends them as such (it built Link objects only to
    take them apart again; the same fields by
    test_links_resolve.py::test_link_fields_are_extract_links_as_plain_values)."""
    noindex = nofollow = False
    try:
        ua = user_agent_token.strip().lower()
        noindex, nofollow = _x_robots(x_robots_tag or "", ua)
        if not is_html(body, content_type or ""):
            return ((), None, noindex, nofollow, None, None, None)
        if parsed is None:
            parsed = parse_html(bytes(body), content_type or "")
        return _extract(parsed, url, ua, max(0, links_max), noindex, nofollow)
    except MemoryError:
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
        return ((), None, noindex, nofollow, None, None, error)


@dataclass(frozen=True, slots=True)
class ParsedHtml:
    """A page decoded and parsed once, for `extract_links` and then
    `courtly.core.maintext.main_text` (which edits the tree: it goes last)."""

    text: str            # the decoded page (`decode_html`)
    tree: Any            # Lexbor tree of `text`, or of its link tags alone when `flat`
    flat: bool           # hostile nesting: `tree` holds only the link tags
    error: str | None    # why the tree is flat


def parse_html(body: bytes, content_type: str = "") -> ParsedHtml:
    """Decode and parse `body`; flat when the nesting is hostile (see module
    docstring). May raise on garbage: `extract_links` reports it."""
    text, whole_utf8 = _decode(body, content_type)
    if _count_over(text, "<", TAGS_FAST_MAX):
        depth = nesting_depth(text)
        if depth > DEPTH_MAX:
            error = f"nesting depth ~{depth} > {DEPTH_MAX}: parsed link tags only"
            return ParsedHtml(text, _Parser(_flatten(text), **_PARSE_OPTIONS), True, error)
    # when `body` is the text's UTF-8 byte for byte, the parser takes it as
    # it is instead of encoding the text again (the same links and text by
    # test_speedups_worker.py::test_link_fields_and_main_text_are_the_same_when_parsed_from_the_text)
    source = body if whole_utf8 and type(body) is bytes else text
    return ParsedHtml(text, _Parser(source, **_PARSE_OPTIONS), False, None)


def _count_over_py(text: str, char: str, limit: int) -> bool:
    return text.count(char) > limit


# the same in C when built: memchr, stopping past the limit (equal by
# test_speedups_worker.py::test_native_count_over_is_str_count)
_count_over = _count_over_py if _count_over_native is None else _count_over_native


def _base(nodes: list[Any], url: str) -> str | None:
    """The first <base href> among `nodes`, resolved against the page URL,
    if http(s). `nodes` come from the page's one CSS query: a second query
    for ``base[href]`` alone walked the whole tree again)."""
    node = next((n for n in nodes if n.tag == "base"), None)
    href = _clean_href(node.attributes.get("href")) if node is not None else None
    resolved = _Resolver(url)(href) if href else None
    if resolved and resolved.split(":", 1)[0].lower() in ("http", "https"):
        return resolved
    return None


def _extract(parsed: ParsedHtml, url: str, ua: str, links_max: int, noindex: bool,
             nofollow: bool) -> tuple[Any, ...]:
    tree, error = parsed.tree, parsed.error
    nodes = tree.css(_SELECTOR)
    base = _base(nodes, url)
    resolver = _Resolver(base or url)
    scan = _Scan(resolver, ua, links_max, noindex, nofollow)
    # the compiled scan takes each run of a/area nodes and hands the anchors
    # it does not take in full to scan.anchor (the same links by
    # test_speedups_worker.py::test_native_anchor_scan_is_the_python_scan)
    native = _link_anchors if resolver.fast and type(nodes) is list else None
    fast_base = (resolver.scheme, resolver.origin, resolver.directory) if native is not None else None
    at, count = 0, len(nodes)
    while at < count:
        if native is not None:
            at = native(nodes, at, scan.links, scan.index, links_max, fast_base, scan.anchor)
            scan.full = len(scan.links) >= links_max
            if at >= count:
                break
        node = nodes[at]
        at += 1
        tag = node.tag
        if tag == "a" or tag == "area":
            if not scan.full:
                scan.anchor(tag, node.attributes)
        elif tag == "link":
            scan.link(node.attributes)
        elif tag == "meta":
            scan.meta(node.attributes)
        elif tag == "title":
            if scan.title is None:
                scan.title = " ".join(node.text(deep=True).split())[:TITLE_CHARS_MAX]
    return (tuple(scan.links), scan.canonical, scan.noindex, scan.nofollow, base, scan.title, error)
