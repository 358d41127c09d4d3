"""The URL space of one simulated host: which paths exist and what links where.

Page ids: 0 is `/`, 1..S are section indexes `/<section>/`, the rest are
articles `/<section>/<slug>-<id>.html` (section "private" holds some
`public-*` articles that robots allows). `resolve(target)` maps a request
target (path plus query) to a `Resource`, a plain value naming what to serve;
`links(k, variant, port)` gives the hrefs a page carries, exactly as written
into the HTML (relative, absolute-path, absolute, protocol-relative, under a
`<base href>` on some pages), so the reachability walk and the HTML agree by
construction. Nothing here does I/O or reads the clock.

A `legit_deep` host is a large real site instead: its pages, paths and
links are sim/deep's (`DeepArchive`). `Resource`, `PageLinks` and the href
forms are sim/resource's.
"""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING

from courtly.sim.hashing import h, mix, rng
from courtly.sim.deep import ARCHIVE_PAGE_SIZE, DeepArchive, deep_links, deep_path, resolve_deep
from courtly.sim.resource import PageLinks, Resource, href_in_form, relative_href
from courtly.sim.robotsfile import robots_hops
from courtly.sim.webconfig import HOSTILE_BODIES, TRAPS

if TYPE_CHECKING:
    from courtly.sim.model import HostSpec, SimWeb

__all__ = ["HostLayout", "Resource", "PageLinks", "DeepArchive", "TRAP_ENTRIES", "ARCHIVE_PAGE_SIZE",
           "bait_urls", "bait_redirects", "relative_href"]

SECTION_POOL = ("news", "blog", "docs", "products", "about", "archive", "events", "guides")
TRAP_ENTRIES = {
    "trap_calendar": "/calendar/2024/01/",
    "trap_session": "/shop/item-0.html?s=" + "0" * 32,
    "trap_filters": "/catalog?color=red",
    "trap_repeat": "/repeat/a/",
    "trap_deep": "/deep/1/",
}
NEAR_VARIANTS = ("ad", "ts", "nav")
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
TARGET_LENGTH_MAX = 4000
_FACETS = {
    "color": ("red", "blue", "green", "black", "white", "grey"),
    "size": ("xs", "s", "m", "l", "xl"),
    "brand": ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell"),
    "sort": ("price", "name", "new", "rating"),
}

_RX_SECTION = re.compile(r"^/([a-z]+)/$")
_RX_ARTICLE = re.compile(r"^/([a-z]+)/((?:public-)?[a-z]+)-(\d+)\.html$")
_RX_EXTRA = re.compile(r"^/([a-z]+)/(hidden|orphan)-(\d+)\.html$")
_RX_PDF = re.compile(r"^/files/report-(\d+)\.pdf$")
_RX_DUP = re.compile(r"^/dup/(\d+)\.html$")
_RX_NEAR = re.compile(r"^/near/(\d+)-(ad|ts|nav)\.html$")
_RX_RELATED = re.compile(r"^/related/(\d+)\.html$")   # shares every other paragraph: not a duplicate
_RX_GO = re.compile(r"^/go/(\d+)/(\d+)/(\d+)$")
_RX_LOOP = re.compile(r"^/loop/(\d+)/([01])$")
_RX_BAIT = re.compile(r"^/bait/(\d+)$")
_RX_RHOP = re.compile(r"^/robots-hop/(\d+)/(\d+)$")
_RX_CAL = re.compile(r"^/calendar/(\d{4})/(\d{2})/$")
_RX_SHOP = re.compile(r"^/shop/item-(\d)\.html$")
# s=<32 hex>: a session id whose name URL normalisation cannot know (it strips
# sid, jsessionid, ...), so only the crawler's trap guard can catch the trap
_RX_SID = re.compile(r"^s=([0-9a-f]{32})$")
_RX_REPEAT = re.compile(r"^/repeat/((?:[ab]/)+)$")
_RX_DEEP = re.compile(r"^/deep/((?:\d+/)+)$")


