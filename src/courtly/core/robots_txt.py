"""robots.txt per RFC 9309: the parser and the matcher (the per-origin
fetch state is core/robots.py's `RobotsBook`).


Why our own parser and not protego
----------------------------------
protego 0.7 was checked against RFC 9309 (tests/core/test_robots.py keeps the
evidence). It merges groups, falls back to ``*``, uses longest match with
allow winning ties and handles the 2.2.2 percent-encoding table, but:

- it does not reduce a user-agent line to its product token, so
  ``User-agent: courtly/1.0`` (or ``Courtly Bot``) does not apply to token
  ``courtly`` (RFC 9309 2.2.1 matches the product token);
- it has no parse limit (2.5 asks for one of at least 500 KiB; we need a
  bound on hostile bodies), and it works on ``str``: decoding, the BOM and
  invalid UTF-8 are left to the caller.

The matcher is about 60 lines, so we own it rather than patch around those.

Parsing (`parse_robots`)
------------------------
At most `PARSE_BYTES_MAX` (500 KiB) bytes are read; when the body is longer,
the partial last line is dropped too (a cut ``Allow: /abc`` must not become
``Allow: /a``). A UTF-8 BOM is skipped, and so is the start of one (as
Google's parser does); invalid UTF-8 survives as the raw octets
(surrogateescape), so a pattern still matches the URL's ``%XX``. Lines end at
CRLF, CR or LF; ``#`` starts a comment. A line without ``:`` is read as key
and value only when it is exactly two words (``Disallow /``: a forgotten
colon, read as Google reads it, RFC 9309 2.2.4 letting crawlers interpret
other records); any other line without ``:`` is ignored. Keys are
case-insensitive, with a few common misspellings accepted (``useragent``,
``disalow``...). A run of user-agent lines starts a group
(blank lines, comments, sitemap and unknown lines do not end the run; an
allow, disallow or crawl-delay line does). Rules before the first user-agent
are ignored. ``Sitemap`` is global; a value that is not UTF-8 keeps its raw
octets as ``%XX``. ``Crawl-delay`` (non-standard) is read per
group as a float; invalid, negative or non-finite values are ignored.

Matching (`RobotsRules.allowed`)
--------------------------------
A user-agent value is reduced to its product token (leading ``[A-Za-z_-]+``)
and compared case-insensitively with the crawler's token; ``*`` is the
fallback. All groups naming the token are merged, else all ``*`` groups; no
group means allow. Patterns and paths are brought to one form (RFC 9309
2.2.2): octets outside ASCII and ASCII that may not appear in a URI are
``%XX``-encoded, escapes of unreserved characters are decoded, other escapes
uppercased; reserved characters stay as written (a literal ``:`` does not
match ``%3A``). In paths, ``*`` and ``$`` are encoded (``%2A``/``%24``) so a
pattern's ``%2A``/``%24`` matches them literally (2.2.3); in patterns ``*`` is
a wildcard and a final ``$`` anchors (a ``$`` elsewhere is literal). A
disallow pattern not starting with ``/`` or ``*`` gets a ``/`` prepended
(stricter than ignoring it); such an allow pattern is dropped, as written it
matches no path (matching starts at the path's first octet, a ``/``) and a
``/`` would widen what the file allows. The longest matching pattern
(octets, after normalisation) wins; allow wins a tie; empty patterns match
nothing; ``/robots.txt`` is always allowed. Matching is greedy and linear,
with no regular expressions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from courtly.core.urls import escape_raw_octets

__all__ = [
    "PARSE_BYTES_MAX", "REDIRECTS_MAX", "CACHE_S_MAX", "SITEMAPS_MAX", "RobotsRule", "RobotsGroup",
    "RobotsRules", "ALLOW_ALL", "DISALLOW_ALL", "parse_robots", "product_token", "is_product_token",
    "robots_allowed",
]

PARSE_BYTES_MAX = 512_000          # RFC 9309 2.5: at least 500 KiB
REDIRECTS_MAX = 5                  # RFC 9309 2.3.1.2
CACHE_S_MAX = 86_400.0             # RFC 9309 2.4: not longer than 24 h
SITEMAPS_MAX = 1_000

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_LITERAL = _UNRESERVED | frozenset(":/?#[]@!&'()+,;=")  # reserved except * and $
_HEX = frozenset("0123456789abcdefABCDEF")
_BOM = b"\xef\xbb\xbf"
_LITERAL_CHARS = "".join(sorted(_LITERAL - {"%"}))
_LINE_RE = re.compile(r"\r\n|\r|\n")
_TOKEN_RE = re.compile(r"[A-Za-z_-]+")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_STAR_RE = re.compile(r"\*(?:\s|$)")
_KEYS = {
    "user-agent": "ua", "useragent": "ua", "user agent": "ua", "user_agent": "ua",
    "allow": "allow",
    "disallow": "disallow", "dissallow": "disallow", "dissalow": "disallow",
    "disalow": "disallow", "diasllow": "disallow", "disallaw": "disallow",
    "crawl-delay": "delay", "crawldelay": "delay", "crawl_delay": "delay",
    "sitemap": "sitemap", "site-map": "sitemap",
}


# --- matching ---------------------------------------------------------------------


def _normalize(text: str, pattern: bool) -> str:
    """The comparison form of a path (pattern=False) or a rule pattern."""
    if not text.strip(_LITERAL_CHARS):
        return text   # literal characters only, no escape: unchanged (most paths)
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        hx = text[i + 1 : i + 3]
        if c == "%" and len(hx) == 2 and hx[0] in _HEX and hx[1] in _HEX:
            ch = chr(int(hx, 16))
            out.append(ch if ch in _UNRESERVED else "%" + hx.upper())
            i += 3
            continue
        if c in _LITERAL:
            out.append(c)
        elif pattern and (c == "*" or (c == "$" and i == n - 1)):
            out.append(c)
        else:
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape")))
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class RobotsRule:
    """One allow/disallow line; `pattern` is already normalised."""

    allow: bool
    pattern: str
    _pieces: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _anchored: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        anchored = self.pattern.endswith("$")
        body = self.pattern[:-1] if anchored else self.pattern
        object.__setattr__(self, "_anchored", anchored)
        object.__setattr__(self, "_pieces", tuple(body.split("*")))

    def matches(self, path: str) -> bool:
        """Greedy leftmost glob match of a normalised path (prefix semantics)."""
        pieces = self._pieces
        if not path.startswith(pieces[0]):
            return False
        pos = len(pieces[0])
        if len(pieces) == 1:
            return pos == len(path) if self._anchored else True
        for piece in pieces[1:-1]:
            found = path.find(piece, pos)
            if found < 0:
                return False
            pos = found + len(piece)
        last = pieces[-1]
        if self._anchored:
            return path.endswith(last) and len(path) - len(last) >= pos
        return path.find(last, pos) >= 0


@dataclass(frozen=True, slots=True)
class RobotsGroup:
    """A group: lowercase product tokens (``*`` for the fallback) and its lines."""

    agents: tuple[str, ...]
    rules: tuple[RobotsRule, ...] = ()
    crawl_delay_s: float | None = None


def product_token(value: str) -> str:
    """The product token of a user-agent value, lowercased (``*`` kept)."""
    v = value.strip()
    if _STAR_RE.match(v):
        return "*"
    m = _TOKEN_RE.match(v)
    return m.group(0).lower() if m else ""


_TOKENS_CACHED_MAX = 8


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """A parsed robots.txt. Values in, values out; never raises on lookups."""

    groups: tuple[RobotsGroup, ...] = ()
    sitemaps: tuple[str, ...] = ()
    # token -> (its groups, their rules as (pattern length, allow, matcher),
    # their crawl-delay): asked for every URL of the origin, with the
    # crawler's one token
    _by_token: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _for(self, token: str) -> tuple[tuple[RobotsGroup, ...], tuple[tuple[int, bool, Any], ...], float | None]:
        got = self._by_token.get(token)
        if got is None:
            groups = self._groups_for(token)
            rules = tuple((len(r.pattern), r.allow, r.matches) for g in groups for r in g.rules)
            delays = [g.crawl_delay_s for g in groups if g.crawl_delay_s is not None]
            if len(self._by_token) >= _TOKENS_CACHED_MAX:
                self._by_token.clear()
            got = self._by_token[token] = (groups, rules, max(delays) if delays else None)
        return got

    def groups_for(self, token: str) -> tuple[RobotsGroup, ...]:
        return self._for(token)[0]

    def _groups_for(self, token: str) -> tuple[RobotsGroup, ...]:
        t = product_token(token)
        if t and t != "*":
            named = tuple(g for g in self.groups if t in g.agents)
            if named:
                return named
        return tuple(g for g in self.groups if "*" in g.agents)

    def allowed(self, token: str, path: str) -> bool:
        """May `token` fetch `path` (path plus ``?query`` of the URL)?"""
        path = path or "/"
        if path.split("?", 1)[0] == "/robots.txt":
            return True
        norm = _normalize(path, pattern=False)
        best, allow = -1, True
        for size, rule_allow, matches in self._for(token)[1]:
            if (size > best or (size == best and rule_allow)) and matches(norm):
                best, allow = size, rule_allow
        return allow

    def crawl_delay(self, token: str) -> float | None:
        """The largest crawl-delay among the groups that apply to `token`."""
        return self._for(token)[2]

    def to_dict(self) -> dict[str, Any]:
        return {
            "groups": [
                {
                    "agents": list(g.agents),
                    "rules": [["allow" if r.allow else "disallow", r.pattern] for r in g.rules],
                    "crawl_delay_s": g.crawl_delay_s,
                }
                for g in self.groups
            ],
            "sitemaps": list(self.sitemaps),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RobotsRules":
        groups = tuple(
            RobotsGroup(
                tuple(str(a) for a in g["agents"]),
                tuple(RobotsRule(kind == "allow", str(p)) for kind, p in g["rules"]),
                None if g.get("crawl_delay_s") is None else float(g["crawl_delay_s"]),
            )
            for g in data["groups"]
        )
        return cls(groups, tuple(str(s) for s in data["sitemaps"]))


ALLOW_ALL = RobotsRules()
DISALLOW_ALL = RobotsRules((RobotsGroup(("*",), (RobotsRule(False, "/"),)),))


# --- parsing ----------------------------------------------------------------------


def _bom_size(data: bytes) -> int:
    """How many leading bytes are a UTF-8 BOM or the start of one: a cut BOM
    cannot begin a valid line either, and Google's parser skips it too."""
    n = 0
    while n < len(_BOM) and data[n : n + 1] == _BOM[n : n + 1]:
        n += 1
    return n


