"""The legit_deep host of the simulated web: a large real site.

`DeepArchive` numbers its pages: after `/` and its category pages come 10
year indexes `/YYYY/`, 120 month indexes `/YYYY/MM/`, the paginated archive
`/archive/page/N/` (20 articles a page, newest first, a pager with +-1,
+-10, +-100, first and last), then `deep_pages` articles
`/YYYY/MM/DD/<slug>-<id>.html` dated evenly over 2014-2023 (always past).
Every article is three links from `/`. `deep_path`, `resolve_deep` and
`deep_links` are the host layout's paths, resolution and links for such a
host (sim/layout calls them when `HostLayout.deep` is set).
"""

from __future__ import annotations

import random
import re
from datetime import date
from typing import TYPE_CHECKING

from courtly.sim.hashing import mix
from courtly.sim.resource import PageLinks, Resource, href_in_form

if TYPE_CHECKING:
    from courtly.sim.layout import HostLayout

__all__ = ["DeepArchive", "ARCHIVE_PAGE_SIZE", "DEEP_FIRST_YEAR", "DEEP_YEARS", "deep_path", "resolve_deep",
           "deep_links"]

_RX_CATEGORY = re.compile(r"^/category/([a-z]+)/$")
_RX_YEAR = re.compile(r"^/(\d{4})/$")
_RX_MONTH = re.compile(r"^/(\d{4})/(\d{2})/$")
_RX_ARCHIVE = re.compile(r"^/archive/page/(\d{1,6})/$")
_RX_DATED = re.compile(r"^/(\d{4})/(\d{2})/(\d{2})/[a-z]+-(\d{1,7})\.html$")
DEEP_FIRST_YEAR, DEEP_YEARS = 2014, 10
_DEEP_DAY0 = date(DEEP_FIRST_YEAR, 1, 1).toordinal()
_DEEP_SPAN_DAYS = date(DEEP_FIRST_YEAR + DEEP_YEARS, 1, 1).toordinal() - _DEEP_DAY0
ARCHIVE_PAGE_SIZE = 20


