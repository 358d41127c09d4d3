"""The origin of a URL that `courtly.core.urls.normalize_url` returned, read
off the string: its form is fixed (``scheme://host[:port]/...``, an IPv6
host in brackets, the port only when not the scheme's default), so the hot
paths that ask for a normalised URL's host or origin need not parse it again.
(Split out of `courtly.core.urls`, which re-exports all three; for any other
URL use `courtly.core.urls.split_origin`.)

Pure: no clock, no I/O.
"""

from __future__ import annotations

import functools

from courtly.core.types import Origin
from courtly.core.urlfast import DEFAULT_PORTS as _DEFAULT_PORTS

__all__ = ["host_of_normalized", "origin_of_normalized", "origin_text_of_normalized"]


def host_of_normalized(url: str) -> str:
    """`split_origin(url).host` for a URL that `normalize_url` returned."""
    return origin_of_normalized(url).host


@functools.lru_cache(maxsize=4096)
def _origin_of(scheme: str, hostport: str) -> Origin:
    if hostport.startswith("["):
        close = hostport.index("]")
        host, rest = hostport[1:close], hostport[close + 1:]
    else:
        host, _, port = hostport.partition(":")
        rest = ":" + port if port else ""
    return Origin(scheme, host, int(rest[1:]) if rest else _DEFAULT_PORTS[scheme])


def origin_of_normalized(url: str) -> Origin:
    """`split_origin(url)` for a URL that `normalize_url` returned (its form
    is fixed: ``scheme://host[:port]/...``, an IPv6 host in brackets), read
    off the string without parsing it again. Other URLs: use split_origin."""
    start = url.index("://")
    end = url.find("/", start + 3)
    return _origin_of(url[:start], url[start + 3:end] if end >= 0 else url[start + 3:])


def origin_text_of_normalized(url: str) -> str:
    """`str(split_origin(url))` for a URL that `normalize_url` returned: its
    ``scheme://host[:port]``, which is how it is written there."""
    return url[: url.index("/", url.index("://") + 3)]