def _lines(body: bytes) -> list[str]:
    data = body[:PARSE_BYTES_MAX]
    if len(body) > PARSE_BYTES_MAX:
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        data = data[: cut + 1] if cut >= 0 else b""
    data = data[_bom_size(data) :]
    return _LINE_RE.split(data.decode("utf-8", "surrogateescape"))


def _key_value(line: str) -> tuple[str, str] | None:
    """A line's key and value, comment dropped: split at the first ``:``, or,
    for a line of exactly two words, between them (a forgotten colon, as
    Google reads ``Disallow /``). None when the line is neither."""
    text = line.split("#", 1)[0]
    key, sep, value = text.partition(":")
    if not sep:
        words = text.split()
        if len(words) != 2:
            return None
        key, value = words
    return key, value.strip()


def _pattern_of(allow: bool, value: str) -> str | None:
    """The pattern of a non-empty rule value. One not starting with ``/`` or
    ``*`` matches no path as written: a disallow gets a ``/`` (the politer
    reading), an allow is dropped (a ``/`` would allow what the file does not)."""
    if value[0] in "/*":
        return value
    return None if allow else "/" + value


def _delay(value: str) -> float | None:
    try:
        v = float(value)
    except ValueError:
        return None
    return v if math.isfinite(v) and v >= 0 else None


