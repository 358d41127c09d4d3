"""robots.txt: an RFC 9309 parser and matcher, and the per-origin fetch state.

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
``Allow: /a``). A UTF-8 BOM is skipped; invalid UTF-8 survives as the raw
octets (surrogateescape), so a pattern still matches the URL's ``%XX``. Lines
end at CRLF, CR or LF; ``#`` starts a comment; a line without ``:`` is
ignored. Keys are case-insensitive, with a few common misspellings accepted
(``useragent``, ``disalow``...). A run of user-agent lines starts a group
(blank lines, comments, sitemap and unknown lines do not end the run; an
allow, disallow or crawl-delay line does). Rules before the first user-agent
are ignored. ``Sitemap`` is global. ``Crawl-delay`` (non-standard) is read per
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
a wildcard and a final ``$`` anchors (a ``$`` elsewhere is literal). A pattern
not starting with ``/`` or ``*`` gets a ``/`` prepended (stricter than
ignoring it). The longest matching pattern (octets, after normalisation)
wins; allow wins a tie; empty patterns match nothing; ``/robots.txt`` is
always allowed. Matching is greedy and linear, with no regular expressions.

Fetch state (`RobotsBook`)
--------------------------
One entry per origin string (``http://a.test:8080``), driven by the table
`TRANSITIONS` of (phase, event) -> (phase, effect). DESIGN invariant 3:

- 2xx: parse, cache `cache_s` (at most 24 h);
- 3xx at the end of the chain, more than 5 redirects, or 4xx other than 429:
  unavailable, allow all (the error body is never parsed), cached likewise;
- 429, 5xx, other statuses, timeout, network error: unreachable. The last
  good copy (2xx or 4xx outcome) is reused if obtained within `stale_s_max`
  (24 h), else DISALLOW_ALL; retry after `retry_s_min` doubling to
  `retry_s_max`. We never switch to allow-all after long unreachability
  (RFC 9309 2.3.1.4 permits it after ~30 days; we prefer staying polite);
- dns / non_public: we cannot read the file (and could not fetch the pages
  either): DISALLOW_ALL, never the old copy, retried with the same back-off.

A fetch started but not finished within `fetch_timeout_s` counts as a timeout
(applied lazily by `lookup`/`fetch_started`). A finish without a start is
ignored; a start while fetching raises `RobotsStateError`. HTTP caching
headers are not consulted. Pure: callers pass `now`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Mapping

from courtly.core.types import Origin, Reason

__all__ = [
    "PARSE_BYTES_MAX", "REDIRECTS_MAX", "CACHE_S_MAX", "RobotsRule", "RobotsGroup",
    "RobotsRules", "ALLOW_ALL", "DISALLOW_ALL", "parse_robots", "product_token",
    "robots_allowed", "RobotsFetched", "RobotsFailed", "RobotsState", "RobotsView",
    "Phase", "Event", "Effect", "TRANSITIONS", "classify", "RobotsStateError", "RobotsBook",
]

PARSE_BYTES_MAX = 512_000          # RFC 9309 2.5: at least 500 KiB
REDIRECTS_MAX = 5                  # RFC 9309 2.3.1.2
CACHE_S_MAX = 86_400.0             # RFC 9309 2.4: not longer than 24 h
SITEMAPS_MAX = 1_000

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_LITERAL = _UNRESERVED | frozenset(":/?#[]@!&'()+,;=")  # reserved except * and $
_HEX = frozenset("0123456789abcdefABCDEF")
_LITERAL_CHARS = "".join(sorted(_LITERAL - {"%"}))
_LINE_RE = re.compile(r"\r\n|\r|\n")
_TOKEN_RE = re.compile(r"[A-Za-z_-]+")
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
    _by_token: dict = field(default_factory=dict, init=False, repr=False, compare=False)

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


def _lines(body: bytes) -> list[str]:
    data = body[:PARSE_BYTES_MAX]
    if len(body) > PARSE_BYTES_MAX:
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        data = data[: cut + 1] if cut >= 0 else b""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return _LINE_RE.split(data.decode("utf-8", "surrogateescape"))


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
        key, sep, value = line.split("#", 1)[0].partition(":")
        kind = _KEYS.get(" ".join(key.split()).lower()) if sep else None
        value = value.strip()
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
                pattern = value if value[0] in "/*" else "/" + value
                groups[-1][1].append(RobotsRule(kind == "allow", _normalize(pattern, pattern=True)))
        elif kind == "sitemap" and value and value not in sitemaps and len(sitemaps) < SITEMAPS_MAX:
            sitemaps.append(value)
    return RobotsRules(
        tuple(
            RobotsGroup(tuple(dict.fromkeys(a)), tuple(dict.fromkeys(r)), max(d) if d else None)
            for a, r, d in groups
        ),
        tuple(sitemaps),
    )


def _path_query(url: str) -> str:
    if url.startswith("/"):
        rest = url
    else:
        m = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*", url)
        rest = url[m.end() :] if m else url
    rest = rest.split("#", 1)[0]
    return rest if rest.startswith("/") else "/" + rest


def robots_allowed(robots_txt: bytes, user_agent: str, url: str) -> bool:
    """Conformance entry point. The token is ``courtly`` when `user_agent`
    mentions it (any case), else the first product token of `user_agent`;
    `url` (absolute, or a path) is matched by its path and query."""
    token = "courtly" if "courtly" in user_agent.lower() else product_token(user_agent)
    return parse_robots(robots_txt).allowed(token, _path_query(url))


# --- fetch state ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RobotsFetched:
    """robots.txt answered with an HTTP status after `redirects` hops."""

    status: int
    body: bytes = b""
    redirects: int = 0


_FAILURE_KINDS = frozenset({"timeout", "network", "dns", "non_public", "too_many_redirects"})


@dataclass(frozen=True, slots=True)
class RobotsFailed:
    """robots.txt could not be fetched; `kind` in timeout, network, dns,
    non_public, too_many_redirects."""

    kind: str

    def __post_init__(self) -> None:
        if self.kind not in _FAILURE_KINDS:
            raise ValueError(f"unknown robots failure kind {self.kind!r}")


class RobotsState(StrEnum):
    NEED_FETCH = "need_fetch"   # fetch robots.txt before any page of the origin
    FETCHING = "fetching"       # a fetch is in flight: wait
    READY = "ready"             # `rules` are in force


class Phase(StrEnum):
    ABSENT = "absent"
    FETCHING = "fetching"
    FRESH = "fresh"      # a good outcome (2xx parsed, or unavailable -> allow all)
    FAILED = "failed"    # unreachable or blocked, in back-off


class Event(StrEnum):
    START = "start"
    LOADED = "loaded"            # 2xx
    UNAVAILABLE = "unavailable"  # 3xx end, > 5 redirects, 4xx except 429
    UNREACHABLE = "unreachable"  # 429, 5xx, timeout, network error
    BLOCKED = "blocked"          # dns failure, non-public address


class Effect(StrEnum):
    BEGIN = "begin"
    STORE = "store"
    STORE_ALLOW_ALL = "store_allow_all"
    BACK_OFF = "back_off"
    BLOCK = "block"
    IGNORE = "ignore"
    REJECT = "reject"


_FINISH = (Event.LOADED, Event.UNAVAILABLE, Event.UNREACHABLE, Event.BLOCKED)
TRANSITIONS: Mapping[tuple[Phase, Event], tuple[Phase, Effect]] = {
    **{(p, Event.START): (Phase.FETCHING, Effect.BEGIN) for p in (Phase.ABSENT, Phase.FRESH, Phase.FAILED)},
    (Phase.FETCHING, Event.START): (Phase.FETCHING, Effect.REJECT),
    (Phase.FETCHING, Event.LOADED): (Phase.FRESH, Effect.STORE),
    (Phase.FETCHING, Event.UNAVAILABLE): (Phase.FRESH, Effect.STORE_ALLOW_ALL),
    (Phase.FETCHING, Event.UNREACHABLE): (Phase.FAILED, Effect.BACK_OFF),
    (Phase.FETCHING, Event.BLOCKED): (Phase.FAILED, Effect.BLOCK),
    **{(p, e): (p, Effect.IGNORE) for p in (Phase.ABSENT, Phase.FRESH, Phase.FAILED) for e in _FINISH},
}


def classify(outcome: RobotsFetched | RobotsFailed) -> Event:
    """The event an outcome is (RFC 9309 2.3.1)."""
    if isinstance(outcome, RobotsFailed):
        if outcome.kind == "too_many_redirects":
            return Event.UNAVAILABLE
        return Event.BLOCKED if outcome.kind in ("dns", "non_public") else Event.UNREACHABLE
    status = outcome.status
    if outcome.redirects > REDIRECTS_MAX or 300 <= status < 400:
        return Event.UNAVAILABLE
    if 200 <= status < 300:
        return Event.LOADED
    if 400 <= status < 500 and status != 429:
        return Event.UNAVAILABLE
    return Event.UNREACHABLE


class RobotsStateError(RuntimeError):
    """A robots.txt fetch was started while one is in flight."""


@dataclass(frozen=True, slots=True)
class RobotsView:
    """What the crawler may do with an origin now."""

    state: RobotsState
    rules: RobotsRules | None = None
    expires_at: float | None = None   # READY from a good copy: refetch at
    retry_at: float | None = None     # READY after a failure: retry at
    unreachable: bool = False         # rules are the failure policy (DISALLOW_ALL)

    def skip_reason(self, token: str, path: str) -> Reason | None:
        """None when a READY view allows `path`; else the Reason to record."""
        if self.state is not RobotsState.READY or self.rules is None:
            raise RobotsStateError(f"robots.txt not ready ({self.state})")
        if self.rules.allowed(token, path):
            return None
        return Reason.ROBOTS_UNREACHABLE if self.unreachable else Reason.ROBOTS


_NEED_FETCH = RobotsView(RobotsState.NEED_FETCH)
_FETCHING = RobotsView(RobotsState.FETCHING)


@dataclass(frozen=True, slots=True)
class _Entry:
    phase: Phase
    resting: Phase = Phase.ABSENT        # phase before the fetch in flight
    good: RobotsRules | None = None      # last good copy
    good_at: float | None = None
    expires_at: float | None = None
    failures: int = 0
    retry_at: float | None = None
    blocked: bool = False
    started_at: float | None = None


_SNAPSHOT_VERSION = 1


class RobotsBook:
    """Per-origin robots.txt state for the origins one worker owns."""

    def __init__(
        self,
        *,
        cache_s: float = CACHE_S_MAX,
        retry_s_min: float = 60.0,
        retry_s_max: float = 3_600.0,
        fetch_timeout_s: float = 120.0,
        stale_s_max: float = CACHE_S_MAX,
    ) -> None:
        if not 0 < cache_s <= CACHE_S_MAX:
            raise ValueError(f"cache_s must be in (0, {CACHE_S_MAX}]")
        if not 0 < retry_s_min <= retry_s_max:
            raise ValueError("need 0 < retry_s_min <= retry_s_max")
        if not 0 < fetch_timeout_s or not 0 <= stale_s_max <= CACHE_S_MAX:
            raise ValueError("bad fetch_timeout_s or stale_s_max")
        self.cache_s, self.retry_s_min, self.retry_s_max = cache_s, retry_s_min, retry_s_max
        self.fetch_timeout_s, self.stale_s_max = fetch_timeout_s, stale_s_max
        self._entries: dict[str, _Entry] = {}
        self._fresh_views: dict[str, RobotsView] = {}   # origin -> the view of its fresh copy

    def __len__(self) -> int:
        return len(self._entries)

    def phase(self, origin: str | Origin) -> Phase:
        e = self._entries.get(str(origin))
        return Phase.ABSENT if e is None else e.phase

    def lookup(self, origin: str | Origin, now: float) -> RobotsView:
        key = str(origin)
        e = self._settle(key, now)
        if e is None or e.phase is Phase.ABSENT:
            return _NEED_FETCH
        if e.phase is Phase.FETCHING:
            return _FETCHING
        if e.phase is Phase.FRESH:
            assert e.expires_at is not None and e.good is not None
            if now >= e.expires_at:
                return _NEED_FETCH
            # asked for every URL: the view of a fresh copy is made once per copy
            view = self._fresh_views.get(key)
            if view is None or view.rules is not e.good or view.expires_at != e.expires_at:
                view = self._fresh_views[key] = RobotsView(RobotsState.READY, e.good, expires_at=e.expires_at)
            return view
        assert e.retry_at is not None
        if now >= e.retry_at:
            return _NEED_FETCH
        if not e.blocked and e.good is not None and e.good_at is not None and now - e.good_at <= self.stale_s_max:
            return RobotsView(RobotsState.READY, e.good, retry_at=e.retry_at)
        return RobotsView(RobotsState.READY, DISALLOW_ALL, retry_at=e.retry_at, unreachable=True)

    def fetch_started(self, origin: str | Origin, now: float) -> None:
        key = str(origin)
        self._step(key, self._settle(key, now), Event.START, now, None)

    def fetch_finished(
        self, origin: str | Origin, now: float, outcome: RobotsFetched | RobotsFailed
    ) -> RobotsView:
        key = str(origin)
        self._step(key, self._entries.get(key), classify(outcome), now, outcome)
        return self.lookup(key, now)

    def next_due_at(self, origin: str | Origin) -> float | None:
        """When the origin next needs attention (None: unknown to the book)."""
        e = self._entries.get(str(origin))
        if e is None:
            return None
        if e.phase is Phase.FETCHING:
            return (e.started_at or 0.0) + self.fetch_timeout_s
        return e.expires_at if e.phase is Phase.FRESH else e.retry_at

    def forget(self, origin: str | Origin) -> None:
        self._entries.pop(str(origin), None)
        self._fresh_views.pop(str(origin), None)

    def prune(self, now: float) -> int:
        """Drop good copies too old to be reused; returns how many."""
        old = [
            k for k, e in self._entries.items()
            if e.phase is Phase.FRESH and e.good_at is not None and now - e.good_at > self.stale_s_max
            and now >= (e.expires_at or 0.0)
        ]
        for k in old:
            del self._entries[k]
            self._fresh_views.pop(k, None)
        return len(old)

    def snapshot(self, origin: str | Origin) -> dict[str, Any] | None:
        """JSON-serialisable state; a fetch in flight is not persisted."""
        e = self._entries.get(str(origin))
        if e is None:
            return None
        if e.phase is Phase.FETCHING:
            if e.resting is Phase.ABSENT:
                return None
            e = replace(e, phase=e.resting, started_at=None)
        return {
            "v": _SNAPSHOT_VERSION, "phase": e.phase.value,
            "good": None if e.good is None else e.good.to_dict(),
            "good_at": e.good_at, "expires_at": e.expires_at, "failures": e.failures,
            "retry_at": e.retry_at, "blocked": e.blocked,
        }

    def restore(self, origin: str | Origin, data: Mapping[str, Any] | None) -> None:
        if data is None:
            self.forget(origin)
            return
        if data.get("v") != _SNAPSHOT_VERSION or data["phase"] not in ("fresh", "failed"):
            raise ValueError(f"unsupported robots snapshot {data!r:.80}")
        good = None if data["good"] is None else RobotsRules.from_dict(data["good"])
        self._entries[str(origin)] = _Entry(
            Phase(data["phase"]), good=good, good_at=data["good_at"],
            expires_at=data["expires_at"], failures=int(data["failures"]),
            retry_at=data["retry_at"], blocked=bool(data["blocked"]),
        )

    # -- internals --

    def _settle(self, key: str, now: float) -> _Entry | None:
        """Turn a fetch that outlived `fetch_timeout_s` into a timeout."""
        e = self._entries.get(key)
        if e is not None and e.phase is Phase.FETCHING:
            if now >= (e.started_at or 0.0) + self.fetch_timeout_s:
                e = self._step(key, e, Event.UNREACHABLE, now, RobotsFailed("timeout"))
        return e

    def _backoff_s(self, failures: int) -> float:
        return min(self.retry_s_max, self.retry_s_min * 2.0 ** min(failures - 1, 60))

    def _step(
        self, key: str, e: _Entry | None, event: Event, now: float,
        outcome: RobotsFetched | RobotsFailed | None,
    ) -> _Entry | None:
        phase = Phase.ABSENT if e is None else e.phase
        nxt, effect = TRANSITIONS[(phase, event)]
        if effect is Effect.REJECT:
            raise RobotsStateError(f"robots.txt fetch for {key} already in flight")
        if effect is Effect.IGNORE:
            return e
        cur = e or _Entry(Phase.ABSENT)
        if effect is Effect.BEGIN:
            new = replace(cur, phase=nxt, resting=phase, started_at=now)
        elif effect in (Effect.STORE, Effect.STORE_ALLOW_ALL):
            body = outcome.body if isinstance(outcome, RobotsFetched) else b""
            rules = parse_robots(body) if effect is Effect.STORE else ALLOW_ALL
            new = _Entry(nxt, good=rules, good_at=now, expires_at=now + self.cache_s)
        else:  # BACK_OFF or BLOCK
            failures = cur.failures + 1
            new = replace(
                cur, phase=nxt, resting=Phase.ABSENT, failures=failures, started_at=None,
                retry_at=now + self._backoff_s(failures), blocked=effect is Effect.BLOCK,
                expires_at=None,
            )
        self._entries[key] = new
        return new