class DeepArchive:
    """Page ids of a legit_deep host with `n_sections` categories and `n`
    articles: 0 home, 1..C categories, then years, months, archive pages and
    articles (oldest first; article i is dated day0 + i * span // n)."""

    def __init__(self, n_sections: int, n: int) -> None:
        self.n = n
        self.first_year = 1 + n_sections
        self.first_month = self.first_year + DEEP_YEARS
        self.first_archive = self.first_month + 12 * DEEP_YEARS
        self.archive_pages = -(-n // ARCHIVE_PAGE_SIZE)
        self.first_article = self.first_archive + self.archive_pages

    def kind_of(self, k: int) -> tuple[str, int]:
        """("home" | "category" | "year" | "month" | "archive" | "article", index from 0)."""
        for kind, first in (("article", self.first_article), ("archive", self.first_archive),
                            ("month", self.first_month), ("year", self.first_year), ("category", 1)):
            if k >= first:
                return kind, k - first
        return "home", 0

    def date_of(self, i: int) -> date:
        return date.fromordinal(_DEEP_DAY0 + i * _DEEP_SPAN_DAYS // self.n)

    def month_articles(self, mi: int) -> range:
        """Articles (indexes) dated in month `mi` (0 = January of the first year)."""
        def first_at(month: int) -> int:
            y, m = divmod(month, 12)
            day = date(DEEP_FIRST_YEAR + y, m + 1, 1).toordinal() - _DEEP_DAY0 if y < DEEP_YEARS else _DEEP_SPAN_DAYS
            return -(-day * self.n // _DEEP_SPAN_DAYS)
        return range(first_at(mi), first_at(mi + 1))

    def archive_articles(self, page: int) -> range:
        """Articles (indexes, newest first) on archive page `page` (from 0)."""
        top = self.n - 1 - ARCHIVE_PAGE_SIZE * page
        return range(top, max(-1, top - ARCHIVE_PAGE_SIZE), -1)

    def pager(self, page: int) -> list[int]:
        """Archive pages (from 0) a page links: first, -+1, -+10, -+100, last."""
        last = self.archive_pages - 1
        out: list[int] = []
        for p in (0, page - 1, page + 1, page - 10, page + 10, page - 100, page + 100, last):
            if 0 <= p <= last and p != page and p not in out:
                out.append(p)
        return out



def deep_path(lay: "HostLayout", k: int) -> str:
    """The path of page `k` of a legit_deep host."""
    d = lay.deep
    assert d is not None
    kind, i = d.kind_of(k)
    if kind == "home":
        return "/"
    if kind == "category":
        return f"/category/{lay.sections[i]}/"
    if kind == "year":
        return f"/{DEEP_FIRST_YEAR + i}/"
    if kind == "month":
        return f"/{DEEP_FIRST_YEAR + i // 12}/{i % 12 + 1:02d}/"
    if kind == "archive":
        return f"/archive/page/{i + 1}/"
    day = d.date_of(i)
    return f"/{day.year}/{day.month:02d}/{day.day:02d}/{lay.slug(k)}-{k}.html"

def resolve_deep(lay: "HostLayout", path: str, query: str) -> Resource | None:
    """The page of a legit_deep host at `path` (no query), or None."""
    d = lay.deep
    assert d is not None
    if query:
        return None
    k = -1
    if path == "/":
        k = 0
    elif m := _RX_DATED.match(path):
        k = int(m.group(4)) if int(m.group(4)) in lay.articles else -1
    elif m := _RX_MONTH.match(path):
        y, mo = int(m.group(1)) - DEEP_FIRST_YEAR, int(m.group(2))
        k = d.first_month + 12 * y + mo - 1 if 0 <= y < DEEP_YEARS and 1 <= mo <= 12 else -1
    elif m := _RX_YEAR.match(path):
        y = int(m.group(1)) - DEEP_FIRST_YEAR
        k = d.first_year + y if 0 <= y < DEEP_YEARS else -1
    elif m := _RX_ARCHIVE.match(path):
        n = int(m.group(1))
        k = d.first_archive + n - 1 if 1 <= n <= d.archive_pages else -1
    elif (m := _RX_CATEGORY.match(path)) and m.group(1) in lay.sections:
        k = 1 + lay.sections.index(m.group(1))
    return Resource("page", k) if k >= 0 and lay.path_of(k) == path else None

def deep_links(lay: "HostLayout", k: int, port: int) -> PageLinks:
    """Links of a legit_deep page: nav (home, categories), then by kind."""
    d, spec, words = lay.deep, lay.spec, lay.web.vocab
    assert d is not None
    own = lay.path_of(k)
    base_dir = own.rsplit("/", 1)[0] + "/"
    out = PageLinks(None, f"http://{spec.name}:{port}{own}")
    r = random.Random(mix(spec.key ^ 0xDEE9, k))
    forms = ("rel", "abs_path", "abs", "proto")

    def add(target: int, text: str | None = None, form: str | None = None) -> None:
        path = lay.path_of(target)
        out.links.append((href_in_form(spec.name, port, base_dir, path, form or r.choice(forms)),
                          text or words[target % len(words)], False))

    for target in range(1 + len(lay.sections)):
        add(target, "Home" if target == 0 else lay.sections[target - 1].title(), "abs_path")
    first, n = d.first_article, d.n
    kind, i = d.kind_of(k)
    if kind == "home":
        for a in range(n - 1, n - 11, -1):
            add(first + a)
        add(d.first_archive, "Archive")
        for y in range(DEEP_YEARS - 1, -1, -1):
            add(d.first_year + y, str(DEEP_FIRST_YEAR + y))
    elif kind == "category":
        c = len(lay.sections)
        newest = n - 1 - (n - 1 - i) % c
        for a in range(newest, max(-1, newest - ARCHIVE_PAGE_SIZE * c), -c):
            add(first + a)
        add(d.first_archive, "Archive")
    elif kind == "year":
        for y in (i - 1, i + 1):
            if 0 <= y < DEEP_YEARS:
                add(d.first_year + y, str(DEEP_FIRST_YEAR + y))
        for mo in range(12):
            add(d.first_month + 12 * i + mo)
    elif kind == "month":
        add(d.first_year + i // 12, str(DEEP_FIRST_YEAR + i // 12))
        for mo in (i - 1, i + 1):
            if 0 <= mo < 12 * DEEP_YEARS:
                add(d.first_month + mo)
        for a in d.month_articles(i):
            add(first + a)
    elif kind == "archive":
        for a in d.archive_articles(i):
            add(first + a)
        for p in d.pager(i):
            add(d.first_archive + p, str(p + 1))
    else:
        day = d.date_of(i)
        add(d.first_year + day.year - DEEP_FIRST_YEAR, str(day.year))
        add(d.first_month + 12 * (day.year - DEEP_FIRST_YEAR) + day.month - 1)
        add(1 + lay.sections.index(lay.section_of(k)))
        for a in (i - 1, i + 1, *(r.randrange(n) for _ in range(4))):
            if 0 <= a < n and a != i:
                add(first + a)
        if r.random() < 0.3:
            other = lay.web.hosts[r.randrange(len(lay.web.hosts))]
            lay = lay.web.layout(other.name)
            a = lay.articles[r.randrange(len(lay.articles))]
            path = lay.path_of(a)
            out.links.append((href_in_form(spec.name, port, base_dir, path, r.choice(("abs", "proto")), other.name),
                              other.name, False))
    return out