def parse_robots(body: bytes) -> RobotsRules:
    """Parse a robots.txt body (see the module docstring). Never raises."""
    groups: list[tuple[list[str], list[RobotsRule], list[float]]] = []
    sitemaps: list[str] = []
    in_agents = False
    for line in _lines(body):
        pair = _key_value(line)
        if pair is None:
            continue
        key, value = pair
        kind = _KEYS.get(" ".join(key.split()).lower())
        if kind == "ua":
            if not in_agents:
                groups.append(([], [], []))
                in_agents = True
            groups[-1][0].append(product_token(value))
        elif kind in ("allow", "disallow", "delay"):
            in_agents = False
            if not groups:
                continue
            if kind == "delay":
                d = _delay(value)
                groups[-1][2].extend([d] if d is not None else [])
            elif value:
                pattern = _pattern_of(kind == "allow", value)
                if pattern is not None:
                    groups[-1][1].append(RobotsRule(kind == "allow", _normalize(pattern, pattern=True)))
        elif kind == "sitemap" and value and len(sitemaps) < SITEMAPS_MAX:
            # raw octets as %XX: the rules are persisted (as JSON: PostgreSQL's jsonb refuses a lone surrogate)
            value = escape_raw_octets(value)
            if value not in sitemaps:
                sitemaps.append(value)
    return RobotsRules(
        tuple(
            RobotsGroup(tuple(dict.fromkeys(a)), tuple(dict.fromkeys(r)), max(d) if d else None)
            for a, r, d in groups
        ),
        tuple(sitemaps),
    )


