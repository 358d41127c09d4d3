"""Values shared by the whole core: reasons, decisions, URL work items.

Everything here is a frozen value. A URL that is not fetched always ends up as
a `Decision` carrying a `Reason`; the runtime records every decision, so
"why was this not fetched?" always has an answer (DESIGN.md invariant 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Reason", "Decision", "UrlItem", "ItemKind", "Origin"]


class Reason(StrEnum):
    """Why a URL was not fetched (or not fetched again)."""

    MALFORMED = "malformed"            # cannot be parsed as a URL
    SCHEME = "scheme"                  # not http or https
    SCOPE = "scope"                    # outside the crawl scope (--scope, filters)
    FILTERED = "filtered"              # removed by a URL filter
    LENGTH = "length"                  # URL longer than urls.length_max
    DEPTH = "depth"                    # more hops from a seed than depth_max
    DUPLICATE = "duplicate"            # already seen (normalised form)
    NOFOLLOW = "nofollow"              # page said nofollow (meta robots / X-Robots-Tag)
    ROBOTS = "robots"                  # disallowed by robots.txt
    ROBOTS_UNREACHABLE = "robots_unreachable"  # robots.txt 5xx/timeout/network error: disallow all
    NON_PUBLIC = "non_public"          # resolves to a non-public address (SSRF guard)
    DNS = "dns"                        # name does not resolve
    REDIRECTS = "redirects"            # too many redirect hops
    ERROR = "error"                    # fetch failed after all retries
    HOST_DOWN = "host_down"            # the host failed every probe for politeness.down_horizon_s
    BANNED = "banned"                  # the host answered with a ban or challenge for down_horizon_s
    BUDGET = "budget"                  # page budget (--max-pages) exhausted
    PURGED = "purged"                  # takedown
    TRAP = "trap"                      # a crawler-trap rule (detail names the rule)
    SOFT404 = "soft404"                # 200 answer that is the host's "not found" page
    QUOTA = "quota"                    # every consumer that asked for it is over its quota


@dataclass(frozen=True, slots=True)
class Decision:
    """A recorded choice not to fetch `url`, with the rule that made it."""

    url: str
    reason: Reason
    detail: str = ""
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class Origin:
    """scheme://host:port, the unit robots.txt applies to (RFC 9309 section 2.3)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        default = 443 if self.scheme == "https" else 80
        port = "" if self.port == default else f":{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{port}"


class ItemKind(StrEnum):
    """Why a URL is in the frontier (`UrlItem.kind`)."""

    DISCOVERY = "discovery"
    RECRAWL = "recrawl"     # granted by the recrawl scheduler


@dataclass(frozen=True, slots=True)
class UrlItem:
    """A URL queued in the frontier."""

    url: str            # normalised
    key: str            # politeness key (registered domain or host)
    band: int = 4       # priority band 0 (highest) .. 7 (lowest)
    depth: int = 0      # hops from a seed
    via: str = ""       # the page it was discovered on ("" for seeds)
    redirects: int = 0  # redirect hops that led here
    kind: ItemKind = ItemKind.DISCOVERY
