"""Tests for courtly.runtime.budget: the soft-404 fingerprint is asked for only when needed."""

import random

from courtly.config import Config
from courtly.core.fingerprint import simhash64
from courtly.core.maintext import main_text
from courtly.core.soft404 import error_fingerprint
from courtly.ports import Batch
from courtly.runtime.budget import BudgetDefence

ORIGIN = "http://soft.test"
ERROR_PAGE = (b"<html><body><main><h1>Not found</h1><p>Sorry, the page %s does not exist on this "
              b"site. Try the search box or go back to the home page of our shop.</p></main></body></html>")


def _page(path: str) -> bytes:
    return ERROR_PAGE % path.encode()


def _judge(budget: BudgetDefence, url: str, body: bytes, prints):
    return budget.page(url=url, key="soft.test", host="soft.test", origin=ORIGIN, content=body,
                       content_type="text/html", canonical=None, now=10.0, batch=Batch(), prints=prints)


def _probed_soft() -> BudgetDefence:
    budget = BudgetDefence(Config(), random.Random(1))
    probe = ORIGIN + "/courtly-404-probe-0123456789abcdef"
    budget.record_probe(ORIGIN, probe, 200, _page("/courtly-404-probe-0123456789abcdef"), "text/html", 1.0)
    return budget


def test_error_print_is_wanted_only_for_hosts_that_answered_the_probe_with_200():
    budget = BudgetDefence(Config(), random.Random(1))
    assert not budget.wants_error_print(ORIGIN)
    budget.record_probe(ORIGIN, ORIGIN + "/courtly-404-probe-1", 404, b"gone", "text/html", 1.0)
    assert not budget.wants_error_print(ORIGIN)
    assert _probed_soft().wants_error_print(ORIGIN)


def test_soft404_is_found_when_the_worker_left_the_error_print_out():
    # the host turned soft while the page was being extracted without its error print
    budget = _probed_soft()
    url = ORIGIN + "/news/missing-13.html"
    body = _page("/news/missing-13.html")
    text = main_text(body, "text/html")
    assert _judge(budget, url, body, (simhash64(text), None)).soft404
    assert _judge(_probed_soft(), url, body, (simhash64(text), error_fingerprint(text, url))).soft404


def test_a_normal_page_of_a_soft_host_is_not_a_soft404():
    budget = _probed_soft()
    body = (b"<html><body><main>" + b" ".join(b"<p>article %d about gardening and tomatoes</p>" % i
                                               for i in range(30)) + b"</main></body></html>")
    text = main_text(body, "text/html")
    assert not _judge(budget, ORIGIN + "/garden.html", body, (simhash64(text), None)).soft404


def test_the_probe_is_asked_before_pages_only_and_not_before_the_first():
    budget = BudgetDefence(Config(), random.Random(1))
    for hint in ("/sitemap.xml", "/sitemap-1.xml.gz", "/news.rss", "/feed.ATOM", "/sitemap.xml?page=2"):
        assert not budget.probe_before(ORIGIN, ORIGIN + hint, 1.0), hint
    assert not budget.probe_before(ORIGIN, ORIGIN + "/", 1.0)        # the first page goes first
    assert budget.probe_before(ORIGIN, ORIGIN + "/about.html", 1.0)  # the second waits for the probe
    budget.note_not_found(ORIGIN, 2.0)                                # ... unless a real 404 came first
    assert not budget.probe_before(ORIGIN, ORIGIN + "/about.html", 3.0)


def test_no_probe_at_all_when_probing_is_off():
    budget = BudgetDefence(Config().replace("budget", soft404_probe=False), random.Random(1))
    assert not budget.probe_before(ORIGIN, ORIGIN + "/", 1.0)
    assert not budget.probe_before(ORIGIN, ORIGIN + "/about.html", 1.0)