def bait_urls(port: int) -> list[str]:
    """SSRF bait hrefs: none of these may ever be requested."""
    return [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/admin",
        "http://192.168.1.1/",
        f"http://localhost:{port}/admin",
        f"http://127.0.0.1:{port}/private",
        f"http://2130706433:{port}/decimal",
        f"http://0x7f000001:{port}/hex",
        f"http://0177.0.0.1:{port}/octal",
        f"http://intranet.test:{port}/internal",
        f"http://[::1]:{port}/v6",
    ]


BAIT_REDIRECT_TEMPLATES = (
    "http://169.254.169.254/latest/meta-data/iam/",
    "http://10.0.0.1/",
    "http://127.0.0.1:{port}/redirected",
    "http://localhost:{port}/redirected",
    "http://intranet.test:{port}/redirected",
)


def bait_redirects(port: int) -> list[str]:
    """Locations of /bait/N redirects: private and loopback addresses."""
    return [t.format(port=port) for t in BAIT_REDIRECT_TEMPLATES]


class HostLayout:
    """Paths and links of one host; immutable once built."""

    def __init__(self, web: "SimWeb", spec: "HostSpec") -> None:
        self.web = web
        self.spec = spec
        r = rng(web.seed, "layout", spec.index)
        self.sections: tuple[str, ...] = tuple(r.sample(SECTION_POOL, 1 + r.randrange(3))) + ("private",)
        self.first_article = 1 + len(self.sections)
        self.n_pages = web.config.pages_per_host
        self.deep: DeepArchive | None = None
        if spec.has("legit_deep"):
            self.sections = self.sections[:-1]  # categories, all public
            self.deep = DeepArchive(len(self.sections), web.config.deep_pages)
            self.first_article = self.deep.first_article
            self.n_pages = self.first_article + web.config.deep_pages
        self.articles = range(self.first_article, self.n_pages)
        self.dup_sources: tuple[int, ...] = tuple(self.articles[:3]) if spec.has("duplicates") else ()

    # ---- paths ----------------------------------------------------------

    def section_of(self, k: int) -> str:
        return self.sections[(k - self.first_article) % len(self.sections)]

    def slug(self, k: int) -> str:
        word = self.web.vocab[mix(self.spec.key, k) % len(self.web.vocab)]
        return f"public-{word}" if self.section_of(k) == "private" and k % 3 == 0 else word

    def path_of(self, k: int) -> str:
        if self.deep is not None:
            return deep_path(self, k)
        if k == 0:
            return "/"
        if k < self.first_article:
            return f"/{self.sections[k - 1]}/"
        return f"/{self.section_of(k)}/{self.slug(k)}-{k}.html"

    def page_paths(self) -> list[str]:
        return [self.path_of(k) for k in range(self.n_pages)]

    def meta(self, k: int) -> tuple[bool, bool]:
        """(noindex, nofollow) of page k."""
        if k < self.first_article or not self.spec.has("meta_robots"):
            return False, False
        return k % 7 == 3, k % 7 == 5

    def change_rate(self, k: int) -> float:
        """Poisson change rate of page k (events per second)."""
        if not self.spec.has("changing"):
            return 0.0
        mult = 5.0 if k == 0 else (0.0, 0.2, 1.0, 5.0)[mix(self.spec.key ^ 0x5A5A, k) % 4]
        return self.spec.change_rate_per_s * mult

    def change_key(self, k: int) -> int:
        return mix(self.spec.key ^ 0xC4A6, k)

    def trap(self) -> str | None:
        return next((b for b in self.spec.behaviours if b in TRAPS), None)

    # ---- resolution -----------------------------------------------------

    def resolve(self, target: str) -> Resource:
        """What `target` (path plus optional ?query) is on this host."""
        if len(target) > TARGET_LENGTH_MAX:
            return Resource("not_found", status=414)
        path, _, query = target.partition("?")
        found = (self._resolve_page(path, query) if self.deep is None else resolve_deep(self, path, query)) \
            or self._resolve_special(path, query)
        if found is not None:
            return found
        if self.spec.has("soft404"):
            return Resource("soft404", tag="soft404")
        return Resource("not_found", status=404)

    def _resolve_page(self, path: str, query: str) -> Resource | None:
        if path == "/":
            return Resource("page", 0) if not query else None
        m = _RX_SECTION.match(path)
        if m and not query and m.group(1) in self.sections:
            return Resource("page", 1 + self.sections.index(m.group(1)))
        m = _RX_EXTRA.match(path)
        if m and not query:
            k, what = int(m.group(3)), m.group(2)
            ok = k in self.articles and self.section_of(k) == m.group(1)
            if ok and what == "hidden" and k % 4 == 1:
                return Resource("extra", k, "hidden")
            if ok and what == "orphan" and self.meta(k)[1]:
                return Resource("extra", k, "orphan")
            return None
        m = _RX_ARTICLE.match(path)
        if m:
            k = int(m.group(3))
            if k in self.articles and self.section_of(k) == m.group(1) and self.slug(k) == m.group(2):
                if not query:
                    return Resource("page", k)
                if query == "print=1":
                    return Resource("extra", k, "print")
            return None
        m = _RX_PDF.match(path)
        if m and int(m.group(1)) in self.articles and int(m.group(1)) % 6 == 0:
            return Resource("pdf", int(m.group(1)))
        m = _RX_DUP.match(path)
        if m and not query and int(m.group(1)) in self.dup_sources:
            return Resource("page", int(m.group(1)), "dup")
        m = _RX_NEAR.match(path)
        if m and not query and int(m.group(1)) in self.dup_sources:
            return Resource("page", int(m.group(1)), "near_" + m.group(2))
        m = _RX_RELATED.match(path)
        if m and not query and int(m.group(1)) in self.dup_sources:
            return Resource("page", int(m.group(1)), "related")
        return None

    def _resolve_special(self, path: str, query: str) -> Resource | None:
        spec = self.spec
        m = _RX_GO.match(path)
        if m and not query:
            return self._resolve_go(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        m = _RX_LOOP.match(path)
        if m and not query and m.group(1) == str(spec.index) and spec.has("redirects"):
            nxt = 1 - int(m.group(2))
            return Resource("redirect", status=302, location_host=spec.name,
                            location=f"/loop/{spec.index}/{nxt}", tag="redirect_loop")
        m = _RX_BAIT.match(path)
        if m and not query and spec.has("ssrf_bait"):
            i = int(m.group(1))
            if i < len(BAIT_REDIRECT_TEMPLATES):
                return Resource("redirect", status=302, location=BAIT_REDIRECT_TEMPLATES[i],
                                tag="ssrf_bait_redirect")
        m = _RX_RHOP.match(path)
        if m and not query:
            return self._resolve_robots_hop(int(m.group(1)), int(m.group(2)))
        if path.startswith("/hostile/") and spec.has("hostile_bodies"):
            name = path[len("/hostile/"):]
            if name in HOSTILE_BODIES:
                return Resource("hostile", variant=name, tag=f"hostile_{name}")
        trap = self.trap()
        if trap is not None and _is_trap_target(trap, path, query):
            return Resource("trap", variant=trap, tag=trap)
        if spec.has("sitemaps") and not query:
            if path in ("/sitemap.xml", "/sitemap-0.xml", "/sitemap-1.xml.gz"):
                return Resource("sitemap", variant=path[1:])
        if spec.has("feeds") and not query and path in ("/feed.rss", "/feed.atom"):
            return Resource("feed", variant=path[len("/feed."):])
        if self.web.config.watch_pages_per_kind and path.startswith("/watch/") and not query:
            return Resource("watch", variant=path, tag="watch")   # sim/watchpage
        return None

    def hop_host(self, s: "HostSpec", c: int, i: int) -> str:
        return s.partner if (c % 2 == 0 and i % 2 == 0) else s.name

    def _resolve_go(self, s_index: int, c: int, i: int) -> Resource | None:
        web = self.web
        if not 0 <= s_index < len(web.hosts) or not 1 <= c <= 6 or not 0 <= i < c:
            return None
        s = web.hosts[s_index]
        if not s.has("redirects") or self.hop_host(s, c, i) != self.spec.name:
            return None
        status = REDIRECT_STATUSES[(c + i) % len(REDIRECT_STATUSES)]
        if i + 1 < c:
            return Resource("redirect", status=status, location_host=self.hop_host(s, c, i + 1),
                            location=f"/go/{s_index}/{c}/{i + 1}", tag="redirect_chain")
        lay = web.layout(s.name)
        target = lay.articles[(c * 7) % len(lay.articles)]
        return Resource("redirect", status=status, location_host=s.name,
                        location=lay.path_of(target), tag="redirect_chain")

    def _resolve_robots_hop(self, s_index: int, i: int) -> Resource | None:
        web = self.web
        if not 0 <= s_index < len(web.hosts):
            return None
        s = web.hosts[s_index]
        hops = robots_hops(web, s)
        if not 0 <= i < len(hops) or hops[i][0] != self.spec.name:
            return None
        if i + 1 < len(hops):
            return Resource("redirect", status=302, location_host=hops[i + 1][0],
                            location=hops[i + 1][1], tag="robots_hop")
        return Resource("robots_body", page=s_index, tag="robots_hop")

    # ---- links ----------------------------------------------------------

    def links(self, k: int, variant: str, port: int) -> PageLinks:
        """The hrefs of page k (variant "", dup, near_*, print, hidden, orphan)."""
        if self.deep is not None:
            return deep_links(self, k, port)
        spec = self.spec
        own = self.path_of(k)
        if variant == "dup" or variant == "print":
            variant = ""
        r = random.Random(mix(spec.key ^ 0x11AC, k))
        base_dir = own.rsplit("/", 1)[0] + "/"
        base_href = None
        if k >= self.first_article and k % 5 == 2 and len(self.sections) > 1 \
                and variant not in ("hidden", "orphan"):
            other = self.sections[(self.sections.index(self.section_of(k)) + 1) % len(self.sections)]
            base_dir = f"/{other}/"
            base_href = f"http://{spec.name}:{port}{base_dir}"
        noindex, nofollow = self.meta(k)
        canonical = own
        if variant in ("hidden", "orphan"):
            canonical = f"/{self.section_of(k)}/{variant}-{k}.html"
            noindex = nofollow = False
        elif variant == "related":
            canonical = f"/related/{k}.html"
        out = PageLinks(base_href, f"http://{spec.name}:{port}{canonical}", noindex=noindex,
                        nofollow=nofollow, feeds=spec.has("feeds"))
        add = out.links.append

        def href(path: str, form: str, host: str | None = None) -> str:
            return href_in_form(spec.name, port, base_dir, path, form, host)

        forms = ("rel", "abs_path", "abs", "proto")
        nav = [("/", "Home")] + [(f"/{s}/", s.title()) for s in self.sections]
        if variant == "near_nav":
            nav = nav[::-1]
        for path, text in nav:
            add((href(path, "abs_path"), text, False))
        if variant in ("hidden", "orphan"):
            return out
        words = self.web.vocab
        if k == 0:
            for a in list(self.articles)[:10]:
                add((href(self.path_of(a), r.choice(forms)), words[a % len(words)], False))
            for _ in range(2):
                other = self.web.hosts[r.randrange(len(self.web.hosts))].name
                add((href("/", "abs", other), other, False))
            self._entry_links(add, href, port)
            return out
        if k < self.first_article:
            sec = self.sections[k - 1]
            for a in self.articles:
                if self.section_of(a) == sec:
                    add((href(self.path_of(a), "rel"), words[a % len(words)], False))
            return out
        sec = self.section_of(k)
        for _ in range(6):
            a = self.articles[r.randrange(len(self.articles))]
            form = r.choice(forms)
            add((href(self.path_of(a), "rel" if base_href else form), words[a % len(words)], False))
        if r.random() < 0.5:
            other = self.web.hosts[r.randrange(len(self.web.hosts))]
            lay = self.web.layout(other.name)
            a = lay.articles[r.randrange(len(lay.articles))]
            form = r.choice(("abs", "proto"))
            if not other.has("spa"):   # an app's pages are found by rendering it (sim/spa.py)
                add((href(lay.path_of(a), form, other.name), other.name, False))
        if k % 4 == 1:
            add((href(f"/{sec}/hidden-{k}.html", "abs_path"), "hidden", True))
        if k % 9 == 4:
            add((href(f"/{sec}/missing-{k}.html", "abs_path"), "gone", False))
        if k % 6 == 0:
            add((href(f"/files/report-{k}.pdf", "abs_path"), "report", False))
            add((href(f"/files/report-{k}.pdf?download=1", "abs_path"), "download", False))
        add((href(own + "?print=1", "abs_path"), "print", False))
        if nofollow:
            add((href(f"/{sec}/orphan-{k}.html", "abs_path"), "orphan", False))
        trap = self.trap()
        if trap is not None and k % 5 == 0:
            add((href(TRAP_ENTRIES[trap], "abs_path"), "more", False))
        if spec.has("ssrf_bait") and k % 3 == 0:
            urls = bait_urls(port)
            add((urls[k % len(urls)], "internal", False))
        return out

    def _entry_links(self, add, href, port: int) -> None:  # type: ignore[no-untyped-def]
        spec = self.spec
        trap = self.trap()
        if trap is not None:
            add((href(TRAP_ENTRIES[trap], "abs_path"), "archive", False))
        for k in self.dup_sources:
            add((href(f"/dup/{k}.html", "abs_path"), "copy", False))
            for v in NEAR_VARIANTS:
                add((href(f"/near/{k}-{v}.html", "abs_path"), "similar", False))
            add((href(f"/related/{k}.html", "abs_path"), "related", False))
        if spec.has("redirects"):
            for c in range(1, 7):
                host = self.hop_host(spec, c, 0)
                add((href(f"/go/{spec.index}/{c}/0", "abs", host), f"moved {c}", False))
            add((href(f"/loop/{spec.index}/0", "abs_path"), "loop", False))
        if spec.has("hostile_bodies"):
            for name in HOSTILE_BODIES:
                add((href(f"/hostile/{name}", "abs_path"), name, False))
        if spec.has("ssrf_bait"):
            for url in bait_urls(port):
                add((url, "internal", False))
            for i in range(len(BAIT_REDIRECT_TEMPLATES)):
                add((href(f"/bait/{i}", "abs_path"), "go", False))
        if spec.has("feeds"):
            add((href("/feed.rss", "abs_path"), "rss", False))
            add((href("/feed.atom", "abs_path"), "atom", False))

    # ---- traps ----------------------------------------------------------

    def trap_links(self, path: str, query: str) -> list[str]:
        """Relative or absolute-path hrefs a trap page carries (endless by design)."""
        trap = self.trap()
        if trap == "trap_calendar":
            m = _RX_CAL.match(path)
            assert m is not None
            y, mo = int(m.group(1)), int(m.group(2))
            prev = (y, mo - 1) if mo > 1 else (y - 1, 12)
            nxt = (y, mo + 1) if mo < 12 else (y + 1, 1)
            return [f"/calendar/{a:04d}/{b:02d}/" for a, b in (prev, nxt) if 1000 <= a <= 9999]
        if trap == "trap_session":
            return [f"/shop/item-{j}.html?s={h(query, j) % (1 << 64):016x}{h(query, j + 5) % (1 << 64):016x}"
                    for j in range(5)]
        if trap == "trap_filters":
            out = []
            for facet, values in _FACETS.items():
                value = values[h(query, facet) % len(values)]
                out.append(f"/catalog?{query}&{facet}={value}")
            return out
        if trap == "trap_repeat":
            return ["a/", "b/"]
        if trap == "trap_deep":
            last = int(path.rstrip("/").rsplit("/", 1)[1])
            return [f"{last + 1}/"]
        return []


def _is_trap_target(trap: str, path: str, query: str) -> bool:
    if trap == "trap_calendar":
        m = _RX_CAL.match(path)
        return bool(m) and not query and 1 <= int(m.group(2)) <= 12 and 1000 <= int(m.group(1))
    if trap == "trap_session":
        return bool(_RX_SHOP.match(path)) and bool(_RX_SID.match(query))
    if trap == "trap_filters":
        if path != "/catalog" or not query:
            return False
        for pair in query.split("&"):
            key, _, value = pair.partition("=")
            if key not in _FACETS or value not in _FACETS[key]:
                return False
        return True
    if trap == "trap_repeat":
        return bool(_RX_REPEAT.match(path)) and not query
    if trap == "trap_deep":
        return bool(_RX_DEEP.match(path)) and not query
    return False
