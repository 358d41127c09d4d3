"""Bytes of the simulated web: HTML pages, trap pages, error templates,
sitemaps and feeds, each rendered on request from the seed.

A page's text is a seeded pick from a pool of paragraphs (so two pages share
little text and SimHash tells them apart), sized 10-50 KB, plus a revision
block that depends on the page's current epoch (so the page changes exactly
when its Poisson process says). Near-duplicates differ from their original
only in the ad, the timestamp line or the nav order; exact duplicates are the
same bytes. Link hrefs come from `HostLayout.links`, never from here.
"""

from __future__ import annotations

import gzip
import html
import re
import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING

from courtly.sim.change import epoch_at, last_change_s
from courtly.sim.hashing import mix, rng

if TYPE_CHECKING:
    from courtly.sim.layout import HostLayout

__all__ = ["Version", "page_version", "render_page", "render_trap", "render_soft404",
           "render_not_found", "render_sitemap", "render_feed", "render_pdf", "http_date"]

_PAGE_BYTES_MIN = 10_000
_PAGE_BYTES_SPAN = 40_000


def http_date(at: float) -> str:
    return formatdate(at, usegmt=True)


@dataclass(frozen=True, slots=True)
class Version:
    """A page's state at one instant: its epoch and validators."""

    epoch: int
    last_modified_at: int  # whole seconds, as Last-Modified can carry
    etag: str


def page_version(lay: "HostLayout", k: int, variant: str, t_s: float, started_at: float) -> Version:
    """Epoch, Last-Modified and ETag of page k `t_s` seconds after the web started."""
    rate = lay.change_rate(k)
    key = lay.change_key(k)
    epoch = epoch_at(key, rate, t_s)
    if epoch == 0:
        age_s = 86_400 * (1 + key % 30)
        last = started_at - age_s
    else:
        changed = last_change_s(key, rate, t_s)
        last = started_at + (changed if changed is not None else 0.0)
    etag = f'"{mix(key, epoch * 8 + _VARIANT_CODE.get(variant, 0)):016x}"'
    return Version(epoch, int(last), etag)


_NEEDS_ESCAPE = re.compile(r"[&<>\"']")
_VARIANT_CODE = {"": 0, "dup": 1, "near_ad": 2, "near_ts": 3, "near_nav": 4, "print": 5, "hidden": 6, "orphan": 7,
                 "related": 8}


def _esc(text: str) -> str:
    return html.escape(text) if _NEEDS_ESCAPE.search(text) else text


def _head(title: str, links_canonical: str, base: str | None, robots: str | None, feeds: bool) -> list[str]:
    out = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{_esc(title)}</title>"]
    if base is not None:
        out.append(f'<base href="{_esc(base)}">')
    out.append(f'<link rel="canonical" href="{_esc(links_canonical)}">')
    if robots:
        out.append(f'<meta name="robots" content="{robots}">')
    if feeds:
        out.append('<link rel="alternate" type="application/rss+xml" href="/feed.rss">')
        out.append('<link rel="alternate" type="application/atom+xml" href="/feed.atom">')
    out.append("</head><body>")
    return out


def _anchor(href: str, text: str, nofollow: bool) -> str:
    rel = ' rel="nofollow"' if nofollow else ""
    return f'<a href="{_esc(href)}"{rel}>{_esc(text)}</a>'


def _link_block(links: list[tuple[str, str, bool]]) -> str:
    return '<ul class="related">' + "".join(f"<li>{_anchor(*a)}</li>" for a in links) + "</ul>"


