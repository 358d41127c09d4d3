"""The change-rate prior pooled by what a URL is (`url_kind`) across hosts,
and by host and kind: a young URL starts from its siblings' pooled rate.

Pure: instants are arguments; the numbers are worked out by hand in the comments."""

from __future__ import annotations

import math
import random

import pytest

from courtly.core.changerate import DAY_S, PriorModel, url_kind
from courtly.core.recrawl import RecrawlScheduler, Tier, policy_for_intent


@pytest.mark.parametrize("url,kind", [
    ("http://a.test/files/report-6.pdf", ".pdf"),
    ("http://a.test/files/REPORT-6.PDF?download=1", ".pdf?download"),
    ("http://a.test/news/story-12.html?print=1&lang=en#top", ".html?lang&print"),
    ("http://a.test/news/", "/"),
    ("http://a.test", "/"),
    ("http://a.test/about", ""),
    ("http://a.test/v1.2/x.tar-gz-backup-file", ""),   # an "extension" that is no declared type
    ("http://a.test/feed.rss", ".rss"),
])
def test_url_kind_is_the_extension_and_the_sorted_query_names(url, kind):
    assert url_kind(url) == kind


def test_a_young_url_starts_from_its_kinds_pooled_rate_shrunk_from_its_hosts():
    # host a: 16 revisits of pages after 100 s, all changed; 8 PDF files on 8 other
    # hosts, one revisit each after 100 s, none changed. One bin (k = int(2 log2 100) = 13).
    prior = PriorModel(1 / DAY_S, n_min=8.0, shrink=8.0)
    page = prior.groups("a.test", "a.test/news/{n}", ".html")
    for _ in range(16):
        prior.observe(page, 100.0, True)
    for i in range(8):
        prior.observe(prior.groups(f"b{i}.test", f"b{i}.test/files/{{n}}", ".pdf"), 100.0, False)
    pdf = prior.groups("a.test", "a.test/files/{n}", ".pdf")
    for g in {*page, *pdf}:
        if g.n:
            g.refresh()   # a group's rate is refreshed lazily (every n / 8 samples): bring all up to date
    # crawl: 24 samples, 16 changed: Cho's estimator ln((n + 0.5) / (n - X + 0.5)) / I = ln(24.5 / 8.5) / 100
    crawl = math.log(24.5 / 8.5) / 100
    # host a: 16 of 16 changed: ln(16.5 / 0.5) / 100; kind .pdf: no change in 800 s: half a change
    # over the exposure plus a mean interval, 0.5 / 900; the other two groups hold no sample of a.test's PDFs
    host, kind_pdf = math.log(33.0) / 100, 0.5 / 900
    # from the default, each group in turn with weight n / (n + 8) in log rate
    log_r = math.log(1 / DAY_S)
    log_r += 24 / 32 * (math.log(crawl) - log_r)
    log_r += 16 / 24 * (math.log(host) - log_r)
    pdf_want = math.exp(log_r + 8 / 16 * (math.log(kind_pdf) - log_r))
    assert prior.rate(pdf) == pytest.approx(pdf_want, rel=1e-9)
    # the page: kind .html, host-and-kind and template all hold host a's 16 changed samples
    page_log = log_r
    for _ in range(3):
        page_log += 16 / 24 * (math.log(host) - page_log)
    assert prior.rate(page) == pytest.approx(math.exp(page_log), rel=1e-9)
    assert prior.rate(pdf) < prior.rate(page) / 10


def _scheduler() -> RecrawlScheduler:
    policy = policy_for_intent("search", 86_400, period_s=10.0, tiers=(Tier("all", 5.0, 3600.0),))
    return RecrawlScheduler(policy, random.Random(3))


def test_young_files_of_a_kind_that_never_changes_wait_longer_than_a_young_page_of_a_changing_host():
    # Host a's pages change at every revisit; the PDF files of 20 other hosts never do.
    # A PDF file and a page of host a, each fetched once (no sample of their own), are
    # placed from their siblings: the file's interval is far longer than the page's.
    # (Before the prior pooled by kind, both took host a's rate: the same interval.)
    s = _scheduler()
    pages = [f"http://a.test/news/story-{i}.html" for i in range(20)]
    files = [(f"b{i}.test", f"http://b{i}.test/files/report-{i}.pdf") for i in range(20)]
    for t in (0.0, 60.0, 120.0):
        for i, u in enumerate(pages):
            s.add(u, t, host="a.test")
            s.record_fetch(u, t + 0.1 * i, status=200, content_hash=f"{u}@{t}")
        for i, (h, u) in enumerate(files):
            s.add(u, t, host=h)
            s.record_fetch(u, t + 0.1 * i, status=200, content_hash="same")
    young_pdf, young_page = "http://a.test/files/report-99.pdf", "http://a.test/news/story-99.html"
    for u in (young_pdf, young_page):
        s.add(u, 200.0, host="a.test")
        s.record_fetch(u, 200.0, status=200, content_hash="v1")
    s.plan(210.0)
    assert s.rate(young_pdf) < s.rate(young_page) / 20
    assert s.interval(young_pdf) > 5 * s.interval(young_page)


def _young_page_rate(static_hosts: int) -> float:
    """The rate given a page of host a fetched once, after 20 pages of host a changed at
    each of 2 revisits 60 s apart while the .html pages of `static_hosts` other hosts did not."""
    s = _scheduler()
    for t in (0.0, 60.0, 120.0):
        for i in range(static_hosts):
            u = f"http://b{i}.test/page-{i}.html"
            s.add(u, t, host=f"b{i}.test")
            s.record_fetch(u, t, status=200, content_hash="same")
        for i in range(20):
            u = f"http://a.test/news/story-{i}.html"
            s.add(u, t, host="a.test")
            s.record_fetch(u, t, status=200, content_hash=f"{u}@{t}")
    u = "http://a.test/other/story-99.html"
    s.add(u, 200.0, host="a.test")
    s.record_fetch(u, 200.0, status=200, content_hash="v1")
    return s.rate(u)


def test_a_young_page_of_a_changing_host_is_not_slowed_by_static_pages_of_its_kind_elsewhere():
    # Alone, host a's 40 changes in 40 revisits give ln(40.5 / 0.5) / 60 (0.0732/s).
    alone = _young_page_rate(0)
    assert alone == pytest.approx(math.log(81.0) / 60, rel=0.01)
    # 20 hosts whose .html pages never change pull it only through the crawl-wide group:
    # the host-and-kind group brings host a's own pace back (0.055/s; 0.048/s before the
    # prior pooled by kind, when the host group alone came after the crawl's)
    assert _young_page_rate(20) > 0.7 * alone
