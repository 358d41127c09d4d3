"""robots.txt bodies of the simulated hosts, one per variant.

`rules_text` writes the file of a rules-like host: a group for other bots
(Disallow: /), a `*` group that courtly must *not* obey, and a courtly group
(spelt in varying case, sometimes split in two groups that RFC 9309 merges)
with Allow/Disallow, `*` and `$` patterns, a tie that Allow wins, an optional
Crawl-delay, and Sitemap lines. `robots_body` gives the body for any variant
that answers 200; `robots_hops` gives the redirect chain of the redirect
variants as (host, path) pairs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from courtly.sim.hashing import rng
from courtly.sim.robotsrule import ROBOTS_BYTES_MAX

if TYPE_CHECKING:
    from courtly.sim.model import HostSpec, SimWeb

__all__ = ["rules_text", "robots_body", "robots_hops"]


def rules_text(web: "SimWeb", spec: "HostSpec", port: int) -> str:
    r = rng(web.seed, "robots", spec.index)
    sections = web.layout(spec.name).sections
    public = [s for s in sections if s != "private"]
    star_only = public[0]  # disallowed for * but allowed for courtly
    token = r.choice(("courtly", "Courtly", "COURTLY", "courtly/1.0"))
    lines = [
        f"# robots.txt for {spec.name}",
        "User-agent: otherbot",
        "User-agent: archiver",
        "Disallow: /",
        "",
        "User-agent: *",
        "Disallow: /private/",
        f"Disallow: /{star_only}/",
        "Crawl-delay: 30",
        "",
        f"User-agent: {token}",
        "Disallow: /private/",
        "Allow: /private/public-",
        "Disallow: /*?print=",
        "Disallow: /*.pdf$",
        "Allow: /archive/",
        "Disallow: /archive/",
    ]
    if spec.crawl_delay_s is not None:
        lines.append(f"Crawl-delay: {spec.crawl_delay_s:g}")
    if r.random() < 0.5 and len(public) > 1:
        lines.append(f"Disallow: /{public[-1]}/*-1*.html$")
    if r.random() < 0.5:
        lines += ["", "# a second courtly group: merged with the first", f"User-agent: {token}",
                  "Disallow: /tmp/"]
    lines.append("")
    if spec.has("sitemaps"):
        lines.append(f"Sitemap: http://{spec.name}:{port}/sitemap.xml")
    lines.append(f"Sitemap: http://{spec.name}:{port}/sitemap-missing.xml")
    return "\n".join(lines) + "\n"


def robots_body(web: "SimWeb", spec: "HostSpec", port: int) -> bytes:
    """The 200 body of `spec`'s robots.txt (end of chain for redirect variants)."""
    v = spec.robots
    if v == "allow_all" or v == "redirect_too_long":
        return b"User-agent: *\nDisallow:\n"
    if v == "disallow_all":
        return b"User-agent: *\nDisallow: /\n"
    if v == "garbage":
        r = rng(web.seed, "garbage", spec.index)
        return bytes(r.randrange(256) for _ in range(4096)).replace(b":", b";")
    text = rules_text(web, spec, port).encode("utf-8")
    if v == "bom":
        return b"\xef\xbb\xbf" + text
    if v == "large":
        pad_line = b"# " + b"padding " * 12 + b"\n"
        pad = pad_line * ((ROBOTS_BYTES_MAX + 100 * 1024) // len(pad_line))
        tail = b"\nUser-agent: *\nUser-agent: courtly\nDisallow: /\n"
        return text + pad + tail
    return text


def robots_hops(web: "SimWeb", spec: "HostSpec") -> list[tuple[str, str]]:
    """The redirect chain after /robots.txt: [(host, path), ...], last one serves the body."""
    if spec.robots == "redirect_chain":
        n = 1 + spec.key % 4
    elif spec.robots == "redirect_too_long":
        n = 6
    else:
        return []
    hops = []
    for i in range(n):
        host = spec.partner if i % 2 == 0 else spec.name
        hops.append((host, f"/robots-hop/{spec.index}/{i}"))
    return hops
