"""Traps the crawler was not written against, and a real deep site beside them.

What it owns: `WildSite`, one simulated site of a kind in `WILD_KINDS`,
answering `page(host, target)` with a `WildPage` (status, tag, HTML, hrefs).
The traps are shaped the way such sites are found in the wild, not the way
courtly's rules are written: the variable parts live in the query string
or in minted host names, values stay inside any plausible date window, and
the pages differ a little from one another (their own heading, a shuffled
order) while saying nothing new. Each trap site also has `REAL_PAGES` real
articles, so a defence must fence the trap, not the host.

Kinds
-----
* ``wild_calendar``: ``/events?month=YYYY-MM&view=month|week|day[&day=D]``;
  every page links the previous and next month and the other views; months
  run back from 2025-12 without end (1,500 of them inside 1900..2026).
* ``wild_facets``: ``/shop/search?...`` with brand, colour, size, sort and
  price in any order and any subset; every page shows the same 12 products
  (in the order its ``sort`` asks) and links every one-facet refinement.
* ``wild_pagination``: ``/list?page=N``; pages 1-3 list the real articles,
  every later page repeats the last ten and links N+1 and N+2.
* ``wild_session``: ``/s/<20-character session id>/item/N.html``: 8 items,
  every page links five of them under a fresh session id.
* ``wild_farm``: ``/`` of ``<minted>.<domain>``: every host's page is the
  same spun text and links six other minted host names (of `FARM_HOSTS`).
* ``wild_deep`` (not a trap): 3,000 articles ``/YYYY/MM/DD/<slug>-N.html``,
  ``/news?page=N`` (200 pages), a category tree 4 levels deep
  (``/c/<a>/<b>/<c>/<d>/``, 256 leaves) whose leaves list articles, and
  ``/events?month=YYYY-MM`` with real events for 2001-2025.

`tag` is "trap" for a trap page (the judge's ground truth), else "page" or
"missing". Pure and deterministic from (seed, kind, domain); no I/O.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from courtly.sim.hashing import h

__all__ = ["WILD_KINDS", "WILD_TRAPS", "WildPage", "WildSite", "REAL_PAGES", "FARM_HOSTS"]

WILD_TRAPS = ("wild_calendar", "wild_facets", "wild_pagination", "wild_session", "wild_farm")
WILD_KINDS = WILD_TRAPS + ("wild_deep",)
REAL_PAGES = 30
FARM_HOSTS = 2000    # the farm mints its names from this many (a name resolver must know them)
_DEEP_ARTICLES = 3000
_NEWS_PAGE = 15
_TREE = (("garden", "kitchen", "tools", "outdoor"), ("chairs", "tables", "lamps", "rugs"),
         ("oak", "pine", "steel", "glass"), ("small", "large", "classic", "modern"))   # 256 leaves under /c/
_FACETS = {
    "brand": ("acme", "globex", "initech", "umbrella", "hooli"),
    "colour": ("red", "blue", "green", "black"),
    "size": ("s", "m", "l", "xl"),
    "sort": ("price", "name", "newest"),
    "price": ("0-10", "10-50", "50-100"),
}
_RX_ARTICLE = re.compile(r"^/article/(\d+)\.html$")
_RX_DATED = re.compile(r"^/(\d{4})/(\d{2})/(\d{2})/[a-z]+-(\d+)\.html$")
_RX_SESSION = re.compile(r"^/s/([0-9a-z]{20})/item/(\d)\.html$")
_RX_TREE = re.compile(r"^/c/((?:[a-z]+/){1,4})$")


@dataclass(frozen=True, slots=True)
class WildPage:
    status: int
    tag: str                 # "page", "trap" or "missing"
    html: bytes = b""
    links: tuple[str, ...] = ()   # hrefs: absolute-path, or absolute for other hosts


class WildSite:
    """One site of `kind` on registered domain `domain` (see module docstring)."""

    def __init__(self, kind: str, domain: str, seed: int = 1) -> None:
        if kind not in WILD_KINDS:
            raise ValueError(f"unknown wild site kind {kind!r}; known: {', '.join(WILD_KINDS)}")
        self.kind, self.domain, self.seed = kind, domain, seed
        r = random.Random(h(seed, "wild-words"))
        self.words = tuple(sorted({"".join(r.choice("bcdfghklmnprstvz") + r.choice("aeiou")
                                            for _ in range(r.randint(2, 4))) for _ in range(2000)}))
        self._farm_names: tuple[str, ...] | None = None

    @property
    def entry(self) -> str:
        """The path the home page links into the trap (or the real site's first index)."""
        return self.entry_at(None)

    def entry_at(self, port: int | None) -> str:
        """`entry`, with `port` in the farm's absolute URL (served over HTTP on a port)."""
        return {"wild_calendar": "/events?month=2025-12&view=month", "wild_facets": "/shop/search?sort=price",
                "wild_pagination": "/list?page=1", "wild_session": "/s/" + "a1" * 10 + "/item/0.html",
                "wild_farm": f"http://{self.farm_names()[0]}.{self.domain}{_port(port)}/",
                "wild_deep": "/news?page=1"}[self.kind]

    # ---------------------------------------------------------------- serving

    def page(self, host: str, target: str, port: int | None = None) -> WildPage:
        """The answer for `target` on `host` (`port`: the one absolute links carry)."""
        path, _, query = target.partition("?")
        if self.kind == "wild_farm" and host != self.domain:
            return self._farm(host, port) if host.endswith("." + self.domain) else _missing()
        if host != self.domain:
            return _missing()
        if path == "/" and not query:
            return self._home(port)
        m = _RX_ARTICLE.match(path)
        if m and not query and int(m.group(1)) < REAL_PAGES:
            return self._article(f"article {m.group(1)}", self._real_links())
        handler = getattr(self, "_" + self.kind[5:])
        return handler(path, query)

    def _home(self, port: int | None) -> WildPage:
        links = [f"/article/{i}.html" for i in range(REAL_PAGES)] + [self.entry_at(port)]
        if self.kind == "wild_deep":
            links += [f"/c/{a}/" for a in _TREE[0]] + ["/events?month=2025-06"]
        return self._render("home", self._text(("home", self.kind), 120), links, "page")

    def _real_links(self) -> list[str]:
        return ["/"] + [f"/article/{i}.html" for i in range(0, REAL_PAGES, 7)]

    def _article(self, name: object, links: list[str]) -> WildPage:
        return self._render(str(name), self._text(("article", name), 300), links, "page")

    # ---------------------------------------------------------------- traps

    def _calendar(self, path: str, query: str) -> WildPage:
        q = _params(query)
        month, view = q.get("month", ""), q.get("view", "month")
        m = re.fullmatch(r"(\d{4})-(\d{2})", month)
        if path != "/events" or m is None or view not in ("month", "week", "day") or not 1 <= int(m.group(2)) <= 12:
            return _missing()
        y, mo = int(m.group(1)), int(m.group(2))
        prev, nxt = (y, mo - 1) if mo > 1 else (y - 1, 12), (y, mo + 1) if mo < 12 else (y + 1, 1)
        links = ["/"] + [f"/events?month={a:04d}-{b:02d}&view={view}" for a, b in (prev, nxt) if a >= 1]
        links += [f"/events?view={v}&month={month}" for v in ("month", "week") if v != view]
        links += [f"/events?month={month}&view=day&day={d}" for d in (1, 8, 15, 22)]
        heading = f"Events {month} ({view}{' ' + q['day'] if 'day' in q else ''})"
        text = heading + ". No events are scheduled for this period. " + self._text("calendar-blurb", 150)
        return self._render(heading, text, links, "trap")

    def _facets(self, path: str, query: str) -> WildPage:
        pairs = [p.partition("=") for p in query.split("&") if p]
        if path != "/shop/search" or not pairs or any(k not in _FACETS or v not in _FACETS[k] for k, _, v in pairs):
            return _missing()
        chosen = {k: v for k, _, v in pairs}
        r = random.Random(h(self.seed, "facets", query))
        links = ["/"]
        for facet, values in _FACETS.items():
            if facet not in chosen:
                for value in values:
                    new = [f"{k}={v}" for k, _, v in pairs] + [f"{facet}={value}"]
                    r.shuffle(new)   # the site writes its parameters in any order
                    links.append("/shop/search?" + "&".join(new))
        products = [self._text(("product", i), 25) for i in range(12)]
        if chosen.get("sort") == "name":
            products.sort()
        elif chosen.get("sort") == "newest":
            products.reverse()
        links += [f"/article/{i}.html" for i in range(12)]
        text = "Showing 12 products. " + " ".join(products)
        return self._render("search " + query, text, links, "trap")

    def _pagination(self, path: str, query: str) -> WildPage:
        q = _params(query)
        if path != "/list" or not q.get("page", "").isdigit() or int(q["page"]) < 1 or len(q) != 1:
            return _missing()
        n = int(q["page"])
        items = range((n - 1) * 10, n * 10) if n <= 3 else range(REAL_PAGES - 10, REAL_PAGES)
        links = ["/"] + [f"/article/{i}.html" for i in items] + [f"/list?page={n + 1}", f"/list?page={n + 2}"]
        text = f"Page {n}. " + " ".join(self._text(("item", i), 20) for i in items)
        return self._render(f"list page {n}", text, links, "page" if n <= 3 else "trap")

    def _session(self, path: str, query: str) -> WildPage:
        m = _RX_SESSION.match(path)
        if m is None or query:
            return _missing()
        sid, item = m.group(1), int(m.group(2))
        links = ["/"] + [f"/s/{_token(h(self.seed, sid, j))}/item/{(item + j) % 8}.html" for j in range(1, 6)]
        return self._render(f"item {item}", self._text(("shop-item", item), 200), links, "trap")

    def _farm(self, host: str, port: int | None) -> WildPage:
        label = host[: -len(self.domain) - 1]
        names = self.farm_names()
        if label not in names:
            return _missing()
        r = random.Random(h(self.seed, "farm", label))
        links = [f"http://{names[r.randrange(FARM_HOSTS)]}.{self.domain}{_port(port)}/" for _ in range(6)]
        spun = self._text("farm", 200).split()
        for i in range(0, len(spun), 60):   # the spinner swaps a word here and there
            spun[i] = r.choice(self.words)
        return self._render(f"best deals {label}", " ".join(spun), links, "trap")

    def farm_names(self) -> tuple[str, ...]:
        """The labels the farm mints (below `domain`), first the entry's."""
        cached = self._farm_names
        if cached is None:
            seen: dict[str, None] = {}
            i = 0
            while len(seen) < FARM_HOSTS:
                seen.setdefault(_token(h(self.seed, "farm-name", i)), None)
                i += 1
            cached = self._farm_names = tuple(seen)
        return cached

    # ---------------------------------------------------------------- the real deep site

    def _deep(self, path: str, query: str) -> WildPage:
        q = _params(query)
        if path == "/news" and q.get("page", "").isdigit() and len(q) == 1:
            n = int(q["page"])
            pages = -(-_DEEP_ARTICLES // _NEWS_PAGE)
            if not 1 <= n <= pages:
                return _missing()
            items = range((n - 1) * _NEWS_PAGE, min(n * _NEWS_PAGE, _DEEP_ARTICLES))
            links = ["/"] + [self._dated(i) for i in items]
            links += [f"/news?page={p}" for p in (n - 1, n + 1, n + 10, 1, pages) if 1 <= p <= pages]
            return self._render(f"news {n}", " ".join(self._text(("title", i), 12) for i in items), links, "page")
        if path == "/events" and set(q) == {"month"}:
            m = re.fullmatch(r"(\d{4})-(\d{2})", q["month"])
            if m is None or not 2001 <= int(m.group(1)) <= 2025 or not 1 <= int(m.group(2)) <= 12:
                return _missing()
            y, mo = int(m.group(1)), int(m.group(2))
            prev, nxt = (y, mo - 1) if mo > 1 else (y - 1, 12), (y, mo + 1) if mo < 12 else (y + 1, 1)
            links = ["/"] + [f"/events?month={a:04d}-{b:02d}" for a, b in (prev, nxt) if 2001 <= a <= 2025]
            links += [f"/events?month={year}-{mo:02d}" for year in range(2001, 2026, 4)]   # a year picker
            return self._render(f"events {q['month']}", self._text(("events", q["month"]), 150), links, "page")
        m = _RX_TREE.match(path)
        if m and not query:
            parts = m.group(1).strip("/").split("/")
            if any(p not in _TREE[level] for level, p in enumerate(parts)):
                return _missing()
            if len(parts) < 4:
                links = ["/"] + [f"{path}{c}/" for c in _TREE[len(parts)]]
            else:
                leaf = int("".join(str(_TREE[level].index(p)) for level, p in enumerate(parts)), 4)   # 0..255
                links = ["/"] + [self._dated(i) for i in range(leaf * 11, leaf * 11 + 11)]
            return self._render("category " + path, self._text(("category", path), 80), links, "page")
        m = _RX_DATED.match(path)
        if m and not query and int(m.group(4)) < _DEEP_ARTICLES and self._dated(int(m.group(4))) == path:
            i = int(m.group(4))
            return self._article(("dated", i), ["/", self._dated((i * 7 + 3) % _DEEP_ARTICLES)])
        return _missing()

    def _dated(self, i: int) -> str:
        y, mo, d = 2010 + i % 15, 1 + (i // 15) % 12, 1 + (i // 180) % 28
        return f"/{y:04d}/{mo:02d}/{d:02d}/{self.words[i % len(self.words)]}-{i}.html"

    # ---------------------------------------------------------------- text

    def _text(self, key: object, n: int) -> str:
        r = random.Random(h(self.seed, self.domain, key))
        return " ".join(r.choice(self.words) for _ in range(n)) + "."

    def _render(self, title: str, text: str, links: list[str], tag: str) -> WildPage:
        nav = "".join(f'<li><a href="{_esc(u)}">{_esc(u)}</a></li>' for u in links)
        body = (f"<!DOCTYPE html><html><head><title>{_esc(title)}</title></head><body>"
                f"<header><nav><a href=\"/\">{_esc(self.domain)}</a></nav></header>"
                f"<main><h1>{_esc(title)}</h1><p>{_esc(text)}</p></main>"
                f"<aside><ul>{nav}</ul></aside><footer>{_esc(self.domain)}</footer></body></html>\n")
        return WildPage(200, tag, body.encode("utf-8"), tuple(links))


def _missing() -> WildPage:
    return WildPage(404, "missing", b"<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>\n")


def _port(port: int | None) -> str:
    return f":{port}" if port else ""


def _params(query: str) -> dict[str, str]:
    return dict(p.partition("=")[::2] for p in query.split("&") if p)


def _token(n: int) -> str:
    """20 characters of [0-9a-z] from a 64-bit-or-more integer (a session id, a minted label)."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    n = (n * 0x9E3779B97F4A7C15) % (36 ** 20) + 36 ** 19
    out = []
    for _ in range(20):
        n, d = divmod(n, 36)
        out.append(alphabet[d])
    return "".join(out)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