def _path_query(url: str) -> str:
    """The path and query `url` is matched by, always starting with ``/``.
    Only a value starting with a single ``/`` is a bare path; otherwise an
    authority comes first: after ``scheme://``, after ``//``, or at the start
    (``example.com/a`` is host and path, as in Google's GetPathParamsQuery)."""
    rest = url.split("#", 1)[0]
    if rest.startswith("/") and not rest.startswith("//"):
        return rest
    m = _SCHEME_RE.match(rest)
    rest = rest[m.end() :] if m else rest.removeprefix("//")
    ends = [i for i in (rest.find("/"), rest.find("?")) if i >= 0]
    path = rest[min(ends) :] if ends else ""
    return path if path.startswith("/") else "/" + path


def is_product_token(value: str) -> bool:
    """May `value` name a group? RFC 9309 2.2.1: a product token is letters,
    ``_`` and ``-`` only (so not ``Foo Bar``, ``Foo/2.1`` or `` Foo ``)."""
    return _TOKEN_RE.fullmatch(value) is not None


def robots_allowed(robots_txt: bytes, user_agent: str, url: str) -> bool:
    """Conformance entry point. A `user_agent` that is a product token is
    matched as it is; any other value names no group (only ``*`` applies, as
    in Google's matcher: ``Foo Bar`` is not ``Foo``, and the first product of
    a User-Agent header is not the crawler's token, see RFC 9309 2.2.1's
    ``Mozilla/5.0 (compatible; ExampleBot/0.1; ...)``), except that a value
    mentioning ``courtly`` (any case) is our own header, token ``courtly``.
    `url` (absolute, or a path) is matched by its path and query."""
    if is_product_token(user_agent):
        token = user_agent
    else:
        token = "courtly" if "courtly" in user_agent.lower() else ""
    return parse_robots(robots_txt).allowed(token, _path_query(url))


# --- fetch state ------------------------------------------------------------------
