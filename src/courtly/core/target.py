"""May the crawler connect for this URL? (invariant 4, as one pure function)

`target_allowed(url, resolve)` normalises the URL (so decimal, hex and octal
IPv4 forms become dotted quads), then judges the address(es): an IP literal
directly, a name through `resolve(host) -> list[str]`, which stands in for
DNS. A name is allowed only if it resolves and *every* address it resolves
to is permitted: a name that mixes public and private answers is a rebinding
trick, not a site.
"""

from __future__ import annotations

from typing import Callable, Iterable

from courtly.core.netpolicy import NetPolicy, parse_ip
from courtly.core.urls import UrlError, normalize_url, split_origin

__all__ = ["target_allowed"]


def target_allowed(
    url: str,
    resolve: Callable[[str], Iterable[str]],
    policy: NetPolicy = NetPolicy(),
) -> bool:
    try:
        host = split_origin(normalize_url(url)).host
    except (UrlError, ValueError):
        return False
    if parse_ip(host) is not None:
        return policy.permits(host)
    try:
        addrs = list(resolve(host))
    except Exception:
        return False
    return bool(addrs) and all(policy.permits(a) for a in addrs)