def render_page(lay: "HostLayout", k: int, variant: str, epoch: int, port: int) -> bytes:
    """HTML of page k; variant is "", dup, near_ad, near_ts, near_nav, print, hidden, orphan, related.

    Text: paragraphs start, start+step, start+2*step, ... of the (prime-sized)
    pool, with start and step from the page's hash, until the page's target
    size (10-50 KB) is reached; one revision paragraph depends on the epoch.
    On a legit_deep host each paragraph is an independent hashed pick instead:
    among thousands of pages, two progressions with the same step would be
    shifted copies of each other (near-duplicates by accident).
    """
    web, spec = lay.web, lay.spec
    links = lay.links(k, variant, port)
    words, pool = web.vocab, web.paragraphs
    n_words, n_pool = len(words), len(pool)
    seed = mix(spec.key, k)
    title = f"{words[seed % n_words].title()} {words[(seed >> 16) % n_words]} - {spec.name}"
    robots = ",".join(n for n, on in (("noindex", links.noindex), ("nofollow", links.nofollow)) if on)
    out = _head(title, links.canonical, links.base_href, robots or None, links.feeds)
    n_nav = 1 + len(lay.sections)
    out.append("<header><nav>" + " | ".join(_anchor(*a) for a in links.links[:n_nav]) + "</nav></header>")
    out.append(f"<main><h1>{_esc(title)}</h1>")
    stamp = f"Published {http_date(1_600_000_000 + (seed >> 8) % 100_000_000)}"
    if variant == "near_ts":
        stamp = f"Generated {http_date(1_700_000_000 + (seed >> 12) % 10_000_000)}"
    out.append(f'<p class="stamp">{stamp}</p>')
    out.append(f'<p class="revision">Revision {epoch}. {pool[mix(seed, epoch) % n_pool]}</p>')
    if variant in ("hidden", "orphan"):
        out.append(f"<p>This is the {variant} page {k}.</p>")
    target = _PAGE_BYTES_MIN + (seed >> 24) % _PAGE_BYTES_SPAN
    size = sum(len(x) for x in out)
    body_links = links.links[n_nav:]
    per_block = max(1, len(body_links) // 3 + 1)
    start, step = (seed >> 32) % n_pool, 1 + (seed >> 44) % (n_pool - 1)
    independent = lay.deep is not None
    i = 0
    while size < target:
        para = pool[mix(seed, i) % n_pool if independent else (start + i * step) % n_pool]
        if variant == "related" and i % 2:   # every other paragraph its own: half the text shared
            para = pool[mix(seed ^ 0x5E1A7ED, i) % n_pool]
        out.append(f"<p>{para}</p>")
        size += len(para) + 7
        if i * per_block < len(body_links):
            block = _link_block(body_links[i * per_block:(i + 1) * per_block])
            out.append(block)
            size += len(block)
        i += 1
    while i * per_block < len(body_links):  # tiny pages still carry every link
        out.append(_link_block(body_links[i * per_block:(i + 1) * per_block]))
        i += 1
    ad_seed = mix(seed, 1 + (variant == "near_ad"))
    out.append(f'<aside class="ad">Sponsored: {words[ad_seed % n_words]} '
               f'{words[(ad_seed >> 20) % n_words]} - buy now</aside>')
    out.append(f"</main><footer>{spec.name} page {k}</footer></body></html>\n")
    return "\n".join(out).encode("utf-8")


def render_trap(lay: "HostLayout", path: str, query: str) -> bytes:
    web = lay.web
    r = rng(web.seed, "trap", lay.spec.index, path, query)
    title = f"{lay.trap()} {path}"
    out = _head(title, f"{path}{'?' + query if query else ''}", None, None, False)
    out.append(f"<h1>{html.escape(title)}</h1>")
    for _ in range(3):
        out.append(f"<p>{web.paragraphs[r.randrange(len(web.paragraphs))]}</p>")
    out.append("<ul>" + "".join(f"<li>{_anchor(x, 'next', False)}</li>" for x in lay.trap_links(path, query)) + "</ul>")
    out.append("</body></html>\n")
    return "\n".join(out).encode("utf-8")


def render_soft404(lay: "HostLayout", target: str) -> bytes:
    return (f"<!DOCTYPE html><html><head><title>{lay.spec.name}</title></head><body>"
            f"<h1>Oops! Page not found</h1><p>Sorry, {html.escape(target)} does not exist "
            f"(anymore). Try the <a href=\"/\">home page</a>.</p></body></html>\n").encode("utf-8")


def render_not_found(target: str) -> bytes:
    return (f"<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>"
            f"<h1>Not Found</h1><p>{html.escape(target)}</p></body></html>\n").encode("utf-8")


def render_pdf(lay: "HostLayout", k: int) -> bytes:
    return (b"%PDF-1.4\n% courtly simweb fake report\n" + f"{lay.spec.name} report {k}\n".encode()
            + b"%%EOF\n")


def _lastmods(lay: "HostLayout", paths_ids: list[int], t_s: float, started_at: float) -> list[tuple[str, int]]:
    out = []
    for k in paths_ids:
        v = page_version(lay, k, "", t_s, started_at)
        out.append((lay.path_of(k), v.last_modified_at))
    return out


def _iso(at: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def render_sitemap(lay: "HostLayout", name: str, port: int, t_s: float, started_at: float) -> bytes:
    """sitemap.xml (an index), sitemap-0.xml, or sitemap-1.xml.gz (gzip bytes)."""
    base = f"http://{lay.spec.name}:{port}"
    ids = list(range(lay.n_pages))
    half = len(ids) // 2
    if name == "sitemap.xml":
        newest = max(v for _, v in _lastmods(lay, ids, t_s, started_at))
        items = "".join(f"<sitemap><loc>{base}/{n}</loc><lastmod>{_iso(newest)}</lastmod></sitemap>"
                        for n in ("sitemap-0.xml", "sitemap-1.xml.gz"))
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns='
                f'"http://www.sitemaps.org/schemas/sitemap/0.9">{items}</sitemapindex>\n').encode()
    part = ids[:half] if name == "sitemap-0.xml" else ids[half:]
    items = "".join(f"<url><loc>{base}{html.escape(p)}</loc><lastmod>{_iso(at)}</lastmod></url>"
                    for p, at in _lastmods(lay, part, t_s, started_at))
    xml = ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns='
           f'"http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>\n').encode()
    return gzip.compress(xml, mtime=0) if name.endswith(".gz") else xml


def render_feed(lay: "HostLayout", kind: str, port: int, t_s: float, started_at: float) -> bytes:
    """RSS 2.0 (kind "rss") or Atom ("atom") of the 10 most recently changed articles."""
    base = f"http://{lay.spec.name}:{port}"
    recent = sorted(_lastmods(lay, list(lay.articles), t_s, started_at), key=lambda x: (-x[1], x[0]))[:10]
    if kind == "rss":
        items = "".join(f"<item><title>{html.escape(p)}</title><link>{base}{html.escape(p)}</link>"
                        f"<guid>{base}{html.escape(p)}</guid><pubDate>{http_date(at)}</pubDate></item>"
                        for p, at in recent)
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
                f"<title>{lay.spec.name}</title><link>{base}/</link><description>feed</description>"
                f"{items}</channel></rss>\n").encode()
    updated = _iso(recent[0][1]) if recent else _iso(int(started_at))
    entries = "".join(f'<entry><title>{html.escape(p)}</title><link href="{base}{html.escape(p)}"/>'
                      f"<id>{base}{html.escape(p)}</id><updated>{_iso(at)}</updated></entry>"
                      for p, at in recent)
    return ('<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>{lay.spec.name}</title><id>{base}/</id><updated>{updated}</updated>"
            f"{entries}</feed>\n").encode()
