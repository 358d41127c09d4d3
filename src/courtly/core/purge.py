"""Takedowns: which URLs a purge covers (DESIGN invariant 7).

A `Purge` names a scope and a value:

    domain      a domain and every subdomain of it: `example.org` covers
                example.org, www.example.org, a.b.example.org (any scheme, any
                port); a public suffix (`com`, `co.uk`) is refused
    host        exactly one host name or IP literal (any scheme, any port)
    url_prefix  every normalised URL that starts with the normalised prefix
                (`http://example.org/private` covers /private, /private/x and
                /private-2: a plain string prefix, as users write them)

`purge_of` checks and normalises what a person typed into that form (lower
case, IDNA A-labels, no trailing dot; a prefix through `normalize_url`), so
matching is a cheap comparison on the normalised URLs the crawl handles.

A `PurgeList` is a value holding the purges in force, indexed for matching:
`match(url)` walks the host's labels (a dictionary lookup per label), checks
the exact host, then the prefixes recorded for that host. `with_purges`
returns a new list; nothing changes in place.

Rules: pure (no clock, no I/O); `at` instants come from the caller; a URL
that cannot be parsed matches nothing (it is never fetched anyway).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Iterable, Iterator

from courtly.core.urls import UrlError, normalize_url, registered_domain, split_origin

__all__ = ["Scope", "Purge", "PurgeList", "purge_of", "PurgeError"]

REASON_CHARS_MAX = 500


class Scope(StrEnum):
    DOMAIN = "domain"
    HOST = "host"
    URL_PREFIX = "url_prefix"


class PurgeError(ValueError):
    """A purge value that names nothing crawlable (one-line message)."""


@dataclass(frozen=True, slots=True)
class Purge:
    """One takedown: `id` is its number in the store (0 before it is stored),
    `at` when it was recorded."""

    scope: Scope
    value: str
    reason: str = ""
    id: int = 0
    at: float = 0.0

    def covers(self, url: str) -> bool:
        return PurgeList((self,)).match(url) is not None

    def describe(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        return f"purge #{self.id} ({self.scope} {self.value}){why}"


def purge_of(scope: str, value: str, *, reason: str = "", id: int = 0, at: float = 0.0) -> Purge:
    """A `Purge` with `value` checked and normalised; raises `PurgeError`."""
    try:
        s = Scope(scope)
    except ValueError:
        raise PurgeError(f"purge scope must be one of {', '.join(Scope)}, not {scope!r}") from None
    raw = value.strip()
    if not raw:
        raise PurgeError(f"empty {s} for a purge")
    if s is Scope.URL_PREFIX:
        try:
            norm = normalize_url(raw)
        except UrlError as e:
            raise PurgeError(f"bad URL prefix {raw!r}: {e}") from None
        if raw.endswith("?") and "?" not in norm:
            norm += "?"   # a prefix for "any query of this path"
    else:
        if "/" in raw or "@" in raw:
            raise PurgeError(f"a {s} is a bare name such as example.org, not {raw!r}")
        try:
            norm = split_origin(f"http://{raw.rstrip('.')}/").host
        except UrlError as e:
            raise PurgeError(f"bad {s} {raw!r}: {e}") from None
        if not norm:
            raise PurgeError(f"bad {s} {raw!r}")
        if s is Scope.DOMAIN and not _is_ip(norm) and registered_domain("x." + norm) == "x." + norm:
            raise PurgeError(f"{norm} is a public suffix: a purge names a registered domain or below")
    return Purge(s, norm, reason.strip()[:REASON_CHARS_MAX], id, at)


@dataclass(frozen=True, slots=True)
class PurgeList:
    """The purges in force, indexed by domain, host and (host -> prefixes)."""

    purges: tuple[Purge, ...] = ()
    _domains: dict[str, Purge] = field(init=False, repr=False, compare=False)
    _hosts: dict[str, Purge] = field(init=False, repr=False, compare=False)
    _prefixes: dict[str, tuple[Purge, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        domains: dict[str, Purge] = {}
        hosts: dict[str, Purge] = {}
        prefixes: dict[str, list[Purge]] = {}
        for p in self.purges:
            if p.scope is Scope.DOMAIN:
                domains.setdefault(p.value, p)
            elif p.scope is Scope.HOST:
                hosts.setdefault(p.value, p)
            else:
                host = _host(p.value)
                if host is not None:
                    prefixes.setdefault(host, []).append(p)
        object.__setattr__(self, "_domains", domains)
        object.__setattr__(self, "_hosts", hosts)
        object.__setattr__(self, "_prefixes", {h: tuple(ps) for h, ps in prefixes.items()})

    def __len__(self) -> int:
        return len(self.purges)

    def __bool__(self) -> bool:
        return bool(self.purges)

    def __iter__(self) -> Iterator[Purge]:
        return iter(self.purges)

    @property
    def last_id(self) -> int:
        return max((p.id for p in self.purges), default=0)

    def with_purges(self, more: Iterable[Purge]) -> "PurgeList":
        known = {p.id for p in self.purges if p.id}
        added = tuple(p for p in more if not p.id or p.id not in known)
        return PurgeList(self.purges + added) if added else self

    def match(self, url: str) -> Purge | None:
        """The first purge covering `url` (a normalised URL), or None."""
        if not self.purges:
            return None
        host = _host(url)
        if host is None:
            return None
        if self._domains and not _is_ip(host):
            name = host
            while True:
                hit = self._domains.get(name)
                if hit is not None:
                    return hit
                dot = name.find(".")
                if dot < 0:
                    break
                name = name[dot + 1:]
        hit = self._hosts.get(host) or self._domains.get(host)
        if hit is not None:
            return hit
        for p in self._prefixes.get(host, ()):
            if url.startswith(p.value):
                return p
        return None


def _is_ip(host: str) -> bool:
    return ":" in host or host.rpartition(".")[2].isdigit()


def _host(url: str) -> str | None:
    try:
        return split_origin(url).host
    except UrlError:
        return None
